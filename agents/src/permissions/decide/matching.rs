//! Matching command rules against one simple command: deny and ask rules match words in any
//! order (and through paths: `rm -rf .` after `cd /` is `rm -rf /`), allow rules must be a
//! prefix of the command as it runs.

use super::command::Ctx;
use super::paths::place;
use crate::permissions::command::classify::{Facts, is_system_program};
use crate::permissions::command::{CommandKind, SimpleCommand, Word, basename};
use crate::permissions::rules::{PermissionRule, RulePattern, SUBCOMMAND_TOOLS};

/// Result of matching a deny or ask rule against a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Match {
    /// It cannot match.
    No,
    /// A computed word or unknown cwd could make it match.
    Maybe,
    /// It matches.
    Yes,
}

/// Short option cluster (`-rf`): its letters.
fn short_cluster(t: &str) -> Option<&str> {
    let rest = t.strip_prefix('-')?;
    (!rest.is_empty() && !rest.starts_with('-') && rest.chars().all(|c| c.is_ascii_alphabetic()))
        .then_some(rest)
}

/// A word that names a path (`/`, `.`, `~/x`, `a/b`).
fn looks_like_path(t: &str) -> bool {
    t.contains('/') || t == "." || t == ".." || t.starts_with('~')
}

/// Does the rule word `r` appear among the command words `words`? (`Maybe` when computed words
/// or an unknown cwd could hide it.)
fn word_appears(ctx: &Ctx<'_>, cmd: &SimpleCommand, r: &str, words: &[Word]) -> Match {
    if let Some(letters) = short_cluster(r) {
        let present = |c: char| {
            words.iter().any(|w| {
                w.as_literal()
                    .and_then(short_cluster)
                    .is_some_and(|l| l.contains(c))
            })
        };
        return yes_or_no(letters.chars().all(present));
    }
    if r.starts_with("--") {
        let hit = words.iter().any(|w| {
            w.as_literal().is_some_and(|t| {
                t == r || (!r.contains('=') && t.split_once('=').is_some_and(|(n, _)| n == r))
            })
        });
        return yes_or_no(hit);
    }
    if words.iter().any(|w| !w.dynamic && !w.glob && w.text == r) {
        return Match::Yes;
    }
    if looks_like_path(r) {
        path_appears(ctx, cmd, r, words)
    } else {
        Match::No
    }
}

fn yes_or_no(hit: bool) -> Match {
    if hit { Match::Yes } else { Match::No }
}

/// Path-aware comparison of the rule word `r` (a path) with the path-like words of `words`,
/// resolved in every directory the command may run in.
fn path_appears(ctx: &Ctx<'_>, cmd: &SimpleCommand, r: &str, words: &[Word]) -> Match {
    let Some(rule_path) = place(r, r.starts_with('~'), ctx.root, ctx.root).map(|p| p.abs) else {
        return Match::No;
    };
    let cwds = ctx.cwds(cmd);
    let mut maybe = false;
    for w in words {
        if w.dynamic || w.text.starts_with('-') {
            continue;
        }
        // A glob matches when its fixed prefix is the rule's path (`/*` for `/`).
        let text = if w.glob {
            let cut = w.text.find(['*', '?', '[']).unwrap_or(w.text.len());
            &w.text[..cut]
        } else {
            w.text.as_str()
        };
        let text = if text.is_empty() { "." } else { text };
        let is_rule_path = |base: &std::path::Path, tilde: bool| {
            place(text, tilde, base, ctx.root).is_some_and(|p| p.abs == rule_path)
        };
        if text.starts_with('/') || w.tilde {
            if is_rule_path(ctx.root, w.tilde) {
                return Match::Yes;
            }
            continue;
        }
        match &cwds {
            None => maybe = true,
            Some(list) => {
                if list.iter().any(|base| is_rule_path(base, false)) {
                    return Match::Yes;
                }
            }
        }
    }
    if maybe { Match::Maybe } else { Match::No }
}

/// Order-insensitive match of a deny/ask rule against one word list (starting at the program).
fn restrictive_match_words(
    ctx: &Ctx<'_>,
    cmd: &SimpleCommand,
    rule: &[String],
    words: &[Word],
) -> Match {
    let Some(first) = words.first() else {
        return Match::No;
    };
    let Some(name) = first.as_literal() else {
        return Match::No;
    };
    if basename(name) != basename(&rule[0]) {
        return Match::No;
    }
    if rule.len() == 1 {
        return Match::Yes;
    }
    let args = &words[1..];
    let has_dynamic = args.iter().any(|w| w.dynamic) || cmd.dynamic_tail;
    let mut rest: &[String] = &rule[1..];
    if SUBCOMMAND_TOOLS.contains(&basename(name)) && !rule[1].starts_with('-') {
        let sub = args.iter().find(|w| !w.text.starts_with('-') || w.dynamic);
        match sub {
            Some(w) if w.dynamic => return Match::Maybe,
            Some(w) if w.text == rule[1] => rest = &rule[2..],
            _ => {
                return if has_dynamic { Match::Maybe } else { Match::No };
            }
        }
    }
    let mut result = Match::Yes;
    for r in rest {
        match word_appears(ctx, cmd, r, args) {
            Match::Yes => {}
            Match::Maybe => result = Match::Maybe,
            Match::No if has_dynamic => result = Match::Maybe,
            Match::No => return Match::No,
        }
    }
    result
}

/// Matches a deny or ask rule against a command: the command as it runs, as written (with its
/// wrappers), and — for programs that may run their arguments — every later word that could be
/// the start of a command.
pub(super) fn restrictive_match(
    ctx: &Ctx<'_>,
    rule: &PermissionRule,
    cmd: &SimpleCommand,
    facts: &Facts,
) -> Match {
    let words = match &rule.pattern {
        RulePattern::Any => return Match::Yes,
        RulePattern::Path { .. } => return Match::No,
        RulePattern::Command { words, .. } => words,
    };
    let mut best = Match::No;
    for candidate in [&cmd.argv, &cmd.raw_argv] {
        match restrictive_match_words(ctx, cmd, words, candidate) {
            Match::Yes => return Match::Yes,
            Match::Maybe => best = Match::Maybe,
            Match::No => {}
        }
    }
    if cmd.kind == CommandKind::Program && (!facts.known || cmd.runner_unresolved) {
        // The program may run a command given in its arguments (`rtk git reset --hard`,
        // `watch rm x`): a rule's command appearing later counts, fully for runners whose
        // options we could not read, as a possibility otherwise.
        let target = basename(&words[0]);
        for start in 1..cmd.argv.len() {
            let w = &cmd.argv[start];
            if w.as_literal().is_some_and(|t| basename(t) == target) {
                match restrictive_match_words(ctx, cmd, words, &cmd.argv[start..]) {
                    Match::Yes if cmd.runner_unresolved => return Match::Yes,
                    Match::Yes | Match::Maybe => best = Match::Maybe,
                    Match::No => {}
                }
            }
        }
    }
    best
}

/// Length of the prefix of `argv` an allow rule matches (`None`: no match). An allow rule must
/// match the command as it runs, word for word.
pub(super) fn allow_match(rule: &PermissionRule, cmd: &SimpleCommand) -> Option<usize> {
    let RulePattern::Command { words, prefix } = &rule.pattern else {
        return None;
    };
    let argv = &cmd.argv;
    if argv.len() < words.len() || (!prefix && argv.len() != words.len()) {
        return None;
    }
    let first = argv[0].as_literal()?;
    let name_ok = first == words[0]
        || (!words[0].contains('/') && is_system_program(first) && basename(first) == words[0]);
    if !name_ok {
        return None;
    }
    for (w, r) in argv.iter().zip(words).skip(1) {
        if w.as_literal()? != r {
            return None;
        }
    }
    if !prefix && cmd.dynamic_tail {
        return None;
    }
    Some(words.len())
}
