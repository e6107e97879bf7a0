//! Decisions that look at the disk (issue 15.1 and 15.5): read deny rules matched against
//! where symbolic links lead, shell globs, input redirections, options naming files, recursive
//! readers and git objects; git in a repository other than the workspace's own.

use super::support::permissions::{check_table_in, decide_call_in, policy};
use ahelper_agents::permissions::{Decision, PermissionMode, read_denied};

/// A workspace with `.env`, a link to it, a source tree and a planted git dir.
fn workspace() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::write(root.join(".env"), "SECRET=1\n").unwrap();
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::os::unix::fs::symlink("../.env", root.join("docs/config.txt")).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::create_dir_all(root.join(".git/objects")).unwrap();
    std::fs::create_dir_all(root.join("tools/evil/objects")).unwrap();
    std::fs::write(root.join("tools/evil/HEAD"), "ref: refs/heads/main\n").unwrap();
    tmp
}

/// Shell reads of a denied path however spelt, file tools on the real path, git outside the
/// workspace's repository: every group of `tests/data/decisions/disk.toml`.
#[test]
fn decision_table() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    check_table_in(include_str!("../data/decisions/disk.toml"), &root, &root);
}

/// The deny rule matches the real path of a link (the decisions are in the table).
#[test]
fn read_denied_follows_links() {
    let ws = workspace();
    let p = policy(PermissionMode::Default, &[], &[], &["read_file(**/.env)"]);
    let root = std::fs::canonicalize(ws.path()).unwrap();
    assert!(read_denied(
        &p.rules.deny,
        &root.join("docs/config.txt"),
        &root
    ));
    assert!(read_denied(&p.rules.deny, &root.join(".env"), &root));
    assert!(!read_denied(&p.rules.deny, &root.join("a.txt"), &root));
}

#[test]
fn a_link_to_a_denied_program_is_refused_by_its_target() {
    let ws = workspace();
    std::os::unix::fs::symlink("/bin/rm", ws.path().join("xx")).unwrap();
    let p = policy(PermissionMode::Bypass, &[], &[], &["run_command(rm:*)"]);
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let d = decide_call_in(&p, &root, &root, "run_command ./xx a.txt");
    assert!(
        matches!(&d, Decision::Deny { reason } if reason.contains("rm")),
        "{d:?}"
    );
}
