//! End-to-end: numeric config values out of range are refused with exit code 2, naming the
//! file, line, key and the allowed range (the same range as the key's flag).

use super::support::*;
use ahelper_fake_llm::Script;

/// Runs `ahelper ARGS` in `repo` and returns (exit code, stderr).
fn run(repo: &TestRepo, args: &[&str]) -> (i32, String) {
    let server = start(Script::new());
    let out = ahelper(repo, &server, Wire::Anthropic)
        .args(args)
        .output()
        .expect("ahelper runs");
    assert!(server.model_requests().is_empty(), "no model request");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn max_workers_0_in_the_project_config_is_refused_like_the_flag() {
    let repo = repo_with(&[("a.txt", "x\n")]);
    repo.write(
        ".ahelper/config.toml",
        "# limits\n[swarm]\nmax_subtasks = 4\nmax_workers = 0\n",
    );
    for args in [
        &["-p", "hi"][..],
        &["swarm", "do it", "--yes"],
        &["swarm", "ls"],
    ] {
        let (code, stderr) = run(&repo, args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        let file = repo.path().join(".ahelper/config.toml");
        assert!(
            stderr.contains(&format!(
                "invalid setting `swarm.max_workers` in {} line 4: 0 is out of range; allowed: at least 1 (as for --max-workers)",
                std::fs::canonicalize(&file).unwrap().display()
            )),
            "{args:?}: {stderr}"
        );
    }
    // The flag refuses the same value.
    let (code, stderr) = run(&repo, &["swarm", "do it", "--max-workers", "0"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("at least 1"), "{stderr}");
}

#[test]
fn keys_without_a_flag_get_sensible_ranges_in_the_user_config_too() {
    let repo = repo_with(&[("a.txt", "x\n")]);
    let user = repo.home().join("config/ahelper/config.toml");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    std::fs::write(&user, "[retry]\nmax_attempts = 0\n").unwrap();
    let (code, stderr) = run(&repo, &["-p", "hi"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "invalid setting `retry.max_attempts` in {} line 2: 0 is out of range; allowed: between 1 and 100",
            user.display()
        )),
        "{stderr}"
    );
    std::fs::write(&user, "max_output_tokens = 8\n").unwrap();
    let (code, stderr) = run(&repo, &["-p", "hi"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("`max_output_tokens`")
            && stderr.contains("line 1")
            && stderr.contains("at least 16"),
        "{stderr}"
    );
}

#[test]
fn values_in_range_still_work() {
    let repo = repo_with(&[("a.txt", "x\n")]);
    repo.write(
        ".ahelper/config.toml",
        "[swarm]\nmax_workers = 1\n[agent]\nrepeat_limit = 2\n",
    );
    let (code, stderr) = run(&repo, &["swarm", "ls"]);
    assert_eq!(code, 0, "{stderr}");
}
