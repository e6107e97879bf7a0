//! Helpers shared by the end-to-end tests: temporary git repositories, the fake LLM server and
//! an `ahelper` command with an isolated environment.

pub mod git;

pub mod nats;
pub mod pyproject;

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

/// `ahelper` in `repo`, talking to `server` in the given wire format, with a clean environment.
pub fn ahelper(repo: &TestRepo, server: &FakeLlm, wire: Wire) -> Command {
    let mut cmd = Command::cargo_bin("ahelper").unwrap();
    cmd.current_dir(repo.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", repo.home())
        .env("XDG_CONFIG_HOME", repo.home().join("config"))
        .env("XDG_STATE_HOME", repo.home().join("state"))
        .envs(GIT_ENV)
        .env("AHELPER_LOG", "debug");
    match wire {
        Wire::Anthropic => {
            cmd.env("ANTHROPIC_API_KEY", "sk-test-secret-key-123")
                .env("ANTHROPIC_BASE_URL", server.base_url());
        }
        Wire::OpenAi => {
            cmd.env("OPENAI_API_KEY", "sk-test-secret-key-123")
                .env("OPENAI_BASE_URL", server.openai_base_url());
        }
    }
    cmd.timeout(std::time::Duration::from_secs(120));
    cmd
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
