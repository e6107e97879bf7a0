//! Steps of a simple command's decision about code the analysis cannot see (programs run by
//! path, command-running options, `PATH` changes), git in a repository other than the
//! workspace's own, and bash's `/dev/tcp` network files.

use super::SimpleCheck;
use crate::permissions::PermissionMode;
use crate::permissions::command::classify::{CONTENT_PRINTERS, ConcernKind, is_system_program};
use crate::permissions::command::{CommandKind, SimpleCommand, Word};
use crate::permissions::decide::command::Outcome;
use crate::permissions::decide::git_dir::foreign_repository;
use crate::permissions::decide::matching::allow_match;
use crate::permissions::decide::paths::{is_network_device, place};
use crate::permissions::decide::scan::deny_could_appear;

impl SimpleCheck<'_> {
    /// Code the analysis cannot see — an option or program that runs commands (`sed e`, `tar
    /// --to-command`, `vim`, `make`, `hash -p`; see `classify/runners.rs`) or a program given
    /// by path (a file of the workspace the agent can write, a symbolic link or a copy of any
    /// program) — is refused when deny rules for commands exist, whatever the mode; otherwise
    /// it is a hazard. A program given by path is refused, too, when its real target is a
    /// program a deny rule names.
    pub(super) fn hidden_code(&mut self) -> Result<(), Outcome> {
        let cmd = self.cmd;
        let program = cmd.argv.first().and_then(Word::as_literal);
        let by_path = program.filter(|p| p.contains('/'));
        if let Some(target) = by_path.and_then(|p| self.denied_target(p)) {
            return Err(Outcome::Deny(target));
        }
        let workspace_code = self.facts.workspace_code.clone();
        let reason = self
            .facts
            .runs_code
            .clone()
            .or_else(|| workspace_code.clone())
            .or_else(|| {
                by_path.filter(|p| !is_system_program(p)).map(|p| {
                    format!(
                        "`{p}` is a file the command runs by path: its contents are not analysed"
                    )
                })
            })
            .or_else(|| sets_path(cmd));
        let Some(reason) = reason else {
            return Ok(());
        };
        if self.facts.runs_code.is_none() && workspace_code.is_some() {
            self.workspace_code(reason);
            return Ok(());
        }
        let policy = self.ctx.policy;
        if let Some(rule) = self.ctx.command_rules(&policy.rules.deny).next() {
            return Err(Outcome::Deny(format!(
                "`{}` cannot be checked against the deny rules ({reason}); it could run what the \
                 rule `{rule}` denies",
                self.shown
            )));
        }
        self.opaque_reads(&reason);
        if self.facts.runs_code.is_some() {
            self.concern(None, ConcernKind::Hazard, reason);
        }
        Ok(())
    }

    /// A program whose behaviour files of the workspace define (`cargo test`, `npm test`,
    /// `python3 -c …`, `bash x.sh`, a git alias): never read-only. An allow rule naming it
    /// (`run_command(cargo test:*)`) is the user's decision; without one it asks when command
    /// deny rules exist (the code could run a denied program), and in bypass mode when
    /// `read_file` deny rules exist (it could read a denied file).
    fn workspace_code(&mut self, reason: String) {
        if !self.named_by_allow_rule() {
            let policy = self.ctx.policy;
            if let Some(rule) = self.ctx.command_rules(&policy.rules.deny).next() {
                self.asks.push(format!(
                    "`{}` cannot be checked against the deny rules ({reason}); it could run what \
                     the rule `{rule}` denies",
                    self.shown
                ));
            } else {
                self.opaque_reads(&reason);
            }
        }
        self.concern(Some(0), ConcernKind::WorkspaceProgram, reason);
    }

    /// True when an allow rule with a command pattern matches the command (it names the
    /// program: `run_command(cargo test:*)`).
    fn named_by_allow_rule(&self) -> bool {
        let ctx = self.ctx;
        ctx.command_rules(&ctx.policy.rules.allow)
            .any(|rule| allow_match(rule, self.cmd).is_some())
    }

    /// Opaque code could read what a `read_file` deny rule covers: in bypass mode, where
    /// nothing else would ask, it asks. (Other modes ask anyway: opaque code is never
    /// read-only.)
    fn opaque_reads(&mut self, reason: &str) {
        if self.ctx.policy.mode != PermissionMode::Bypass {
            return;
        }
        let Some(rule) = self.read_denies().next().map(ToString::to_string) else {
            return;
        };
        self.asks.push(format!(
            "`{}` runs code the analysis cannot see ({reason}): it could read what the rule \
             `{rule}` denies",
            self.shown
        ));
    }

    /// Git commands that print file contents from history or the index (`git diff`, `git log
    /// -p`, `git show`, `git grep`, `git cat-file`, …) could print a tracked file a `read_file`
    /// deny rule covers: with such rules they ask, in every mode.
    pub(super) fn git_content(&mut self) {
        let Some(program) = self.cmd.argv.first().and_then(Word::as_literal) else {
            return;
        };
        if crate::permissions::command::basename(program) != "git" || !is_system_program(program) {
            return;
        }
        let sub = self.cmd.argv.get(1).map_or("", |w| w.text.as_str());
        let prints = CONTENT_PRINTERS.contains(&sub)
            || (PATCH_ON_REQUEST.contains(&sub) && asks_for_patches(self.cmd));
        if !prints || only_object_paths(self.cmd, sub) {
            return;
        }
        let Some(rule) = self.read_denies().next().map(ToString::to_string) else {
            return;
        };
        self.asks.push(format!(
            "`{}` can print the contents of tracked files, which the rule `{rule}` may cover",
            self.shown
        ));
    }

    /// Why running `program` (a path) is denied: its real target (symbolic links resolved) is a
    /// program a deny rule names, by file name or by path.
    pub(super) fn denied_target(&self, program: &str) -> Option<String> {
        let policy = self.ctx.policy;
        self.cwds.as_ref()?.iter().find_map(|base| {
            let target = std::fs::canonicalize(base.join(program)).ok()?;
            let name = target.file_name()?.to_string_lossy().into_owned();
            let rule = deny_could_appear(policy, &name)
                .or_else(|| deny_could_appear(policy, &target.to_string_lossy()))?;
            Some(format!(
                "`{}` runs {}, which the rule `{rule}` denies",
                self.shown,
                target.display()
            ))
        })
    }

    /// `/dev/tcp/HOST/PORT` and `/dev/udp/…` (bash opens a socket for them) are network access:
    /// refused when the sandbox turns the network off, asked outside bypass mode.
    pub(super) fn network(&mut self) -> Result<(), Outcome> {
        let redirected = self
            .cmd
            .redirections
            .iter()
            .filter_map(|r| r.target.as_ref());
        let words = self.cmd.argv.iter().skip(1).chain(redirected);
        let root = self.ctx.root;
        let bases = self
            .cwds
            .clone()
            .unwrap_or_else(|| vec![root.to_path_buf()]);
        let socket = words.into_iter().find(|w| {
            bases.iter().any(|base| {
                place(&w.text, w.tilde, base, root).is_some_and(|p| is_network_device(&p.abs))
            })
        });
        let Some(word) = socket else {
            return Ok(());
        };
        let reason = format!(
            "`{}` opens a network connection ({})",
            self.shown, word.text
        );
        if self.ctx.policy.network_off {
            return Err(Outcome::Deny(format!(
                "{reason}, and the sandbox's network is off (`[sandbox] network = false`)"
            )));
        }
        if self.ctx.policy.mode != PermissionMode::Bypass {
            self.asks.push(reason);
        }
        Ok(())
    }

    /// Git run in a repository other than the workspace's own (a `cd` into a directory holding
    /// its own git dir, `git -C DIR`, a working directory outside the workspace): that
    /// repository's configuration can run programs, so the command is not read-only — and it
    /// is refused, like other hidden code, when deny rules for commands exist.
    pub(super) fn foreign_git(&mut self) -> Result<(), Outcome> {
        let Some(program) = self.cmd.argv.first().and_then(Word::as_literal) else {
            return Ok(());
        };
        if crate::permissions::command::basename(program) != "git" || !is_system_program(program) {
            return Ok(());
        }
        let Some(cwds) = self.cwds.clone() else {
            return Ok(()); // An unknown working directory is already a concern of the reads.
        };
        let globals = &self.cmd.global_options;
        let mut dirs = cwds.clone();
        for (i, w) in globals.iter().enumerate() {
            if w.text == "-C"
                && let Some(dir) = globals.get(i + 1)
            {
                dirs = cwds
                    .iter()
                    .filter_map(|base| place(&dir.text, dir.tilde, base, self.ctx.root))
                    .map(|p| p.abs)
                    .collect();
            }
        }
        let root = self.ctx.root;
        let explicit = explicit_git_dir(self.cmd).map(std::path::PathBuf::from);
        let Some(repo) = explicit.or_else(|| dirs.iter().find_map(|d| foreign_repository(d, root)))
        else {
            return Ok(());
        };
        let reason = format!(
            "git runs in {}, which is not the workspace's own repository: its configuration \
             can run programs",
            repo.display()
        );
        let policy = self.ctx.policy;
        if let Some(rule) = self.ctx.command_rules(&policy.rules.deny).next() {
            return Err(Outcome::Deny(format!(
                "{reason} that the rule `{rule}` could deny"
            )));
        }
        self.concern(None, ConcernKind::Hazard, reason);
        Ok(())
    }
}

/// Subcommands that print file contents only with a patch option (`git log -p`).
const PATCH_ON_REQUEST: &[&str] = &["log", "whatchanged", "reflog", "stash"];

/// True when a word of `cmd` asks for patches or line histories (`-p`, `--patch`, `-u`,
/// `-U<n>`, `--cc`, `-c`, `--word-diff`, `-L…`, `--full-diff`) or is computed at run time.
fn asks_for_patches(cmd: &SimpleCommand) -> bool {
    cmd.argv.iter().skip(2).any(|w| {
        let t = w.text.as_str();
        w.dynamic
            || matches!(
                t,
                "-p" | "-u" | "-c" | "--cc" | "--patch" | "--patch-with-stat"
            )
            || t.starts_with("-U")
            || t.starts_with("-L")
            || t.starts_with("--unified")
            || t.starts_with("--word-diff")
            || t.starts_with("--color-words")
            || t.starts_with("--full-diff")
            || (t.starts_with('-') && !t.starts_with("--") && t.contains('p'))
    })
}

/// `git show REV:PATH…` and `git cat-file -p REV:PATH` print only the files they name, which
/// the read step already checked against the deny rules.
fn only_object_paths(cmd: &SimpleCommand, sub: &str) -> bool {
    let operands: Vec<&Word> = cmd
        .argv
        .iter()
        .skip(2)
        .filter(|w| !w.text.starts_with('-'))
        .collect();
    matches!(sub, "show" | "cat-file")
        && !operands.is_empty()
        && operands
            .iter()
            .all(|w| !w.dynamic && w.text.split_once(':').is_some_and(|(_, p)| !p.is_empty()))
}

/// The git directory `cmd` names explicitly (`GIT_DIR=…`, `GIT_COMMON_DIR=…`, `--git-dir`).
fn explicit_git_dir(cmd: &SimpleCommand) -> Option<String> {
    let assigned = cmd
        .assignments
        .iter()
        .find(|a| matches!(a.name.as_str(), "GIT_DIR" | "GIT_COMMON_DIR"))
        .map(|a| a.value.text.clone());
    let globals = &cmd.global_options;
    assigned.or_else(|| {
        globals.iter().enumerate().find_map(|(i, w)| {
            if w.text == "--git-dir" {
                Some(globals.get(i + 1).map_or(String::new(), |v| v.text.clone()))
            } else {
                w.text.strip_prefix("--git-dir=").map(str::to_string)
            }
        })
    })
}

/// Why `cmd` changes where programs are looked up (`PATH=… cmd`, `PATH=…`, `export PATH=…`):
/// a bare name may then run a file of the workspace.
fn sets_path(cmd: &SimpleCommand) -> Option<String> {
    let assigned = cmd.assignments.iter().any(|a| a.name == "PATH");
    let declared = cmd.kind == CommandKind::Declaration
        && cmd.argv.iter().skip(1).any(|w| w.text.starts_with("PATH="));
    (assigned || declared)
        .then(|| "setting `PATH` lets a bare name run a file the analysis cannot see".to_string())
}
