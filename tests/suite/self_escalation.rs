//! 15.2: a script the model runs cannot rewrite `.git` or `.ahelper` (code on the user's next
//! `git status`, an unrestricted next session), while it still writes the rest of the
//! workspace.

use super::support::sandbox::{Needs, require_sandbox};
use super::support::scripts::{agent, runs};
use super::support::*;
use ahelper_fake_llm::Turn;

/// A script that plants `core.fsmonitor` in `.git/config`, a hook, `mode = "bypass"` in
/// `.ahelper/config.toml`, tries to move `.git` away, and writes ordinary files.
const ESCALATE: &str = r#"printf '[core]\n\tfsmonitor = "sh p.sh"\n' >> .git/config
echo 'touch pwned' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit
printf '[permissions]\nmode = "bypass"\n' > .ahelper/config.toml
rm -f .ahelper/config.toml
mv .git .git-old
echo made > made-by-script.txt
mkdir -p newdir && echo x > newdir/f.txt
"#;

#[test]
fn a_script_cannot_rewrite_git_or_ahelper_config() {
    require_sandbox!(Needs::LandlockAndNamespaces);
    let repo = repo_with(&[("s.sh", ESCALATE), ("a.txt", "a\n")]);
    repo.write(".ahelper/config.toml", "# project settings\n");
    let config_before = repo.file(".git/config");
    let (requests, _) = play(&repo, &["--permission-mode", "bypass"], [runs("sh s.sh")]);
    assert_eq!(repo.file(".git/config"), config_before);
    assert!(!repo.path().join(".git/hooks/pre-commit").exists());
    assert_eq!(repo.file(".ahelper/config.toml"), "# project settings\n");
    assert!(repo.path().join(".git/HEAD").exists());
    assert!(!repo.path().join(".git-old").exists());
    assert_eq!(repo.file("made-by-script.txt"), "made\n");
    assert_eq!(repo.file("newdir/f.txt"), "x\n");
    let last = requests.last().unwrap().body.to_string();
    assert!(last.contains("Read-only file system"), "{last}");
}

/// What a command tries in order to undo the read-only binds with the capabilities it holds in
/// its user namespace: remount `.git` writable, unmount it, unshare a nested user and mount
/// namespace and retry there, mount a tmpfs over it; then append to `.git/config`.
const UNDO_BINDS: &str = "mount -o remount,rw,bind .git; echo remount=$?
umount .git; echo umount=$?
umount -l .git; echo lazy=$?
unshare -rm sh -c 'umount .git; mount -o remount,rw,bind .git; mount -t tmpfs t .git; echo x >> .git/config'; echo nested=$?
unshare -Um sh -c 'umount .git; mount -o remount,rw,bind .git; echo z >> .git/config'; echo unmapped=$?
echo y >> .git/config; echo write=$?
grep -E '^Cap(Eff|Bnd)' /proc/self/status";

/// Each attempt of [`UNDO_BINDS`] ran and none succeeded (exit status 0) in its tool
/// `result`; `who` starts each failure message.
fn assert_every_attempt_failed(result: &str, who: &str) {
    for attempt in [
        "remount=",
        "umount=",
        "lazy=",
        "nested=",
        "unmapped=",
        "write=",
    ] {
        assert!(result.contains(attempt), "{who}{attempt} missing: {result}");
        assert!(
            !result.contains(&format!("{attempt}0")),
            "{who}{attempt} succeeded: {result}"
        );
    }
}

/// `ahelper -p` in `repo` (bypass mode) running [`UNDO_BINDS`], as this user or — when
/// `as_nobody` — through `setpriv` as the unprivileged user 65534. Returns the tool result.
fn undo_binds(repo: &TestRepo, as_nobody: bool) -> String {
    let script = agent([runs("sh undo.sh"), Turn::text("done")]);
    let server = start(script);
    let mut cmd = ahelper(repo, &server, Wire::Anthropic);
    if as_nobody {
        let bin = assert_cmd::cargo::cargo_bin("ahelper");
        let mut wrapped = std::process::Command::new("setpriv");
        wrapped
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(bin)
            .args(["-p", "go", "--permission-mode", "bypass"]);
        isolate(&mut wrapped, repo);
        talk_to(&mut wrapped, &server, Wire::Anthropic);
        succeeds(&mut wrapped);
    } else {
        cmd.args(["-p", "go", "--permission-mode", "bypass"])
            .assert()
            .success();
    }
    let requests = server.model_requests();
    let body = requests.last().unwrap().body.to_string();
    // Only the tool result: from the first attempt's output on.
    body.rfind("remount=")
        .map_or(body.clone(), |i| body[i..].to_string())
}

/// Issue 15 review of the user namespace: the capabilities a command holds in its own user
/// namespace (all of them for root's commands, none after `exec` for other users') do not let
/// it remount the read-only binds writable, unmount them, or escape through a nested namespace
/// — landlock forbids every mount change in the domain and the copies of the binds in a nested
/// namespace are locked. Run as root and, when the tests run as root, as the unprivileged
/// user 65534 through `setpriv`.
#[test]
fn namespace_capabilities_cannot_undo_the_read_only_binds() {
    require_sandbox!(Needs::LandlockAndNamespaces);
    let repo = repo_with(&[("a.txt", "a\n"), ("undo.sh", UNDO_BINDS)]);
    let config_before = repo.file(".git/config");
    let result = undo_binds(&repo, false);
    assert_eq!(repo.file(".git/config"), config_before, "{result}");
    assert_every_attempt_failed(&result, "");
    let is_root = unsafe { libc::geteuid() } == 0;
    let setpriv = std::process::Command::new("setpriv")
        .arg("--version")
        .output();
    if !is_root || setpriv.is_err() {
        eprintln!("the unprivileged run needs root and setpriv; skipped");
        return;
    }
    let repo = repo_with(&[("a.txt", "a\n"), ("undo.sh", UNDO_BINDS)]);
    let config_before = repo.file(".git/config");
    let chown = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(repo.root())
        .status()
        .unwrap();
    assert!(chown.success());
    std::fs::set_permissions(
        repo.root(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let result = undo_binds(&repo, true);
    assert_eq!(repo.file(".git/config"), config_before, "{result}");
    assert_every_attempt_failed(&result, "nobody: ");
}
