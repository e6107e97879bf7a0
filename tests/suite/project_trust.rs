//! 15.3: a project config that widens permissions (a cloned repository's
//! `.ahelper/config.toml`) applies only once the user trusts that exact file; narrowing
//! settings apply always.

use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::{Script, Turn};

const WIDENING: &str = r#"[permissions]
mode = "bypass"
allow = ["write_file(notes.txt)"]
deny = ["run_command(rm:*)"]

[sandbox]
mode = "off"
"#;

/// A model that writes `notes.txt`, then tries `rm a.txt`.
fn writes_then_removes() -> Script {
    agent([
        writes("notes.txt", "notes\n"),
        runs("rm a.txt"),
        Turn::text("done"),
    ])
}

fn run(repo: &TestRepo, extra: &[&str]) -> String {
    let server = start(writes_then_removes());
    stderr_of(
        ahelper(repo, &server, Wire::Anthropic)
            .args(["-p", "go"])
            .args(extra),
    )
}

fn repo_with_project_config() -> TestRepo {
    let repo = repo_with(&[("a.txt", "a\n")]);
    repo.write(".ahelper/config.toml", WIDENING);
    repo
}

#[test]
fn an_untrusted_project_config_widens_nothing_and_says_what_it_ignored() {
    let repo = repo_with_project_config();
    let stderr = run(&repo, &[]);
    assert!(!repo.path().join("notes.txt").exists(), "{stderr}");
    assert!(repo.path().join("a.txt").exists(), "{stderr}");
    let warning = stderr
        .lines()
        .find(|l| l.contains("have not trusted"))
        .unwrap_or_else(|| panic!("no warning:\n{stderr}"));
    for key in ["permissions.mode", "permissions.allow", "sandbox.mode"] {
        assert!(warning.contains(key), "{warning}");
    }
    assert!(!warning.contains("permissions.deny"), "{warning}");
    assert!(warning.contains("ahelper trust"), "{warning}");
}

#[test]
fn trusting_the_file_applies_it_until_it_changes_and_deny_rules_always_apply() {
    let repo = repo_with_project_config();
    let server = start(Script::new());
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .arg("trust")
        .assert()
        .success()
        .get_output()
        .clone();
    assert!(String::from_utf8_lossy(&out.stderr).contains("trusted"));
    let store = repo.home().join("state/ahelper/trusted-projects.json");
    assert!(std::fs::read_to_string(&store).unwrap().contains("sha256"));

    let stderr = run(&repo, &[]);
    assert_eq!(repo.file("notes.txt"), "notes\n", "{stderr}");
    assert!(!stderr.contains("have not trusted"), "{stderr}");
    assert!(
        repo.path().join("a.txt").exists(),
        "the deny rule holds: {stderr}"
    );

    // A changed file is untrusted again; `--trust-project` trusts it for this run and after.
    std::fs::remove_file(repo.path().join("notes.txt")).unwrap();
    repo.write(".ahelper/config.toml", &format!("{WIDENING}# changed\n"));
    let stderr = run(&repo, &[]);
    assert!(stderr.contains("have not trusted"), "{stderr}");
    assert!(!repo.path().join("notes.txt").exists(), "{stderr}");
    let stderr = run(&repo, &["--trust-project"]);
    assert_eq!(repo.file("notes.txt"), "notes\n", "{stderr}");
    assert!(repo.path().join("a.txt").exists(), "{stderr}");
}

#[test]
fn an_untrusted_project_config_still_narrows() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    repo.write(
        ".ahelper/config.toml",
        "[permissions]\nmode = \"plan\"\ndeny = [\"run_command(rm:*)\"]\n",
    );
    let stderr = run(&repo, &["--permission-mode", "bypass"]);
    assert!(repo.path().join("a.txt").exists(), "{stderr}");
    assert!(!stderr.contains("have not trusted"), "{stderr}");
}
