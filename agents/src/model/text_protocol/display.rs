//! Holding back tool-call markup from streamed text.

use super::scan::{Fence, OPENERS, scan_line};

/// Decides which part of a growing assistant text may be shown now.
///
/// Text is released up to (not including) the first tool-call opener outside Markdown code
/// (fenced code, inline code and block quotes are skipped, as in the parser); from there on
/// everything is held until the turn ends. A suffix that could still become an opener (e.g. a
/// delta ending in `<tool_`) is held until the next delta decides. A reply whose first non-blank character is `{` is held whole, because it may be a
/// bare JSON call. Leading whitespace is held until something else arrives.
#[derive(Debug, Default, Clone)]
pub struct DisplayGate {
    text: String,
    shown: usize,
    /// Start of the first line not yet scanned as complete.
    line_start: usize,
    fence: Option<Fence>,
    held: bool,
}

impl DisplayGate {
    /// An empty gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything received so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The part released so far.
    pub fn shown(&self) -> &str {
        &self.text[..self.shown]
    }

    /// Adds a delta; returns the text that may be shown now (possibly empty).
    pub fn push(&mut self, delta: &str) -> String {
        self.text.push_str(delta);
        if self.held {
            return String::new();
        }
        if self.shown == 0 {
            let trimmed = self.text.trim_start();
            if trimmed.is_empty() {
                return String::new();
            }
            if trimmed.starts_with('{') {
                self.held = true;
                return String::new();
            }
        }
        // Complete lines: an opener there is final.
        while let Some(n) = self.text[self.line_start..].find('\n') {
            let end = self.line_start + n;
            let at_line_start =
                self.line_start == 0 || self.text.as_bytes()[self.line_start - 1] == b'\n';
            let line = &self.text[self.line_start..end];
            if let Some((off, _)) = scan_line(line, at_line_start, &mut self.fence, false) {
                self.held = true;
                return self.release(self.line_start + off);
            }
            self.line_start = end + 1;
        }
        // The last, still growing line: hold from an opener or a possible partial opener.
        let line = &self.text[self.line_start..];
        let mut fence = self.fence;
        let limit = match scan_line(line, true, &mut fence, true) {
            Some((off, _)) => self.line_start + off,
            None => self.text.len() - partial_opener_len(&self.text),
        };
        self.release(limit)
    }

    fn release(&mut self, limit: usize) -> String {
        if limit <= self.shown {
            return String::new();
        }
        let out = self.text[self.shown..limit].to_string();
        self.shown = limit;
        out
    }

    /// At the end of the turn: the rest of `prose` (the parsed text without call regions) that
    /// has not been shown yet. Empty when what was shown is not a prefix of `prose`.
    pub fn finish(&self, prose: &str) -> String {
        prose
            .strip_prefix(self.shown())
            .map(str::to_string)
            .unwrap_or_default()
    }
}

/// Length of the longest suffix of `text` that is a proper prefix of an opener.
fn partial_opener_len(text: &str) -> usize {
    let max = OPENERS.iter().map(|(p, _)| p.len() - 1).max().unwrap_or(0);
    (1..=max.min(text.len()))
        .rev()
        .find(|&k| {
            text.is_char_boundary(text.len() - k)
                && OPENERS
                    .iter()
                    .any(|(p, _)| p.len() > k && p.starts_with(&text[text.len() - k..]))
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(deltas: &[&str]) -> (String, DisplayGate) {
        let mut g = DisplayGate::new();
        let shown: String = deltas.iter().map(|d| g.push(d)).collect();
        (shown, g)
    }

    /// A split opener is held back, a false alarm released, a fenced opener shown.
    #[test]
    fn what_is_shown_of_split_deltas() {
        let cases: [(&[&str], &str); 3] = [
            (
                &["Reading.\n<tool_", "call>{\"name\": \"x\"}"],
                "Reading.\n",
            ),
            (&["a <to", "day> b"], "a <today> b"),
            (
                &["```\n<tool_call>\n```\n", "done"],
                "```\n<tool_call>\n```\ndone",
            ),
        ];
        for (deltas, expected) in cases {
            assert_eq!(feed(deltas).0, expected, "{deltas:?}");
        }
    }

    #[test]
    fn leading_brace_is_held() {
        let (shown, g) = feed(&["  ", "{\"a\": 1}"]);
        assert_eq!(shown, "");
        assert_eq!(g.finish("  {\"a\": 1}"), "  {\"a\": 1}");
    }
}
