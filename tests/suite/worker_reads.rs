//! 15.11: a swarm worker's commands read their own worktree, the system and the repository's
//! git directory — not a sibling worktree, nor the user's uncommitted files in the checkout.

use super::support::sandbox::{Needs, require_sandbox};
use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::Turn;

/// The worker's probe: a sibling worktree's file (another run's worker), the user's
/// uncommitted file, then what a worker needs: its own files, git, the system. (Names in those
/// directories stay listable: landlock grants listing to a whole subtree.)
fn probe(repo: &std::path::Path) -> String {
    format!(
        "cat ../../0000-old/w1/sibling.txt; cat {repo}/uncommitted.txt; \
         cat a.txt; git status --short && echo git-ok; git log --oneline | wc -l; \
         head -c 10 /etc/passwd >/dev/null && echo system-ok",
        repo = repo.display()
    )
}

#[test]
fn a_worker_cannot_read_sibling_worktrees_or_the_users_checkout() {
    require_sandbox!(Needs::Landlock);
    let repo = repo_with(&[("a.txt", "committed-a\n")]);
    repo.write("uncommitted.txt", "user-secret-7731\n");
    let canonical = std::fs::canonicalize(repo.path()).unwrap();
    let sibling = repo
        .home()
        .join("state/ahelper/worktrees")
        .join(ahelper_agents::swarm::run::repo_id(&canonical))
        .join("0000-old/w1");
    std::fs::create_dir_all(&sibling).unwrap();
    std::fs::write(sibling.join("sibling.txt"), "sibling-secret-5519\n").unwrap();

    let script = one_worker([runs(&probe(&canonical)), Turn::text("s1 done")]);
    let server = start(script);
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args(["swarm", "x", "--yes", "--permission-mode", "bypass"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let result = server
        .model_requests()
        .into_iter()
        .filter(|r| r.conversation == Some(1))
        .last()
        .map(|r| r.body.to_string())
        .unwrap_or_else(|| panic!("the worker never reported back:\n{stderr}"));
    assert!(!result.contains("sibling-secret-5519"), "{result}");
    assert!(!result.contains("user-secret-7731"), "{result}");
    assert!(result.contains("Permission denied"), "{result}");
    assert!(result.contains("committed-a"), "{result}");
    assert!(result.contains("git-ok"), "{result}");
    assert!(result.contains("system-ok"), "{result}");
}
