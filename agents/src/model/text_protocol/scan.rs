//! Finding tool-call openers in assistant text while skipping Markdown code and quotes.
//!
//! A `<tool_call>` (or `<function=`, `[TOOL_CALLS]`, …) that sits inside a fenced code block,
//! an inline code span or a block-quote line is documentation, not a call. Fences follow
//! CommonMark (<https://spec.commonmark.org/0.31.2/#fenced-code-blocks>): a line indented at
//! most three spaces starting with three or more backticks or tildes opens a fence, which a line
//! of at least as many of the same character closes. Inline code spans are matched within one
//! line (a run of N backticks closed by the next run of exactly N).
//!
//! The same line scanner drives the parser (whole text) and the streaming display gate (a
//! growing prefix), so both agree on where the first call starts.

/// What an opener starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opener {
    /// `<tool_call>`: a block holding JSON or a Qwen3-coder `<function=…>` call.
    Block,
    /// `<function=NAME>` without an outer `<tool_call>` (Qwen3-coder XML).
    Function,
    /// `[TOOL_CALLS]` (Mistral).
    Mistral,
    /// A closing tag or parameter of a call whose opener is missing (`</function>`, …).
    Orphan,
}

/// Opener texts and what they start. All ASCII.
pub const OPENERS: &[(&str, Opener)] = &[
    ("<tool_call>", Opener::Block),
    ("<function=", Opener::Function),
    ("[TOOL_CALLS]", Opener::Mistral),
    ("<parameter=", Opener::Orphan),
    ("</parameter>", Opener::Orphan),
    ("</function>", Opener::Orphan),
    ("</tool_call>", Opener::Orphan),
];

/// An open code fence: its character and run length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence {
    ch: u8,
    len: usize,
}

/// Returns the opener starting at `rest`, if any.
pub fn opener_at(rest: &str) -> Option<(&'static str, Opener)> {
    OPENERS
        .iter()
        .copied()
        .find(|(pat, _)| rest.starts_with(pat))
}

fn fence_run(line: &str) -> Option<(u8, usize, &str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let ch = *rest.as_bytes().first()?;
    if ch != b'`' && ch != b'~' {
        return None;
    }
    let len = rest.bytes().take_while(|&c| c == ch).count();
    if len < 3 {
        return None;
    }
    Some((ch, len, &rest[len..]))
}

fn opening_fence(line: &str) -> Option<Fence> {
    let (ch, len, info) = fence_run(line)?;
    if ch == b'`' && info.contains('`') {
        return None;
    }
    Some(Fence { ch, len })
}

fn closes_fence(line: &str, fence: Fence) -> bool {
    matches!(fence_run(line), Some((ch, len, rest)) if ch == fence.ch && len >= fence.len && rest.trim().is_empty())
}

fn is_block_quote(line: &str) -> bool {
    let indent = line.len() - line.trim_start_matches(' ').len();
    indent <= 3 && line[indent..].starts_with('>')
}

/// Scans one line (without its `\n`) for the first opener outside inline code.
///
/// `at_line_start` says whether `line` begins at a real line start (fences and block quotes are
/// only recognised there). `fence` is the fence state before the line; it is updated when the
/// line opens or closes a fence. With `partial` (the line may still grow), an inline code span
/// whose closing backticks end the text is not trusted, because more backticks may follow.
pub fn scan_line(
    line: &str,
    at_line_start: bool,
    fence: &mut Option<Fence>,
    partial: bool,
) -> Option<(usize, Opener)> {
    if let Some(open) = *fence {
        if at_line_start && closes_fence(line, open) {
            *fence = None;
        }
        return None;
    }
    if at_line_start {
        if let Some(f) = opening_fence(line) {
            *fence = Some(f);
            return None;
        }
        if is_block_quote(line) {
            return None;
        }
    }
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'`' => {
                let run = b[i..].iter().take_while(|&&c| c == b'`').count();
                match closing_backticks(b, i + run, run) {
                    Some(close) if !(partial && close + run == b.len()) => i = close + run,
                    _ => i += run,
                }
            }
            b'<' | b'[' => {
                if let Some((_, kind)) = opener_at(&line[i..]) {
                    return Some((i, kind));
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    None
}

/// Start of the next run of exactly `run` backticks at or after `from`.
fn closing_backticks(b: &[u8], from: usize, run: usize) -> Option<usize> {
    let mut i = from;
    while i < b.len() {
        if b[i] == b'`' {
            let n = b[i..].iter().take_while(|&&c| c == b'`').count();
            if n == run {
                return Some(i);
            }
            i += n;
        } else {
            i += 1;
        }
    }
    None
}

/// Walks a complete text line by line, yielding openers outside code and quotes.
#[derive(Debug, Clone)]
pub struct ProseScanner<'a> {
    text: &'a str,
    pos: usize,
    fence: Option<Fence>,
}

impl<'a> ProseScanner<'a> {
    /// A scanner at the start of `text`.
    pub fn new(text: &'a str) -> Self {
        ProseScanner {
            text,
            pos: 0,
            fence: None,
        }
    }

    /// Continues after a consumed call region ending at byte `pos` (outside any fence).
    pub fn resume_at(&mut self, pos: usize) {
        self.pos = pos.min(self.text.len());
        self.fence = None;
    }

    /// The next opener: its byte offset and kind. The scanner moves past it.
    pub fn next_opener(&mut self) -> Option<(usize, Opener)> {
        let text = self.text;
        while self.pos < text.len() {
            let start = self.pos;
            let at_line_start = start == 0 || text.as_bytes()[start - 1] == b'\n';
            let end = text[start..].find('\n').map_or(text.len(), |n| start + n);
            let line = &text[start..end];
            if let Some((off, kind)) = scan_line(line, at_line_start, &mut self.fence, false) {
                let at = start + off;
                let len = opener_at(&text[at..]).map_or(1, |(pat, _)| pat.len());
                self.pos = at + len;
                return Some((at, kind));
            }
            self.pos = end + 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn openers(text: &str) -> Vec<(usize, Opener)> {
        let mut s = ProseScanner::new(text);
        std::iter::from_fn(|| s.next_opener()).collect()
    }

    #[test]
    fn skips_fences_inline_code_and_quotes() {
        let text = "a `<tool_call>` b\n```\n<tool_call>\n```\n> <tool_call>\n~~~~\n```\n<tool_call>\n~~~~\nx <tool_call>";
        assert_eq!(openers(text), vec![(text.len() - 11, Opener::Block)]);
    }

    #[test]
    fn unmatched_backtick_is_literal() {
        assert_eq!(openers("a ` <function=x>"), vec![(4, Opener::Function)]);
    }

    #[test]
    fn partial_inline_span_at_end_is_not_trusted() {
        let mut fence = None;
        assert_eq!(
            scan_line("`<tool_call>`", true, &mut fence, true),
            Some((1, Opener::Block))
        );
        assert_eq!(scan_line("`<tool_call>`", true, &mut fence, false), None);
    }
}
