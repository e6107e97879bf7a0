#!/usr/bin/env bash
# Installs ahelper and its fake LLM server with cargo, then runs a complete swarm offline:
# a coordinator plans three subtasks, three workers edit their own files in their own git
# worktrees, the branches are merged into an integration branch, and a summary is printed.
# No API key and no network are needed: the model is ahelper-fake-llm playing
# fakellm/examples/swarm-demo.json.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cargo install --locked --quiet --path "$here"
cargo install --locked --quiet --path "$here/fakellm"
# the binaries just installed come first
export PATH="${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}/bin:$PATH"

work="$(mktemp -d)"
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true; }
trap cleanup EXIT

# A tiny project to work on.
repo="$work/demo-project"
mkdir -p "$repo"
cd "$repo"
git init -q -b main
git config user.email demo@example.com
git config user.name "ahelper demo"
printf '#!/bin/sh\necho "Hello, $1!"\n' > greet.sh
printf '#!/bin/sh\nwc -l < "$1"\n' > count.sh
chmod +x greet.sh count.sh
git add -A && git commit -q -m "demo project"

# The fake model.
ahelper-fake-llm --script "$here/fakellm/examples/swarm-demo.json" --port-file "$work/port" --quiet &
server_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
port="$(cat "$work/port")"

export ANTHROPIC_BASE_URL="http://127.0.0.1:$port" ANTHROPIC_API_KEY="demo-key-not-secret"
export XDG_STATE_HOME="$work/state"
echo "== ahelper -p (one agent)"
ahelper -p "What does greet.sh do?" --permission-mode accept-edits -v
echo
echo "== ahelper swarm (coordinator + 3 workers in worktrees)"
ahelper swarm "Document the demo scripts" --yes --permission-mode accept-edits
echo
echo "== the integration branch"
run="$(ahelper swarm ls | awk 'NR==2 {print $1}')"
git log --oneline --graph "ahelper/$run/integration" | head -20
echo
echo "Your checkout is untouched (git status --short):"
git status --short
echo "Inspect: cd $repo && ahelper swarm logs $run w1"
echo
echo "Everything the demo made is in $work (the project, the model's state and the worktrees)."
echo "Remove it when you are done: rm -rf '$work'"
