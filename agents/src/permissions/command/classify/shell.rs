//! Shell builtins that change how later commands run: declarations (`export`, `declare`,
//! `local`, `readonly`, `typeset`, `unset`) and `set` (bash(1), "SHELL BUILTIN COMMANDS").

use super::{ConcernKind, Facts, SimpleCommand, is_inert_variable, is_sensitive_shell_variable};

/// Declaration options that neither print nor change anything but attributes we do not care
/// about (`-a` array, `-r` read-only, `-x` export — exports are checked by name, …).
const HARMLESS_DECLARATION_LETTERS: &[char] = &['a', 'A', 'r', 'l', 'u', 'g', 't', 'x'];

/// `export`, `declare`, `typeset`, `local`, `readonly`, `unset`: read-only unless they
/// export or change a variable later commands use, or list variables.
pub(super) fn declaration(facts: &mut Facts, cmd: &SimpleCommand) {
    facts.known = true;
    facts.read_only = true;
    let keyword = cmd.argv.first().map(|w| w.text.as_str()).unwrap_or("");
    let mut exports = keyword == "export";
    let mut names = 0;
    for (i, w) in cmd.argv.iter().enumerate().skip(1) {
        let t = w.text.as_str();
        if (t.starts_with('-') || t.starts_with('+')) && t.len() > 1 && !t.contains('=') {
            let letters = &t[1..];
            if letters.contains('x') {
                exports = true;
            }
            let harmless = letters
                .chars()
                .all(|c| HARMLESS_DECLARATION_LETTERS.contains(&c));
            if !harmless {
                facts.concern(
                    Some(i),
                    ConcernKind::StateChange,
                    format!("`{keyword} {t}` prints or changes variables or functions"),
                );
            }
            continue;
        }
        names += 1;
        let name = t.split_once('=').map_or(t, |(n, _)| n);
        let unsafe_name = if exports {
            !is_inert_variable(name)
        } else {
            is_sensitive_shell_variable(name)
        };
        if unsafe_name {
            let what = if exports { "exports" } else { "changes" };
            facts.concern(
                Some(i),
                ConcernKind::StateChange,
                format!("`{keyword}` {what} `{name}`, which changes how later commands run"),
            );
        }
    }
    if names == 0 && keyword != "local" {
        facts.concern(
            Some(0),
            ConcernKind::StateChange,
            format!("`{keyword}` without names lists variables (including secrets)"),
        );
    }
}

/// `set`: `-a`/`-k` (and `-o allexport`/`keyword`) export later assignments; `set` alone
/// lists variables.
pub(super) fn set_builtin(facts: &mut Facts, cmd: &SimpleCommand) {
    facts.read_only = true;
    if cmd.argv.len() == 1 {
        facts.concern(
            Some(0),
            ConcernKind::StateChange,
            "`set` without arguments lists variables (including secrets)",
        );
        return;
    }
    let mut i = 1;
    while i < cmd.argv.len() {
        let t = cmd.argv[i].text.as_str();
        if t == "--" || t == "-" || !(t.starts_with('-') || t.starts_with('+')) {
            break;
        }
        let letters = &t[1..];
        if letters.contains('a') || letters.contains('k') {
            facts.concern(
                Some(i),
                ConcernKind::StateChange,
                "`set -a`/`set -k` exports later assignments to every command",
            );
        }
        if letters.contains('o') {
            let option = cmd.argv.get(i + 1).map(|w| w.text.as_str()).unwrap_or("");
            if matches!(option, "allexport" | "keyword" | "") {
                facts.concern(
                    Some(i),
                    ConcernKind::StateChange,
                    format!("`set -o {option}` changes how later commands run"),
                );
            }
            i += 1;
        }
        i += 1;
    }
}
