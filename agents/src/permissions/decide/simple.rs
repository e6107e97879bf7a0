//! The decision for one simple command, in the order the steps are taken: deny rules (in every
//! mode), files it reads, a program from the workspace, files it writes and modifies, ask
//! rules, then the built-in read-only list or an allow rule that covers every concern.

use super::command::{Ctx, Outcome};
use super::disk::{MAX_RECURSIVE_ENTRIES, expand_glob, real, walk_files};
use super::git_dir::foreign_repository;
use super::matching::{Match, allow_match, restrictive_match};
use super::paths::{
    Placed, in_temp_dir, is_harmless_device, is_network_device, path_rule_matches, place,
};
use super::scan::deny_could_appear;
use crate::permissions::PermissionMode;
use crate::permissions::command::classify::{
    Concern, ConcernKind, Facts, classify, is_system_program,
};
use crate::permissions::command::{CommandKind, RedirectKind, SimpleCommand, Word};
use crate::permissions::rules::{PermissionRule, RulePattern};
use crate::sandbox::protection_reason;
use crate::tools::ToolKind;
use std::path::PathBuf;

/// Decides one simple command.
pub(super) fn decide_simple(ctx: &Ctx<'_>, cmd: &SimpleCommand) -> Outcome {
    let mut check = SimpleCheck {
        ctx,
        cmd,
        facts: classify(cmd),
        shown: describe(cmd),
        cwds: ctx.cwds(cmd),
        asks: Vec::new(),
    };
    check.run().unwrap_or_else(|refused| refused)
}

/// The command as shown in reasons: its words as it runs, or its source text.
fn describe(cmd: &SimpleCommand) -> String {
    let words: Vec<&str> = cmd.argv.iter().map(|w| w.text.as_str()).collect();
    if words.is_empty() {
        cmd.text.clone()
    } else {
        words.join(" ")
    }
}

/// The state of one simple command's decision.
struct SimpleCheck<'a> {
    ctx: &'a Ctx<'a>,
    cmd: &'a SimpleCommand,
    /// What the command does ([`classify`]), with the concerns the steps add.
    facts: Facts,
    /// The command for messages.
    shown: String,
    /// The directories it may run in (`None`: unknown).
    cwds: Option<Vec<PathBuf>>,
    /// Reasons to ask found so far.
    asks: Vec<String>,
}

/// Where a redirection or `tee` writes.
enum WritePlace {
    /// Only harmless devices (`/dev/null`).
    Harmless,
    /// A file to decide like an edit.
    Edit(Placed),
    /// A protected path or a path outside the workspace.
    Deny(String),
    /// A path computed at run time.
    Unknown(String),
}

impl SimpleCheck<'_> {
    /// Runs the steps; `Err` is an outcome reached early (a refusal).
    fn run(&mut self) -> Result<Outcome, Outcome> {
        self.deny_rules()?;
        self.hidden_code()?;
        self.network()?;
        self.reads()?;
        self.unknown_program_reads()?;
        self.workspace_program();
        self.foreign_git()?;
        self.writes()?;
        self.modified()?;
        self.ask_rules();
        Ok(self.outcome())
    }

    /// 1. Deny rules, in every mode: a rule that computed words could match asks.
    fn deny_rules(&mut self) -> Result<(), Outcome> {
        let (ctx, shown) = (self.ctx, &self.shown);
        for rule in ctx.command_rules(&ctx.policy.rules.deny) {
            match restrictive_match(ctx, rule, self.cmd, &self.facts) {
                Match::Yes => {
                    return Err(Outcome::Deny(format!(
                        "`{shown}` is denied by the rule `{rule}`"
                    )));
                }
                Match::Maybe => self.asks.push(format!(
                    "`{shown}` has parts computed at run time that could match the deny rule \
                     `{rule}`"
                )),
                Match::No => {}
            }
        }
        Ok(())
    }

    /// 2. Files it reads (operands, input redirections, glob expansions, everything beneath a
    ///    directory read recursively): `read_file` deny rules refuse; reads outside the
    ///    workspace are concerns.
    fn reads(&mut self) -> Result<(), Outcome> {
        let mut reads = self.facts.reads.clone();
        let redirected = self
            .cmd
            .redirections
            .iter()
            .filter(|r| r.kind == RedirectKind::Read);
        reads.extend(
            redirected
                .filter_map(|r| r.target.clone())
                .map(|w| (None, w)),
        );
        if self.facts.recursive && !reads.iter().any(|(i, _)| i.is_some()) {
            reads.push((None, Word::literal(".")));
        }
        let denies = self.read_denies().next().is_some();
        if denies && self.cmd.dynamic_tail && self.facts.known {
            self.asks.push(format!(
                "`{}` reads files named at run time (xargs), which could be covered by a read \
                 deny rule",
                self.shown
            ));
        }
        for (index, word) in reads {
            if word.dynamic {
                if denies {
                    self.asks.push(format!(
                        "`{}` reads `{}`, computed at run time, which could be covered by a read \
                         deny rule",
                        self.shown, word.text
                    ));
                }
                continue;
            }
            let Some(bases) = self.bases(&word) else {
                self.concern(
                    index,
                    ConcernKind::OutsideRead,
                    format!("reads `{}` after a `cd` computed at run time", word.text),
                );
                continue;
            };
            for base in bases {
                for p in self.expand(&word, &base) {
                    self.read_at(index, &word, &p)?;
                }
            }
        }
        Ok(())
    }

    /// A program whose arguments we do not model (`base64`, `xxd`, `less`, `cp`) may read any
    /// path it is given: when read deny rules exist, an argument (or the value of
    /// `--option=VALUE`) naming a denied path refuses it.
    fn unknown_program_reads(&mut self) -> Result<(), Outcome> {
        let cmd = self.cmd;
        if self.facts.known
            || cmd.kind != CommandKind::Program
            || self.read_denies().next().is_none()
        {
            return Ok(());
        }
        let words =
            cmd.argv
                .iter()
                .skip(1)
                .filter(|w| !w.dynamic)
                .map(|w| match w.text.split_once('=') {
                    Some((name, value)) if name.starts_with('-') => Word {
                        text: value.to_string(),
                        ..w.clone()
                    },
                    _ => w.clone(),
                });
        for word in words.collect::<Vec<_>>() {
            for base in self.bases(&word).unwrap_or_default() {
                for p in self.expand(&word, &base) {
                    if let Some(rule) = self.read_denial(&p) {
                        return Err(Outcome::Deny(format!(
                            "`{}` is given {}, which the rule `{rule}` denies reading",
                            self.shown,
                            p.abs.display()
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// The paths `word` names from `base`: a glob's matches on disk (or the word itself when
    /// nothing matches, as bash passes it on), else the word.
    fn expand(&mut self, word: &Word, base: &std::path::Path) -> Vec<Placed> {
        let root = self.ctx.root;
        if word.glob && !word.tilde {
            match expand_glob(&word.text, base) {
                Some(found) if !found.is_empty() => {
                    return found
                        .iter()
                        .filter_map(|f| place(&f.to_string_lossy(), false, base, root))
                        .collect();
                }
                Some(_) => {}
                None if self.read_denies().next().is_some() => {
                    self.asks.push(format!(
                        "`{}` expands to too many files to check against the read deny rules",
                        word.text
                    ));
                }
                None => {}
            }
        }
        place(&word.text, word.tilde, base, root)
            .into_iter()
            .collect()
    }

    /// The `read_file` deny rules that name paths.
    fn read_denies(&self) -> impl Iterator<Item = &PermissionRule> {
        self.ctx
            .policy
            .rules
            .deny
            .iter()
            .filter(|r| r.applies_to("read_file", ToolKind::Read))
            .filter(|r| !matches!(r.pattern, RulePattern::Any))
    }

    /// The read deny rule matching `p` as written or where its symbolic links lead.
    fn read_denial(&self, p: &Placed) -> Option<String> {
        let real = real(p, self.ctx.root);
        self.read_denies()
            .find(|r| {
                path_rule_matches(r, p, true)
                    || real.as_ref().is_some_and(|q| path_rule_matches(r, q, true))
            })
            .map(ToString::to_string)
    }

    /// The directories a path word is relative to: the root for absolute and `~` paths (which
    /// ignore it), the command's working directories otherwise (`None`: unknown).
    fn bases(&self, word: &Word) -> Option<Vec<PathBuf>> {
        if word.tilde || word.text.starts_with('/') {
            Some(vec![self.ctx.root.to_path_buf()])
        } else {
            self.cwds.clone()
        }
    }

    /// One read of `word`, placed at `p`.
    fn read_at(&mut self, index: Option<usize>, word: &Word, p: &Placed) -> Result<(), Outcome> {
        if let Some(rule) = self.read_denial(p) {
            return Err(Outcome::Deny(format!(
                "`{}` reads {}, denied by the rule `{rule}`",
                self.shown,
                if word.glob {
                    p.abs.display().to_string()
                } else {
                    word.text.clone()
                }
            )));
        }
        if self.facts.recursive && p.abs.is_dir() && self.read_denies().next().is_some() {
            self.recursive_read(p)?;
        }
        if p.rel.is_none() && !is_harmless_device(&p.abs) {
            self.concern(
                index,
                ConcernKind::OutsideRead,
                format!("reads {}, which is outside the workspace", p.abs.display()),
            );
        }
        Ok(())
    }

    /// A directory read recursively (`grep -r`, `rg`): refused when a file beneath it is
    /// covered by a read deny rule; asks when there are too many entries to check.
    fn recursive_read(&mut self, dir: &Placed) -> Result<(), Outcome> {
        let root = self.ctx.root.to_path_buf();
        let mut denied: Option<(std::path::PathBuf, String)> = None;
        let walked = walk_files(&dir.abs, |file| {
            let Some(p) = place(&file.to_string_lossy(), false, &root, &root) else {
                return false;
            };
            denied = self.read_denial(&p).map(|rule| (file.to_path_buf(), rule));
            denied.is_some()
        });
        if let Some((file, rule)) = denied {
            return Err(Outcome::Deny(format!(
                "`{}` reads everything beneath {}, including {}, denied by the rule `{rule}`; \
                 search the allowed files by name instead",
                self.shown,
                dir.abs.display(),
                file.display()
            )));
        }
        if walked.is_err() {
            self.asks.push(format!(
                "`{}` reads {} recursively, which holds more than {MAX_RECURSIVE_ENTRIES} entries \
                 to check against the read deny rules",
                self.shown,
                dir.abs.display()
            ));
        }
        Ok(())
    }

    /// Code the analysis cannot see — an option or program that runs commands (`sed e`, `tar
    /// --to-command`, `vim`, `make`, `hash -p`; see `classify/runners.rs`) or a program given
    /// by path (a file of the workspace the agent can write, a symbolic link or a copy of any
    /// program) — is refused when deny rules for commands exist, whatever the mode; otherwise
    /// it is a hazard. A program given by path is refused, too, when its real target is a
    /// program a deny rule names.
    fn hidden_code(&mut self) -> Result<(), Outcome> {
        let cmd = self.cmd;
        let program = cmd.argv.first().and_then(Word::as_literal);
        let by_path = program.filter(|p| p.contains('/'));
        if let Some(target) = by_path.and_then(|p| self.denied_target(p)) {
            return Err(Outcome::Deny(target));
        }
        let reason = self
            .facts
            .runs_code
            .clone()
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
        let policy = self.ctx.policy;
        if let Some(rule) = self.ctx.command_rules(&policy.rules.deny).next() {
            return Err(Outcome::Deny(format!(
                "`{}` cannot be checked against the deny rules ({reason}); it could run what the \
                 rule `{rule}` denies",
                self.shown
            )));
        }
        if self.facts.runs_code.is_some() {
            self.concern(None, ConcernKind::Hazard, reason);
        }
        Ok(())
    }

    /// Why running `program` (a path) is denied: its real target (symbolic links resolved) is a
    /// program a deny rule names, by file name or by path.
    fn denied_target(&self, program: &str) -> Option<String> {
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
    fn network(&mut self) -> Result<(), Outcome> {
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

    /// A program from the workspace is opaque: the agent can rewrite it.
    fn workspace_program(&mut self) {
        let Some(program) = self.cmd.argv.first().and_then(Word::as_literal) else {
            return;
        };
        if !program.contains('/') || is_system_program(program) {
            return;
        }
        let root = self.ctx.root;
        let inside = self.cwds.as_ref().is_none_or(|list| {
            list.iter()
                .any(|base| place(program, false, base, root).is_some_and(|p| p.rel.is_some()))
        });
        if inside {
            self.concern(
                None,
                ConcernKind::WorkspaceProgram,
                format!(
                    "`{program}` is a program in the workspace: its contents are not analysed \
                     and can be changed by the agent"
                ),
            );
        }
    }

    /// Git run in a repository other than the workspace's own (a `cd` into a directory holding
    /// its own git dir, `git -C DIR`, a working directory outside the workspace): that
    /// repository's configuration can run programs, so the command is not read-only — and it
    /// is refused, like other hidden code, when deny rules for commands exist.
    fn foreign_git(&mut self) -> Result<(), Outcome> {
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

    /// 3. Writes: redirections and `tee` files, decided like edits.
    fn writes(&mut self) -> Result<(), Outcome> {
        let cmd = self.cmd;
        let redirected = cmd
            .redirections
            .iter()
            .filter(|r| r.kind.writes())
            .filter_map(|r| r.target.as_ref());
        let targets: Vec<Word> = redirected.chain(&self.facts.writes).cloned().collect();
        let mode = self.ctx.policy.mode;
        for target in &targets {
            match self.place_write(target) {
                WritePlace::Harmless => {}
                WritePlace::Deny(reason) => return Err(Outcome::Deny(reason)),
                WritePlace::Unknown(reason) if mode == PermissionMode::Plan => {
                    return Err(Outcome::PlanModeDeny(format!(
                        "plan mode is read-only: the command {reason}"
                    )));
                }
                WritePlace::Unknown(reason) if mode != PermissionMode::Bypass => {
                    self.asks.push(reason)
                }
                WritePlace::Unknown(_) => {}
                WritePlace::Edit(placed) => match self.decide_write(&placed) {
                    Outcome::Allow => {}
                    Outcome::Ask(reason) => self.asks.push(reason),
                    refused @ (Outcome::Deny(_) | Outcome::PlanModeDeny(_)) => return Err(refused),
                },
            }
        }
        Ok(())
    }

    /// Files the command modifies as its main effect (`cp` destinations, `sed -i`, `git
    /// config`, …): protected paths, paths outside the workspace and edit deny rules refuse
    /// it; whether the command may run at all stays with the command rules.
    fn modified(&self) -> Result<(), Outcome> {
        for target in &self.facts.modified {
            match self.place_write(target) {
                WritePlace::Deny(reason) => return Err(Outcome::Deny(reason)),
                WritePlace::Edit(placed) => {
                    if let refused @ Outcome::Deny(_) = self.decide_write(&placed) {
                        return Err(refused);
                    }
                }
                WritePlace::Harmless | WritePlace::Unknown(_) => {}
            }
        }
        Ok(())
    }

    /// 4. Ask rules.
    fn ask_rules(&mut self) {
        let ctx = self.ctx;
        for rule in ctx.command_rules(&ctx.policy.rules.ask) {
            if restrictive_match(ctx, rule, self.cmd, &self.facts) != Match::No {
                let reason = format!("the rule `{rule}` asks before `{}`", self.shown);
                self.asks.push(reason);
            }
        }
    }

    /// 5. Bypass mode allows what nothing asked about; plan mode allows only the built-in
    ///    read-only commands; otherwise the built-in list or an allow rule covering every
    ///    concern allows, and anything else asks.
    fn outcome(&mut self) -> Outcome {
        let policy = self.ctx.policy;
        let asks = std::mem::take(&mut self.asks);
        let builtin = policy.rules.builtin_read_only
            && self.facts.read_only
            && self.facts.concerns.is_empty();
        match policy.mode {
            PermissionMode::Bypass if asks.is_empty() => Outcome::Allow,
            PermissionMode::Bypass => Outcome::Ask(asks.join("; ")),
            PermissionMode::Plan if builtin && asks.is_empty() => Outcome::Allow,
            PermissionMode::Plan => Outcome::PlanModeDeny(format!(
                "plan mode is read-only: `{}` is not a read-only command",
                self.shown
            )),
            _ if !asks.is_empty() => Outcome::Ask(asks.join("; ")),
            _ if builtin => Outcome::Allow,
            _ => self.allow_rules(),
        }
    }

    /// An allow rule that covers every concern allows; else the first rule's uncovered
    /// concerns, or all of them, are why it asks.
    fn allow_rules(&self) -> Outcome {
        let ctx = self.ctx;
        let mut best_reason: Option<String> = None;
        for rule in ctx.command_rules(&ctx.policy.rules.allow) {
            let Some(uncovered) = self.uncovered(rule) else {
                continue;
            };
            if uncovered.is_empty() {
                return Outcome::Allow;
            }
            best_reason.get_or_insert_with(|| {
                format!(
                    "the rule `{rule}` does not cover `{}`: {}",
                    self.shown,
                    reasons(&uncovered)
                )
            });
        }
        if let Some(reason) = best_reason {
            return Outcome::Ask(reason);
        }
        let all: Vec<&Concern> = self.facts.concerns.iter().collect();
        if all.is_empty() {
            Outcome::Ask(format!("no rule allows `{}`", self.shown))
        } else {
            Outcome::Ask(format!("`{}`: {}", self.shown, reasons(&all)))
        }
    }

    /// The concerns an allow rule leaves uncovered (`None`: the rule does not match). A bare
    /// `run_command` rule covers all but reads outside the workspace, `sudo` and hard links; a
    /// prefix rule covers the concerns about the words it names.
    fn uncovered(&self, rule: &PermissionRule) -> Option<Vec<&Concern>> {
        let concerns = self.facts.concerns.iter();
        match &rule.pattern {
            RulePattern::Any => Some(
                concerns
                    .filter(|c| {
                        matches!(
                            c.kind,
                            ConcernKind::OutsideRead
                                | ConcernKind::Elevated
                                | ConcernKind::HardLink
                        )
                    })
                    .collect(),
            ),
            _ => {
                let len = allow_match(rule, self.cmd)?;
                Some(
                    concerns
                        .filter(|c| c.word.is_none_or(|w| w >= len))
                        .collect(),
                )
            }
        }
    }

    fn concern(&mut self, word: Option<usize>, kind: ConcernKind, reason: String) {
        self.facts.concerns.push(Concern { word, kind, reason });
    }

    /// Where a write to `target` goes (see [`WritePlace`]).
    fn place_write(&self, target: &Word) -> WritePlace {
        if target.dynamic || target.glob {
            return WritePlace::Unknown(format!(
                "writes to `{}`, a path computed at run time",
                target.text
            ));
        }
        let Some(candidates) = self.bases(target) else {
            return WritePlace::Unknown(format!(
                "writes to `{}` after a `cd` to a directory computed at run time",
                target.text
            ));
        };
        let mut result = WritePlace::Harmless;
        for base in candidates {
            let Some(p) = place(&target.text, target.tilde, &base, self.ctx.root) else {
                return WritePlace::Unknown(format!(
                    "writes to `{}` (home directory unknown)",
                    target.text
                ));
            };
            if is_harmless_device(&p.abs) {
                continue;
            }
            if let Some(why) = protection_reason(p.rel.as_deref().unwrap_or(&p.abs)) {
                return WritePlace::Deny(format!("writes to {}: {why}", p.abs.display()));
            }
            if p.rel.is_none() && !in_temp_dir(&p.abs) {
                return WritePlace::Deny(format!(
                    "writes to {}, which is outside the workspace",
                    p.abs.display()
                ));
            }
            result = WritePlace::Edit(p);
        }
        result
    }

    /// The edit decision for a file written by the command.
    fn decide_write(&self, placed: &Placed) -> Outcome {
        let policy = self.ctx.policy;
        let shown = placed.rel.as_ref().map_or_else(
            || placed.abs.display().to_string(),
            |r| r.display().to_string(),
        );
        let edit_rules = |list: &[PermissionRule], restrictive: bool| {
            list.iter()
                .filter(|r| r.applies_to("edit_file", ToolKind::Edit))
                .find(|r| path_rule_matches(r, placed, restrictive))
                .map(ToString::to_string)
        };
        if let Some(rule) = edit_rules(&policy.rules.deny, true) {
            return Outcome::Deny(format!("writing {shown} is denied by the rule `{rule}`"));
        }
        if policy.mode == PermissionMode::Plan {
            return Outcome::PlanModeDeny(format!(
                "plan mode is read-only: the command writes {shown}"
            ));
        }
        if let Some(rule) = edit_rules(&policy.rules.ask, true) {
            return Outcome::Ask(format!("the rule `{rule}` asks before writing {shown}"));
        }
        if policy.mode == PermissionMode::Bypass
            || (policy.mode == PermissionMode::AcceptEdits && placed.rel.is_some())
            || edit_rules(&policy.rules.allow, false).is_some()
        {
            return Outcome::Allow;
        }
        Outcome::Ask(format!("the command writes {shown}"))
    }
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

/// The reasons of `concerns`, joined.
fn reasons(concerns: &[&Concern]) -> String {
    concerns
        .iter()
        .map(|c| c.reason.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}
