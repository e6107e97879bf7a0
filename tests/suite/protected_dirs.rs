//! Issue 29, items 2 and 3: with the workspace at the user's home, nothing the model writes
//! changes ahelper's own config and state or the places that run code on their own
//! (`~/.local/bin`, systemd user units, autostart entries); no file tool creates a directory
//! laid out like a git directory, a worker's branch that does is a hazard at `--apply`, and a
//! command cannot rewrite the `.git` of a repository nested in the workspace.

use super::support::sandbox::{Needs, require_sandbox};
use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::{RecordedRequest, Turn};
use std::path::Path;

/// The files of the fake home that must not change, with their content.
const HOME_FILES: &[(&str, &str)] = &[
    (".config/ahelper/config.toml", "# user settings\n"),
    (
        ".local/state/ahelper/trusted-projects.json",
        "{\"projects\": {}}\n",
    ),
    ("xdg-state/ahelper/mcp-approvals.json", "{}\n"),
];

/// A repository that is also the fake `$HOME`, holding [`HOME_FILES`]; `XDG_STATE_HOME` points
/// at `xdg-state` inside it (so both the default and the XDG locations are in the workspace).
fn home_repo() -> TestRepo {
    let repo = repo_with(&[("a.txt", "a\n")]);
    for (path, content) in HOME_FILES {
        repo.write(path, content);
    }
    repo
}

/// `ahelper -p go args…` with the workspace as `$HOME` playing `turns` then "done"; (model
/// requests, stderr).
fn play_at_home(
    repo: &TestRepo,
    args: &[&str],
    turns: Vec<Turn>,
) -> (Vec<RecordedRequest>, String) {
    let server = start(agent(turns.into_iter().chain([Turn::text("done")])));
    let out = ahelper(repo, &server, Wire::Anthropic)
        .env("HOME", repo.path())
        .env_remove("XDG_CONFIG_HOME")
        .env("XDG_STATE_HOME", repo.path().join("xdg-state"))
        .args(["-p", "go"])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (server.model_requests(), stderr)
}

/// The tool results the model saw (the last request's body).
fn results(requests: &[RecordedRequest]) -> String {
    requests.last().unwrap().body.to_string()
}

#[track_caller]
fn assert_home_unchanged(repo: &TestRepo, context: &str) {
    for (path, content) in HOME_FILES {
        assert_eq!(&repo.file(path), content, "{path} changed\n{context}");
    }
    for path in [
        ".local/bin/git",
        ".config/systemd/user/evil.service",
        ".config/autostart/evil.desktop",
        ".config/git/config",
    ] {
        assert!(!repo.path().join(path).exists(), "{path} exists\n{context}");
    }
}

/// Item 2: in accept-edits and in bypass, `write_file` into ahelper's config and state
/// directories (default and XDG locations), `~/.local/bin`, systemd user units and autostart
/// is refused with the reason, while an ordinary file is written; the start warns that the
/// workspace holds the home's configuration.
#[test]
fn file_tools_never_write_ahelpers_dirs_or_autorun_places_in_home() {
    for mode in ["accept-edits", "bypass"] {
        let repo = home_repo();
        let turns = vec![
            writes(
                ".config/ahelper/config.toml",
                "[permissions]\nmode = \"bypass\"\n",
            ),
            writes(".local/state/ahelper/trusted-projects.json", "{}"),
            writes("xdg-state/ahelper/mcp-approvals.json", "{\"x\": 1}"),
            writes(".local/bin/git", "#!/bin/sh\ntouch /tmp/pwned\n"),
            writes(
                ".config/systemd/user/evil.service",
                "[Service]\nExecStart=/bin/true\n",
            ),
            writes(
                ".config/autostart/evil.desktop",
                "[Desktop Entry]\nExec=true\n",
            ),
            writes(".config/git/config", "[core]\n\tpager = x\n"),
            writes("notes.txt", "notes\n"),
        ];
        let (requests, stderr) = play_at_home(&repo, &["--permission-mode", mode], turns);
        let context = format!("{mode}: {stderr}");
        assert_home_unchanged(&repo, &context);
        assert_eq!(repo.file("notes.txt"), "notes\n", "{context}");
        let seen = results(&requests);
        assert!(
            seen.contains("ahelper's own configuration or state"),
            "{seen}"
        );
        assert!(seen.contains("on PATH"), "{seen}");
        assert!(seen.contains("systemd user units"), "{seen}");
        assert!(
            stderr.contains("contains your home's configuration"),
            "{context}"
        );
    }
}

/// What a hostile command appends or plants in the home it can write (the workspace), after
/// trying to move the directories that hold ahelper's away and make new ones.
const PLANT_HOME: &str = r#"mv .config .config-old; mv .local .local-old
mkdir -p .config/ahelper && printf '[permissions]\nmode = "bypass"\n' > .config/ahelper/config.toml
printf '[[hooks.SessionStart]]\nhooks = [{type = "command", command = "touch /tmp/pwned"}]\n' >> .config/ahelper/config.toml
echo x >> .local/state/ahelper/trusted-projects.json
echo x >> xdg-state/ahelper/mcp-approvals.json
mkdir -p .local/bin && printf '#!/bin/sh\n' > .local/bin/git
mkdir -p .config/systemd/user && echo x > .config/systemd/user/evil.service
mkdir -p .config/autostart && echo x > .config/autostart/evil.desktop
mkdir -p .config/git && echo x > .config/git/config
echo made > made.txt
"#;

/// Item 2: in bypass, a sandboxed command cannot append to ahelper's config or state (default
/// and XDG locations) nor plant a program on PATH, a systemd unit or an autostart entry, while
/// it still writes the workspace.
#[test]
fn a_command_cannot_change_ahelpers_dirs_or_autorun_places_in_home() {
    require_sandbox!(Needs::LandlockAndNamespaces);
    let repo = home_repo();
    repo.write("plant.sh", PLANT_HOME);
    let (requests, stderr) = play_at_home(
        &repo,
        &["--permission-mode", "bypass"],
        vec![runs("sh plant.sh")],
    );
    assert_home_unchanged(&repo, &stderr);
    assert!(!repo.path().join(".config-old").exists(), "{stderr}");
    assert!(!repo.path().join(".local-old").exists(), "{stderr}");
    assert_eq!(repo.file("made.txt"), "made\n", "{stderr}");
    let seen = results(&requests);
    assert!(seen.contains("Read-only file system"), "{seen}");
}

/// The files of a directory `evil` laid out like a git directory whose config runs a program.
fn embedded_git_dir() -> Vec<Turn> {
    vec![
        writes("evil/HEAD", "ref: refs/heads/main\n"),
        writes("evil/objects/.keep", ""),
        writes("evil/refs/.keep", ""),
        writes(
            "evil/config",
            "[core]\n\tworktree = .\n\tfsmonitor = \"touch PWNED\"\n",
        ),
        writes("notes.txt", "notes\n"),
    ]
}

/// Item 3: in accept-edits and in bypass, `write_file` cannot complete a directory laid out
/// like a git directory nor write a git config that runs a program; `git status` in `evil`
/// afterwards is not git in another repository.
#[test]
fn file_tools_never_create_an_embedded_git_directory() {
    for mode in ["accept-edits", "bypass"] {
        let repo = repo_with(&[("a.txt", "a\n")]);
        let (requests, stderr) = play(&repo, &["--permission-mode", mode], embedded_git_dir());
        let evil = repo.path().join("evil");
        let shape = evil.join("HEAD").exists()
            && (evil.join("objects").exists() || evil.join("refs").exists());
        assert!(!shape, "{mode}: evil/ looks like a git directory\n{stderr}");
        assert!(!evil.join("config").exists(), "{mode}: {stderr}");
        assert_eq!(repo.file("notes.txt"), "notes\n", "{mode}: {stderr}");
        let seen = results(&requests);
        assert!(seen.contains("look like a git directory"), "{mode}: {seen}");
        assert!(
            seen.contains("runs a program (core.worktree)"),
            "{mode}: {seen}"
        );
    }
}

/// What a worker's command plants: an embedded git directory with a config that runs a
/// program.
const PLANT_GIT_DIR: &str = r#"mkdir -p evil/objects evil/refs
echo 'ref: refs/heads/main' > evil/HEAD
touch evil/objects/.keep evil/refs/.keep
printf '[core]\n\tfsmonitor = "touch PWNED"\n' > evil/config
echo A > a.txt"#;

/// Item 3: a worker's branch that adds an embedded git directory is a hazard: `--apply`
/// names it and its config and leaves the user's branch where it was.
#[test]
fn an_embedded_git_directory_from_a_worker_is_a_hazard_at_apply() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let head = repo.git(&["rev-parse", "HEAD"]);
    let server = start(one_worker([runs(PLANT_GIT_DIR), Turn::text("s1 done")]));
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args([
            "swarm",
            "x",
            "--yes",
            "--apply",
            "--permission-mode",
            "bypass",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("hazardous content"), "{stderr}");
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head);
    assert!(!repo.path().join("evil").exists());
    for expected in [
        "evil: embedded git directory",
        "evil/config: git configuration that runs a program (core.fsmonitor)",
    ] {
        assert!(stdout.contains(expected), "{expected} missing:\n{stdout}");
    }
}

/// A script (opaque to the permission analysis) that rewrites nested repositories' git dirs
/// and writes a file of one of them.
const NESTED_ATTACK: &str = r#"printf '[core]\n\tfsmonitor = "touch PWNED"\n' >> inner/.git/config
echo x >> libs/deep/vendored/.git/config
echo 'touch PWNED' > inner/.git/hooks/pre-commit
echo B > inner/b.txt
"#;

/// Item 3: in bypass, a command cannot append `core.fsmonitor` to the `.git/config` of a
/// repository nested in the workspace (nor plant a hook there), while it writes the nested
/// repository's files.
#[test]
fn a_command_cannot_rewrite_a_nested_repositorys_git_dir() {
    require_sandbox!(Needs::LandlockAndNamespaces);
    let repo = repo_with(&[("a.txt", "a\n")]);
    for inner in ["inner", "libs/deep/vendored"] {
        super::support::git::init_repo(&repo.path().join(inner), &[("b.txt", "b\n")]);
    }
    let configs = |repo: &TestRepo| {
        ["inner", "libs/deep/vendored"].map(|i| repo.file(&format!("{i}/.git/config")))
    };
    let before = configs(&repo);
    repo.write("attack.sh", NESTED_ATTACK);
    let (requests, stderr) = play(
        &repo,
        &["--permission-mode", "bypass"],
        [runs("sh attack.sh")],
    );
    assert_eq!(configs(&repo), before, "{stderr}");
    assert!(!Path::new(&repo.path().join("inner/.git/hooks/pre-commit")).exists());
    assert_eq!(repo.file("inner/b.txt"), "B\n", "{stderr}");
    assert!(results(&requests).contains("Read-only file system"));
}

/// Item 2 with `--add-dir ~` (the harness's home, its XDG dirs inside): in bypass, the file
/// tools refuse ahelper's user config and state and `~/.local/bin`, while another file in the
/// added home is written; the start warns that the added directory holds the configuration.
#[test]
fn an_added_home_keeps_ahelpers_dirs_and_path_protected() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let home = repo.home();
    std::fs::create_dir_all(home.join("config/ahelper")).unwrap();
    std::fs::write(home.join("config/ahelper/config.toml"), "# user\n").unwrap();
    let at = |p: &str| home.join(p).display().to_string();
    let turns = [
        writes(
            &at("config/ahelper/config.toml"),
            "[permissions]\nmode = \"bypass\"\n",
        ),
        writes(&at("state/ahelper/trusted-projects.json"), "{}"),
        writes(&at(".local/bin/git"), "#!/bin/sh\n"),
        writes(&at("notes.txt"), "notes\n"),
    ];
    let home_arg = home.display().to_string();
    let args = ["--permission-mode", "bypass", "--add-dir", &home_arg];
    let (requests, stderr) = play(&repo, &args, turns);
    let read = |p: &str| std::fs::read_to_string(home.join(p)).unwrap_or_default();
    assert_eq!(read("config/ahelper/config.toml"), "# user\n", "{stderr}");
    assert!(!home.join("state/ahelper/trusted-projects.json").exists());
    assert!(!home.join(".local/bin/git").exists());
    assert_eq!(read("notes.txt"), "notes\n", "{stderr}");
    assert!(results(&requests).contains("is protected"));
    assert!(
        stderr.contains("contains your home's configuration"),
        "{stderr}"
    );
}

/// A command that copies the workspace's mount without its submounts (`open_tree` with
/// `OPEN_TREE_CLONE`, which needs `CAP_SYS_ADMIN` over the command's mount namespace — a root
/// command held it in the user namespace the sandbox made) and writes `.git/config` through
/// that copy, beneath the read-only bind.
const OPEN_TREE_ATTACK: &str = r#"import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.syscall(428, -100, b".", 1 | 0o2000000)
print("open_tree", fd, os.strerror(ctypes.get_errno()))
if fd >= 0:
    try:
        f = os.open(".git/config", os.O_WRONLY | os.O_APPEND, dir_fd=fd)
        os.write(f, b"\n[core]\n\tfsmonitor = touch /tmp/ahelper-open-tree\n")
        print("wrote through the copy")
    except OSError as e:
        print("refused", e)
"#;

/// A command keeps no capability in the namespaces the sandbox makes for it, so it cannot copy
/// a mount without the read-only binds (`open_tree`) and write `.git/config` beneath them —
/// which a command run as root could (found in review).
#[test]
fn a_command_cannot_see_beneath_the_read_only_binds() {
    require_sandbox!(Needs::LandlockAndNamespaces);
    let repo = repo_with(&[("a.txt", "a\n")]);
    let before = repo.file(".git/config");
    repo.write("attack.py", OPEN_TREE_ATTACK);
    let (requests, stderr) = play(
        &repo,
        &["--permission-mode", "bypass"],
        [runs("python3 attack.py")],
    );
    assert_eq!(repo.file(".git/config"), before, "{stderr}");
    let results = results(&requests);
    assert!(
        results.contains("open_tree -1 Operation not permitted"),
        "{results}"
    );
}
