//! Character-level steps of the command analysis: suspicious characters, line continuations,
//! ANSI-C quoting and lexical path normalisation.

use crate::sandbox::is_invisible;
use std::iter::Peekable;
use std::path::{Component, Path, PathBuf};
use std::str::Chars;

/// Lists invisible, bidirectional and control characters (other than tab and newline) and
/// non-ASCII spaces in `command`.
pub(super) fn suspicious_characters(command: &str) -> Vec<String> {
    let mut warnings = Vec::new();
    for (offset, c) in command.char_indices() {
        let what = if c == '\r' {
            Some("a raw carriage return (bash keeps it inside the word; displays hide it)")
        } else if c.is_control() && c != '\n' && c != '\t' {
            Some("a control character")
        } else if c.is_whitespace() && !c.is_ascii() {
            Some("a non-ASCII space (bash does not split words on it)")
        } else if is_invisible(c) {
            Some("an invisible or bidirectional formatting character")
        } else {
            None
        };
        if let Some(what) = what {
            warnings.push(format!(
                "the command contains {what} (U+{:04X}) at byte {offset}",
                c as u32
            ));
        }
    }
    warnings
}

/// Where [`join_continuations`] is in the shell's quoting.
#[derive(Clone, Copy, PartialEq)]
enum Quoting {
    Normal,
    Single,
    AnsiC,
    Double,
    Comment,
}

impl Quoting {
    /// The quoting after the character `c` (not an escape), which follows `prev`.
    fn after(self, c: char, prev: Option<char>) -> Quoting {
        match (self, c) {
            (Quoting::Normal, '\'') if prev == Some('$') => Quoting::AnsiC,
            (Quoting::Normal, '\'') => Quoting::Single,
            (Quoting::Normal, '"') => Quoting::Double,
            (Quoting::Normal, '#') if prev.is_none_or(|p| p.is_whitespace() || p == ';') => {
                Quoting::Comment
            }
            (Quoting::Double, '"') | (Quoting::Single | Quoting::AnsiC, '\'') => Quoting::Normal,
            (Quoting::Comment, '\n') => Quoting::Normal,
            (state, _) => state,
        }
    }
}

/// Removes backslash-newline line continuations outside single quotes, as the shell does before
/// splitting words (tree-sitter-bash would otherwise split `r\⏎m` into two words).
pub(super) fn join_continuations(src: &str) -> std::borrow::Cow<'_, str> {
    if !src.contains("\\\n") {
        return std::borrow::Cow::Borrowed(src);
    }
    let mut out = String::with_capacity(src.len());
    let mut state = Quoting::Normal;
    let mut chars = src.chars();
    let mut prev: Option<char> = None;
    while let Some(c) = chars.next() {
        if c == '\\' && matches!(state, Quoting::Normal | Quoting::Double) {
            match chars.next() {
                Some('\n') => continue,
                Some(next) => {
                    out.push(c);
                    out.push(next);
                    prev = Some(next);
                    continue;
                }
                None => {}
            }
        } else if c == '\\' && state == Quoting::AnsiC {
            // `\'` does not end `$'…'`.
            out.push(c);
            out.extend(chars.next());
            prev = None;
            continue;
        } else {
            state = state.after(c, prev);
        }
        out.push(c);
        prev = Some(c);
    }
    std::borrow::Cow::Owned(out)
}

/// The character of a one-letter ANSI-C escape (`\n`, `\t`, `\\`, …).
fn simple_escape(e: char) -> Option<char> {
    Some(match e {
        'a' => '\u{7}',
        'b' => '\u{8}',
        'e' | 'E' => '\u{1b}',
        'f' => '\u{c}',
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        'v' => '\u{b}',
        '\\' | '\'' | '"' | '?' => e,
        _ => return None,
    })
}

/// Reads up to `max` more digits of `radix` onto `value`: the value and how many were read.
fn read_digits(
    chars: &mut Peekable<Chars<'_>>,
    radix: u32,
    max: usize,
    value: u32,
) -> (u32, usize) {
    let mut value = value;
    let mut n = 0;
    while n < max {
        let Some(d) = chars.peek().and_then(|d| d.to_digit(radix)) else {
            break;
        };
        value = value.wrapping_mul(radix).wrapping_add(d);
        chars.next();
        n += 1;
    }
    (value, n)
}

/// Decodes the body of an ANSI-C quoted string (`$'…'` without the quotes), per the bash manual
/// ("ANSI-C Quoting").
pub(crate) fn decode_ansi_c(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        if let Some(decoded) = simple_escape(e) {
            out.push(decoded);
            continue;
        }
        match e {
            '0'..='7' => {
                let (value, _) = read_digits(&mut chars, 8, 2, e.to_digit(8).unwrap_or(0));
                out.push(char::from_u32(value & 0xff).unwrap_or('\u{fffd}'));
            }
            'x' | 'u' | 'U' => {
                let max = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                match read_digits(&mut chars, 16, max, 0) {
                    (_, 0) => {
                        out.push('\\');
                        out.push(e);
                    }
                    (value, _) => out.push(char::from_u32(value).unwrap_or('\u{fffd}')),
                }
            }
            'c' => {
                if let Some(x) = chars.next() {
                    out.push(char::from_u32((x as u32) & 0x1f).unwrap_or('\u{fffd}'));
                }
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    out
}

/// Lexically normalises a path: removes `.` and resolves `..` against the preceding component
/// (never above the root of an absolute path). A relative path keeps leading `..`.
pub(crate) fn normalize_path(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::CurDir => {}
            Component::ParentDir => {
                let last_is_normal =
                    matches!(out.components().next_back(), Some(Component::Normal(_)));
                if last_is_normal {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}
