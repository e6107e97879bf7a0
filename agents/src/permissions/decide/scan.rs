//! The fail-closed scan of text the analysis could not read (opaque parts, command lines over
//! the cap): is the program name of a deny rule anywhere in it?

use crate::permissions::PermissionPolicy;
use crate::permissions::command::{basename, decode_ansi_c};
use crate::permissions::rules::{RulePattern, is_command_tool};
use std::iter::Peekable;
use std::str::Chars;

/// The first deny rule for commands whose program name appears anywhere in `text` (any bare
/// `run_command` deny rule matches everything).
pub(super) fn deny_could_appear(policy: &PermissionPolicy, text: &str) -> Option<String> {
    let mut toks: Option<Vec<String>> = None;
    for rule in policy
        .rules
        .deny
        .iter()
        .filter(|r| is_command_tool(&r.tool))
    {
        match &rule.pattern {
            RulePattern::Any => return Some(rule.to_string()),
            RulePattern::Command { words, .. } => {
                let target = basename(&words[0]);
                let toks = toks.get_or_insert_with(|| tokens(text));
                if toks.iter().any(|t| basename(t) == target) {
                    return Some(rule.to_string());
                }
            }
            RulePattern::Path { .. } => {}
        }
    }
    None
}

/// Command-like tokens of `text` for the fail-closed scan: plain splitting plus
/// [`scan_words`], whose words are split again at punctuation (so `alias.x=!rm` and
/// `system("rm` yield `rm`).
fn tokens(text: &str) -> Vec<String> {
    let mut all = plain_tokens(text);
    let mut words = Vec::new();
    scan_words(text, 0, &mut words);
    for w in words {
        all.extend(plain_tokens(&w));
        all.push(w);
    }
    // Escapes that some layer may decode later (`$'\x72\x6d'` nested in quotes that the scan
    // above cannot unwind, `printf '\162\155'`): decode every `\x..`/`\NNN` sequence of the
    // whole text and split again. More tokens only make the scan stricter.
    if text.contains('\\') {
        let decoded = decode_ansi_c(&text.replace("\\\\", "\\"));
        all.extend(plain_tokens(&decoded));
    }
    all
}

/// `text` split at white space and shell punctuation, quotes left in place.
fn plain_tokens(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || ";&|()<>{}$`'\"\\=!,[]".contains(c))
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// Splits text the way the shell would before running it ([`shell_split`]); words that
/// themselves look like command strings (`bash -c '…'` arguments) are split again, up to 4
/// levels.
fn scan_words(text: &str, depth: usize, out: &mut Vec<String>) {
    for w in shell_split(text) {
        if depth < 4
            && w.chars()
                .any(|c| c.is_whitespace() || ";&|()<>`'\"\\$".contains(c))
        {
            scan_words(&w, depth + 1, out);
        }
        out.push(w);
    }
}

/// Splits text like the shell: quotes removed, `$'…'` decoded, backslash-newline joined,
/// operators (`;&|()<>{}` and backticks) separating words.
fn shell_split(text: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(x) => cur.push(x),
            },
            '\'' => cur.extend(chars.by_ref().take_while(|x| *x != '\'')),
            '"' => double_quoted(&mut chars, &mut cur),
            '$' if chars.peek() == Some(&'\'') => {
                chars.next();
                cur.push_str(&decode_ansi_c(&ansi_c_body(&mut chars)));
            }
            '$' if chars.peek() == Some(&'"') => {}
            c if c.is_whitespace() || ";&|()<>`{}".contains(c) => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            other => cur.push(other),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// The rest of a double-quoted string (after the `"`): `\"`, `\\`, `\$`, `` \` `` escaped,
/// backslash-newline removed.
fn double_quoted(chars: &mut Peekable<Chars<'_>>, cur: &mut String) {
    while let Some(x) = chars.next() {
        match x {
            '"' => break,
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(y @ ('"' | '\\' | '$' | '`')) => cur.push(y),
                Some(y) => {
                    cur.push('\\');
                    cur.push(y);
                }
            },
            other => cur.push(other),
        }
    }
}

/// The body of `$'…'` (after the `'`), escapes kept for [`decode_ansi_c`].
fn ansi_c_body(chars: &mut Peekable<Chars<'_>>) -> String {
    let mut body = String::new();
    while let Some(x) = chars.next() {
        match x {
            '\'' => break,
            '\\' => {
                body.push('\\');
                if let Some(y) = chars.next() {
                    body.push(y);
                }
            }
            other => body.push(other),
        }
    }
    body
}
