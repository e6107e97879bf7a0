//! Reading shell words: quote removal, escapes, and which parts are computed at run time
//! (their substitutions are walked as commands).

use super::lexical::decode_ansi_c;
use super::walker::{Walker, children, children_with_fields, named_children, node_text};
use super::{Assignment, Word};
use tree_sitter::Node;

/// Accumulates one word from its pieces.
#[derive(Default)]
pub(super) struct WordBuf {
    text: String,
    dynamic: bool,
    glob: bool,
    tilde: bool,
    started: bool,
}

impl WordBuf {
    pub(super) fn finish(self) -> Word {
        Word {
            text: self.text,
            dynamic: self.dynamic,
            glob: self.glob,
            tilde: self.tilde,
        }
    }

    /// Unquoted text: backslash escapes, glob characters, brace expansion, leading tilde.
    fn unquoted(&mut self, s: &str) {
        let at_start = !self.started;
        self.started = true;
        let mut chars = s.chars().peekable();
        let mut first = at_start;
        let mut brace_open = false;
        let mut brace_list = false;
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    if let Some(n) = chars.next() {
                        self.text.push(n);
                    }
                }
                '*' | '?' | '[' => {
                    self.glob = true;
                    self.text.push(c);
                }
                '~' if first => {
                    self.tilde = true;
                    self.text.push(c);
                }
                '{' => {
                    brace_open = true;
                    self.text.push(c);
                }
                ',' if brace_open => {
                    brace_list = true;
                    self.text.push(c);
                }
                '.' if brace_open && chars.peek() == Some(&'.') => {
                    brace_list = true;
                    self.text.push(c);
                }
                '}' if brace_open => {
                    if brace_list {
                        // Brace expansion turns one word into several.
                        self.dynamic = true;
                    }
                    self.text.push(c);
                }
                _ => self.text.push(c),
            }
            first = false;
        }
    }

    /// Text inside double quotes: only `\$`, `` \` ``, `\"`, `\\` and backslash-newline are escapes.
    fn double_quoted(&mut self, s: &str) {
        self.started = true;
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.peek() {
                    Some('$' | '`' | '"' | '\\') => {
                        self.text.push(chars.next().unwrap_or('\\'));
                    }
                    Some('\n') => {
                        chars.next();
                    }
                    _ => self.text.push('\\'),
                }
            } else {
                self.text.push(c);
            }
        }
    }

    fn literal(&mut self, s: &str) {
        self.started = true;
        self.text.push_str(s);
    }

    fn computed(&mut self, source: &str) {
        self.started = true;
        self.dynamic = true;
        self.text.push_str(source);
    }
}

/// `text` without the `open` and `close` quotes (unchanged when they are missing).
fn strip_quotes<'s>(text: &'s str, open: &str, close: &str) -> &'s str {
    text.strip_prefix(open)
        .and_then(|t| t.strip_suffix(close))
        .unwrap_or(text)
}

impl Walker<'_> {
    /// Builds one word from adjacent nodes.
    pub(super) fn word_from(&mut self, nodes: &[Node<'_>], src: &str) -> Word {
        let mut buf = WordBuf::default();
        self.append_all(&mut buf, nodes, src);
        buf.finish()
    }

    /// Adds adjacent nodes to one word (`$"…"`: the `$` is dropped).
    fn append_all(&mut self, buf: &mut WordBuf, nodes: &[Node<'_>], src: &str) {
        for (i, node) in nodes.iter().enumerate() {
            // `$"…"` is a locale-translated double-quoted string; the `$` is not literal.
            if !node.is_named()
                && node_text(*node, src) == "$"
                && nodes.get(i + 1).is_some_and(|next| {
                    next.kind() == "string" && next.start_byte() == node.end_byte()
                })
            {
                continue;
            }
            self.append(buf, *node, src);
        }
    }

    /// Adds `node` to the word in `buf`, walking the substitutions inside it.
    pub(super) fn append(&mut self, buf: &mut WordBuf, node: Node<'_>, src: &str) {
        let text = node_text(node, src);
        if node.is_error() || node.is_missing() {
            buf.computed(text);
            self.misparsed(format!(
                "syntax the bash parser cannot read near `{}`",
                text.trim()
            ));
            self.walk_children(node, src);
            return;
        }
        if !node.is_named() {
            buf.unquoted(text);
            return;
        }
        match node.kind() {
            "word"
            | "regex"
            | "extglob_pattern"
            | "special_variable_name"
            | "variable_name"
            | "test_operator" => buf.unquoted(text),
            "number" if node.named_child_count() == 0 => buf.unquoted(text),
            "raw_string" => buf.literal(strip_quotes(text, "'", "'")),
            "ansi_c_string" => buf.literal(&decode_ansi_c(strip_quotes(text, "$'", "'"))),
            "string" => self.double_quoted(buf, node, src),
            "translated_string" => match named_children(node).first() {
                Some(string) => self.double_quoted(buf, *string, src),
                None => buf.literal(text.trim_start_matches('$').trim_matches('"')),
            },
            "concatenation" | "command_name" => self.append_all(buf, &children(node), src),
            "number"
            | "simple_expansion"
            | "expansion"
            | "arithmetic_expansion"
            | "brace_expression"
            | "array" => {
                buf.computed(text);
                self.walk_children(node, src);
            }
            "command_substitution" | "process_substitution" => {
                buf.computed(text);
                self.walk_scoped(node, src, true);
            }
            _ => {
                buf.computed(text);
                self.opaque(text, format!("unrecognised word syntax `{}`", node.kind()));
                self.walk_children(node, src);
            }
        }
    }

    /// A double-quoted string: its text with the few escapes double quotes allow, and the
    /// expansions inside it.
    fn double_quoted(&mut self, buf: &mut WordBuf, node: Node<'_>, src: &str) {
        buf.started = true;
        let start = node.start_byte() + 1;
        let end = node.end_byte().saturating_sub(1).max(start);
        let mut pos = start;
        for child in named_children(node) {
            if child.start_byte() > pos {
                buf.double_quoted(src.get(pos..child.start_byte()).unwrap_or(""));
            }
            if child.kind() == "string_content" {
                buf.double_quoted(node_text(child, src));
            } else {
                self.append(buf, child, src);
            }
            pos = child.end_byte().max(pos);
        }
        if end > pos {
            buf.double_quoted(src.get(pos..end).unwrap_or(""));
        }
    }

    /// Reads `NAME=VALUE`. A literal value holding `$(…)` or backticks is opaque: a later
    /// `eval` or arithmetic expansion could run it.
    pub(super) fn assignment(&mut self, node: Node<'_>, src: &str) -> Assignment {
        let name = node
            .child_by_field_name("name")
            .map(|n| node_text(n, src).to_string())
            .unwrap_or_default();
        let mut value_nodes = Vec::new();
        let mut after_eq = false;
        for (field, child) in children_with_fields(node) {
            if field == Some("value") || (after_eq && field.is_none()) {
                value_nodes.push(child);
            }
            if !child.is_named() && node_text(child, src).ends_with('=') {
                after_eq = true;
            }
        }
        let value = self.word_from(&value_nodes, src);
        let value_text = &value.text;
        if !value.dynamic && (value_text.contains("$(") || value_text.contains('`')) {
            self.opaque(
                node_text(node, src),
                "the value holds command-substitution text that a later eval or arithmetic \
                 expansion could run",
            );
        }
        Assignment { name, value }
    }
}
