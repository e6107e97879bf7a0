//! The offline demo of the README (`scripts/demo.sh`) played as a new user sees it: the same
//! project, the same commands, the bundled `fakellm/examples/swarm-demo.json` — without
//! installing anything. Every step ends cleanly, the run has its coordinator's summary, and
//! the transcripts the README names can be shown.

use super::support::git::init_repo;
use super::support::*;
use ahelper_fake_llm::Script;

fn demo_script() -> Script {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fakellm")
        .join("examples")
        .join("swarm-demo.json");
    Script::from_file(&path).unwrap()
}

#[test]
fn the_offline_demo_plays_to_its_summary() {
    let repo = TestRepo::empty();
    init_repo(
        &repo.path(),
        &[
            ("greet.sh", "#!/bin/sh\necho \"Hello, $1!\"\n"),
            ("count.sh", "#!/bin/sh\nwc -l < \"$1\"\n"),
        ],
    );
    let server = start(demo_script());
    let answer = stdout_of(
        ahelper(&repo, &server, Wire::Anthropic)
            .args(["-p", "What does greet.sh do?", "--permission-mode"])
            .args(["accept-edits", "-v"]),
    );
    assert!(answer.contains("greet.sh prints"), "{answer}");
    let (code, stdout, stderr) = outcome_of(
        ahelper(&repo, &server, Wire::Anthropic)
            .args(["swarm", "Document the demo scripts", "--yes"])
            .args(["--permission-mode", "accept-edits"]),
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("Result: success"), "{stdout}");
    assert!(!stdout.contains("no summary"), "{stdout}");
    assert!(
        stdout.contains("The three workers documented the demo project"),
        "{stdout}"
    );
    let run = last_run(&repo)["run_id"].as_str().unwrap().to_string();
    let ls = stdout_of(ahelper(&repo, &server, Wire::Anthropic).args(["swarm", "ls"]));
    assert!(ls.lines().nth(1).unwrap().starts_with(&run), "{ls}");
    let w1 =
        stdout_of(ahelper(&repo, &server, Wire::Anthropic).args(["swarm", "logs", &run, "w1"]));
    assert!(w1.contains("greet.sh"), "{w1}");
    let coordinator =
        stdout_of(ahelper(&repo, &server, Wire::Anthropic).args(["swarm", "logs", "coordinator"]));
    assert!(coordinator.contains("Document greet.sh"), "{coordinator}");
}
