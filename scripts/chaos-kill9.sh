#!/usr/bin/env bash
# Crash-safety chaos loop (issue 37): a swarm run of four workers against the fake model is
# killed with `kill -9` at a random moment, its first resume is killed too (half of the time),
# then two resumes are started together and the run is resumed until it ends. Each round
# checks what a crash must never do:
#   - an interrupted write's temp file (.NAME.ahelper-<uuid>.tmp) on the integration branch;
#   - a worker merged twice (two "Merge wN (" commits on the integration branch);
#   - two processes driving the run (both concurrent resumes exiting 0 with work done);
#   - `git fsck` errors;
#   - a run that does not end finished with all four workers merged and their files intact.
# Not a CI test: it takes minutes and its kill moments are random. Usage:
#   scripts/chaos-kill9.sh [ROUNDS]      (default 20; builds the debug binaries first)
# CHAOS_KEEP=1 keeps the repositories and outputs (the fake model's request log in fake.log); CHAOS_DEBUG=1 names the processes holding a
# run's lock after each kill.
# Prints one line per round and the totals; exits 1 when any round broke a rule.
set -uo pipefail
rounds="${1:-20}"
here="$(cd "$(dirname "$0")/.." && pwd)"
cargo build --quiet --manifest-path "$here/Cargo.toml" -p ahelper -p ahelper-fake-llm || exit 2
ahelper="$here/target/debug/ahelper"
fake="$here/target/debug/ahelper-fake-llm"
work="$(mktemp -d)"
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
    if [ -n "${CHAOS_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# The fake model: a plan of four subtasks, each worker writes its file (32 KiB) and a second
# file, each answer after a pause; kills land in model waits, tool
# calls, commits and merges.
python3 - "$work/script.json" <<'EOF'
import json, sys
big = "x" * 32768 + "\n"
plan = {"summary": "one file each", "subtasks": [
    {"id": f"s{i}", "title": f"Work on s{i}", "instructions": f"Do s{i}.", "scope": [f"f{i}.txt", f"g{i}.txt"]}
    for i in range(1, 5)]}
convs = [{"name": "coordinator", "match": "You are the coordinator of a swarm",
          "turns": [{"text": json.dumps(plan), "delay_ms": 200}]}]
for i in range(1, 5):
    write_f = {"tool_calls": [{"name": "write_file", "arguments": {"path": f"f{i}.txt", "content": f"s{i} " + big}}],
               "delay_ms": 150 * i}
    write_g = {"tool_calls": [{"name": "write_file", "arguments": {"path": f"g{i}.txt", "content": f"s{i} done\n"}}],
               "delay_ms": 300}
    # Every turn decided by what is on disk in the worker's worktree, never by counting tool
    # results (a call cut by a kill gets an extra "interrupted" result on resume, which would
    # shift a counted script): f missing → write f; else g missing → write g; else done. One
    # turn and no fallback text: past the end the fake model plays its last (this) turn.
    f_done = {"file_contains": {"path": f"f{i}.txt", "text": f"s{i} x"}}
    g_done = {"file_contains": {"path": f"g{i}.txt", "text": f"s{i} done"}}
    decide = {"text": f"s{i} done", "delay_ms": 200, "when": {"all": [f_done, g_done]},
              "otherwise": dict(write_g, when=f_done, otherwise=write_f)}
    convs.append({"name": f"s{i}", "match": f"Your subtask `s{i}`", "turns": [decide]})
json.dump({"model": "fake-model", "conversations": convs}, open(sys.argv[1], "w"))
EOF
"$fake" --script "$work/script.json" --port-file "$work/port" >/dev/null 2>"$work/fake.log" &
server_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
url="http://127.0.0.1:$(cat "$work/port")"

# ahelper in `dir` with an isolated environment (as the tests); it execs, so call it in a
# subshell: `run_ahelper … &` (then `$!` is ahelper's pid) or `(run_ahelper …)`.
run_ahelper() { # dir, args…
    local dir="$1"; shift
    cd "$dir" && exec env -i PATH="$PATH" HOME="$dir.home" XDG_CONFIG_HOME="$dir.home/config" \
        XDG_STATE_HOME="$dir.home/state" ANTHROPIC_API_KEY=chaos-key ANTHROPIC_BASE_URL="$url" \
        GIT_AUTHOR_NAME=chaos GIT_AUTHOR_EMAIL=chaos@localhost GIT_COMMITTER_NAME=chaos \
        GIT_COMMITTER_EMAIL=chaos@localhost "$ahelper" "$@"
}
random_ms() { echo $(( $1 + RANDOM % ($2 - $1) )); }
sleep_ms() { sleep "$(printf '%d.%03d' $(( $1 / 1000 )) $(( $1 % 1000 )))"; }

broken=0; temp_merged=0; double_merged=0; fsck_failed=0; unfinished=0; both_drove=0; refused=0
kills=0; resumes=0; planless=0; unkilled=0
for round in $(seq "$rounds"); do
    repo="$work/r$round"; mkdir -p "$repo"
    git -C "$repo" init -q -b main
    for i in 1 2 3 4; do echo "f$i" >"$repo/f$i.txt"; echo "g$i" >"$repo/g$i.txt"; done
    git -C "$repo" -c user.name=chaos -c user.email=chaos@localhost add -A
    git -C "$repo" -c user.name=chaos -c user.email=chaos@localhost commit -q -m base
    # the run, killed at a random moment
    run_ahelper "$repo" swarm "do it" --yes --permission-mode bypass >"$repo.out" 2>&1 &
    pid=$!; at=$(random_ms 200 2500); sleep_ms "$at"; kill -9 "$pid" 2>/dev/null && kills=$((kills + 1))
    wait "$pid" 2>/dev/null
    # `kill` succeeds on a process that exited but was not waited for yet: a run that printed
    # its result ended before the kill.
    grep -q '^Result:' "$repo.out" && unkilled=$((unkilled + 1))
    id="$(ls "$repo/.ahelper/runs" 2>/dev/null | head -1)"
    if [ -n "${CHAOS_DEBUG:-}" ]; then for p in /proc/[0-9]*; do ls -l "$p/fd" 2>/dev/null | grep -q run.lock && echo "DEBUG holder $p $(cat "$p/comm") $(tr '\0' ' ' <"$p/cmdline")"; done; fi
    if [ -z "$id" ]; then echo "round $round: killed at ${at} ms before the run was recorded"; continue; fi
    if ! grep -q '"plan": {' "$repo/.ahelper/runs/$id/run.json"; then
        # A run killed while planning has no plan: by design it cannot be resumed (start anew).
        planless=$((planless + 1)); echo "round $round: killed at ${at} ms while planning (no plan to resume)"; continue
    fi
    # half of the time, the first resume is killed too
    if [ $((RANDOM % 2)) -eq 0 ]; then
        run_ahelper "$repo" swarm resume "$id" >>"$repo.out" 2>&1 &
        pid=$!; sleep_ms "$(random_ms 100 1500)"; kill -9 "$pid" 2>/dev/null && kills=$((kills + 1))
        wait "$pid" 2>/dev/null; resumes=$((resumes + 1))
    fi
    # two resumes started together: one drives the run, the other is refused (or, when the
    # first ended already, finds nothing left to do)
    run_ahelper "$repo" swarm resume "$id" >"$repo.a" 2>&1 & a=$!
    run_ahelper "$repo" swarm resume "$id" >"$repo.b" 2>&1 & b=$!
    wait "$a"; ca=$?; wait "$b"; cb=$?; resumes=$((resumes + 2))
    grep -qh "being driven by another ahelper process" "$repo.a" "$repo.b" && refused=$((refused + 1))
    if [ "$ca" = 0 ] && [ "$cb" = 0 ] && ! grep -qh "nothing left to do" "$repo.a" "$repo.b"; then
        both_drove=$((both_drove + 1)); echo "round $round: both concurrent resumes drove the run"
    fi
    # until it ends (a resume of a finished run says there is nothing left to do)
    for _ in 1 2 3; do (run_ahelper "$repo" swarm resume "$id") >>"$repo.out" 2>&1; resumes=$((resumes + 1)); done
    integration="ahelper/$id/integration"
    bad=""
    if git -C "$repo" ls-tree -r --name-only "$integration" 2>/dev/null | grep -q '\.ahelper-.*\.tmp$'; then
        temp_merged=$((temp_merged + 1)); bad="$bad temp-file-merged"
    fi
    dups="$(git -C "$repo" log --format=%s "$integration" 2>/dev/null | grep -o '^Merge w[0-9]* (' | sort | uniq -d)"
    if [ -n "$dups" ]; then double_merged=$((double_merged + 1)); bad="$bad double-merge"; fi
    if ! git -C "$repo" fsck --no-dangling >"$repo.fsck" 2>&1; then fsck_failed=$((fsck_failed + 1)); bad="$bad fsck"; fi
    status="$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["status"], sum(w["status"]=="merged" for w in r["workers"]))' "$repo/.ahelper/runs/$id/run.json" 2>/dev/null)"
    content_ok=1
    for i in 1 2 3 4; do
        [ "$(git -C "$repo" show "$integration:g$i.txt" 2>/dev/null)" = "s$i done" ] || content_ok=0
        [ "$(git -C "$repo" show "$integration:f$i.txt" 2>/dev/null | wc -c)" = 32772 ] || content_ok=0
    done
    if [ "$status" != "finished 4" ] || [ "$content_ok" != 1 ]; then unfinished=$((unfinished + 1)); bad="$bad not-finished($status,files=$content_ok)"; fi
    [ -n "$bad" ] && broken=$((broken + 1))
    echo "round $round: killed at ${at} ms; concurrent resumes exited $ca/$cb; ${bad:- ok}"
done
echo "rounds $rounds (killed while planning: $planless; run ended before its kill: $unkilled) · kill -9 $kills · resumes $resumes · concurrent pair refused $refused · both drove $both_drove"
echo "temp file merged $temp_merged · double merge $double_merged · fsck failed $fsck_failed · not finished $unfinished · broken rounds $broken"
[ "$broken" = 0 ] && [ "$both_drove" = 0 ]
