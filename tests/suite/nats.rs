//! Distributed swarm runs (issue 13): a real `nats-server -js` on 127.0.0.1, a bare repository
//! as the shared git remote, `ahelper worker` processes with their own HOMEs and work dirs, the
//! coordinator `ahelper swarm --nats URL`, all against the fake LLM server.

use super::support::nats::{NatsServer, WorkerProcess, bare_remote, wait_for};
use super::support::*;
use ahelper_fake_llm::{Conversation, FakeLlm, Script, Turn};
use serde_json::{Value, json};
use std::time::Duration;

const COORDINATOR: &str = "You are the coordinator of a swarm";
const FILES: [(&str, &str); 4] = [
    ("s1", "a.txt"),
    ("s2", "b.txt"),
    ("s3", "c.txt"),
    ("s4", "d.txt"),
];

/// Four subtasks on four files; each worker writes `<id> was here` into its file.
fn four_subtasks() -> Script {
    let subtasks: Vec<Value> = FILES
        .iter()
        .map(|(id, file)| {
            json!({"id": id, "title": format!("Work on {id}"), "instructions": format!("Do {id}."), "scope": [file]})
        })
        .collect();
    let plan = json!({"summary": "split by file", "subtasks": subtasks}).to_string();
    let mut script = Script::new().with_conversation(
        Conversation::new()
            .matching(COORDINATOR)
            .turn(Turn::text(plan)),
    );
    for (id, file) in FILES {
        script = script.with_conversation(
            Conversation::new()
                .named(id)
                .matching(format!("Your subtask `{id}`"))
                .turn(Turn::tool_call(
                    "write_file",
                    json!({"path": file, "content": format!("{id} was here\n")}),
                ))
                .turn(Turn::text(format!("{id} done"))),
        );
    }
    script
}

fn repo_with_remote() -> TestRepo {
    let repo = repo_with(&[
        ("a.txt", "a\n"),
        ("b.txt", "b\n"),
        ("c.txt", "c\n"),
        ("d.txt", "d\n"),
    ]);
    bare_remote(&repo.path(), repo.root());
    repo
}

/// A 4-subtask run completes over NATS on two worker machines: every branch merged into the
/// integration branch, each worker's machine recorded, its transcript on the coordinator.
#[test]
fn four_subtasks_complete_over_nats_on_two_worker_processes() {
    let nats = NatsServer::start();
    let repo = repo_with_remote();
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
        let transcript = repo
            .path()
            .join(".ahelper/runs")
            .join(run["run_id"].as_str().unwrap())
            .join(format!("workers/w{}.jsonl", i + 1));
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
    for worker in &mut workers {
        worker.signal("TERM");
        assert_eq!(
            worker.wait_exit(Duration::from_secs(60)),
            Some(0),
            "{}",
            worker.log()
        );
    }
}

/// Like [`four_subtasks`], but each worker's second turn takes `slow_ms` and then writes again:
/// a worker killed during that turn leaves its subtask half done (nothing pushed), and the
/// machine that gets it redelivered plays turns 3 and 4 (write, done).
fn four_slow_subtasks(slow_ms: u64) -> Script {
    let mut script = four_subtasks();
    for (i, (id, file)) in FILES.iter().enumerate() {
        let write = || {
            Turn::tool_call(
                "write_file",
                json!({"path": file, "content": format!("{id} was here\n")}),
            )
        };
        script.conversations[i + 1] = Conversation::new()
            .named(*id)
            .matching(format!("Your subtask `{id}`"))
            .turn(write())
            .turn(write().with_delay_ms(slow_ms))
            .turn(write())
            .turn(Turn::text(format!("{id} done")));
    }
    script
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

/// A run of four slow subtasks over NATS, every one in its slow second turn on machine `m1`:
/// (the NATS server, the repository, the model server, `m1`, the coordinator).
fn four_slow_subtasks_on_m1() -> (NatsServer, TestRepo, FakeLlm, WorkerProcess, Killed) {
    let nats = NatsServer::start();
    let repo = repo_with_remote();
    let server = start(four_slow_subtasks(60_000));
    let m1 = WorkerProcess::start(&nats.url(), "m1", &server.base_url(), 4);
    let run = coordinator(&repo, &server, &nats.url());
    wait_for_second_turn_of_all_four(&server);
    (nats, repo, server, m1, run)
}

/// Waits (up to 300 s) for the coordinator `run` to end while machine `m2` works, checks that
/// it succeeded, and returns the run's record.
fn run_finished_on(run: &mut Killed, m2: &WorkerProcess, repo: &TestRepo) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = run.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run did not end:\n{}",
            m2.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let err = std::fs::read_to_string(repo.root().join("coordinator.err")).unwrap_or_default();
    assert!(status.success(), "{err}\nm2:\n{}", m2.log());
    last_run(repo)
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
    let (nats, repo, server, mut m1, mut run) = four_slow_subtasks_on_m1();
    m1.signal("KILL");
    assert_eq!(m1.wait_exit(Duration::from_secs(30)), None);
    let m2 = WorkerProcess::start(&nats.url(), "m2", &server.base_url(), 4);
    let record = run_finished_on(&mut run, &m2, &repo);
    let integration = record["integration_branch"].as_str().unwrap();
    for (i, (id, file)) in FILES.iter().enumerate() {
        let w = &record["workers"][i];
        assert_eq!(w["status"], "merged", "{w:#}");
        assert_eq!(w["machine"], "m2", "{w:#}");
        assert_eq!(
            repo.git(&["show", &format!("{integration}:{file}")]),
            format!("{id} was here\n")
        );
    }
}

/// SIGTERM on a worker machine: its running subtasks commit and push `wip`, are handed back
/// (nak) and it exits 0; the other machine continues them from the pushed `wip` branches.
#[test]
fn a_sigtermed_worker_hands_its_subtasks_back_and_exits_0() {
    let (nats, repo, server, mut m1, mut run) = four_slow_subtasks_on_m1();
    m1.signal("TERM");
    assert_eq!(
        m1.wait_exit(Duration::from_secs(120)),
        Some(0),
        "{}",
        m1.log()
    );
    assert!(m1.log().contains("4 handed back"), "{}", m1.log());
    let m2 = WorkerProcess::start(&nats.url(), "m2", &server.base_url(), 4);
    let record = run_finished_on(&mut run, &m2, &repo);
    for (i, _) in FILES.iter().enumerate() {
        let w = &record["workers"][i];
        assert_eq!(w["status"], "merged", "{w:#}");
        assert_eq!(w["machine"], "m2", "{w:#}");
    }
}
