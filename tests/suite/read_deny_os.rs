//! 15.5 at the OS level: what a `read_file` deny rule covers is hidden from every command —
//! also from code the user allowed to run (an allow rule for an interpreter, a script), which
//! the permission analysis cannot see into. And the git commands that print file contents ask
//! under read deny rules (refused in `-p`).

use super::support::sandbox::{Needs, require_sandbox};
use super::support::scripts::runs;
use super::support::*;

/// `ahelper -p go --permission-mode bypass` in `repo` with `args`, playing `commands`; returns
/// the model requests and stderr.
fn play_bypass(
    repo: &TestRepo,
    args: &[&str],
    commands: &[&str],
) -> (Vec<ahelper_fake_llm::RecordedRequest>, String) {
    let args = [&["--permission-mode", "bypass"][..], args].concat();
    play(repo, &args, commands.iter().map(|c| runs(c)))
}

/// An allowed interpreter and an allowed script read `.env` (directly, through a symbolic link
/// and through a hard link), a nested `.env` and a denied directory: they get nothing of the
/// secrets, cannot write the hidden files, and read the other files as before.
#[test]
fn allowed_code_cannot_read_what_read_deny_rules_cover() {
    require_sandbox!(Needs::LandlockAndNamespaces);
    let repo = repo_with(&[
        (".env", "SECRET=hunter2-top\n"),
        ("app/.env", "SECRET=hunter2-app\n"),
        ("vault/key.txt", "hunter2-vault\n"),
        ("a.txt", "plain-text-ok\n"),
        (
            "t.sh",
            "cat app/.env; cat vault/key.txt; ls -a vault; grep -r 'hun''ter2' . ; echo script-ran\n",
        ),
    ]);
    std::os::unix::fs::symlink(".env", repo.path().join("link.txt")).unwrap();
    std::fs::hard_link(repo.path().join(".env"), repo.path().join("copy.txt")).unwrap();
    let read_env = "python3 -c 'print(open(\".env\").read(), open(\"link.txt\").read(), \
                    open(\"copy.txt\").read(), open(\"a.txt\").read())'";
    let write_env = "python3 -c 'open(\".env\", \"w\").write(\"overwritten\")'";
    let (requests, stderr) = play_bypass(
        &repo,
        &[
            "--disallowedTools",
            "read_file(**/.env)",
            "--disallowedTools",
            "read_file(vault)",
            "--allowedTools",
            "run_command(python3:*)",
            "--allowedTools",
            "run_command(sh t.sh)",
        ],
        &[read_env, "sh t.sh", write_env],
    );
    assert_never_sent(&requests, "hunter2", &stderr);
    let read = requests[1].body.to_string();
    assert!(read.contains("plain-text-ok"), "{read}");
    assert!(requests[2].body.to_string().contains("script-ran"));
    let write = requests[3].body.to_string();
    assert!(write.contains("Read-only file system"), "{write}");
    assert_eq!(repo.file(".env"), "SECRET=hunter2-top\n");
    assert_eq!(repo.file("vault/key.txt"), "hunter2-vault\n");
}

/// The git commands that print what files hold — `git diff`, `git log -p`, `git stash show
/// -p`, `git grep`, `git show` — are refused in `-p` when read deny rules exist: a tracked
/// denied file's contents come from the object store, which no bind hides.
#[test]
fn git_content_commands_are_refused_under_read_deny_rules() {
    let repo = repo_with_changed_env("SECRET=hunter2-git\n", "SECRET=hunter2-changed\n");
    let forms = [
        "git diff",
        "git diff HEAD~0 -- .",
        "git log -p",
        "git log --patch -1",
        "git stash show -p",
        "git grep SECRET",
        "git show HEAD",
    ];
    let (requests, stderr) =
        play_bypass(&repo, &["--disallowedTools", "read_file(**/.env)"], &forms);
    assert_never_sent(&requests, "hunter2", &stderr);
    assert_eq!(refused_commands(&stderr), forms.len(), "{stderr}");
}
