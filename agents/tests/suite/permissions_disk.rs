//! Decisions that look at the disk (issue 15.1 and 15.5): read deny rules matched against
//! where symbolic links lead, shell globs, input redirections, options naming files, recursive
//! readers and git objects; git in a repository other than the workspace's own.

use ahelper_agents::permissions::{
    Decision, PermissionMode, PermissionPolicy, PermissionRequest, RuleSet, read_denied,
};
use ahelper_agents::tools::ToolKind;
use std::path::Path;

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

fn policy(mode: PermissionMode, deny: &[&str]) -> PermissionPolicy {
    PermissionPolicy {
        mode,
        rules: RuleSet::parse(&[], &[], deny).unwrap(),
        ..PermissionPolicy::default()
    }
}

fn decide(
    p: &PermissionPolicy,
    root: &Path,
    tool: &str,
    kind: ToolKind,
    subject: &str,
) -> Decision {
    let root = std::fs::canonicalize(root).unwrap();
    p.decide(&PermissionRequest {
        tool,
        kind,
        subject: Some(subject),
        workspace_root: &root,
        cwd: &root,
    })
}

fn command(p: &PermissionPolicy, root: &Path, command: &str) -> Decision {
    decide(p, root, "run_command", ToolKind::Execute, command)
}

#[test]
fn shell_reads_of_a_denied_path_are_refused_however_spelt() {
    let ws = workspace();
    let p = policy(PermissionMode::Default, &["read_file(**/.env)"]);
    for c in [
        "cat .env",
        "cat .en?",
        "cat .e*",
        "cat < .env",
        "echo $(<.env)",
        "date -f .env",
        "date -f.env",
        "date --file=.env",
        "grep -r SECRET .",
        "grep -R SECRET",
        "grep --recursive SECRET docs",
        "rg SECRET",
        "git show HEAD:.env",
        "git cat-file -p HEAD:.env",
        "cat docs/config.txt",
        "head -1 docs/c*",
        "find . -name '.e*' -exec cat {} +",
        "find docs -type l -exec cat {} ;",
        "base64 .env",
        "xxd docs/config.txt",
        "cp .e* leak.txt",
        "openssl enc -in .env",
        "some-tool --config=.env",
    ] {
        let d = command(&p, ws.path(), c);
        assert!(matches!(d, Decision::Deny { .. }), "`{c}`: {d:?}");
    }
    let bypass = policy(PermissionMode::Bypass, &["read_file(**/.env)"]);
    assert!(matches!(
        command(&bypass, ws.path(), "base64 .env"),
        Decision::Deny { .. }
    ));
    assert_eq!(command(&bypass, ws.path(), "base64 a.txt"), Decision::Allow);
    for c in ["cat $(echo .env)", "ls -a | xargs cat", "cat \"$F\""] {
        let d = command(&bypass, ws.path(), c);
        assert!(matches!(d, Decision::Ask { .. }), "`{c}`: {d:?}");
    }
    for c in [
        "cat a.txt",
        "cat *.txt",
        "grep -r main src",
        "rg main src",
        "git show HEAD:a.txt",
    ] {
        assert_eq!(command(&p, ws.path(), c), Decision::Allow, "`{c}`");
    }
}

#[test]
fn file_tools_match_deny_rules_on_the_real_path() {
    let ws = workspace();
    let p = policy(PermissionMode::Default, &["read_file(**/.env)"]);
    let d = decide(
        &p,
        ws.path(),
        "read_file",
        ToolKind::Read,
        "docs/config.txt",
    );
    assert!(
        matches!(&d, Decision::Deny { reason } if reason.contains(".env")),
        "{d:?}"
    );
    assert_eq!(
        decide(&p, ws.path(), "read_file", ToolKind::Read, "a.txt"),
        Decision::Allow
    );
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
fn git_outside_the_workspace_repository_is_not_read_only() {
    let ws = workspace();
    let p = policy(PermissionMode::Default, &[]);
    for c in [
        "cd tools/evil && git status",
        "git -C tools/evil status",
        "cd tools/evil; git log",
        "cd / && git status",
    ] {
        let d = command(&p, ws.path(), c);
        assert!(matches!(d, Decision::Ask { .. }), "`{c}`: {d:?}");
    }
    for c in ["git status", "cd src && git status", "git -C src log"] {
        assert_eq!(command(&p, ws.path(), c), Decision::Allow, "`{c}`");
    }
    let deny = policy(PermissionMode::Bypass, &["run_command(rm:*)"]);
    let d = command(&deny, ws.path(), "cd tools/evil && git diff");
    assert!(matches!(d, Decision::Deny { .. }), "{d:?}");
    assert_eq!(command(&deny, ws.path(), "git diff"), Decision::Allow);
    for c in [
        "GIT_DIR=tools/evil git diff",
        "git --git-dir=tools/evil diff",
        "git --git-dir tools/evil log",
    ] {
        let d = command(&deny, ws.path(), c);
        assert!(matches!(d, Decision::Deny { .. }), "`{c}`: {d:?}");
    }
}

#[test]
fn a_link_to_a_denied_program_is_refused_by_its_target() {
    let ws = workspace();
    std::os::unix::fs::symlink("/bin/rm", ws.path().join("xx")).unwrap();
    let p = policy(PermissionMode::Bypass, &["run_command(rm:*)"]);
    let d = command(&p, ws.path(), "./xx a.txt");
    assert!(
        matches!(&d, Decision::Deny { reason } if reason.contains("rm")),
        "{d:?}"
    );
}
