//! The decision for one simple command, in the order the steps are taken: deny rules (in every
//! mode), hidden code and network files (`hidden.rs`), files it reads (`reads.rs`), a program
//! from the workspace, git in another repository (`hidden.rs`), files it writes and modifies,
//! ask rules, then the built-in read-only list or an allow rule that covers every concern.

mod hidden;
mod reads;

use super::command::{Ctx, Outcome};
use super::matching::{Match, allow_match, restrictive_match};
use super::paths::{Placed, in_temp_dir, is_harmless_device, path_rule_matches, place};
use crate::permissions::PermissionMode;
use crate::permissions::command::classify::{
    Concern, ConcernKind, Facts, classify, is_system_program,
};
use crate::permissions::command::{SimpleCommand, Word};
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
        self.git_content();
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
            if !p.inside(&self.ctx.policy.added_dirs) && !in_temp_dir(&p.abs) {
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
        if policy.mode == PermissionMode::AcceptEdits
            && let Some(rel) = &placed.rel
            && !crate::mcp::files::project_servers_naming(self.ctx.root, rel).is_empty()
        {
            return Outcome::Ask(format!(
                "the command writes {shown}, code an MCP server of .mcp.json runs"
            ));
        }
        if policy.mode == PermissionMode::Bypass
            || (policy.mode == PermissionMode::AcceptEdits && placed.inside(&policy.added_dirs))
            || edit_rules(&policy.rules.allow, false).is_some()
        {
            return Outcome::Allow;
        }
        Outcome::Ask(format!("the command writes {shown}"))
    }
}

/// The reasons of `concerns`, joined.
fn reasons(concerns: &[&Concern]) -> String {
    concerns
        .iter()
        .map(|c| c.reason.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}
