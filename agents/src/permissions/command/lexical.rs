//! Character-level steps of the command analysis: suspicious characters, line continuations,
//! ANSI-C quoting and lexical path normalisation.

use crate::sandbox::is_invisible;
use std::path::{Component, Path, PathBuf};

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

/// Removes backslash-newline line continuations outside single quotes, as the shell does before
/// splitting words (tree-sitter-bash would otherwise split `r\⏎m` into two words).
pub(super) fn join_continuations(src: &str) -> std::borrow::Cow<'_, str> {
    if !src.contains("\\\n") {
        return std::borrow::Cow::Borrowed(src);
    }
    #[derive(PartialEq)]
    enum State {
        Normal,
        Single,
        AnsiC,
        Double,
        Comment,
    }
    let mut out = String::with_capacity(src.len());
    let mut state = State::Normal;
    let mut chars = src.chars().peekable();
    let mut prev: Option<char> = None;
    while let Some(c) = chars.next() {
        match state {
            State::Normal | State::Double => {
                if c == '\\' {
                    match chars.peek() {
                        Some('\n') => {
                            chars.next();
                            continue;
                        }
                        Some(&next) => {
                            out.push(c);
                            out.push(next);
                            chars.next();
                            prev = Some(next);
                            continue;
                        }
                        None => {}
                    }
                } else if state == State::Normal {
                    if c == '\'' {
                        state = if prev == Some('$') {
                            State::AnsiC
                        } else {
                            State::Single
                        };
                    } else if c == '"' {
                        state = State::Double;
                    } else if c == '#' && prev.is_none_or(|p| p.is_whitespace() || p == ';') {
                        state = State::Comment;
                    }
                } else if c == '"' {
                    state = State::Normal;
                }
            }
            State::Single => {
                if c == '\'' {
                    state = State::Normal;
                }
            }
            State::AnsiC => {
                if c == '\\' {
                    out.push(c);
                    if let Some(next) = chars.next() {
                        out.push(next);
                    }
                    prev = None;
                    continue;
                }
                if c == '\'' {
                    state = State::Normal;
                }
            }
            State::Comment => {
                if c == '\n' {
                    state = State::Normal;
                }
            }
        }
        out.push(c);
        prev = Some(c);
    }
    std::borrow::Cow::Owned(out)
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
        match e {
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'e' | 'E' => out.push('\u{1b}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            '\\' | '\'' | '"' | '?' => out.push(e),
            '0'..='7' => {
                let mut value = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(value & 0xff).unwrap_or('\u{fffd}'));
            }
            'x' | 'u' | 'U' => {
                let max = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut value = 0u32;
                let mut n = 0;
                while n < max {
                    match chars.peek().and_then(|d| d.to_digit(16)) {
                        Some(d) => {
                            value = value.wrapping_mul(16).wrapping_add(d);
                            chars.next();
                            n += 1;
                        }
                        None => break,
                    }
                }
                if n == 0 {
                    out.push('\\');
                    out.push(e);
                } else {
                    out.push(char::from_u32(value).unwrap_or('\u{fffd}'));
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
