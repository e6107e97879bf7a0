//! Helpers shared by the end-to-end tests: temporary git repositories, the fake LLM server and
//! an `ahelper` command with an isolated environment.

pub mod config;

pub mod files;

pub mod requests;

pub mod run;

pub mod text;

pub mod git;

pub mod nats;
pub mod pyproject;

pub mod sandbox;

pub mod scripts;

pub mod tmpfs;

pub mod tmux;

pub mod wait;

use ahelper_fake_llm::{FakeLlm, Script};
use assert_cmd::Command;
use git::{GIT_ENV, git, init_repo, write_file};
use std::path::{Path, PathBuf};

/// A temporary directory holding a git repository (`repo/`) and isolated XDG dirs (`home/`).
pub struct TestRepo {
    pub dir: tempfile::TempDir,
}

impl TestRepo {
    /// Empty `repo/` and `home/` directories: not a git repository yet.
    pub fn empty() -> TestRepo {
        let repo = TestRepo {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(repo.path()).unwrap();
        std::fs::create_dir_all(repo.home()).unwrap();
        repo
    }

    /// The temporary directory that holds `repo/` and `home/` (and whatever else a test
    /// puts beside them, e.g. a private `tmp/`).
    pub fn root(&self) -> &Path {
        self.dir.path()
    }
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("repo")
    }
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }
    pub fn file(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap_or_default()
    }
    pub fn write(&self, rel: &str, text: &str) {
        write_file(&self.path(), rel, text);
    }
    pub fn git(&self, args: &[&str]) -> String {
        git(&self.path(), args)
    }
}

/// A repository with `files` committed on `main`.
pub fn repo_with(files: &[(&str, &str)]) -> TestRepo {
    let repo = TestRepo::empty();
    init_repo(&repo.path(), files);
    repo
}

/// Which wire format the binary should use.
#[derive(Clone, Copy, Debug)]
pub enum Wire {
    Anthropic,
    OpenAi,
}

/// The clean environment of every `ahelper` a test starts: `cmd` runs in `repo` with only
/// `PATH`, the isolated `HOME`/XDG dirs of `repo.home()`, git's fixed identity ([`GIT_ENV`])
/// and `AHELPER_LOG=debug`.
pub fn isolate<'c>(
    cmd: &'c mut std::process::Command,
    repo: &TestRepo,
) -> &'c mut std::process::Command {
    clean_env(cmd.current_dir(repo.path()), &repo.home())
}

/// Clears `cmd`'s environment but for `PATH`, and gives it `home` as `HOME` (its XDG config and
/// state dirs inside), git's fixed identity ([`GIT_ENV`]) and `AHELPER_LOG=debug`.
pub fn clean_env<'c>(
    cmd: &'c mut std::process::Command,
    home: &Path,
) -> &'c mut std::process::Command {
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .envs(GIT_ENV)
        .env("AHELPER_LOG", "debug")
        .env("AHELPER_NATS_SIGNING_KEY", nats::COORDINATOR_KEY_FILE)
}

/// The API key and base URL that point `cmd` at `server` in the given wire format.
pub fn talk_to<'c>(
    cmd: &'c mut std::process::Command,
    server: &FakeLlm,
    wire: Wire,
) -> &'c mut std::process::Command {
    match wire {
        Wire::Anthropic => cmd
            .env("ANTHROPIC_API_KEY", "sk-test-secret-key-123")
            .env("ANTHROPIC_BASE_URL", server.base_url()),
        Wire::OpenAi => cmd
            .env("OPENAI_API_KEY", "sk-test-secret-key-123")
            .env("OPENAI_BASE_URL", server.openai_base_url()),
    }
}

/// `ahelper` as a plain process (for tests that spawn, signal or wait on it), set up as
/// [`ahelper`] sets it up.
pub fn ahelper_process(repo: &TestRepo, server: &FakeLlm, wire: Wire) -> std::process::Command {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("ahelper"));
    isolate(&mut cmd, repo);
    talk_to(&mut cmd, server, wire);
    cmd
}

/// `ahelper` in `repo`, talking to `server` in the given wire format, with a clean environment
/// ([`isolate`]) and a 120 s timeout.
pub fn ahelper(repo: &TestRepo, server: &FakeLlm, wire: Wire) -> Command {
    let mut cmd = Command::from_std(ahelper_process(repo, server, wire));
    cmd.timeout(std::time::Duration::from_secs(120));
    cmd
}

/// Starts `ahelper args…` in `repo` against `server` (Anthropic format) with no stdin and
/// piped stdout and stderr; the test signals and waits on the child.
pub fn spawn_ahelper(repo: &TestRepo, server: &FakeLlm, args: &[&str]) -> std::process::Child {
    ahelper_process(repo, server, Wire::Anthropic)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ahelper starts")
}

/// Runs `cmd`, asserts it succeeds, and returns its stdout as text.
#[track_caller]
pub fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.assert().success().get_output().stdout.clone();
    String::from_utf8(out).expect("stdout is UTF-8")
}

/// Runs `cmd` whatever its exit status; (exit code, -1 when killed by a signal; stdout; stderr).
pub fn outcome_of(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().expect("ahelper runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `cmd`, asserts it exits with code 2 (a usage or configuration error) and that its
/// stderr contains every one of `texts`.
#[track_caller]
pub fn assert_usage_error(cmd: &mut Command, texts: &[&str]) {
    let stderr = String::from_utf8_lossy(&cmd.assert().code(2).get_output().stderr).into_owned();
    for text in texts {
        assert!(stderr.contains(text), "no {text:?} in stderr:\n{stderr}");
    }
}

/// Runs the program `cmd` (not `ahelper`: a tool a test needs, e.g. `openssl`) and asserts it
/// succeeds, showing its stderr when it does not; its output.
#[track_caller]
pub fn succeeds(cmd: &mut std::process::Command) -> std::process::Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?} does not start: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `cmd`, asserts it succeeds, and returns its stderr as text.
#[track_caller]
pub fn stderr_of(cmd: &mut Command) -> String {
    let out = cmd.assert().success().get_output().stderr.clone();
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs `cmd`, asserts it succeeds, and returns its stdout parsed as one JSON value
/// (`--output-format json`).
#[track_caller]
pub fn json_stdout_of(cmd: &mut Command) -> serde_json::Value {
    serde_json::from_str(&stdout_of(cmd)).expect("stdout is one JSON value")
}

/// A repository with `a.txt` and a model that answers "first answer", then "second answer" to
/// every later request, after `ahelper -p "remember the word banana" --output-format json`
/// ran in it; (repository, server, the session id that run printed).
pub fn session_remembering_banana() -> (TestRepo, FakeLlm, String) {
    let repo = repo_with(&[("a.txt", "x\n")]);
    let server = start(
        scripts::agent([ahelper_fake_llm::Turn::text("first answer")])
            .with_fallback_text("second answer"),
    );
    let id = json_stdout_of(ahelper(&repo, &server, Wire::Anthropic).args([
        "-p",
        "remember the word banana",
        "--output-format",
        "json",
    ]))["session_id"]
        .as_str()
        .expect("a session id")
        .to_string();
    (repo, server, id)
}

/// Runs `ahelper args…` in `repo` against `server` (it must succeed) and returns the body of
/// the model request it made last.
#[track_caller]
pub fn last_request_after(repo: &TestRepo, server: &FakeLlm, args: &[&str]) -> String {
    ahelper(repo, server, Wire::Anthropic)
        .args(args)
        .assert()
        .success();
    let requests = server.model_requests();
    requests
        .last()
        .expect("the model was asked")
        .body
        .to_string()
}

/// `ahelper -p go args…` in `repo` playing `turns`, then a final "done" (it must succeed);
/// (the model requests, stderr).
pub fn play(
    repo: &TestRepo,
    args: &[&str],
    turns: impl IntoIterator<Item = ahelper_fake_llm::Turn>,
) -> (Vec<ahelper_fake_llm::RecordedRequest>, String) {
    let turns = turns
        .into_iter()
        .chain([ahelper_fake_llm::Turn::text("done")]);
    let server = start(scripts::agent(turns));
    let stderr = stderr_of(
        ahelper(repo, &server, Wire::Anthropic)
            .args(["-p", "go"])
            .args(args),
    );
    (server.model_requests(), stderr)
}

/// The number of refused `run_command` calls `ahelper -p` reported on `stderr`.
pub fn refused_commands(stderr: &str) -> usize {
    stderr
        .lines()
        .filter(|l| l.starts_with("ahelper: refused run_command("))
        .count()
}

/// Asserts that no request of `requests` holds `secret`; `context` (stderr, the case) is shown
/// when one does.
#[track_caller]
pub fn assert_never_sent(
    requests: &[ahelper_fake_llm::RecordedRequest],
    secret: &str,
    context: &str,
) {
    for (i, request) in requests.iter().enumerate() {
        let body = request.body.to_string();
        assert!(
            !body.contains(secret),
            "{secret:?} reached the model in request {i}: {body}\n{context}"
        );
    }
}

/// A repository whose tracked `.env` was committed holding `committed` and now holds `changed`,
/// beside `a.txt`.
pub fn repo_with_changed_env(committed: &str, changed: &str) -> TestRepo {
    let repo = repo_with(&[(".env", committed), ("a.txt", "a\n")]);
    repo.write(".env", changed);
    repo
}

/// The newest run's record, `.ahelper/runs/<newest>/run.json`.
#[track_caller]
pub fn last_run(repo: &TestRepo) -> serde_json::Value {
    try_last_run(repo).expect("the repository has a run record")
}

/// The newest run's record ([`last_run`]) once there is one that reads whole.
pub fn try_last_run(repo: &TestRepo) -> Option<serde_json::Value> {
    let dir = repo.path().join(".ahelper/runs");
    let mut runs: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| Some(e.ok()?.path()))
        .collect();
    runs.sort();
    let text = std::fs::read_to_string(runs.last()?.join("run.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// Worker `id`'s entry in a run record ([`last_run`]); panics naming the record when it has none.
pub fn worker_record<'a>(run: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    run["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == id)
        .unwrap_or_else(|| panic!("no worker {id} in {run:#}"))
}

/// Where worker `id` of `run` (a run record, [`last_run`]) keeps its transcript:
/// `.ahelper/runs/<run id>/workers/<id>.jsonl`.
pub fn worker_transcript(repo: &TestRepo, run: &serde_json::Value, id: &str) -> PathBuf {
    repo.path()
        .join(".ahelper/runs")
        .join(run["run_id"].as_str().expect("the run record has a run id"))
        .join("workers")
        .join(format!("{id}.jsonl"))
}

/// The names of the tools offered in `request` (its `tools` array; none when it has none).
pub fn tool_names(request: &ahelper_fake_llm::RecordedRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["name"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

pub fn start(script: Script) -> FakeLlm {
    FakeLlm::start_blocking(script).expect("fake LLM server starts")
}

/// Every line of every session transcript in the repo, parsed.
pub fn session_lines(repo: &TestRepo) -> Vec<serde_json::Value> {
    let dir = repo.path().join(".ahelper/sessions");
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        for l in text.lines() {
            out.push(serde_json::from_str(l).expect("transcript lines are JSON"));
        }
    }
    out
}

/// The names (`/proc/<pid>/comm`) of the processes whose parent is `parent`.
pub fn child_names(parent: i32) -> Vec<String> {
    let child_name = |entry: std::fs::DirEntry| {
        let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
        let (head, rest) = stat.rsplit_once(") ")?;
        let ppid = rest.split(' ').nth(1)?.parse::<i32>().ok()?;
        let (_, name) = head.split_once('(')?;
        (ppid == parent).then(|| name.to_string())
    };
    let processes = std::fs::read_dir("/proc").unwrap().flatten();
    processes.filter_map(child_name).collect()
}
