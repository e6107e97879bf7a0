//! Distributed swarm runs (issue 13): a real `nats-server -js` on 127.0.0.1, a bare repository
//! as the shared git remote, `ahelper worker` processes with their own HOMEs and work dirs, the
//! coordinator `ahelper swarm --nats URL`, all against the fake LLM server.

use super::support::nats::{NatsClient, NatsServer, WorkerProcess, repo_with_remote};
use super::support::scripts::{done, plan_files, was_here, worker};
use super::support::wait::{wait_for, wait_for_or_show};
use super::support::*;
use ahelper_fake_llm::{FakeLlm, Script, Turn};
use serde_json::{Value, json};
use std::time::Duration;

const FILES: [(&str, &str); 4] = [
    ("s1", "a.txt"),
    ("s2", "b.txt"),
    ("s3", "c.txt"),
    ("s4", "d.txt"),
];

/// Four subtasks on four files ([`FILES`]); the worker of each plays `turns(id, file)`.
fn four_subtasks_playing(turns: impl Fn(&str, &str) -> Vec<Turn>) -> Script {
    let script = plan_files(&FILES.map(|(_, file)| file));
    FILES.iter().fold(script, |script, (id, file)| {
        script.with_conversation(worker(id, turns(id, file)))
    })
}

/// Four subtasks on four files; each worker writes `<id> was here` into its file.
fn four_subtasks() -> Script {
    four_subtasks_playing(|id, file| vec![was_here(id, file), done(id)])
}

/// The repository of the four subtasks, with a bare clone as its remote `origin`.
fn four_file_repo() -> TestRepo {
    repo_with_remote(&[
        ("a.txt", "a\n"),
        ("b.txt", "b\n"),
        ("c.txt", "c\n"),
        ("d.txt", "d\n"),
    ])
}

/// A 4-subtask run completes over NATS on two worker machines: every branch merged into the
/// integration branch, each worker's machine recorded, its transcript on the coordinator.
#[test]
fn four_subtasks_complete_over_nats_on_two_worker_processes() {
    let nats = NatsServer::start();
    let repo = four_file_repo();
    let server = start(four_subtasks());
    let mut workers = [
        WorkerProcess::start(&nats.url(), "m1", &server.base_url(), 2),
        WorkerProcess::start(&nats.url(), "m2", &server.base_url(), 2),
    ];
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args([
            "swarm",
            "change four files",
            "--yes",
            "--permission-mode",
            "bypass",
        ])
        .args(["--no-verify", "--nats", &nats.url()])
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    let logs = || {
        workers
            .iter()
            .map(|w| w.log())
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    assert!(
        out.status.success(),
        "{}\n{}\nworkers:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        logs()
    );
    // The run released its consumer on NATS and stopped reading first: no failed read (and
    // no retry that would re-create the consumer) after it.
    let log = std::fs::read_to_string(repo.home().join("state/ahelper/logs/ahelper.log")).unwrap();
    assert!(log.contains("released the run on NATS"), "{log}");
    assert!(!log.contains("reading worker events failed"), "{log}");
    let run = last_run(&repo);
    assert_eq!(run["status"], "finished", "{run:#}");
    let integration = run["integration_branch"].as_str().unwrap();
    for (i, (id, file)) in FILES.iter().enumerate() {
        let w = &run["workers"][i];
        assert_eq!(w["status"], "merged", "{w:#}");
        let machine = w["machine"].as_str().unwrap_or_default();
        assert!(machine == "m1" || machine == "m2", "{w:#}");
        assert_eq!(
            repo.git(&["show", &format!("{integration}:{file}")]),
            format!("{id} was here\n")
        );
        let transcript = worker_transcript(&repo, &run, &format!("w{}", i + 1));
        let text = std::fs::read_to_string(&transcript).unwrap_or_default();
        assert!(
            text.contains("write_file"),
            "{}: {text}",
            transcript.display()
        );
        for line in text.lines() {
            serde_json::from_str::<Value>(line).expect("transcript lines are JSON");
        }
    }
    // the user's checkout is untouched; nothing of the run was done in it
    assert_eq!(repo.file("a.txt"), "a\n");
    let run_id = run["run_id"].as_str().unwrap();
    for worker in &mut workers {
        worker.signal("TERM");
        assert_eq!(
            worker.wait_exit(Duration::from_secs(60)),
            Some(0),
            "{}",
            worker.log()
        );
        assert_worktrees_of_their_own_and_no_spares(worker, run_id);
    }
}

/// On a stopped worker machine: every worktree of the run is on its own worker's branch (a
/// spare worktree went to one subtask only), and no spare worktree is left, on disk or
/// registered in the clone.
fn assert_worktrees_of_their_own_and_no_spares(worker: &WorkerProcess, run_id: &str) {
    let work = worker.dir.path().join("work");
    let Ok(clones) = std::fs::read_dir(work.join("repos")) else {
        return;
    };
    for clone in clones.map(|c| c.unwrap().path()) {
        let key = clone.file_name().unwrap().to_owned();
        let spares = work.join("worktrees").join(&key).join(".spares");
        let left: Vec<_> = std::fs::read_dir(&spares)
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "spares left: {left:?}\n{}", worker.log());
        let listed = super::support::git::git(&clone, &["worktree", "list", "--porcelain"]);
        assert!(!listed.contains(".spares"), "{listed}");
        let run_dir = work.join("worktrees").join(&key).join(run_id);
        for wt in std::fs::read_dir(&run_dir).into_iter().flatten() {
            let wt = wt.unwrap().path();
            let id = wt.file_name().unwrap().to_string_lossy().to_string();
            if id.starts_with('.') {
                continue;
            }
            let branch = super::support::git::git(&wt, &["rev-parse", "--abbrev-ref", "HEAD"]);
            assert_eq!(branch.trim(), format!("ahelper/{run_id}/{id}"), "{listed}");
        }
    }
}

/// Like [`four_subtasks`], but each worker's second turn takes `slow_ms` and then writes again:
/// a worker killed during that turn leaves its subtask half done (nothing pushed), and the
/// machine that gets it redelivered plays turns 3 and 4 (write, done).
fn four_slow_subtasks(slow_ms: u64) -> Script {
    four_subtasks_playing(|id, file| {
        let write = || was_here(id, file);
        vec![write(), write().with_delay_ms(slow_ms), write(), done(id)]
    })
}

/// A child process killed (by PID) when the test ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// `ahelper swarm` as a child process (the test watches the run while it goes on).
fn coordinator(repo: &TestRepo, server: &ahelper_fake_llm::FakeLlm, nats_url: &str) -> Killed {
    let mut child = ahelper_process(repo, server, Wire::Anthropic);
    child
        .args(["swarm", "change four files", "--yes"])
        .args(["--permission-mode", "bypass"])
        .args(["--no-verify", "--nats", nats_url])
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(repo.root().join("coordinator.out")).unwrap())
        .stderr(std::fs::File::create(repo.root().join("coordinator.err")).unwrap());
    Killed(child.spawn().unwrap())
}

/// A run over NATS under way: its coordinator, worker machine `m1` (four subtasks at once),
/// the test's own client (capturing every subtask published), the model server, the repository
/// and the NATS server, dropped in that order.
struct RunOnM1 {
    run: Killed,
    m1: WorkerProcess,
    client: NatsClient,
    server: FakeLlm,
    repo: TestRepo,
    nats: NatsServer,
}

/// Starts a run of `script` over NATS on machine `m1` ([`RunOnM1`]).
fn run_on_m1(script: Script) -> RunOnM1 {
    let nats = NatsServer::start();
    let repo = four_file_repo();
    let server = start(script);
    let client = NatsClient::connect(&nats.url());
    client.capture("ahelper.work.>");
    let m1 = WorkerProcess::start(&nats.url(), "m1", &server.base_url(), 4);
    let run = coordinator(&repo, &server, &nats.url());
    RunOnM1 {
        run,
        m1,
        client,
        server,
        repo,
        nats,
    }
}

impl RunOnM1 {
    /// Kills the coordinator with SIGKILL and waits for it; the run's record then.
    fn kill_coordinator(&mut self) -> Value {
        self.run.0.kill().unwrap();
        self.run.0.wait().unwrap();
        last_run(&self.repo)
    }
}

/// A run of four slow subtasks (`slow_ms`) over NATS, every one in its slow second turn on
/// machine `m1`.
fn four_slow_subtasks_on_m1(slow_ms: u64) -> RunOnM1 {
    let running = run_on_m1(four_slow_subtasks(slow_ms));
    wait_for_second_turn_of_all_four(&running.server);
    running
}

/// A run of four slow subtasks on machine `m1`, all four in their slow second turn when
/// `stop_m1` stops that machine; then machine `m2` (four subtasks at once) starts, and the run
/// must succeed with all four merged, each run to its end on `m2`.
fn m2_finishes_the_run_after(stop_m1: impl FnOnce(&mut WorkerProcess)) {
    let mut running = four_slow_subtasks_on_m1(60_000);
    stop_m1(&mut running.m1);
    let m2 = WorkerProcess::start(&running.nats.url(), "m2", &running.server.base_url(), 4);
    let status = wait_for_exit(&mut running.run, || m2.log());
    let read = |name: &str| std::fs::read_to_string(running.repo.root().join(name));
    // the coordinator's output last: a cut test output keeps its tail
    assert!(
        status.success(),
        "m2 (its log's end):\n{}\ncoordinator stdout:\n{}\ncoordinator stderr:\n{}",
        m2.log_tail(60),
        read("coordinator.out").unwrap_or_default(),
        read("coordinator.err").unwrap_or_default()
    );
    assert_all_four_merged(&running.repo, Some("m2"));
}

/// Waits until each of the four subtasks' conversations is in its (slow) second turn.
fn wait_for_second_turn_of_all_four(server: &FakeLlm) {
    wait_for(
        "m1 to be in the second turn of all four",
        Duration::from_secs(240),
        || {
            (1..=4).all(|c| {
                server
                    .model_requests()
                    .iter()
                    .filter(|r| r.conversation == Some(c))
                    .count()
                    >= 2
            })
        },
    );
}

/// A worker machine SIGKILLed while it runs all four subtasks: JetStream redelivers them after
/// the ack wait to the other machine, and the run still ends with all four merged.
#[test]
fn a_sigkilled_worker_machine_is_replaced_and_all_four_merge() {
    m2_finishes_the_run_after(|m1| {
        m1.signal("KILL");
        assert_eq!(m1.wait_exit(Duration::from_secs(30)), None);
    });
}

/// SIGTERM on a worker machine: its running subtasks commit and push `wip`, are handed back
/// (nak) and it exits 0; the other machine continues them from the pushed `wip` branches.
#[test]
fn a_sigtermed_worker_hands_its_subtasks_back_and_exits_0() {
    m2_finishes_the_run_after(|m1| {
        m1.signal("TERM");
        assert_eq!(
            m1.wait_exit(Duration::from_secs(120)),
            Some(0),
            "{}",
            m1.log()
        );
        assert!(m1.log().contains("4 handed back"), "{}", m1.log());
    });
}

/// Waits (generously) for the coordinator to exit; `context` is shown when it does not.
fn wait_for_exit(run: &mut Killed, context: impl Fn() -> String) -> std::process::ExitStatus {
    let mut status = None;
    let ended = || {
        status = run.0.try_wait().unwrap();
        status.is_some()
    };
    wait_for_or_show("the run to end", Duration::from_secs(400), ended, context);
    status.expect("the run ended")
}

/// What the coordinator printed on stderr, then its log file (`AHELPER_LOG=debug`).
fn coordinator_log(repo: &TestRepo) -> String {
    let read = |p: std::path::PathBuf| std::fs::read_to_string(p).unwrap_or_default();
    let printed = read(repo.root().join("coordinator.err"));
    let logged = read(repo.home().join("state/ahelper/logs/ahelper.log"));
    format!("{printed}\n--- log file:\n{logged}")
}

/// Every worker of the last run merged (on `machine`, when one is given), each file as its
/// subtask wrote it; the run's record.
fn assert_all_four_merged(repo: &TestRepo, machine: Option<&str>) -> Value {
    let record = last_run(repo);
    assert_eq!(record["status"], "finished", "{record:#}");
    let integration = record["integration_branch"].as_str().unwrap();
    for (i, (id, file)) in FILES.iter().enumerate() {
        let w = &record["workers"][i];
        assert_eq!(w["status"], "merged", "{w:#}");
        if let Some(machine) = machine {
            assert_eq!(w["machine"], machine, "{w:#}");
        }
        assert_eq!(
            repo.git(&["show", &format!("{integration}:{file}")]),
            format!("{id} was here\n")
        );
    }
    record
}

/// nats-server stopped (SIGTERM) while all four subtasks are in their slow second turn and
/// started again on the same port with the same store: the workers and the coordinator
/// reconnect by themselves, the subtasks and events on disk survive, and all four merge.
#[test]
fn a_restarted_nats_server_does_not_lose_the_run() {
    let mut nats = NatsServer::start();
    let repo = four_file_repo();
    let server = start(four_slow_subtasks(20_000));
    let m1 = WorkerProcess::start(&nats.url(), "m1", &server.base_url(), 2);
    let m2 = WorkerProcess::start(&nats.url(), "m2", &server.base_url(), 2);
    let mut run = coordinator(&repo, &server, &nats.url());
    wait_for_second_turn_of_all_four(&server);
    nats.restart();
    let status = wait_for_exit(&mut run, || {
        format!(
            "{}\nm1:\n{}\nm2:\n{}\nnats:\n{}",
            coordinator_log(&repo),
            m1.log(),
            m2.log(),
            nats.log()
        )
    });
    assert!(
        status.success(),
        "{}\nm1:\n{}\nm2:\n{}",
        coordinator_log(&repo),
        m1.log(),
        m2.log()
    );
    assert_all_four_merged(&repo, None);
}

/// s1 is quick (write, done); s2, s3 and s4 have a slow second turn (`slow_ms`), so the run
/// goes on while the test plays with s1's messages or forges its own.
fn one_quick_three_slow(slow_ms: u64) -> Script {
    let mut script = four_slow_subtasks(slow_ms);
    script.conversations[1] = four_subtasks().conversations[1].clone();
    script
}

/// The last run's record once it exists and `condition` holds for it.
fn wait_for_run(
    repo: &TestRepo,
    what: &str,
    condition: impl Fn(&Value) -> bool,
    logs: impl Fn() -> String,
) -> Value {
    let found = || try_last_run(repo).filter(&condition);
    wait_for_or_show(what, Duration::from_secs(300), || found().is_some(), logs);
    found().unwrap()
}

/// The lines of `log` that contain every one of `parts`.
fn lines_with(log: &str, parts: &[&str]) -> usize {
    log.lines()
        .filter(|l| parts.iter().all(|p| l.contains(p)))
        .count()
}

/// Duplicate delivery never merges twice: after w1 merged, its `done` event is published twice
/// more and its subtask published again (a replay, which the worker machine refuses: its
/// message id is not its signed nonce). The coordinator ignores every later end of w1
/// (idempotent by run and worker id): the merge queue merges it once and the summary counts
/// it once.
#[test]
fn duplicate_deliveries_merge_once_and_count_once() {
    let RunOnM1 {
        nats: _nats,
        server: _server,
        repo,
        client,
        m1,
        mut run,
    } = run_on_m1(one_quick_three_slow(90_000));
    let logs = || format!("{}\nm1:\n{}", coordinator_log(&repo), m1.log());
    let record = wait_for_run(
        &repo,
        "w1 to merge",
        |r| r["workers"][0]["status"] == "merged",
        logs,
    );
    let run_id = record["run_id"].as_str().unwrap().to_string();
    let events = format!("ahelper.events.{run_id}.w1");
    let done = client
        .last_message("AHELPER_EVENTS", &events)
        .expect("w1's events are in the stream");
    let done_json: Value = serde_json::from_slice(&done).unwrap();
    assert_eq!(done_json["body"]["kind"], "done", "{done_json:#}");
    client.publish(&events, &done);
    client.publish(&events, &done);
    let work = format!("ahelper.work.{run_id}.w1");
    let subtask = client.captured(&work);
    assert_eq!(subtask.len(), 1, "w1's subtask was published once");
    client.publish(&work, &subtask[0]);
    wait_for_or_show(
        "the replayed subtask refused",
        Duration::from_secs(300),
        || lines_with(&m1.log(), &["refused a subtask message", "a replay"]) >= 1,
        logs,
    );
    // the two copies reach the coordinator and are ignored
    wait_for_or_show(
        "two later ends of w1 ignored",
        Duration::from_secs(300),
        || {
            let log = coordinator_log(&repo);
            lines_with(&log, &["not running ignored", "worker=w1", "kind=\"done\""]) >= 2
        },
        logs,
    );
    let status = wait_for_exit(&mut run, logs);
    assert!(
        status.success(),
        "{}\nm1:\n{}",
        coordinator_log(&repo),
        m1.log()
    );
    let record = assert_all_four_merged(&repo, None);
    let range = format!(
        "{}..{}",
        record["base_commit"].as_str().unwrap(),
        record["integration_branch"].as_str().unwrap()
    );
    // one step of the integration branch per worker (a fast-forward or a merge commit)
    let steps = repo.git(&["rev-list", "--first-parent", &range]);
    assert_eq!(steps.lines().count(), 4, "one merge per worker: {steps}");
    assert_eq!(
        record["workers"][0]["turns"], 2,
        "{:#}",
        record["workers"][0]
    );
    let out = std::fs::read_to_string(repo.root().join("coordinator.out")).unwrap();
    assert!(out.contains("— 4 merged,"), "{out}");
    assert!(out.contains("of 4 subtasks"), "{out}");
}

/// `value` with `edit` applied, as JSON bytes.
fn edited(value: &Value, edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut value = value.clone();
    edit(&mut value);
    serde_json::to_vec(&value).unwrap()
}

/// Forged messages end to end: subtasks with a bad run id (a path escape of the work dir), a
/// worker id that makes a ref outside `ahelper/`, a repository URL that runs a program, a
/// subject that disagrees, a bad commit, another version and garbage are published onto the
/// work queue; events with a bad worker id, another run's id, a bad machine name, another
/// version and garbage onto a running worker's subject. The worker machines refuse each
/// subtask (logged, terminated, never run), the coordinator refuses each event (logged, not
/// applied), and the run goes on to merge all four.
#[test]
fn forged_subtasks_and_events_are_refused_and_the_run_goes_on() {
    let RunOnM1 {
        nats,
        repo,
        server,
        client,
        m1,
        mut run,
    } = run_on_m1(one_quick_three_slow(60_000));
    let m2 = WorkerProcess::start(&nats.url(), "m2", &server.base_url(), 1);
    wait_for_second_turn_of_all_four(&server);
    let run_id = last_run(&repo)["run_id"].as_str().unwrap().to_string();
    let real = client.captured(&format!("ahelper.work.{run_id}.w2"));
    let real: Value = serde_json::from_slice(&real[0]).unwrap();
    let escape = repo.root().join("escaped");
    let w9 = format!("ahelper.work.{run_id}.w9");
    let forged_subtasks: Vec<(String, Vec<u8>)> = vec![
        (
            w9.clone(),
            edited(&real, |m| m["run_id"] = json!("../../../../escaped")),
        ),
        (
            format!("ahelper.work.{run_id}.main"),
            edited(&real, |m| m["worker_id"] = json!("../../heads/main")),
        ),
        (
            w9.clone(),
            edited(&real, |m| {
                m["worker_id"] = json!("w9");
                m["repo_url"] = json!(format!("ext::sh -c touch% {}", escape.display()));
            }),
        ),
        (w9.clone(), edited(&real, |_| {})),
        (
            w9.clone(),
            edited(&real, |m| {
                m["worker_id"] = json!("w9");
                m["start_commit"] = json!("HEAD~1");
            }),
        ),
        (
            w9.clone(),
            edited(&real, |m| {
                m["worker_id"] = json!("w9");
                m["version"] = json!(99);
            }),
        ),
        (w9.clone(), b"{\"not\": \"a subtask\"".to_vec()),
    ];
    for (subject, payload) in &forged_subtasks {
        client.publish(subject, payload);
    }
    let events = format!("ahelper.events.{run_id}.w2");
    let accepted = json!({"version": 1, "run_id": run_id, "worker_id": "w2", "machine": "m1",
        "body": {"kind": "done", "status": "finished",
                 "report": {"summary": "forged", "commit": "0".repeat(40)}}});
    let forged_events = [
        edited(&accepted, |e| e["worker_id"] = json!("../w2")),
        edited(&accepted, |e| {
            e["run_id"] = json!("0190f2a4-6b1c-7cc3-a3f1-2b7d5e9c1a20")
        }),
        edited(&accepted, |e| e["machine"] = json!("../../evil")),
        edited(&accepted, |e| e["version"] = json!(2)),
        b"garbage".to_vec(),
    ];
    for payload in &forged_events {
        client.publish(&events, payload);
    }
    let logs = || {
        format!(
            "{}\nm1:\n{}\nm2:\n{}",
            coordinator_log(&repo),
            m1.log(),
            m2.log()
        )
    };
    wait_for_or_show(
        "the worker machines to refuse every forged subtask",
        Duration::from_secs(300),
        || {
            let refused = lines_with(&m1.log(), &["refused a subtask message"])
                + lines_with(&m2.log(), &["refused a subtask message"]);
            refused >= forged_subtasks.len()
        },
        logs,
    );
    wait_for_or_show(
        "the coordinator to refuse every forged event",
        Duration::from_secs(300),
        || lines_with(&coordinator_log(&repo), &["refused a worker event"]) >= forged_events.len(),
        logs,
    );
    let status = wait_for_exit(&mut run, logs);
    assert!(status.success(), "{}", logs());
    assert_all_four_merged(&repo, None);
    assert!(!escape.exists(), "the ext:: URL ran a program");
    assert!(!repo.root().join("escaped").exists());
    for m in [&m1, &m2] {
        let work = m.dir.path().join("work");
        assert!(!work.join("worktrees").join("escaped").exists());
        assert!(!m.dir.path().join("escaped").exists());
    }
    // no forged subtask ran: only the four real ones reached the model
    let runs = server
        .model_requests()
        .iter()
        .filter(|r| r.conversation.is_none())
        .count();
    assert_eq!(runs, 0, "a request matched no subtask of the plan");
}

/// The refs of run `run_id` on the bare remote next to `repo`.
fn remote_refs_of(repo: &TestRepo, run_id: &str) -> Vec<String> {
    let remote = repo.root().join("remote.git");
    repo.git(&["ls-remote", remote.to_str().unwrap()])
        .lines()
        .filter_map(|l| l.split_once('\t').map(|(_, name)| name.to_string()))
        .filter(|name| name.contains(run_id))
        .collect()
}

/// The coordinator killed with SIGKILL while all four subtasks are in their slow second turn
/// on a worker machine: `swarm resume RUN` (no `--nats`: the run recorded its server)
/// re-attaches to the subtasks still in flight — it publishes none again — and to the run's
/// consumer, and merges all four. The finished run leaves no consumer behind; `swarm clean`
/// then deletes its refs and pushed branches on the shared remote.
#[test]
fn swarm_resume_reattaches_after_the_coordinator_is_killed_and_clean_removes_the_remote_refs() {
    let mut running = four_slow_subtasks_on_m1(30_000);
    let record = running.kill_coordinator();
    let run_id = record["run_id"].as_str().unwrap().to_string();
    assert_eq!(
        record["remote"]["nats_url"],
        running.nats.url(),
        "{record:#}"
    );
    let (repo, server, client) = (&running.repo, &running.server, &running.client);
    let (code, stdout, stderr) = outcome_of(
        ahelper(repo, server, Wire::Anthropic)
            .args(["swarm", "resume", &run_id])
            .timeout(Duration::from_secs(400)),
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}\nm1:\n{}", running.m1.log());
    assert!(stderr.contains("Re-attaching"), "{stderr}");
    assert_all_four_merged(repo, Some("m1"));
    for i in 0..4 {
        let subject = format!("ahelper.work.{run_id}.w{}", i + 1);
        assert_eq!(
            client.captured(&subject).len(),
            1,
            "w{} was published again instead of re-attached",
            i + 1
        );
    }
    assert!(
        client.consumers("AHELPER_EVENTS").is_empty(),
        "{:?}",
        client.consumers("AHELPER_EVENTS")
    );
    let refs = remote_refs_of(repo, &run_id);
    assert!(
        refs.iter()
            .any(|r| r == &format!("refs/ahelper/{run_id}/base")),
        "{refs:?}"
    );
    assert!(
        refs.iter()
            .any(|r| r == &format!("refs/heads/ahelper/{run_id}/w1")),
        "{refs:?}"
    );
    stdout_of(ahelper(repo, server, Wire::Anthropic).args(["swarm", "clean", &run_id]));
    assert_eq!(remote_refs_of(repo, &run_id), Vec::<String>::new());
}

/// `swarm clean` of a run whose coordinator and worker machine were both killed mid-run:
/// its durable consumer, its subtasks still in the work queue and its refs on the shared
/// remote are removed.
#[test]
fn swarm_clean_removes_a_killed_runs_consumer_queued_subtasks_and_remote_refs() {
    let mut running = four_slow_subtasks_on_m1(60_000);
    let run_id = running.kill_coordinator()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    running.m1.signal("KILL");
    assert_eq!(running.m1.wait_exit(Duration::from_secs(30)), None);
    let (repo, server, client) = (&running.repo, &running.server, &running.client);
    let consumer = format!("coordinator-{run_id}");
    assert_eq!(client.consumers("AHELPER_EVENTS"), vec![consumer]);
    let queued = format!("ahelper.work.{run_id}.w1");
    assert!(client.last_message("AHELPER_WORK", &queued).is_some());
    assert!(!remote_refs_of(repo, &run_id).is_empty());
    let stdout = stdout_of(
        ahelper(repo, server, Wire::Anthropic).args(["swarm", "clean", &run_id, "--force"]),
    );
    assert!(stdout.contains("deleted its consumer"), "{stdout}");
    assert!(stdout.contains("4 queued subtask(s) removed"), "{stdout}");
    assert!(client.consumers("AHELPER_EVENTS").is_empty());
    assert!(client.last_message("AHELPER_WORK", &queued).is_none());
    assert_eq!(remote_refs_of(repo, &run_id), Vec::<String>::new());
}

/// The four subtasks on one machine with four slots: they finish at about the same time, their
/// branches go to the remote (those that finish while a push runs together in the next push;
/// the hook of the bare remote records each push), and all four merge.
#[test]
fn four_branches_finishing_together_on_one_machine_are_all_pushed_and_merged() {
    let nats = NatsServer::start();
    let repo = four_file_repo();
    let remote = repo.root().join("remote.git");
    let pushes = repo.root().join("pushes.log");
    let hook = remote.join("hooks/post-receive");
    let script = format!(
        "#!/bin/sh\nrefs=$(cut -d' ' -f3 | tr '\\n' ' ')\necho \"$refs\" >> '{}'\n",
        pushes.display()
    );
    std::fs::write(&hook, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = start(four_subtasks());
    let m1 = WorkerProcess::start(&nats.url(), "m1", &server.base_url(), 4);
    let mut run = coordinator(&repo, &server, &nats.url());
    let status = wait_for_exit(&mut run, || {
        format!("{}\nworker:\n{}", coordinator_log(&repo), m1.log())
    });
    assert!(status.success(), "{}\n{}", coordinator_log(&repo), m1.log());
    let record = assert_all_four_merged(&repo, Some("m1"));
    let run_id = record["run_id"].as_str().unwrap();
    let log = std::fs::read_to_string(&pushes).unwrap_or_default();
    let worker_pushes: Vec<&str> = log.lines().filter(|l| l.contains("refs/heads/")).collect();
    for w in ["w1", "w2", "w3", "w4"] {
        let branch = format!("refs/heads/ahelper/{run_id}/{w}");
        let times = worker_pushes.iter().filter(|l| l.contains(&branch)).count();
        assert_eq!(times, 1, "{branch} pushed once:\n{log}");
    }
    assert!(worker_pushes.len() <= 4, "{log}");
}

/// A machine of one slot in a run of one worker at a time: a subtask is published once the
/// one before ended, so the work queue is empty while each runs; the machine still asks for a
/// spare worktree for a later subtask once its subtask waits on the model (none is starting
/// then), every subtask merges, and no spare is left when the machine stops.
#[test]
fn a_one_slot_machine_asks_for_a_spare_for_the_runs_next_subtask() {
    let nats = NatsServer::start();
    let repo = four_file_repo();
    let server = start(four_subtasks());
    let mut m1 = WorkerProcess::start(&nats.url(), "m1", &server.base_url(), 1);
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args(["swarm", "change four files", "--yes", "--max-workers", "1"])
        .args(["--permission-mode", "bypass"])
        .args(["--no-verify", "--nats", &nats.url()])
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}
{}",
        coordinator_log(&repo),
        m1.log()
    );
    let record = assert_all_four_merged(&repo, Some("m1"));
    let log = m1.log();
    let asked = lines_with(&log, &["asked for spare worktrees", "waiting=0", "later=1"]);
    assert_eq!(asked, 4, "one spare asked for per subtask:\n{log}");
    m1.signal("TERM");
    assert_eq!(
        m1.wait_exit(Duration::from_secs(60)),
        Some(0),
        "{}",
        m1.log()
    );
    assert_worktrees_of_their_own_and_no_spares(&m1, record["run_id"].as_str().unwrap());
}

/// A run that does not start (`--plan-only`) while NATS does not answer (a port that accepts
/// connections and never speaks, so the client waits for its 10 s connect timeout): the
/// set-up that started during planning is abandoned and the command ends at once.
#[test]
fn a_run_that_does_not_start_does_not_wait_for_an_unanswering_nats_server() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("nats://{}", silent.local_addr().unwrap());
    let repo = four_file_repo();
    let server = start(four_subtasks());
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["swarm", "change four files", "--plan-only", "--nats", &url])
        // well below the connect timeout: the command must not wait for it
        .timeout(Duration::from_secs(8))
        .assert()
        .success();
    assert_eq!(last_run(&repo)["status"], "planned");
    drop(silent);
}

/// Issue 37.4: a nats-server outage of 2 s while all four subtasks run (stopped, then started
/// again on the same port; the heartbeat bucket, kept in memory, starts empty), with machine m1
/// paused (SIGSTOP) through it and 8 s after — a heartbeat gap shorter than the liveness
/// timeout, which the coordinator sees as an absent key once NATS is back: no machine is taken
/// for lost — not in the coordinator's output, not in the record — and all four merge.
#[test]
fn a_two_second_nats_outage_loses_no_machine() {
    let mut nats = NatsServer::start();
    let repo = four_file_repo();
    let server = start(four_slow_subtasks(20_000));
    let m1 = WorkerProcess::start(&nats.url(), "m1", &server.base_url(), 4);
    let mut run = coordinator(&repo, &server, &nats.url());
    wait_for_second_turn_of_all_four(&server);
    m1.signal("STOP");
    nats.restart_after(Duration::from_secs(2));
    // NATS is back, m1's heartbeat absent (the bucket starts empty) for 8 s: more than the
    // coordinator's read interval (3 s), less than the liveness timeout (15 s).
    std::thread::sleep(Duration::from_secs(8));
    m1.signal("CONT");
    let status = wait_for_exit(&mut run, || {
        format!("{}\nm1:\n{}", coordinator_log(&repo), m1.log())
    });
    assert!(
        status.success(),
        "{}\nm1:\n{}",
        coordinator_log(&repo),
        m1.log()
    );
    let record = assert_all_four_merged(&repo, Some("m1"));
    let read = |name: &str| std::fs::read_to_string(repo.root().join(name)).unwrap();
    let printed = format!("{}\n{}", read("coordinator.out"), read("coordinator.err"));
    assert!(!printed.contains("machine lost"), "{printed}");
    for w in record["workers"].as_array().unwrap() {
        assert_eq!(w["machine_lost"], false, "{w:#}");
        assert!(w.get("nats_unreachable").is_none(), "{w:#}");
    }
}
