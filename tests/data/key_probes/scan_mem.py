#!/usr/bin/env python3
"""A hostile tool command's memory scanner (test data for tests/suite/key_protection.rs).

Usage:
  scan_mem.py PATTERN PID...      read /proc/PID/maps and /proc/PID/mem of each process
  scan_mem.py --file PATTERN FILE  scan a file (a core dump)

PATTERN is a Python bytes regex (e.g. 'sk-ant-probe-[0-9a-f]{32}'). Every distinct match is
printed *reversed*, so that output redaction cannot hide a channel that is open: the test
looks for the reversed key to know whether the memory was readable.
"""
import re
import sys


def report(label, found):
    print(f"{label}: {len(found)} distinct matches")
    for match in sorted(found):
        print("  reversed:", match[::-1].decode(errors="replace"))


def scan_pid(pid, pattern):
    try:
        with open(f"/proc/{pid}/maps") as f:
            maps = f.read().splitlines()
    except OSError as e:
        print(f"pid {pid}: maps: {e.strerror}")
        return
    try:
        mem = open(f"/proc/{pid}/mem", "rb", 0)
    except OSError as e:
        print(f"pid {pid}: mem: {e.strerror}")
        return
    found, read, failed = set(), 0, 0
    with mem:
        for line in maps:
            fields = line.split()
            perms = fields[1]
            name = fields[5] if len(fields) > 5 else ""
            # Writable memory holds the environment block (stack), heap copies and stacks.
            if "r" not in perms or "w" not in perms or name.startswith("[v"):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(start)
                data = mem.read(end - start)
            except OSError:
                failed += 1
                continue
            read += len(data)
            found.update(m.group(0) for m in pattern.finditer(data))
    report(f"pid {pid}: read {read} bytes ({failed} regions unreadable)", found)


def main():
    args = sys.argv[1:]
    if args and args[0] == "--file":
        pattern = re.compile(args[1].encode())
        try:
            with open(args[2], "rb") as f:
                data = f.read()
        except OSError as e:
            print(f"{args[2]}: {e.strerror}")
            return
        report(f"{args[2]}: {len(data)} bytes", set(m.group(0) for m in pattern.finditer(data)))
        return
    pattern = re.compile(args[0].encode())
    if len(args) == 1:
        print("no process to scan")
    for pid in args[1:]:
        scan_pid(pid, pattern)


main()
