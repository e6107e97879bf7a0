//! A bounded, lenient JSON reader for tool-call JSON written as plain text by a model.
//!
//! It reads standard JSON (RFC 8259, <https://www.rfc-editor.org/rfc/rfc8259>) and, instead of
//! failing, accepts a small fixed set of deviations that models are known to produce. Every
//! deviation it accepts is recorded as a [`Repair`], so the caller can decide per tool whether
//! the repaired value may be used (see [`Repair::guesses_content`]). It is only used after a
//! strict `serde_json` parse of the same text has failed.

use serde_json::{Map, Value};

/// Deepest nesting of objects and arrays accepted.
const MAX_DEPTH: usize = 64;

/// A deterministic fix applied to a tool call written as text before it could be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Repair {
    /// A comma directly before `}` or `]` was dropped.
    TrailingComma,
    /// A literal two-character `\n`, `\t` or `\r` between JSON tokens was read as whitespace.
    LiteralEscapeBetweenTokens,
    /// A raw control character (e.g. a newline) inside a string was kept as that character.
    RawControlCharInString,
    /// A single-quoted string without escapes was read as a double-quoted one.
    SingleQuotes,
    /// An object key without its opening quote (or without quotes) was read as a string.
    UnquotedKey,
    /// An invalid backslash escape inside a string (e.g. `\d`) was kept literally.
    InvalidEscape,
    /// JSON cut off after a complete value had its open objects/arrays closed.
    ClosedTruncatedJson,
    /// A Markdown code fence around the JSON inside a block was ignored.
    StrippedCodeFence,
    /// A trailing special token such as `<|call|>` or `</s>` was ignored.
    StrippedSpecialToken,
    /// The block had no closing `</tool_call>` (or `</function>`), but its content was complete.
    MissingClosingTag,
    /// Prose around the single JSON object inside a block was ignored.
    ProseAroundJson,
    /// `arguments` was a JSON string holding a JSON object and was decoded.
    StringifiedArguments,
    /// An XML parameter without `</parameter>` ended at the following `</function>`.
    MissingParameterClose,
    /// A Qwen3-coder XML call cut off after its last complete parameter was used as is.
    TruncatedXmlCall,
    /// Identical calls in one block were run once.
    DuplicateCallDropped,
}

impl Repair {
    /// Whether the repair guesses content the model may not have meant (so it is only applied
    /// to read-only tools; mutating tools get an error instead).
    pub fn guesses_content(self) -> bool {
        matches!(
            self,
            Repair::SingleQuotes
                | Repair::UnquotedKey
                | Repair::InvalidEscape
                | Repair::ClosedTruncatedJson
                | Repair::TruncatedXmlCall
        )
    }

    /// A short description for logs and error messages.
    pub fn describe(self) -> &'static str {
        match self {
            Repair::TrailingComma => "dropped a trailing comma",
            Repair::LiteralEscapeBetweenTokens => {
                "read a literal `\\n` between JSON tokens as whitespace"
            }
            Repair::RawControlCharInString => "kept a raw control character inside a string",
            Repair::SingleQuotes => "read single-quoted strings as double-quoted",
            Repair::UnquotedKey => "added the missing quote of an object key",
            Repair::InvalidEscape => "kept an invalid backslash escape literally",
            Repair::ClosedTruncatedJson => "closed JSON that was cut off",
            Repair::StrippedCodeFence => "ignored a code fence inside the block",
            Repair::StrippedSpecialToken => "ignored a trailing special token",
            Repair::MissingClosingTag => "accepted a block without its closing tag",
            Repair::ProseAroundJson => "ignored prose around the JSON object",
            Repair::StringifiedArguments => "decoded `arguments` given as a JSON string",
            Repair::MissingParameterClose => {
                "ended a parameter without `</parameter>` at `</function>`"
            }
            Repair::TruncatedXmlCall => {
                "used an XML call that was cut off after its last parameter"
            }
            Repair::DuplicateCallDropped => "ran identical calls once",
        }
    }
}

/// A value read by [`parse_lenient`].
#[derive(Debug, Clone, PartialEq)]
pub struct LenientValue {
    /// The value.
    pub value: Value,
    /// Byte offset just after the value in the input.
    pub end: usize,
    /// Deviations accepted, in the order met (may repeat).
    pub repairs: Vec<Repair>,
}

/// Why [`parse_lenient`] failed.
#[derive(Debug, Clone, PartialEq)]
pub struct LenientError {
    /// What is wrong, for the model.
    pub message: String,
    /// Byte offset where the problem was found.
    pub offset: usize,
    /// True when the input ended in a place that cannot be closed without guessing (inside a
    /// string, number or literal, or after a key).
    pub truncated: bool,
}

/// Reads one JSON object or array starting at byte `start` of `text` (which must be `{` or `[`),
/// accepting the deviations listed in [`Repair`].
///
/// # Errors
/// [`LenientError`] when the text is not JSON even with those deviations.
pub fn parse_lenient(text: &str, start: usize) -> Result<LenientValue, LenientError> {
    let mut p = Lenient {
        s: text,
        b: text.as_bytes(),
        pos: start,
        repairs: Vec::new(),
        truncated: false,
        depth: 0,
    };
    let value = match p.b.get(start) {
        Some(b'{') => p.object()?,
        Some(b'[') => p.array()?,
        _ => return Err(p.err("expected `{` or `[` to start the JSON")),
    };
    if p.truncated {
        p.repairs.push(Repair::ClosedTruncatedJson);
    }
    Ok(LenientValue {
        value,
        end: p.pos,
        repairs: p.repairs,
    })
}

/// Finds the end of the JSON object or array starting at byte `start` (`{` or `[`) by bracket
/// matching that skips double-quoted strings (with escapes). Returns the byte offset just after
/// the matching bracket, or `None` when the text ends first or brackets do not match.
pub fn skip_balanced(text: &str, start: usize) -> Option<usize> {
    let b = text.as_bytes();
    let mut stack: Vec<u8> = Vec::new();
    let mut i = start;
    let mut in_string = false;
    while i < b.len() {
        let c = b[i];
        if in_string {
            match c {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match c {
                b'"' => in_string = true,
                b'{' => stack.push(b'}'),
                b'[' => stack.push(b']'),
                b'}' | b']' => {
                    if stack.pop() != Some(c) {
                        return None;
                    }
                    if stack.is_empty() {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
        }
        i += 1;
    }
    None
}

struct Lenient<'a> {
    s: &'a str,
    b: &'a [u8],
    pos: usize,
    repairs: Vec<Repair>,
    /// Set when the input ended at a point where the open containers can be closed.
    truncated: bool,
    depth: usize,
}

impl Lenient<'_> {
    fn err(&self, message: impl Into<String>) -> LenientError {
        LenientError {
            message: message.into(),
            offset: self.pos,
            truncated: false,
        }
    }

    fn eof_err(&self, message: impl Into<String>) -> LenientError {
        LenientError {
            message: message.into(),
            offset: self.pos,
            truncated: true,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    /// Describes the character at the cursor for error messages.
    fn found(&self) -> String {
        match self.s[self.pos..].chars().next() {
            Some(c) => format!("`{c}`"),
            None => "the end of the text".to_string(),
        }
    }

    fn ws(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' | b'\n' | b'\r' => self.pos += 1,
                b'\\' if matches!(self.b.get(self.pos + 1), Some(b'n' | b't' | b'r')) => {
                    self.pos += 2;
                    self.repairs.push(Repair::LiteralEscapeBetweenTokens);
                }
                _ => break,
            }
        }
    }

    fn enter(&mut self) -> Result<(), LenientError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err(format!("JSON nested deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    /// At the start of a container or after one of its members: true when the container ends
    /// here, closed by `close` (consumed) or cut off by the end of the text (then `truncated`).
    fn container_ends(&mut self, close: u8) -> bool {
        self.ws();
        match self.peek() {
            None => {
                self.truncated = true;
                true
            }
            Some(c) if c == close => {
                self.pos += 1;
                self.depth -= 1;
                true
            }
            _ => false,
        }
    }

    /// After a member of a container closed by `close`: `,` then the next member (a `,` right
    /// before `close` is repaired as a trailing comma), or the end of the container (true).
    /// `expected` says what was expected, for the error when neither follows.
    fn after_member(
        &mut self,
        close: u8,
        expected: impl FnOnce() -> String,
    ) -> Result<bool, LenientError> {
        if self.container_ends(close) {
            return Ok(true);
        }
        if self.peek() != Some(b',') {
            return Err(self.err(format!("{}, found {}", expected(), self.found())));
        }
        self.pos += 1;
        self.ws();
        if self.peek() == Some(close) {
            self.repairs.push(Repair::TrailingComma);
        }
        Ok(self.container_ends(close))
    }

    fn object(&mut self) -> Result<Value, LenientError> {
        self.enter()?;
        self.pos += 1; // `{`
        let mut map = Map::new();
        if self.container_ends(b'}') {
            return Ok(Value::Object(map));
        }
        loop {
            let key = self.key()?;
            self.ws();
            match self.peek() {
                None => return Err(self.eof_err(format!("the text ends after the key \"{key}\""))),
                Some(b':') => self.pos += 1,
                Some(_) => {
                    return Err(self.err(format!(
                        "expected `:` after the key \"{key}\", found {}",
                        self.found()
                    )));
                }
            }
            let value = self.value(&format!("after the key \"{key}\""))?;
            map.insert(key.clone(), value);
            if self.truncated
                || self.after_member(b'}', || {
                    format!("expected `,` or `}}` after the value of \"{key}\"")
                })?
            {
                return Ok(Value::Object(map));
            }
        }
    }

    fn array(&mut self) -> Result<Value, LenientError> {
        self.enter()?;
        self.pos += 1; // `[`
        let mut items = Vec::new();
        if self.container_ends(b']') {
            return Ok(Value::Array(items));
        }
        loop {
            let value = self.value("in an array")?;
            items.push(value);
            if self.truncated
                || self.after_member(b']', || "expected `,` or `]` in an array".to_string())?
            {
                return Ok(Value::Array(items));
            }
        }
    }

    fn key(&mut self) -> Result<String, LenientError> {
        match self.peek() {
            Some(b'"') => self.dq_string(),
            Some(b'\'') => self.sq_string(),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let start = self.pos;
                while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
                {
                    self.pos += 1;
                }
                let key = self.s[start..self.pos].to_string();
                if self.peek() == Some(b'"') {
                    // The key lost only its opening quote: `{pattern": …}`.
                    self.pos += 1;
                }
                self.repairs.push(Repair::UnquotedKey);
                Ok(key)
            }
            None => Err(self.eof_err("the text ends where an object key was expected")),
            Some(_) => Err(self.err(format!(
                "expected a double-quoted object key, found {}",
                self.found()
            ))),
        }
    }

    fn value(&mut self, context: &str) -> Result<Value, LenientError> {
        self.ws();
        match self.peek() {
            None => Err(self.eof_err(format!(
                "the text ends where a value was expected {context}"
            ))),
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => self.dq_string().map(Value::String),
            Some(b'\'') => self.sq_string().map(Value::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't' | b'f' | b'n') => self.literal(),
            Some(_) => Err(self.err(format!(
                "expected a JSON value {context}, found {}",
                self.found()
            ))),
        }
    }

    fn dq_string(&mut self) -> Result<String, LenientError> {
        self.pos += 1; // `"`
        let mut out = String::new();
        let mut run = self.pos;
        loop {
            let Some(c) = self.peek() else {
                return Err(self.eof_err("the text ends inside a string"));
            };
            match c {
                b'"' => {
                    out.push_str(&self.s[run..self.pos]);
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    out.push_str(&self.s[run..self.pos]);
                    self.escape(&mut out)?;
                    run = self.pos;
                }
                0x00..=0x1f => {
                    if !self.repairs.contains(&Repair::RawControlCharInString) {
                        self.repairs.push(Repair::RawControlCharInString);
                    }
                    self.pos += 1;
                }
                _ => self.pos += 1,
            }
        }
    }

    /// Reads one escape sequence at the cursor (a backslash) into `out`.
    fn escape(&mut self, out: &mut String) -> Result<(), LenientError> {
        let Some(&c) = self.b.get(self.pos + 1) else {
            self.pos += 1;
            return Err(self.eof_err("the text ends inside a string escape"));
        };
        let simple = match c {
            b'"' => Some('"'),
            b'\\' => Some('\\'),
            b'/' => Some('/'),
            b'b' => Some('\u{8}'),
            b'f' => Some('\u{c}'),
            b'n' => Some('\n'),
            b'r' => Some('\r'),
            b't' => Some('\t'),
            _ => None,
        };
        if let Some(ch) = simple {
            out.push(ch);
            self.pos += 2;
            return Ok(());
        }
        if c == b'u' {
            let first = self.hex4(self.pos + 2)?;
            self.pos += 6;
            if (0xD800..0xDC00).contains(&first)
                && self.b.get(self.pos) == Some(&b'\\')
                && self.b.get(self.pos + 1) == Some(&b'u')
            {
                let second = self.hex4(self.pos + 2)?;
                if (0xDC00..0xE000).contains(&second) {
                    self.pos += 6;
                    let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                    out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                    return Ok(());
                }
            }
            out.push(char::from_u32(first).unwrap_or('\u{FFFD}'));
            return Ok(());
        }
        // An escape JSON does not know (`\d`, `\.`): keep backslash and character.
        self.repairs.push(Repair::InvalidEscape);
        out.push('\\');
        self.pos += 1;
        Ok(())
    }

    fn hex4(&self, at: usize) -> Result<u32, LenientError> {
        let Some(digits) = self.s.get(at..at + 4) else {
            return Err(LenientError {
                message: "the text ends inside a `\\u` escape".into(),
                offset: at,
                truncated: true,
            });
        };
        u32::from_str_radix(digits, 16).map_err(|_| LenientError {
            message: format!("invalid `\\u` escape `\\u{digits}`"),
            offset: at,
            truncated: false,
        })
    }

    fn sq_string(&mut self) -> Result<String, LenientError> {
        let start = self.pos + 1;
        let Some(len) = self.s[start..].find('\'') else {
            self.pos = self.s.len();
            return Err(self.eof_err("the text ends inside a single-quoted string"));
        };
        let body = &self.s[start..start + len];
        if body.contains('\\') {
            self.pos = start;
            return Err(self.err(
                "a single-quoted string contains a backslash escape; JSON strings use double quotes",
            ));
        }
        if body.bytes().any(|c| c < 0x20) && !self.repairs.contains(&Repair::RawControlCharInString)
        {
            self.repairs.push(Repair::RawControlCharInString);
        }
        self.repairs.push(Repair::SingleQuotes);
        self.pos = start + len + 1;
        Ok(body.to_string())
    }

    fn number(&mut self) -> Result<Value, LenientError> {
        let start = self.pos;
        while matches!(
            self.peek(),
            Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        ) {
            self.pos += 1;
        }
        if self.pos == self.b.len() {
            return Err(self.eof_err("the text ends inside a number"));
        }
        let token = &self.s[start..self.pos];
        match serde_json::from_str::<serde_json::Number>(token) {
            Ok(n) => Ok(Value::Number(n)),
            Err(_) => {
                self.pos = start;
                Err(self.err(format!("`{token}` is not a JSON number")))
            }
        }
    }

    fn literal(&mut self) -> Result<Value, LenientError> {
        let rest = &self.s[self.pos..];
        for (word, value) in [
            ("true", Value::Bool(true)),
            ("false", Value::Bool(false)),
            ("null", Value::Null),
        ] {
            if rest.starts_with(word) {
                self.pos += word.len();
                return Ok(value);
            }
            if word.starts_with(rest) {
                self.pos = self.s.len();
                return Err(self.eof_err("the text ends inside a literal"));
            }
        }
        Err(self.err(format!("expected a JSON value, found {}", self.found())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(text: &str) -> LenientValue {
        parse_lenient(text, 0).unwrap_or_else(|e| panic!("{text}: {e:?}"))
    }

    #[test]
    fn strict_json_needs_no_repair() {
        let v = ok(r#"{"a": [1, 2.5, -3e2], "b": {"c": "x\ny\u00e9\ud83d\ude00"}, "d": null}"#);
        assert_eq!(v.value["b"]["c"], json!("x\nyé😀"));
        assert!(v.repairs.is_empty());
    }

    #[test]
    fn trailing_commas_and_literal_newlines_between_tokens() {
        let v = ok(r#"{"a": [1, 2,], "b": \n"x",}"#);
        assert_eq!(v.value, json!({"a": [1, 2], "b": "x"}));
        assert!(v.repairs.contains(&Repair::TrailingComma));
        assert!(v.repairs.contains(&Repair::LiteralEscapeBetweenTokens));
    }

    #[test]
    fn single_quotes_only_without_escapes() {
        let v = ok("{'a': 'b c'}");
        assert_eq!(v.value, json!({"a": "b c"}));
        assert!(v.repairs.contains(&Repair::SingleQuotes));
        assert!(parse_lenient(r"{'a': 'it\'s'}", 0).is_err());
        assert!(parse_lenient("{'a': 'it's'}", 0).is_err());
    }

    #[test]
    fn truncation_is_closable_only_after_complete_values() {
        let v = ok(r#"{"a": {"b": "c""#);
        assert_eq!(v.value, json!({"a": {"b": "c"}}));
        assert!(v.repairs.contains(&Repair::ClosedTruncatedJson));
        for cut in [
            r#"{"a": "b"#,
            r#"{"a": "#,
            r#"{"a""#,
            r#"{"a": 12"#,
            r#"{"a": tr"#,
        ] {
            let e = parse_lenient(cut, 0).unwrap_err();
            assert!(e.truncated, "{cut}: {e:?}");
        }
    }

    #[test]
    fn raw_control_characters_and_unknown_escapes_are_recorded() {
        let v = ok("{\"a\": \"x\ny\", \"b\": \"\\d+\"}");
        assert_eq!(v.value, json!({"a": "x\ny", "b": "\\d+"}));
        assert!(v.repairs.contains(&Repair::RawControlCharInString));
        assert!(v.repairs.contains(&Repair::InvalidEscape));
    }

    #[test]
    fn skip_balanced_ignores_brackets_in_strings() {
        let t = r#"{"c": "mkdir {a,b"} tail"#;
        assert_eq!(skip_balanced(t, 0), Some(t.len() - 5));
        assert_eq!(skip_balanced(r#"{"a": "}"#, 0), None);
    }

    #[test]
    fn deep_nesting_is_refused() {
        let t = "[".repeat(100);
        assert!(parse_lenient(&t, 0).is_err());
    }
}
