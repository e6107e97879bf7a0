//! The landlock command sandbox through the real `run_command` path: real `bash` children,
//! real files in directories outside the temp dir, a real TCP listener on 127.0.0.1.
//!
//! Every test prints a note and passes when the kernel has no landlock (nothing to check).

use super::support::git::{git, init_repo};
use super::support::tools::run_command;
use ahelper_agents::sandbox_os::{CommandSandbox, SandboxMode, SandboxSettings, landlock_status};
use ahelper_agents::tools::{ToolContext, ToolOutput};
use serde_json::json;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

/// A base directory for test trees that is **not** inside the temp dir (the temp dir is
/// writable under the sandbox, so "outside" must be elsewhere).
fn base_outside_temp() -> tempfile::TempDir {
    let temp = fs::canonicalize(std::env::temp_dir()).unwrap();
    let candidates = [
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        PathBuf::from("/var/tmp"),
    ];
    for c in candidates {
        if fs::create_dir_all(&c).is_err() {
            continue;
        }
        let real = fs::canonicalize(&c).unwrap();
        if !real.starts_with(&temp) {
            return tempfile::Builder::new()
                .prefix("landlock-test-")
                .tempdir_in(real)
                .unwrap();
        }
    }
    panic!("no writable directory outside the temp dir for the test");
}

fn available() -> bool {
    let status = landlock_status();
    if status.abi().is_none() {
        eprintln!("note: skipping landlock test: {status}");
        return false;
    }
    true
}

struct Fx {
    _base: tempfile::TempDir,
    base: PathBuf,
    ws: PathBuf,
    outside: PathBuf,
    home: PathBuf,
}

/// The fixture, or `None` (after a note) when the kernel has no landlock.
fn fixture() -> Option<Fx> {
    available().then(fixture_dirs)
}

fn fixture_dirs() -> Fx {
    let base_dir = base_outside_temp();
    let base = fs::canonicalize(base_dir.path()).unwrap();
    let ws = base.join("ws");
    let outside = base.join("outside");
    let home = base.join("home");
    for d in [&ws, &outside, &home.join(".ssh"), &home.join("projects")] {
        fs::create_dir_all(d).unwrap();
    }
    fs::write(home.join(".ssh/id_rsa"), "PRIVATE KEY\n").unwrap();
    fs::write(home.join("notes.txt"), "public notes\n").unwrap();
    Fx {
        _base: base_dir,
        base,
        ws,
        outside,
        home,
    }
}

/// Settings with the default denied paths of the fake home plus the real home's defaults.
fn settings(fx: &Fx, network: bool) -> SandboxSettings {
    let mut s = SandboxSettings::with_defaults(Some(&fx.home));
    s.network = network;
    s
}

impl Fx {
    /// A tool context in the workspace, sandboxed with [`settings`].
    fn ctx(&self, network: bool) -> ToolContext {
        ctx_with(
            &self.ws,
            CommandSandbox::new(&settings(self, network), &self.ws),
        )
    }

    /// A repository `main` beside the workspace with one commit of `README` ("hello").
    fn main_repo(&self) -> PathBuf {
        let main = self.base.join("main");
        init_repo(&main, &[("README", "hello\n")]);
        main
    }
}

/// Adds a worktree of `repo` at `path` on a new branch `branch`; returns `path`.
fn add_worktree(repo: &Path, branch: &str, path: &Path) -> PathBuf {
    let path_text = path.to_str().unwrap();
    git(repo, &["worktree", "add", "-q", "-b", branch, path_text]);
    path.to_path_buf()
}

fn ctx_with(ws: &Path, sandbox: CommandSandbox) -> ToolContext {
    let mut ctx = ToolContext::new(ws).unwrap();
    ctx.command_sandbox = Some(Arc::new(sandbox));
    ctx
}

async fn run(ctx: &ToolContext, command: &str) -> ToolOutput {
    run_command(ctx, json!({ "command": command })).await
}

/// Runs `command`, asserting that it fails; returns its output.
async fn fails(ctx: &ToolContext, command: &str) -> String {
    let out = run(ctx, command).await;
    assert!(out.is_error, "{command}: {}", out.content);
    out.content
}

/// Runs `command`, asserting that it fails with "Permission denied"; returns its output.
async fn denied(ctx: &ToolContext, command: &str) -> String {
    let content = fails(ctx, command).await;
    assert!(
        content.contains("Permission denied"),
        "{command}: {content}"
    );
    content
}

/// Runs `command`, asserting that it succeeds; returns its output.
async fn succeeds(ctx: &ToolContext, command: &str) -> String {
    let out = run(ctx, command).await;
    assert!(!out.is_error, "{command}: {}", out.content);
    out.content
}

#[tokio::test]
async fn write_outside_workspace_fails_with_eacces_inside_succeeds() {
    let Some(fx) = fixture() else {
        return;
    };
    let ctx = fx.ctx(true);
    assert!(ctx.command_sandbox.as_ref().unwrap().is_enforced());

    let outside_file = fx.outside.join("file.txt");
    let out = denied(&ctx, &format!("echo x > '{}'", outside_file.display())).await;
    assert!(out.contains("sandbox"), "hint expected: {}", out);
    assert!(!outside_file.exists());

    succeeds(&ctx, "echo x > inside.txt && cat inside.txt").await;
    assert_eq!(fs::read_to_string(fx.ws.join("inside.txt")).unwrap(), "x\n");

    // Through a nested shell, a pipe into tee, a rename and a mkdir: all confined.
    let outside = fx.outside.display();
    denied(&ctx, &format!("bash -c 'echo x > {outside}/nested.txt'")).await;
    denied(&ctx, &format!("echo x | tee {outside}/tee.txt")).await;
    fails(&ctx, &format!("mv inside.txt {outside}/")).await;
    assert!(fx.ws.join("inside.txt").exists());
    fails(&ctx, &format!("mkdir {outside}/d")).await;
    // The restriction is the child's only: this process still writes there.
    fs::write(&outside_file, "parent").unwrap();
    fails(&ctx, &format!(": > {}", outside_file.display())).await;
    assert_eq!(fs::read_to_string(&outside_file).unwrap(), "parent");
}

#[tokio::test]
async fn same_command_runs_unconfined_when_mode_is_off() {
    let Some(fx) = fixture() else {
        return;
    };
    let mut s = settings(&fx, true);
    s.mode = SandboxMode::Off;
    let ctx = ctx_with(&fx.ws, CommandSandbox::new(&s, &fx.ws));
    let target = fx.outside.join("off.txt");
    succeeds(&ctx, &format!("echo x > '{}'", target.display())).await;
    assert!(target.exists());
}

/// The command's private `TMPDIR` and the device files are writable; the shared temp dir is
/// not.
#[tokio::test]
async fn private_temp_dir_and_dev_null_are_writable_shared_temp_is_not() {
    let Some(fx) = fixture() else {
        return;
    };
    let ctx = fx.ctx(true);
    let out = succeeds(
        &ctx,
        "echo hi > \"$TMPDIR/scratch.txt\" && cat \"$TMPDIR/scratch.txt\" && echo gone > /dev/null \
         && mktemp -d && ls /dev/null",
    )
    .await;
    assert!(out.contains("hi"));
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("scratch.txt");
    denied(&ctx, &format!("echo hi > '{}'", file.display())).await;
    assert!(!file.exists());
}

#[tokio::test]
async fn denied_paths_cannot_be_read_by_any_route() {
    let Some(fx) = fixture() else {
        return;
    };
    let ctx = fx.ctx(true);
    let key = fx.home.join(".ssh/id_rsa");

    let out = denied(&ctx, &format!("cat '{}'", key.display())).await;
    assert!(!out.contains("PRIVATE KEY"));

    // Through /proc's view of the root, a symlink placed in the workspace, and a HOME= cat.
    std::os::unix::fs::symlink(&key, fx.ws.join("key-link")).unwrap();
    for cmd in [
        format!("cat /proc/self/root{}", key.display()),
        "cat key-link".to_string(),
        format!("HOME='{}' bash -c 'cat ~/.ssh/id_rsa'", fx.home.display()),
        format!("cp '{}' stolen", key.display()),
    ] {
        let out = fails(&ctx, &cmd).await;
        assert!(!out.contains("PRIVATE KEY"), "{cmd}");
    }
    assert!(!fx.ws.join("stolen").exists());

    // The rest of the fake home stays readable, and the home can be listed.
    let h = fx.home.display();
    let out = succeeds(
        &ctx,
        &format!("cat '{h}/notes.txt' && ls -a '{h}' && ls '{h}/projects'"),
    )
    .await;
    assert!(out.contains("public notes"));
    assert!(out.contains(".ssh"));
}

/// The read rules are built once and reused (issue 32): whatever appears or is swapped between
/// two commands of the same sandbox is judged afresh — a denied directory created later, a
/// denied directory replaced by another, a home directory moved away and replaced — and files
/// created since then outside the denied paths are readable.
#[tokio::test]
async fn reused_read_rules_cover_what_changes_between_commands() {
    let Some(fx) = fixture() else {
        return;
    };
    let ctx = fx.ctx(true);
    let h = fx.home.display();
    succeeds(&ctx, &format!("cat '{h}/notes.txt'")).await;
    succeeds(&ctx, &format!("cat '{h}/notes.txt'")).await;

    fs::create_dir_all(fx.home.join(".aws")).unwrap();
    fs::write(fx.home.join(".aws/credentials"), "AWS SECRET\n").unwrap();
    fs::write(fx.home.join("later.txt"), "later notes\n").unwrap();
    let out = denied(&ctx, &format!("cat '{h}/.aws/credentials'")).await;
    assert!(!out.contains("AWS SECRET"));
    assert!(
        succeeds(&ctx, &format!("cat '{h}/later.txt'"))
            .await
            .contains("later notes")
    );

    // Swap ~/.ssh for another directory holding a new key.
    fs::rename(fx.home.join(".ssh"), fx.home.join("old-ssh")).unwrap();
    fs::create_dir_all(fx.home.join(".ssh")).unwrap();
    fs::write(fx.home.join(".ssh/id_new"), "NEW KEY\n").unwrap();
    let out = denied(&ctx, &format!("cat '{h}/.ssh/id_new'")).await;
    assert!(!out.contains("NEW KEY"));

    // Replace the whole home: the new one's `.ssh` is as closed as the old one's was.
    let moved = fx.base.join("home-moved");
    fs::rename(&fx.home, &moved).unwrap();
    fs::create_dir_all(fx.home.join(".ssh")).unwrap();
    fs::write(fx.home.join(".ssh/id_rsa"), "THIRD KEY\n").unwrap();
    let out = denied(&ctx, &format!("cat '{h}/.ssh/id_rsa'")).await;
    assert!(!out.contains("THIRD KEY"));
}

#[tokio::test]
async fn network_off_blocks_tcp_connect_to_a_local_listener() {
    let Some(fx) = fixture() else {
        return;
    };
    if !landlock_status().supports_network() {
        eprintln!(
            "note: skipping network test: {} cannot restrict TCP (ABI 4 needed)",
            landlock_status()
        );
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accept = std::thread::spawn(move || {
        // One connection is expected (from the network-on run).
        listener.accept().map(|_| ())
    });
    let connect = format!("echo hi > /dev/tcp/127.0.0.1/{port}");

    let off = fx.ctx(false);
    denied(&off, &connect).await;
    assert!(
        off.command_sandbox
            .as_ref()
            .unwrap()
            .summary()
            .contains("network off")
    );

    let on = fx.ctx(true);
    succeeds(&on, &connect).await;
    accept.join().unwrap().unwrap();
}

#[tokio::test]
async fn git_and_cargo_still_work_inside_the_sandbox() {
    let Some(fx) = fixture() else {
        return;
    };
    git(&fx.ws, &["init", "-q", "-b", "main"]);
    fs::write(fx.ws.join("a.txt"), "a\n").unwrap();
    git(&fx.ws, &["add", "a.txt"]);
    git(
        &fx.ws,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit",
            "-qm",
            "first",
        ],
    );
    fs::write(fx.ws.join("b.txt"), "b\n").unwrap();
    // The real home's defaults: toolchains under $HOME (rustup, cargo) must stay readable.
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let s = SandboxSettings::with_defaults(home.as_deref());
    let ctx = ctx_with(&fx.ws, CommandSandbox::new(&s, &fx.ws));
    let out = succeeds(
        &ctx,
        "git status --short && git log --oneline | wc -l && git diff --stat HEAD",
    )
    .await;
    assert!(out.contains("?? b.txt"), "{}", out);
    // `.git` is read-only for commands: git commands that write it fail.
    let out = fails(&ctx, "git add b.txt").await;
    assert!(out.contains("Read-only file system"), "{}", out);
    if Command::new("cargo").arg("--version").output().is_ok() {
        let out = succeeds(&ctx, "cargo --version && rustc --version").await;
        assert!(out.contains("cargo "), "{}", out);
    } else {
        eprintln!("note: cargo is not on PATH; only git was checked");
    }
}

#[tokio::test]
async fn worker_cannot_write_into_main_checkout_or_another_worktree() {
    let Some(fx) = fixture() else {
        return;
    };
    let main = fx.main_repo();
    let [wt1, wt2] = ["w1", "w2"].map(|w| add_worktree(&main, w, &fx.base.join("wt").join(w)));

    // The way `swarm::worker` builds it: the run's sandbox, re-rooted at the worktree.
    let run_sandbox = CommandSandbox::new(&settings(&fx, true), &main);
    let ctx = ctx_with(&wt1, run_sandbox.for_workspace(&wt1));

    for target in [
        main.join("README"),
        wt2.join("README"),
        main.join("new.txt"),
    ] {
        for cmd in [
            format!("echo pwned > '{}'", target.display()),
            format!("bash -c \"echo pwned >> '{}'\"", target.display()),
            format!("sh -c \"cp README '{}'\"", target.display()),
        ] {
            denied(&ctx, &cmd).await;
        }
    }
    assert_eq!(fs::read_to_string(main.join("README")).unwrap(), "hello\n");
    assert_eq!(fs::read_to_string(wt2.join("README")).unwrap(), "hello\n");
    assert!(!main.join("new.txt").exists());
    // The main repository's .git (hooks, config, refs) is out of reach too.
    fails(
        &ctx,
        &format!("echo 'exit 0' > '{}/.git/hooks/pre-commit'", main.display()),
    )
    .await;

    // Its own worktree is writable, and read-only git commands work there.
    let out = succeeds(
        &ctx,
        "echo mine >> README && git status --short && git diff --stat",
    )
    .await;
    assert!(out.contains("M README"), "{}", out);
    assert_eq!(
        fs::read_to_string(wt1.join("README")).unwrap(),
        "hello\nmine\n"
    );
    // The index and objects live in the main repository's .git: a worker cannot change them
    // (ahelper commits the worker's work itself).
    fails(&ctx, "git add README").await;
    assert!(
        !run_sandbox
            .for_workspace(&wt1)
            .writable
            .iter()
            .any(|w| w.starts_with(&main))
    );
}

#[tokio::test]
async fn a_session_in_a_linked_worktree_cannot_write_the_git_directory() {
    let Some(fx) = fixture() else {
        return;
    };
    let main = fx.main_repo();
    let wt = add_worktree(&main, "mine", &fx.base.join("mine"));
    let ctx = ctx_with(&wt, CommandSandbox::new(&settings(&fx, true), &wt));
    let out = succeeds(&ctx, "echo more >> README && git log --oneline | wc -l").await;
    assert!(out.starts_with('1'), "{}", out);
    // The repository's git directory (outside the worktree) is not writable: no commit, no
    // config change.
    fails(&ctx, "git add README").await;
    let config = main.join(".git/config");
    fails(&ctx, &format!("echo x >> '{}'", config.display())).await;
    // The main checkout's files stay out of reach.
    fails(&ctx, &format!("echo x > '{}/README'", main.display())).await;
}
