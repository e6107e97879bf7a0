//! Distributed swarm runs (issue 13): a real `nats-server -js` on 127.0.0.1, a bare repository
//! as the shared git remote, `ahelper worker` processes with their own HOMEs and work dirs, the
//! coordinator `ahelper swarm --nats URL`, all against the fake LLM server.

use super::support::nats::{NatsServer, WorkerProcess, bare_remote, wait_for};
use super::support::*;
use ahelper_fake_llm::{Conversation, Script, Turn};
use serde_json::{Value, json};
use std::time::Duration;

const COORDINATOR: &str = "You are the coordinator of a swarm";
const FILES: [(&str, &str); 4] = [("s1", "a.txt"), ("s2", "b.txt"), ("s3", "c.txt"), ("s4", "d.txt")];

/// Four subtasks on four files; each worker writes `<id> was here` into its file.
fn four_subtasks() -> Script {
    let subtasks: Vec<Value> = FILES
        .iter()
        .map(|(id, file)| {
            json!({"id": id, "title": format!("Work on {id}"), "instructions": format!("Do {id}."), "scope": [file]})
        })
        .collect();
    let plan = json!({"summary": "split by file", "subtasks": subtasks}).to_string();
    let mut script =
        Script::new().with_conversation(Conversation::new().matching(COORDINATOR).turn(Turn::text(plan)));
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
    let repo = repo_with(&[("a.txt", "a\n"), ("b.txt", "b\n"), ("c.txt", "c\n"), ("d.txt", "d\n")]);
    bare_remote(&repo.path(), repo.root());
    repo
}

fn last_run(repo: &TestRepo) -> Value {
    let dir = repo.path().join(".ahelper/runs");
    let mut runs: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    runs.sort();
    serde_json::from_str(&std::fs::read_to_string(runs.last().unwrap().join("run.json")).unwrap()).unwrap()
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
        .args(["swarm", "change four files", "--yes", "--permission-mode", "bypass"])
        .args(["--no-verify", "--nats", &nats.url()])
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    let logs = || workers.iter().map(|w| w.log()).collect::<Vec<_>>().join("\n---\n");
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
        assert_eq!(repo.git(&["show", &format!("{integration}:{file}")]), format!("{id} was here\n"));
        let transcript = repo
            .path()
            .join(".ahelper/runs")
            .join(run["run_id"].as_str().unwrap())
            .join(format!("workers/w{}.jsonl", i + 1));
        let text = std::fs::read_to_string(&transcript).unwrap_or_default();
        assert!(text.contains("write_file"), "{}: {text}", transcript.display());
        for line in text.lines() {
            serde_json::from_str::<Value>(line).expect("transcript lines are JSON");
        }
    }
    // the user's checkout is untouched; nothing of the run was done in it
    assert_eq!(repo.file("a.txt"), "a\n");
    for worker in &mut workers {
        worker.signal("TERM");
        assert_eq!(worker.wait_exit(Duration::from_secs(60)), Some(0), "{}", worker.log());
    }
}
