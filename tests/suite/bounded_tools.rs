//! Bounded tools (issue 29.5) through the built binary, a fake model playing the hostile turns:
//! a FIFO handed to `read_file` (it used to hang `-p` for ever), a huge one-line file (it used
//! to be held whole in memory), and commands that hit the process or memory limit.

use super::support::sandbox::{Needs, require_sandbox};
use super::support::*;
use ahelper_fake_llm::Turn;
use serde_json::json;
use std::ffi::CString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

/// The tool result the model got for its first call (the text of request 1).
fn first_result(requests: &[ahelper_fake_llm::RecordedRequest]) -> String {
    requests
        .get(1)
        .map(|r| r.body.to_string())
        .unwrap_or_default()
}

#[test]
fn read_file_of_a_fifo_fails_at_once_and_p_ends() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let pipe = CString::new(repo.path().join("pipe").as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path and a mode.
    assert_eq!(unsafe { libc::mkfifo(pipe.as_ptr(), 0o644) }, 0);
    let server = start(scripts::agent([
        Turn::tool_call("read_file", json!({"path": "pipe"})),
        Turn::text("done"),
    ]));
    let started = Instant::now();
    let (code, _, stderr) = outcome_of(
        ahelper(&repo, &server, Wire::Anthropic)
            .args(["-p", "go"])
            .timeout(Duration::from_secs(60)),
    );
    let took = started.elapsed();
    assert_eq!(code, 0, "{stderr}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    let result = first_result(&server.model_requests());
    assert!(
        result.contains("is a FIFO (named pipe), not a regular file"),
        "{result}"
    );
}

/// Runs `ahelper -p go` in `repo` against `server` and waits for it with `wait4(2)`; (its stderr,
/// its peak resident set in KiB — `ru_maxrss` of that one child).
// Reaped with `wait4(2)` below: `Child::wait` would drop the child's resource usage.
#[allow(clippy::zombie_processes)]
fn run_measuring_rss(repo: &TestRepo, server: &ahelper_fake_llm::FakeLlm) -> (String, i64) {
    let mut child = ahelper_process(repo, server, Wire::Anthropic)
        .args(["-p", "go"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ahelper starts");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: plain out-parameters; `pid` is our child, not yet reaped.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{stderr}"
    );
    (stderr, usage.ru_maxrss)
}

#[test]
fn read_file_of_a_huge_line_keeps_memory_bounded() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    // One line of 256 MiB: 8 KiB of text, then a hole (NUL bytes, no newline) — sparse, so it
    // costs no disk; read_file only sniffs the first 8 KiB for NULs.
    let size: u64 = 256 << 20;
    let big = std::fs::File::create(repo.path().join("big.txt")).unwrap();
    std::io::Write::write_all(&mut &big, &[b'x'; 8192]).unwrap();
    big.set_len(size).unwrap();
    let server = start(scripts::agent([
        Turn::tool_call("read_file", json!({"path": "big.txt"})),
        Turn::text("done"),
    ]));
    let (stderr, peak_kib) = run_measuring_rss(&repo, &server);
    eprintln!("peak RSS of ahelper reading a {size}-byte line: {peak_kib} KiB");
    // The code before held the whole line (and a copy): ≥ 512 MiB.
    assert!(peak_kib < 120 * 1024, "peak RSS {peak_kib} KiB");
    let result = first_result(&server.model_requests());
    assert!(
        result.contains(&format!("line cut at 2000 characters: {size} in total")),
        "{stderr}\n{}",
        &result[..result.len().min(3000)]
    );
}

/// A Python program that forks at most `n` children that sleep (so it cannot harm the machine
/// if the limit fails), prints how many it started and why it stopped, and kills them.
fn bounded_fork_loop(n: u32) -> String {
    format!(
        "python3 - <<'EOF'\nimport os, signal, time\nkids = []\ntry:\n    for i in range({n}):\n        \
         pid = os.fork()\n        if pid == 0:\n            time.sleep(30)\n            os._exit(0)\n        \
         kids.append(pid)\nfinally:\n    print('started', len(kids), flush=True)\n    for k in kids:\n        \
         os.kill(k, signal.SIGKILL)\nEOF"
    )
}

/// The text of the tool result of the first call, from the requests `server` recorded.
fn command_result(server: &ahelper_fake_llm::FakeLlm) -> String {
    let requests = server.model_requests();
    let body = &requests.get(1).expect("a second request").body;
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    messages
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["type"] == "tool_result")
        .map(|c| c["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// uid and gid of `nobody`, for the unprivileged run when the test runs as root.
const NOBODY: u32 = 65534;

/// Who runs ahelper.
#[derive(Clone, Copy, PartialEq)]
enum Who {
    /// The test's own user (root on CI).
    Me,
    /// `nobody`, through `setpriv` (the test must be root).
    Nobody,
}

fn chown_tree(path: &std::path::Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path(), uid);
        }
    }
}

/// Runs `command` with `ahelper -p` in bypass mode as `who`, the user config `[sandbox]`
/// table holding `sandbox`; the command's tool result.
fn run_limited_as(who: Who, sandbox: &str, command: &str) -> String {
    let repo = repo_with(&[("a.txt", "a\n")]);
    super::support::config::write_user_config(&repo, &format!("[sandbox]\n{sandbox}\n"));
    let server = start(scripts::agent([scripts::runs(command), Turn::text("done")]));
    let mut cmd = if who == Who::Nobody {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(repo.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
        chown_tree(&repo.path(), NOBODY);
        chown_tree(&repo.home(), NOBODY);
        let mut cmd = std::process::Command::new("setpriv");
        cmd.args([
            format!("--reuid={NOBODY}"),
            format!("--regid={NOBODY}"),
            "--clear-groups".into(),
            "--".into(),
        ])
        .arg(assert_cmd::cargo::cargo_bin("ahelper"));
        cmd
    } else {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("ahelper"))
    };
    isolate(&mut cmd, &repo);
    talk_to(&mut cmd, &server, Wire::Anthropic);
    cmd.args(["-p", "go", "--permission-mode", "bypass"]);
    let mut cmd = assert_cmd::Command::from_std(cmd);
    let stderr = stderr_of(cmd.timeout(Duration::from_secs(120)));
    let result = command_result(&server);
    assert!(!result.is_empty(), "{stderr}");
    result
}

/// [`run_limited_as`] as the test's own user.
fn run_limited(sandbox: &str, command: &str) -> String {
    run_limited_as(Who::Me, sandbox, command)
}

/// How many children [`bounded_fork_loop`] said it started.
fn started(result: &str) -> u32 {
    result
        .split("started ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{result}"))
}

/// Whether this kernel has a `pid_max` per PID namespace (Linux 6.14 and newer), from the
/// release in `/proc/sys/kernel/osrelease`.
fn per_namespace_pid_max() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor) >= (6, 14)
}

#[test]
fn a_command_that_hits_the_process_limit_is_told_so() {
    require_sandbox!(Needs::LandlockAndNamespaces);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 && !per_namespace_pid_max() {
        eprintln!("skipped: as root the process limit needs Linux 6.14 (pid_max per namespace)");
        return;
    }
    // The command first tries to lift the PID namespace's limit (as root it holds
    // CAP_SYS_ADMIN in its own user namespace; landlock gives it no write to the new /proc).
    // (Through python: the permission layer refuses a plain redirection out of the workspace.)
    let lift = "python3 -c \"open('/proc/sys/kernel/pid_max', 'w').write('4000000')\"; \
                echo pid_max=$(cat /proc/sys/kernel/pid_max)";
    let result = run_limited(
        "max_processes = 100",
        &format!("{lift}\n{}", bounded_fork_loop(600)),
    );
    assert!(!result.contains("pid_max=4000000"), "{result}");
    eprintln!("{}", result.lines().take(8).collect::<Vec<_>>().join("\n"));
    let started = started(&result);
    // 100 (RLIMIT_NPROC) for a user, at most 100 + 300 as root (pid_max; see limits.rs).
    assert!(started < 400, "{started} started: {result}");
    eprintln!("{started} children started under max_processes = 100");
    assert!(
        result.contains("[the command hit the process limit")
            && result.contains("at most 100 processes and threads")
            && result.contains("sandbox.max_processes"),
        "{result}"
    );
}

#[test]
fn a_command_that_hits_the_memory_limit_is_told_so() {
    require_sandbox!(Needs::Landlock);
    // The command first tries to lift the limit (as root it holds every capability in its own
    // user namespace, which does not count for RLIMIT_DATA's hard limit).
    let lift = "python3 -c 'import resource as r; r.setrlimit(r.RLIMIT_DATA, (-1, -1)); \
                print(\"lifted\")'";
    let allocate = "python3 -c 'b = bytearray(512 << 20); print(\"allocated\", len(b))'";
    let result = run_limited("max_memory_mb = 256", &format!("{lift}; {allocate}"));
    assert!(
        !result.contains("lifted") && result.contains("not allowed to raise maximum limit"),
        "{result}"
    );
    assert!(!result.contains("allocated"), "{result}");
    assert!(
        result.contains("MemoryError")
            && result.contains("[the command hit the memory limit")
            && result.contains("at most 256 MiB (sandbox.max_memory_mb)"),
        "{result}"
    );
}

/// As an unprivileged user the limit is exact: `RLIMIT_NPROC` in the command's own user
/// namespace counts only its processes (the shell and python among them).
#[test]
fn an_unprivileged_users_command_gets_exactly_the_process_limit() {
    require_sandbox!(Needs::LandlockAndNamespaces);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let has_setpriv = std::process::Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !root || !has_setpriv {
        eprintln!("skipped: needs root and setpriv to run ahelper as nobody");
        return;
    }
    let result = run_limited_as(Who::Nobody, "max_processes = 100", &bounded_fork_loop(600));
    let started = started(&result);
    eprintln!("{started} children started as nobody under max_processes = 100");
    assert!((90..100).contains(&started), "{started} started: {result}");
    assert!(
        result.contains("[the command hit the process limit"),
        "{result}"
    );
}
