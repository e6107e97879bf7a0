//! Shortening text by characters (never inside a UTF-8 sequence).
//!
//! Every place that shortens text — tool results for the model, the status table, transcript
//! views, worker reports, one-line call summaries — cuts with [`clip`] (keep the start),
//! [`last_chars`] (keep the end) or [`truncate_middle`] (both) and adds its own marker.
//!
//! Text the model controls (answers, plans, titles, tool results, transcripts) goes through
//! [`for_terminal`] before it is printed to a terminal.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` made safe to print on a terminal: every character that a terminal would act on
/// instead of showing is shown as a visible escape, so model-controlled text cannot write the
/// clipboard (OSC 52), disguise a link (OSC 8), clear the screen (`ESC[2J`), move the cursor or
/// reorder what the user reads.
///
/// - C0 controls (U+0000–U+001F) except `\n` and `\t`, and DEL (U+007F), become `\x1b`-style
///   escapes (two hex digits); a `\r` directly before `\n` is dropped (CRLF line ends).
/// - C1 controls (U+0080–U+009F; U+009B is a one-character CSI) and the bidirectional
///   embedding, override and isolate controls (U+202A–U+202E, U+2066–U+2069) become
///   `\u{202e}`-style escapes.
///
/// Returns the input unchanged (borrowed) when it holds none of these. JSON output must not go
/// through this: its serializer escapes controls itself and must stay exact.
pub fn for_terminal(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() == Some(&'\n') {
            continue;
        }
        if !needs_escape(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// Whether [`for_terminal`] shows `c` as an escape.
fn needs_escape(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

/// The first `max_chars` characters of `text`, and how many characters were cut after them
/// (0 when `text` fits).
pub fn clip(text: &str, max_chars: usize) -> (&str, usize) {
    match text.char_indices().nth(max_chars) {
        None => (text, 0),
        Some((end, _)) => (&text[..end], text[end..].chars().count()),
    }
}

/// The last `max_chars` characters of `text` (all of it when shorter).
pub fn last_chars(text: &str, max_chars: usize) -> &str {
    let total = text.chars().count();
    let start = text
        .char_indices()
        .nth(total.saturating_sub(max_chars))
        .map_or(text.len(), |(i, _)| i);
    &text[start..]
}

/// The first line of `text` cut to `max_chars` characters, with `…` appended when anything was
/// cut (characters or further lines).
pub fn first_line_clipped(text: &str, max_chars: usize) -> String {
    let mut lines = text.lines();
    let line = lines.next().unwrap_or("");
    let (kept, cut) = clip(line, max_chars);
    let mut out = kept.to_string();
    if cut > 0 || lines.next().is_some() {
        out.push('…');
    }
    out
}

/// Shortens `text` to at most about `max_chars` characters, keeping the first 60% and the tail,
/// with a marker line in between saying how many characters were cut. Text within the limit is
/// returned unchanged.
pub fn truncate_middle(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return text.to_string();
    }
    let head_chars = max_chars * 6 / 10;
    let tail_chars = max_chars - head_chars;
    let cut = total - head_chars - tail_chars;
    let (head, _) = clip(text, head_chars);
    let tail = last_chars(text, tail_chars);
    format!("{head}\n[… {cut} characters cut from the middle of this output …]\n{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_text_shows_escapes_instead_of_running_them() {
        let hostile = "a\x1b]52;c;ZXZpbA==\x07b\x1b[2J\u{9b}31m\u{202e}txt.exe\u{2066}";
        let safe = for_terminal(hostile);
        assert_eq!(
            safe,
            "a\\x1b]52;c;ZXZpbA==\\x07b\\x1b[2J\\u{9b}31m\\u{202e}txt.exe\\u{2066}"
        );
        assert!(!safe.chars().any(needs_escape));
        assert_eq!(for_terminal("line\r\nnext\rover"), "line\nnext\\x0dover");
        assert_eq!(for_terminal("del\x7f nul\0"), "del\\x7f nul\\x00");
    }

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        let text = "héllo\n\tworld — ✓ \u{200f}";
        assert!(matches!(for_terminal(text), Cow::Borrowed(t) if t == text));
    }

    #[test]
    fn clip_counts_characters_not_bytes() {
        assert_eq!(clip("héllo", 2), ("hé", 3));
        assert_eq!(clip("héllo", 5), ("héllo", 0));
        assert_eq!(clip("", 3), ("", 0));
        assert_eq!(last_chars("héllo", 4), "éllo");
        assert_eq!(last_chars("hé", 5), "hé");
        assert_eq!(last_chars("hé", 0), "");
    }

    #[test]
    fn first_line_marks_cut_text_and_further_lines() {
        assert_eq!(first_line_clipped("ls\nrm x", 10), "ls…");
        assert_eq!(first_line_clipped("abcdef", 3), "abc…");
        assert_eq!(first_line_clipped("abc", 3), "abc");
    }

    #[test]
    fn truncate_keeps_head_and_tail_with_marker() {
        let text: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let out = truncate_middle(&text, 100);
        assert!(out.starts_with(&text[..60]));
        assert!(out.ends_with(&text[960..]));
        assert!(out.contains("900 characters cut"));
        assert_eq!(truncate_middle("short", 100), "short");
    }
}
