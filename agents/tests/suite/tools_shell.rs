//! `run_command` with real processes: cwd, environment, exit status, output cap, timeout and
//! cancellation killing the whole process group (grandchildren included).

use super::support::process::{read_pid, wait_dead};
use super::support::tools::{Workspace, run_command};
use ahelper_agents::tools::ToolOutput;
use serde_json::json;
use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A workspace with a `sub/` directory.
fn fixture() -> Workspace {
    let f = Workspace::new();
    fs::create_dir_all(f.ws.join("sub")).unwrap();
    f
}

/// Runs `command` with `timeout_ms` in `f` and asserts that the call returned within `within`.
async fn run_with_timeout(
    f: &Workspace,
    command: &str,
    timeout_ms: u64,
    within: Duration,
) -> ToolOutput {
    let t = Instant::now();
    let out = run_command(
        &f.ctx,
        json!({"command": command, "timeout_ms": timeout_ms}),
    )
    .await;
    assert!(t.elapsed() < within, "{:?}", t.elapsed());
    out
}

#[tokio::test]
async fn runs_in_the_call_cwd_with_the_call_env() {
    let f = fixture();
    let mut ctx = f.ctx.clone();
    ctx.cwd = f.ws.join("sub");
    ctx.env.insert("AHELPER_RUN_ID".into(), "run-42".into());
    let out = run_command(&ctx, json!({"command": "pwd; echo \"id=$AHELPER_RUN_ID\""})).await;
    assert_eq!(
        out.content,
        format!("{}/sub\nid=run-42\n[exit code: 0]", f.ws.display())
    );
    assert!(!out.is_error);
}

#[tokio::test]
async fn cwd_outside_the_workspace_is_refused() {
    let f = fixture();
    let mut ctx = f.ctx.clone();
    ctx.cwd = PathBuf::from("/");
    let e = f
        .call_in(&ctx, "run_command", json!({"command": "pwd"}))
        .await
        .unwrap_err();
    assert!(e.message().contains("outside the workspace"), "{e}");
}

#[tokio::test]
async fn reports_exit_code_interleaved_output_and_signals() {
    let f = fixture();
    let out = run_command(
        &f.ctx,
        json!({"command": "echo out1; echo err1 >&2; echo out2; exit 3"}),
    )
    .await;
    assert_eq!(out.content, "out1\nerr1\nout2\n[exit code: 3]");
    assert!(out.is_error);
    let out = run_command(&f.ctx, json!({"command": "true"})).await;
    assert_eq!(out.content, "(no output)\n[exit code: 0]");
    let out = run_command(&f.ctx, json!({"command": "kill -9 $$"})).await;
    assert!(
        out.content.contains("[killed by signal 9 (SIGKILL)]"),
        "{out:?}"
    );
    assert!(out.is_error);
}

#[tokio::test]
async fn stdin_is_empty_so_interactive_commands_do_not_hang() {
    let f = fixture();
    let t = Instant::now();
    let out = run_command(&f.ctx, json!({"command": "cat; read x; echo done"})).await;
    assert_eq!(out.content, "done\n[exit code: 0]");
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn output_is_capped_keeping_head_and_tail() {
    let f = fixture();
    let mut ctx = f.ctx.clone();
    ctx.max_output_chars = 2000;
    let out = run_command(&ctx, json!({"command": "seq 1 200000"})).await;
    assert!(
        out.content.starts_with("1\n2\n3\n"),
        "{}",
        &out.content[..50]
    );
    assert!(
        out.content.ends_with("199999\n200000\n[exit code: 0]"),
        "{}",
        &out.content[out.content.len() - 60..]
    );
    assert!(out.content.contains("cut from the middle"));
    assert!(out.content.chars().count() < 2300, "{}", out.content.len());
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let f = fixture();
    // A background child and a grandchild in a subshell, each writing its pid.
    let script =
        "sleep 30 & echo $! > bg.pid; sh -c 'sleep 30 & echo $! > gc.pid; sleep 30'; echo never";
    let out = run_with_timeout(&f, script, 400, Duration::from_secs(5)).await;
    assert!(out.is_error);
    assert!(
        out.content.contains("[timed out after 400 ms"),
        "{}",
        out.content
    );
    assert!(!out.content.contains("never"));
    for file in ["bg.pid", "gc.pid"] {
        let pid = read_pid(f.ws.join(file));
        assert!(
            wait_dead(pid, Duration::from_secs(3)),
            "{file}: pid {pid} survived the timeout"
        );
    }
}

#[tokio::test]
async fn processes_ignoring_sigterm_get_sigkill() {
    let f = fixture();
    let script = "(trap '' TERM; exec sleep 30) & echo $! > stubborn.pid; wait";
    let out = run_with_timeout(&f, script, 200, Duration::from_secs(6)).await;
    assert!(out.content.contains("timed out"), "{out:?}");
    let pid = read_pid(f.ws.join("stubborn.pid"));
    assert!(wait_dead(pid, Duration::from_secs(3)), "pid {pid} survived");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_kills_the_group_promptly() {
    let f = fixture();
    let ctx = f.ctx.clone();
    let cancel = ctx.cancel.clone();
    let task = tokio::spawn(async move {
        run_command(
            &ctx,
            json!({"command": "echo started; sleep 30 & echo $! > c.pid; wait"}),
        )
        .await
    });
    let pid = read_pid(f.ws.join("c.pid"));
    let t = Instant::now();
    cancel.cancel();
    let out = task.await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(3));
    assert!(out.is_error);
    assert!(out.content.starts_with("started\n"), "{out:?}");
    assert!(out.content.contains("[cancelled"), "{out:?}");
    assert!(wait_dead(pid, Duration::from_secs(3)));
}

/// A background process does not keep the call waiting, and it does not outlive the command
/// (even detached with `setsid`); the model is told.
#[tokio::test]
async fn background_process_left_running_does_not_block_the_call_and_is_killed() {
    let f = fixture();
    let t = Instant::now();
    let out = run_command(
        &f.ctx,
        json!({"command": "sleep 20 & echo $! > bg.pid; setsid sleep 20 & echo launched"}),
    )
    .await;
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert!(
        out.content
            .starts_with("launched\n[exit code: 0]\n[note: 2 background process(es)"),
        "{}",
        out.content
    );
    assert!(wait_dead(
        read_pid(f.ws.join("bg.pid")),
        Duration::from_secs(3)
    ));
}

#[tokio::test]
async fn timeout_is_clamped_and_bad_args_are_explained() {
    let f = fixture();
    let out = run_command(&f.ctx, json!({"command": "echo hi", "timeout_ms": 900000})).await;
    assert!(
        out.content.contains("lowered to the maximum 600000"),
        "{out:?}"
    );
    let tool = f.tools.get("run_command").unwrap();
    let e = tool.call(json!({"cmd": "ls"}), &f.ctx).await.unwrap_err();
    assert!(
        e.message().contains("unknown field `cmd`") && e.message().contains("`command`"),
        "{e}"
    );
    let e = tool
        .call(json!({"command": "  "}), &f.ctx)
        .await
        .unwrap_err();
    assert!(e.message().contains("empty"), "{e}");
}
