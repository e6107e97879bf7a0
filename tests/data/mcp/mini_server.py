#!/usr/bin/env python3
"""A small MCP server (raw JSON-RPC 2.0) for ahelper's failure-case tests.

Usage: mini_server.py MODE [PORT_FILE]
  ok            stdio (with MINI_PID_FILE set: starts `sleep 300` and writes
                "<server pid> <sleep pid>" there); tools `shout` (upper-cases `text`), `fail` (an error result),
                `picture` (an image), `die` (the process exits mid-call), `stall`
                (answers after 60 s)
  hang          stdio; never answers `initialize`
  crash         writes a message on stderr and exits 3 at once
  http          the `ok` tools over streamable HTTP (JSON responses) on 127.0.0.1, port
                chosen by the OS and written to PORT_FILE (with MINI_HEADERS_FILE set: appends
                the headers of every request there)
"""
import json
import os
import subprocess
import sys
import time

TOOLS = [
    {"name": "shout", "description": "Upper-cases text.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]}},
    {"name": "fail", "description": "Always fails.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "picture", "description": "Returns a small PNG.",
     "inputSchema": {"type": "object", "properties": {}},
     "annotations": {"readOnlyHint": True}},
    {"name": "die", "description": "Ends the server process.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "stall", "description": "Sleeps 60 s before answering.",
     "inputSchema": {"type": "object", "properties": {}}},
]


def call(name, args):
    if name == "shout":
        return {"content": [{"type": "text", "text": str(args.get("text", "")).upper()}]}
    if name == "fail":
        return {"content": [{"type": "text", "text": "the fail tool failed"}], "isError": True}
    if name == "picture":
        return {"content": [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]}
    if name == "stall":
        time.sleep(60)
        return {"content": [{"type": "text", "text": "late"}]}
    if name == "die":
        sys.stderr.write("mini_server: dying as asked\n")
        sys.stderr.flush()
        sys.exit(7)
    return None


def answer(msg):
    """The JSON-RPC response to `msg`, or None for a notification."""
    method = msg.get("method")
    if "id" not in msg:
        return None
    rid = msg["id"]
    if method == "initialize":
        version = msg.get("params", {}).get("protocolVersion", "2025-06-18")
        return {"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "mini", "version": "1.0"}}}
    if method == "tools/list":
        return {"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}}
    if method == "tools/call":
        params = msg.get("params", {})
        result = call(params.get("name"), params.get("arguments") or {})
        if result is None:
            return {"jsonrpc": "2.0", "id": rid,
                    "error": {"code": -32602, "message": "unknown tool"}}
        return {"jsonrpc": "2.0", "id": rid, "result": result}
    if method == "ping":
        return {"jsonrpc": "2.0", "id": rid, "result": {}}
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such method"}}


def stdio(hang):
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        if hang:
            continue
        reply = answer(msg)
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


def http(port_file):
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            headers_file = os.environ.get("MINI_HEADERS_FILE")
            if headers_file:
                with open(headers_file, "a") as f:
                    f.write(str(self.headers) + "\n")
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            reply = answer(json.loads(body))
            if reply is None:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Mcp-Session-Id", "mini-session")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_DELETE(self):
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
    if mode == "crash":
        sys.stderr.write("mini_server: cannot open the database\n")
        sys.exit(3)
    if mode == "hang":
        stdio(hang=True)
        time.sleep(3600)
    elif mode == "http":
        http(sys.argv[2])
    else:
        pid_file = os.environ.get("MINI_PID_FILE")
        if pid_file:
            # A child in the server's process group, to check that it ends with the server.
            child = subprocess.Popen(["sleep", "300"])
            with open(pid_file, "w") as f:
                f.write(f"{os.getpid()} {child.pid}")
        stdio(hang=False)


if __name__ == "__main__":
    main()
