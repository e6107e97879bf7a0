//! Step 2 of a simple command's decision: the files it reads — operands, input redirections,
//! glob expansions, where links lead, everything beneath a directory read recursively, and the
//! arguments of programs we do not model — against the `read_file` deny rules.

use super::SimpleCheck;
use crate::permissions::command::classify::ConcernKind;
use crate::permissions::command::{CommandKind, RedirectKind, Word};
use crate::permissions::decide::command::Outcome;
use crate::permissions::decide::disk::{MAX_RECURSIVE_ENTRIES, expand_glob, real, walk_files};
use crate::permissions::decide::paths::{Placed, is_harmless_device, path_rule_matches, place};
use crate::permissions::rules::{PermissionRule, RulePattern};
use crate::tools::ToolKind;
use std::path::PathBuf;

impl SimpleCheck<'_> {
    /// 2. Files it reads (operands, input redirections, glob expansions, everything beneath a
    ///    directory read recursively): `read_file` deny rules refuse; reads outside the
    ///    workspace are concerns.
    pub(super) fn reads(&mut self) -> Result<(), Outcome> {
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
    pub(super) fn unknown_program_reads(&mut self) -> Result<(), Outcome> {
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
    pub(super) fn expand(&mut self, word: &Word, base: &std::path::Path) -> Vec<Placed> {
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
    pub(super) fn read_denies(&self) -> impl Iterator<Item = &PermissionRule> {
        self.ctx
            .policy
            .rules
            .deny
            .iter()
            .filter(|r| r.applies_to("read_file", ToolKind::Read))
            .filter(|r| !matches!(r.pattern, RulePattern::Any))
    }

    /// The read deny rule matching `p` as written or where its symbolic links lead.
    pub(super) fn read_denial(&self, p: &Placed) -> Option<String> {
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
    pub(super) fn bases(&self, word: &Word) -> Option<Vec<PathBuf>> {
        if word.tilde || word.text.starts_with('/') {
            Some(vec![self.ctx.root.to_path_buf()])
        } else {
            self.cwds.clone()
        }
    }

    /// One read of `word`, placed at `p`.
    pub(super) fn read_at(
        &mut self,
        index: Option<usize>,
        word: &Word,
        p: &Placed,
    ) -> Result<(), Outcome> {
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
        if !p.inside(&self.ctx.policy.added_dirs) && !is_harmless_device(&p.abs) {
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
    pub(super) fn recursive_read(&mut self, dir: &Placed) -> Result<(), Outcome> {
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
}
