//! A real pseudo-terminal for end-to-end tests: `ahelper` in a tmux window on a private socket,
//! driven by keys and read from the pane (`.ci/run` installs tmux).

use super::*;
use ahelper_fake_llm::{FakeLlm, Script};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// One tmux server on a private socket with one window running `ahelper`.
pub struct Tmux {
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    /// Starts `ahelper <args>` in `repo` on a 120×40 terminal, with the environment the other
    /// end-to-end tests use.
    pub fn start(repo: &TestRepo, server: &FakeLlm, args: &[&str]) -> Tmux {
        Tmux::start_then(repo, server, args, None)
    }

    /// As [`Tmux::start`], then runs the shell command `after` in the same terminal once
    /// `ahelper` exited.
    pub fn start_then(
        repo: &TestRepo,
        server: &FakeLlm,
        args: &[&str],
        after: Option<&str>,
    ) -> Tmux {
        Tmux::launch(repo, server, args, after, 120)
    }

    /// As [`Tmux::start`] on a terminal `width` columns wide.
    pub fn start_sized(repo: &TestRepo, server: &FakeLlm, args: &[&str], width: u16) -> Tmux {
        Tmux::launch(repo, server, args, None, width)
    }

    fn launch(
        repo: &TestRepo,
        server: &FakeLlm,
        args: &[&str],
        after: Option<&str>,
        width: u16,
    ) -> Tmux {
        let dir = tempfile::tempdir().unwrap();
        let base = ahelper(repo, server, Wire::Anthropic);
        let mut script = String::from("#!/bin/bash\n");
        for (k, v) in base.get_envs() {
            if let Some(v) = v {
                script.push_str(&format!(
                    "export {}='{}'\n",
                    k.to_string_lossy(),
                    v.to_string_lossy()
                ));
            }
        }
        script.push_str(&format!(
            "cd '{}' && {}'{}'",
            repo.path().display(),
            if after.is_some() { "" } else { "exec " },
            base.get_program().to_string_lossy()
        ));
        for a in args {
            script.push_str(&format!(" '{a}'"));
        }
        script.push('\n');
        if let Some(after) = after {
            script.push_str(after);
            script.push('\n');
        }
        let script_path = dir.path().join("run.sh");
        std::fs::write(&script_path, script).unwrap();
        let tmux = Tmux {
            socket: dir.path().join("tmux.sock"),
            _dir: dir,
        };
        tmux.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            &width.to_string(),
            "-y",
            "40",
        ])
        // bash, not sh: it carries on after a child that handled Ctrl-C itself
        .arg("bash")
        .arg(&script_path)
        .status()
        .unwrap();
        tmux.run(&["set-option", "-g", "remain-on-exit", "on"])
            .status()
            .unwrap();
        tmux
    }

    pub fn run(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.arg("-S").arg(&self.socket).args(args);
        cmd
    }

    /// Types `text` literally.
    pub fn type_text(&self, text: &str) {
        self.run(&["send-keys", "-l", text]).status().unwrap();
    }

    /// Presses keys by tmux name (`Enter`, `C-c`).
    pub fn press(&self, key: &str) {
        self.run(&["send-keys", key]).status().unwrap();
    }

    /// Waits until the REPL shows an empty prompt (its last line is `ahelper〉`): keys typed
    /// before that belong to the running turn (kept as type-ahead, Enter included).
    #[track_caller]
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.screen();
            let last = screen.lines().rev().find(|l| !l.trim().is_empty());
            if last.is_some_and(|l| l.trim_end() == "ahelper〉") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the REPL never showed an empty prompt:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for an empty prompt, types `line` and presses Enter.
    #[track_caller]
    pub fn line(&self, line: &str) {
        self.wait_ready();
        self.type_text(line);
        self.press("Enter");
    }

    /// The whole pane with its scroll-back.
    pub fn screen(&self) -> String {
        let out = self
            .run(&["capture-pane", "-p", "-J", "-S", "-1000"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the pane shows `text` `times` times; fails with the screen after 60 s.
    #[track_caller]
    pub fn wait_for_count(&self, text: &str, times: usize) -> String {
        self.wait_until(&format!("{text:?} {times} times"), |screen| {
            screen.matches(text).count() >= times
        })
    }

    /// Waits until the pane's text satisfies `done` (described by `what`); the screen then.
    /// Fails with the screen after 60 s.
    #[track_caller]
    pub fn wait_until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "the terminal never showed {what}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    #[track_caller]
    pub fn wait_for(&self, text: &str) -> String {
        self.wait_for_count(text, 1)
    }

    /// Types `/swarm <task>` at the prompt, answers `y` to the plan and waits until the run's
    /// outcome is reported; the screen then.
    #[track_caller]
    pub fn swarm(&self, task: &str) -> String {
        self.line(&format!("/swarm {task}"));
        self.wait_for("[y]es");
        self.type_text("y");
        self.press("Enter");
        self.wait_for("goes to the model with your next prompt")
    }

    /// Closes the terminal (kills the tmux server) while process `pid`, which runs in it, is
    /// alive, then waits up to `timeout` for that process to end.
    #[track_caller]
    pub fn close_then_wait_for_end_of(self, pid: i32, timeout: Duration) {
        assert!(
            !process_ended(pid),
            "{pid} ended before its terminal closed"
        );
        drop(self);
        let what = format!("{pid} to end after its terminal closed");
        super::wait::wait_for(&what, timeout, || process_ended(pid));
    }

    /// The PID of the pane's process: `ahelper` itself (the start script `exec`s it).
    pub fn pane_pid(&self) -> i32 {
        let pane = self
            .run(&["display-message", "-p", "#{pane_pid}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&pane.stdout)
            .trim()
            .parse()
            .expect("tmux names the pane's process")
    }
}

/// The live view of `ahelper swarm upper --yes --permission-mode accept-edits` in `repo` on a
/// terminal `width` columns wide (a worker's command waits there for the user's answer).
pub fn accept_edits_swarm(repo: &TestRepo, server: &FakeLlm, width: u16) -> Tmux {
    let args = [
        "swarm",
        "upper",
        "--yes",
        "--permission-mode",
        "accept-edits",
    ];
    Tmux::start_sized(repo, server, &args, width)
}

/// The live view ([`accept_edits_swarm`], `width` columns) of a run of
/// [`scripts::two_sed_workers`] in a repository with `a.txt` and `b.txt`: both workers ask
/// before their `sed`; (repository, model server, terminal).
pub fn two_questions_in_the_live_view(width: u16) -> (TestRepo, FakeLlm, Tmux) {
    let repo = repo_with(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let server = start(scripts::two_sed_workers());
    let tmux = accept_edits_swarm(&repo, &server, width);
    (repo, server, tmux)
}

/// A REPL (`ahelper args…`) in a new repository holding `files`, its model playing `script`,
/// once it shows its welcome; (repository, model server, terminal).
pub fn repl_with(
    files: &[(&str, &str)],
    script: Script,
    args: &[&str],
) -> (TestRepo, FakeLlm, Tmux) {
    let repo = repo_with(files);
    let server = start(script);
    let tmux = Tmux::start(&repo, &server, args);
    tmux.wait_for("Type /help");
    (repo, server, tmux)
}

/// A REPL (`--permission-mode bypass`, [`repl_with`] `a.txt`) that ran `/swarm update a.txt`
/// ([`scripts::update_a`]) and waits at its empty prompt again.
pub fn repl_idle_after_a_swarm() -> (TestRepo, FakeLlm, Tmux) {
    let (repo, server, tmux) = repl_with(
        &[("a.txt", "a\n")],
        scripts::update_a(),
        &["--permission-mode", "bypass"],
    );
    tmux.swarm("update a.txt");
    tmux.wait_ready();
    (repo, server, tmux)
}

/// The lines `command`'s output printed on `screen`: those indented by two spaces right after
/// the line that shows `command` (e.g. `/tools`, one line per tool).
pub fn indented_lines_after<'s>(screen: &'s str, command: &str) -> Vec<&'s str> {
    screen
        .lines()
        .skip_while(|l| !l.contains(command))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect()
}

/// Whether process `pid` has ended: it is gone or a zombie.
pub fn process_ended(pid: i32) -> bool {
    !std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.split(' ').nth(2) != Some("Z"))
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]).status();
    }
}
