//! End-to-end tests of what `run_command` leaves behind, through the built binary: no process
//! outlives its command, its ahelper (even after `kill -9`) or a `SIGTERM`/`SIGHUP`; each
//! command's private `TMPDIR`; no UDP with `sandbox.network = false`.

use super::support::sandbox::{Needs, available, require_sandbox};
use super::support::scripts::*;
use super::support::wait::{poll_every, wait_for_some};
use super::support::*;
use ahelper_fake_llm::{FakeLlm, RecordedRequest, Turn};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

/// Digits unique to this test process and moment, to recognise its processes in `/proc`.
fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{}{}", std::process::id(), nanos % 1_000_000)
}

/// Live (not zombie) processes whose `/proc/<pid>/<file>` holds `needle`; `cmdline` and
/// `environ` entries are separated by NUL, turned into spaces for `cmdline`.
fn live_processes_with(file: &str, needle: &str) -> Vec<u32> {
    let processes = std::fs::read_dir("/proc").unwrap().flatten();
    let live_with = |entry: std::fs::DirEntry| {
        let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
        let bytes = std::fs::read(entry.path().join(file)).ok()?;
        let hit = if file == "environ" {
            bytes.split(|b| *b == 0).any(|e| e == needle.as_bytes())
        } else {
            String::from_utf8_lossy(&bytes)
                .replace('\0', " ")
                .contains(needle)
        };
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .map(|s| s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z')))
            .unwrap_or(true);
        (hit && !zombie).then_some(pid)
    };
    processes.filter_map(live_with).collect()
}

/// The tool results the model received in `request`, as one string.
fn body(request: &RecordedRequest) -> String {
    request.body.to_string()
}

/// `ahelper -p` in `repo` with every tool allowed, playing `turns`; returns the model requests.
fn print_run(repo: &TestRepo, turns: Vec<Turn>) -> Vec<RecordedRequest> {
    let server = start(agent(turns));
    ahelper(repo, &server, Wire::Anthropic)
        .args(["-p", "go", "--permission-mode", "bypass"])
        .assert()
        .success();
    server.model_requests()
}

/// 15.7: `nohup … &`, `setsid … &` and a double fork are gone when their command returns; a
/// timed-out command's `setsid` child is gone; nothing is left after ahelper exits.
#[test]
fn no_process_outlives_its_command_or_ahelper() {
    let x = unique();
    let forms =
        format!("nohup sleep 300.{x}1 & setsid sleep 300.{x}2 & (sleep 300.{x}3 &) & echo started");
    let requests = leave_processes_behind(&x, &forms, &format!("setsid sleep 300.{x}4"));
    assert_eq!(requests.len(), 4);
    assert_told(&requests[1], "started");
    assert!(
        body(&requests[1]).contains("left running were killed"),
        "the model is told about the killed leftovers: {}",
        body(&requests[1])
    );
    assert!(body(&requests[2]).contains("timed out"));
    assert_none_survived(&body(&requests[3]), &x, "a process");
}

/// `ahelper -p` (bypass) in a new repository running `detached` (it starts processes meant to
/// outlive it), then `left & sleep 60` with a 1 s timeout, then the [`survivor_check`] of `x`;
/// the model requests (the three tool results are in requests 1, 2 and 3).
fn leave_processes_behind(x: &str, detached: &str, left: &str) -> Vec<RecordedRequest> {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let timed_out = json!({"command": format!("{left} & sleep 60"), "timeout_ms": 1000});
    print_run(
        &repo,
        vec![
            runs(detached),
            Turn::tool_call("run_command", timed_out),
            runs(&survivor_check(x)),
            Turn::text("done"),
        ],
    )
}

/// Asserts that the model was told `text` in `request` (a tool result).
#[track_caller]
fn assert_told(request: &RecordedRequest, text: &str) {
    assert!(body(request).contains(text), "{}", body(request));
}

/// Asserts that the model was not told `text` in `request`.
#[track_caller]
fn assert_not_told(request: &RecordedRequest, text: &str) {
    assert!(!body(request).contains(text), "{}", body(request));
}

/// A command that prints `SURVIVOR /proc/<pid>` for every process whose command line holds
/// `sleep 300.<x>`, then `checked`.
fn survivor_check(x: &str) -> String {
    // The pattern is written so that the checking shell's own command line does not match it.
    format!(
        "X={x}; for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null \
         | grep -q \"sleep 300\\.$X\" && echo SURVIVOR $p; done; echo checked"
    )
}

/// `checked` (the tool result of [`survivor_check`]) ran to its end and found no `sleep
/// 300.<x>` process (`who` names the kind, e.g. "a process"), and none is left now.
fn assert_none_survived(checked: &str, x: impl std::fmt::Display, who: &str) {
    assert!(checked.contains("checked"), "{checked}");
    assert!(
        !checked.contains("SURVIVOR /proc"),
        "{who} outlived its command: {checked}"
    );
    assert_eq!(
        live_processes_with("cmdline", &format!("sleep 300.{x}")),
        Vec::<u32>::new(),
        "a process outlived ahelper"
    );
}

/// Processes that also shed the command's environment marker (`env -i`) — detached with
/// `setsid`, `nohup`, a double fork, `disown`, or from a nested user namespace (`unshare -U`) —
/// are gone when their command returns, and when it times out: they cannot leave the
/// command's PID namespace. (Needs the OS sandbox; without landlock the environment marker is
/// the only one.)
#[test]
fn processes_that_clear_their_environment_do_not_outlive_their_command() {
    require_sandbox!(Needs::Landlock);
    let x = unique();
    let forms = format!(
        "env -i setsid sh -c 'sleep 300.{x}1' & env -i nohup sleep 300.{x}2 >/dev/null 2>&1 & \
         (env -i sleep 300.{x}3 &) ; env -i sleep 300.{x}4 & disown; \
         unshare -U env -i setsid sleep 300.{x}5 & echo started"
    );
    let left_by_the_timed_out = format!(
        "nohup sleep 300.{x}6 >/dev/null 2>&1 & setsid sleep 300.{x}7 & (sleep 300.{x}8 &); \
         env -i setsid sleep 300.{x}9"
    );
    let requests = leave_processes_behind(&x, &forms, &left_by_the_timed_out);
    assert_told(&requests[1], "started");
    assert_told(&requests[1], "left running were killed");
    assert_told(&requests[2], "timed out");
    assert_none_survived(
        &body(&requests[3]),
        &x,
        "a process without the environment marker",
    );
}

/// A swarm run in the background (`ahelper swarm "do it" --yes --permission-mode bypass`) of one
/// subtask whose worker writes `partial`, then runs `command` after writing its shell's pid to
/// `sleeper.pid`, then (when resumed) writes `complete`.
struct SleepingRun {
    repo: TestRepo,
    server: FakeLlm,
    child: Child,
    /// The run record once the worker's command wrote `sleeper.pid`.
    run: Value,
}

impl SleepingRun {
    /// `ahelper swarm resume <run>`, which succeeds.
    fn resume(&self) -> assert_cmd::assert::Assert {
        let run_id = self.run["run_id"].as_str().unwrap();
        ahelper(&self.repo, &self.server, Wire::Anthropic)
            .args(["swarm", "resume", run_id])
            .assert()
            .success()
    }
}

/// A command that leaves `nohup sleep 300.<x>1` behind and sleeps (`300.<x>2`) in the
/// foreground.
fn nohup_and_sleep(x: &str) -> String {
    format!("nohup sleep 300.{x}1 >/dev/null 2>&1 & exec sleep 300.{x}2")
}

/// Starts a [`SleepingRun`] of `command` and waits until the command runs.
fn start_sleeping_run(command: &str, extra_args: &[&str]) -> SleepingRun {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_worker([
        writes("a.txt", "partial\n"),
        runs(&format!("echo $$ > sleeper.pid; {command}")),
        writes("a.txt", "complete\n"),
        Turn::text("s1 done"),
    ]));
    let mut args = vec!["swarm", "do it", "--yes", "--permission-mode", "bypass"];
    args.extend_from_slice(extra_args);
    let child = spawn_ahelper(&repo, &server, &args);
    let run = wait_for_worker_command(&repo);
    SleepingRun {
        repo,
        server,
        child,
        run,
    }
}

/// The run record of the only run, once its worker's command wrote `sleeper.pid`.
fn wait_for_worker_command(repo: &TestRepo) -> Value {
    wait_for_some(
        "the worker to start its command",
        Duration::from_secs(90),
        || {
            let run = try_last_run(repo)?;
            let worktree = PathBuf::from(run["workers"][0]["worktree"].as_str().unwrap_or(""));
            std::fs::read_to_string(worktree.join("sleeper.pid"))
                .is_ok_and(|s| s.ends_with('\n'))
                .then_some(run)
        },
    )
}

/// Waits up to `timeout`, checking every `every`, until no live process's `/proc/<pid>/<file>`
/// holds `needle` ([`live_processes_with`]); `what` names them when some are left.
fn wait_until_gone(file: &str, needle: &str, every: Duration, timeout: Duration, what: &str) {
    poll_every(
        every,
        &format!("{what} to be gone"),
        timeout,
        || live_processes_with(file, needle).is_empty(),
        || format!("left: {:?}", live_processes_with(file, needle)),
    );
}

/// Kills `child` (ahelper) with SIGKILL, then waits up to `timeout`, checking every
/// millisecond, until no live process's `/proc/<pid>/<file>` holds `needle`; prints how soon
/// they were all gone.
fn kill_9_then_wait_until_gone(child: &mut Child, (file, needle): (&str, &str), timeout: Duration) {
    child.kill().unwrap();
    let killed_at = Instant::now();
    child.wait().unwrap();
    let what = format!("the processes whose {file} holds {needle:?}, after kill -9 of ahelper,");
    wait_until_gone(file, needle, Duration::from_millis(1), timeout, &what);
    eprintln!("the last of {what} gone {:?} later", killed_at.elapsed());
}

fn run_marker(run: &Value) -> String {
    format!("AHELPER_RUN_ID={}", run["run_id"].as_str().unwrap())
}

/// 9.1: `kill -9` of ahelper while a worker's command runs (a `sleep` in the foreground and a
/// `nohup` one in the background): every process of the run is gone soon after, without any
/// resume; then `swarm resume` finishes the run (a swarm run has no `-p` memory holder). The
/// watchdog that sweeps them runs in the idle scheduling class (issue 11: it never takes a CPU
/// from whoever waits for ahelper).
#[test]
fn kill_9_leaves_no_command_running_and_resume_finishes() {
    let x = unique();
    let mut sleeping = start_sleeping_run(&nohup_and_sleep(&x), &[]);
    let watchdog = watchdog_of(sleeping.child.id());
    let children = child_names(sleeping.child.id() as i32);
    assert!(
        !children.iter().any(|c| c == "ahelper-memory"),
        "a swarm run makes no -p memory holder: {children:?}"
    );
    // (it names itself, then takes the class)
    wait_for_some(
        "the watchdog in the idle scheduling class",
        Duration::from_secs(10),
        || {
            // SAFETY: reads the scheduling policy of our child's child.
            let policy = unsafe { libc::sched_getscheduler(watchdog as libc::pid_t) };
            (policy == libc::SCHED_IDLE).then_some(())
        },
    );
    let marker = run_marker(&sleeping.run);
    assert!(!live_processes_with("environ", &marker).is_empty());
    kill_9_then_wait_until_gone(
        &mut sleeping.child,
        ("environ", &marker),
        Duration::from_secs(60),
    );
    assert_eq!(
        live_processes_with("cmdline", &format!("sleep 300.{x}")),
        Vec::<u32>::new()
    );

    sleeping.resume();
    let run = last_run(&sleeping.repo);
    assert_eq!(run["status"], "finished", "{run}");
}

/// The watchdog ahelper `parent` forked (`ahelper-reaper`).
fn watchdog_of(parent: u32) -> u32 {
    child_named(parent, "ahelper-reaper")
}

/// The child of `parent` named `name` (`/proc/<pid>/comm`), once there is one.
fn child_named(parent: u32, name: &str) -> u32 {
    let named = |entry: std::fs::DirEntry| {
        let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
        let (head, rest) = stat.rsplit_once(") ")?;
        let ppid = rest.split(' ').nth(1).and_then(|p| p.parse::<u32>().ok());
        if !head.ends_with(&format!("({name}")) || ppid != Some(parent) {
            return None;
        }
        entry.file_name().to_str()?.parse::<u32>().ok()
    };
    wait_for_some(
        &format!("the {name} of ahelper {parent}"),
        Duration::from_secs(10),
        || {
            std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .find_map(named)
        },
    )
}

/// 9.1, second layer: ahelper and its watchdog both killed with `kill -9`, commands without
/// the OS sandbox (`--sandbox off`: no PID namespace): the worker's shell dies with ahelper
/// (`PR_SET_PDEATHSIG`), the `nohup` process it left is found and killed by `swarm resume`
/// (its `AHELPER_RUN_ID`) before the run continues.
#[test]
fn resume_kills_leftovers_of_a_run_whose_watchdog_died_too() {
    let x = unique();
    let mut sleeping = start_sleeping_run(&nohup_and_sleep(&x), &["--sandbox", "off"]);
    let watchdog = watchdog_of(sleeping.child.id());
    // SAFETY: signalling the watchdog of our own child.
    unsafe { libc::kill(watchdog as i32, libc::SIGKILL) };
    std::thread::sleep(Duration::from_millis(100));
    sleeping.child.kill().unwrap();
    sleeping.child.wait().unwrap();
    wait_until_gone(
        "cmdline",
        &format!("sleep 300.{x}2"),
        Duration::from_millis(10),
        Duration::from_secs(30),
        "the worker's shell, after ahelper,",
    );
    let marker = run_marker(&sleeping.run);
    assert_eq!(
        live_processes_with("environ", &marker).len(),
        1,
        "the nohup sleep is left"
    );

    sleeping.resume().stderr(predicates::str::contains(
        "Stopped 1 process(es) left running",
    ));
    assert_eq!(live_processes_with("environ", &marker), Vec::<u32>::new());
    assert_eq!(last_run(&sleeping.repo)["status"], "finished");
}

/// 15.7 after `kill -9`: ahelper *and* its watchdog killed while a worker's command runs that
/// left `nohup … &`, `setsid …`, a double fork and `env -i setsid …` (no environment marker)
/// behind: all of them are gone without any resume — the command's PID namespace dies with
/// the waiter ahelper spawned (`PR_SET_PDEATHSIG`), and with it every process in it.
#[test]
fn kill_9_of_ahelper_and_its_watchdog_leaves_nothing_of_a_sandboxed_command() {
    require_sandbox!(Needs::Landlock);
    let x = unique();
    let SleepingRun { mut child, .. } = start_sleeping_run(
        &format!(
            "nohup sleep 300.{x}1 >/dev/null 2>&1 & setsid sleep 300.{x}2 & \
             (sleep 300.{x}3 &) ; env -i setsid sleep 300.{x}4 & exec sleep 300.{x}5"
        ),
        &[],
    );
    let pattern = format!("sleep 300.{x}");
    poll_every(
        Duration::from_millis(10),
        "the command's five processes to start",
        Duration::from_secs(30),
        || live_processes_with("cmdline", &pattern).len() >= 5,
        String::new,
    );
    let watchdog = watchdog_of(child.id());
    // SAFETY: signalling the watchdog of our own child.
    unsafe { libc::kill(watchdog as i32, libc::SIGKILL) };
    kill_9_then_wait_until_gone(&mut child, ("cmdline", &pattern), Duration::from_secs(30));
}

/// 9.2: `signal` mid-run is handled like the first Ctrl-C: the worker commits `wip`, the
/// output says how to resume, exit status 130, and no process of the run survives.
fn signal_mid_run_commits_wip_and_prints_resume(signal: i32) {
    let x = unique();
    let SleepingRun {
        repo, child, run, ..
    } = start_sleeping_run(&format!("setsid sleep 300.{x}1 & exec sleep 300.{x}2"), &[]);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("Resume with: ahelper swarm resume"),
        "{stdout}"
    );
    assert_eq!(
        live_processes_with("environ", &run_marker(&run)),
        Vec::<u32>::new(),
        "a process of the run survived the signal"
    );
    let run = last_run(&repo);
    assert_eq!(run["status"], "cancelled");
    let branch = run["workers"][0]["branch"].as_str().unwrap();
    assert!(
        repo.git(&["log", "-1", "--format=%s", branch])
            .starts_with("wip:")
    );
    assert_eq!(repo.git(&["show", &format!("{branch}:a.txt")]), "partial\n");
}

#[test]
fn sigterm_mid_run_commits_wip_and_prints_resume() {
    signal_mid_run_commits_wip_and_prints_resume(libc::SIGTERM);
}

#[test]
fn sighup_mid_run_commits_wip_and_prints_resume() {
    signal_mid_run_commits_wip_and_prints_resume(libc::SIGHUP);
}

/// `SIGTERM` while `ahelper -p` waits for a command (one-shot runs on a single-threaded
/// runtime): the command is ended, the session's transcript records the cancelled stop, stderr
/// says how to resume, exit status 130, and no process of the command survives.
#[test]
fn sigterm_during_print_mode_cancels_the_command_and_exits_130() {
    let x = unique();
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(agent([
        runs(&format!("echo $$ > sleeper.pid; exec sleep 300.{x}")),
        Turn::text("never reached"),
    ]));
    let child = spawn_ahelper(&repo, &server, &["-p", "go", "--permission-mode", "bypass"]);
    wait_for_some("the command to start", Duration::from_secs(60), || {
        std::fs::read_to_string(repo.path().join("sleeper.pid"))
            .ok()
            .filter(|s| s.ends_with('\n'))
    });
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("--resume"), "{stderr}");
    let stops: Vec<Value> = session_lines(&repo)
        .into_iter()
        .filter(|l| l["type"] == "stop")
        .collect();
    assert_eq!(stops.len(), 1, "{stops:?}");
    assert_eq!(stops[0]["reason"], "cancelled", "{stops:?}");
    wait_until_gone(
        "cmdline",
        &format!("sleep 300.{x}"),
        Duration::from_millis(10),
        Duration::from_secs(10),
        "the command's sleep",
    );
}

/// An `ahelper -p` run whose one command (`command`) waits for the file `go` in the repository
/// before the model answers "all done"; the repository, the fake server, ahelper and the pid of
/// its memory holder.
fn gated_print_run(command: &str) -> (TestRepo, FakeLlm, Child, u32) {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(agent([runs(command), Turn::text("all done")]));
    let child = spawn_ahelper(&repo, &server, &["-p", "go", "--permission-mode", "bypass"]);
    let holder = child_named(child.id(), "ahelper-memory");
    (repo, server, child, holder)
}

/// Issue 11 (exit tail): `ahelper -p` shares its memory with a holder process that frees it
/// after ahelper's exit was reported. The holder keeps no descriptor of ahelper's (only
/// ahelper's pidfd: a pipe reader sees end of file when ahelper exits), runs in the idle
/// scheduling class, and is gone soon after ahelper exits; the answer is whole.
#[test]
fn print_mode_memory_holder_holds_nothing_and_ends_after_ahelper() {
    let (repo, _server, child, holder) =
        gated_print_run("while [ ! -e go ]; do sleep 0.05; done; echo released");
    wait_for_some(
        "the holder in the idle class",
        Duration::from_secs(10),
        || {
            // SAFETY: reads the scheduling policy of our child's child.
            let policy = unsafe { libc::sched_getscheduler(holder as libc::pid_t) };
            (policy == libc::SCHED_IDLE).then_some(())
        },
    );
    // ahelper is not dumpable, so only root reads its (shared) descriptors' links.
    if let Ok(fds) = std::fs::read_dir(format!("/proc/{holder}/fd")) {
        let links: Vec<String> = fds
            .flatten()
            .map(|fd| std::fs::read_link(fd.path()).unwrap().display().to_string())
            .collect();
        assert_eq!(links, ["anon_inode:[pidfd]"], "the holder's descriptors");
        // Nor the working directory: the repository is not kept busy while the holder lingers.
        let cwd = std::fs::read_link(format!("/proc/{holder}/cwd")).unwrap();
        assert_eq!(
            cwd,
            std::path::Path::new("/"),
            "the holder's working directory"
        );
    }
    std::fs::write(repo.path().join("go"), "").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "all done\n");
    poll_every(
        Duration::from_millis(10),
        "the memory holder to be gone",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(format!("/proc/{holder}/stat"))
                .map(|s| s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z')))
                .unwrap_or(true)
        },
        || format!("holder {holder} still alive"),
    );
}

/// Issue 11 (exit tail), a hostile case: the `-p` memory holder killed mid-run (ahelper gets a
/// `SIGCHLD` for a child no tool started). The run goes on: the command running meanwhile is
/// still waited for and its output reaches the model, the answer is whole, the exit code 0.
#[test]
fn print_mode_outlives_a_killed_memory_holder() {
    let (repo, server, child, holder) =
        gated_print_run("while [ ! -e go ]; do sleep 0.05; done; echo released-$((6 * 7))");
    // SAFETY: signalling our child's child.
    unsafe { libc::kill(holder as libc::pid_t, libc::SIGKILL) };
    std::fs::write(repo.path().join("go"), "").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "all done\n");
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    assert_told(&requests[1], "released-42");
}

/// Issue 11 (exit tail): `ahelper -p` as the init of a PID namespace (`docker run` without
/// `--init`) makes neither the memory holder nor the watchdog: the kernel tells init's parent
/// of its exit only once every process of the namespace is gone (the holder's freeing of the
/// memory, in the idle class, would be waited for: 0.25–0.44 s median under load), and kills
/// them all anyway. The run is whole.
#[test]
fn print_mode_as_a_pid_namespace_init_makes_no_holder_nor_watchdog() {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let unshare: &[&str] = if root {
        &["--fork", "--pid", "--mount-proc"]
    } else {
        &[
            "--user",
            "--map-root-user",
            "--fork",
            "--pid",
            "--mount-proc",
        ]
    };
    let works = std::process::Command::new("unshare")
        .args(unshare)
        .arg("true")
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        eprintln!(
            "skipped: `unshare {}` does not work here",
            unshare.join(" ")
        );
        return;
    }
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(agent([
        runs("while [ ! -e go ]; do sleep 0.05; done; echo released"),
        Turn::text("all done"),
    ]));
    let mut cmd = std::process::Command::new("unshare");
    talk_to(isolate(&mut cmd, &repo), &server, Wire::Anthropic);
    let child = cmd
        .args(unshare)
        .arg(assert_cmd::cargo::cargo_bin("ahelper"))
        .args(["-p", "go", "--permission-mode", "bypass"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let init = child_named(child.id(), "ahelper") as i32;
    // Both would be there before the command runs.
    let children = wait_for_some("the command under ahelper", Duration::from_secs(30), || {
        let names = child_names(init);
        names
            .iter()
            .any(|n| n == "bash" || n == "ahelper-spawner")
            .then_some(names)
    });
    std::fs::write(repo.path().join("go"), "").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        !children
            .iter()
            .any(|n| n == "ahelper-memory" || n == "ahelper-reaper"),
        "{children:?}"
    );
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "all done\n");
}

/// 15.8: each command gets its own 0700 `TMPDIR`, removed afterwards; the shared temp dir is
/// not writable under the sandbox.
#[test]
fn each_command_gets_a_private_temp_dir() {
    let x = unique();
    let repo = repo_with(&[("a.txt", "a\n")]);
    let shared = std::env::temp_dir().join(format!("ahelper-shared-{x}"));
    let probe = format!(
        "echo TMPDIR=$TMPDIR; stat -c mode=%a $TMPDIR; touch $TMPDIR/f && echo private-ok; \
         touch {} && echo shared-written || echo shared-denied",
        shared.display()
    );
    let requests = print_run(&repo, vec![runs(&probe), runs(&probe), Turn::text("done")]);
    let first = body(&requests[1]);
    let second = body(&requests[2]);
    assert!(
        first.contains("mode=700") && first.contains("private-ok"),
        "{first}"
    );
    if available(Needs::Landlock) {
        assert!(first.contains("shared-denied"), "{first}");
        assert!(!shared.exists());
    }
    let tmpdir = |text: &str| {
        let start = text.find("TMPDIR=").unwrap() + "TMPDIR=".len();
        let rest = &text[start..];
        PathBuf::from(&rest[..rest.find("\\n").unwrap()])
    };
    let (a, b) = (tmpdir(&first), tmpdir(&second));
    assert_ne!(a, b, "each command has its own temp dir");
    assert!(
        !a.exists() && !b.exists(),
        "temp dirs are removed after their command"
    );
}

/// 15.6: with `sandbox.network = false` a UDP datagram to a listener on 127.0.0.1 does not
/// arrive (the command has its own network namespace); with the network on it does.
#[test]
fn network_off_stops_udp() {
    // Unprivileged, the namespace needs user namespaces; `unshare -Urn` says whether they work.
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let namespaces = root
        || std::process::Command::new("unshare")
            .args(["-Urn", "true"])
            .status()
            .is_ok_and(|s| s.success());
    if !available(Needs::Landlock) || !namespaces {
        return;
    }
    let listener = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let send = format!(
        "perl -e 'use Socket; socket(S, PF_INET, SOCK_DGRAM, 0) or die \"socket: $!\"; \
         send(S, \"hi\", 0, pack_sockaddr_in({port}, inet_aton(\"127.0.0.1\"))) \
         or die \"send: $!\"; print \"sent\\n\"'"
    );
    let received = |listener: &std::net::UdpSocket| {
        let mut buf = [0u8; 64];
        std::thread::sleep(Duration::from_millis(200));
        listener.recv_from(&mut buf).is_ok()
    };

    let repo = repo_with(&[("a.txt", "a\n")]);
    repo.write(".ahelper/config.toml", "[sandbox]\nnetwork = false\n");
    let requests = print_run(&repo, vec![runs(&send), Turn::text("done")]);
    assert_not_told(&requests[1], "sent\\n");
    assert_told(&requests[1], "send: Network is unreachable");
    assert!(!received(&listener), "a datagram left the sandbox");

    let open = repo_with(&[("a.txt", "a\n")]);
    let requests = print_run(&open, vec![runs(&send), Turn::text("done")]);
    assert_told(&requests[1], "sent\\n");
    assert!(
        received(&listener),
        "with the network on the datagram arrives"
    );
}

/// A sandboxed command lives in a PID namespace of its own whose `/proc` it can read (`ps`,
/// `$$` and `/proc/<pid>` agree), and its exit code and fatal signal reach ahelper unchanged
/// through the namespace's init and the waiter.
#[test]
fn a_command_sees_its_own_pid_namespace_and_keeps_its_exit_status() {
    require_sandbox!(Needs::LandlockAndNamespaces);
    let repo = repo_with(&[("a.txt", "a\n")]);
    let probe = "echo \"shell=$$\"; read -r pid comm rest < /proc/$$/stat; echo \"stat=$pid $comm\"; \
                 echo \"count=$(ls /proc | grep -c '^[0-9]')\"";
    let requests = print_run(
        &repo,
        vec![
            runs(probe),
            runs("exit 7"),
            runs("kill -TERM $$"),
            Turn::text("done"),
        ],
    );
    let probed = body(&requests[1]);
    assert!(probed.contains("shell=2"), "{probed}");
    assert!(probed.contains("stat=2 (bash)"), "{probed}");
    let count: usize = probed
        .rsplit("count=")
        .next()
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{probed}"));
    assert!(
        count <= 5,
        "only the namespace's processes are listed: {probed}"
    );
    assert!(
        body(&requests[2]).contains("[exit code: 7]"),
        "{}",
        body(&requests[2])
    );
    assert!(
        body(&requests[3]).contains("[killed by signal 15 (SIGTERM)]"),
        "{}",
        body(&requests[3])
    );
}
