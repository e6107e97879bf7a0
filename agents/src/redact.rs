//! Redaction of secret values: the provider keys ahelper read at start-up and the variables the
//! user lists in `[secrets] redact_env` are replaced by `[REDACTED:<NAME>]` in every tool
//! result, transcript line, log line and event before it reaches the model, a file or the
//! screen.
//!
//! Redaction is defence in depth, behind the process hardening of [`crate::hardening`]: it
//! catches a key that reaches output anyway (the user keeps it in a repository file, a command
//! echoes a variable the user listed). It only knows exact values: a transformed value
//! (reversed, base64, split by the command itself) is not recognised.
//!
//! - [`Redactor`] holds the values (cheap to clone: one `Arc`) and replaces them in complete
//!   text ([`Redactor::redact`]), bytes, JSON values and serialisable structures.
//! - [`StreamRedactor`] scrubs output that arrives in chunks (a command's pipe, streamed model
//!   text): it holds back the last `longest value − 1` bytes, so a value split across two
//!   chunks is still replaced.
//! - [`RedactingWriter`] wraps an [`std::io::Write`] (the log file).
//!
//! Values shorter than [`MIN_SECRET_LEN`] bytes are ignored: a short value ("x", "test", a
//! local server's dummy key) would be replaced wherever those letters occur and shred unrelated
//! output, while a real provider key is 40 characters or more.

use aho_corasick::{AhoCorasick, MatchKind};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;

/// Values shorter than this many bytes are not redacted (see the module docs).
pub const MIN_SECRET_LEN: usize = 8;

/// True for variable names that hold credentials by convention and whose values are
/// redacted: `API_KEY` and names ending in `_API_KEY`, `_API_TOKEN`, `_AUTH_TOKEN` or
/// `_SECRET_KEY` (case-insensitive).
pub fn is_credential_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper == "API_KEY"
        || ["_API_KEY", "_API_TOKEN", "_AUTH_TOKEN", "_SECRET_KEY"]
            .iter()
            .any(|s| upper.ends_with(s))
}

/// Errors while building a [`Redactor`].
#[derive(Debug, thiserror::Error)]
pub enum RedactError {
    /// The matcher could not be built (only for absurdly many or long values).
    #[error(
        "cannot build the redaction matcher for {count} secret values: {message}; \
         shorten `[secrets] redact_env`"
    )]
    Matcher {
        /// Number of patterns.
        count: usize,
        /// The matcher's error.
        message: String,
    },
}

struct Patterns {
    matcher: AhoCorasick,
    /// `[REDACTED:<NAME>]` for each pattern, by pattern index.
    replacements: Vec<String>,
    /// Names, in the order given (for `Debug` and [`Redactor::names`]).
    names: Vec<String>,
    /// Length in bytes of the longest pattern (≥ [`MIN_SECRET_LEN`]).
    longest: usize,
}

/// Replaces known secret values by `[REDACTED:<NAME>]`. The default redactor knows no value
/// and changes nothing. `Debug` shows the names only, never a value.
#[derive(Clone, Default)]
pub struct Redactor {
    patterns: Option<Arc<Patterns>>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("names", &self.names())
            .finish()
    }
}

/// `value` as it appears inside a JSON string (`"` `\` and control characters escaped).
fn json_escaped(value: &str) -> String {
    let quoted = serde_json::to_string(value).unwrap_or_default();
    quoted
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(value)
        .to_string()
}

impl Redactor {
    /// A redactor for `(name, value)` pairs. The first name given for a value is the one shown.
    /// Each value is also matched trimmed of surrounding whitespace and in its JSON-escaped
    /// form (as it appears in a transcript or a log line); values shorter than
    /// [`MIN_SECRET_LEN`] bytes are skipped.
    ///
    /// # Errors
    /// [`RedactError::Matcher`] when the matcher cannot be built.
    pub fn new<I, N, V>(secrets: I) -> Result<Redactor, RedactError>
    where
        I: IntoIterator<Item = (N, V)>,
        N: Into<String>,
        V: AsRef<str>,
    {
        let mut patterns: Vec<String> = Vec::new();
        let mut replacements = Vec::new();
        let mut names: Vec<String> = Vec::new();
        for (name, value) in secrets {
            let name = name.into();
            let value = value.as_ref();
            let forms = [value, value.trim()].map(|v| [v.to_string(), json_escaped(v)]);
            let mut added = false;
            for form in forms.into_iter().flatten() {
                if form.len() >= MIN_SECRET_LEN && !patterns.contains(&form) {
                    patterns.push(form);
                    replacements.push(format!("[REDACTED:{name}]"));
                    added = true;
                }
            }
            if added && !names.contains(&name) {
                names.push(name);
            }
        }
        if patterns.is_empty() {
            return Ok(Redactor::default());
        }
        let matcher = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&patterns)
            .map_err(|e| RedactError::Matcher {
                count: patterns.len(),
                message: e.to_string(),
            })?;
        let longest = patterns.iter().map(String::len).max().unwrap_or(0);
        Ok(Redactor {
            patterns: Some(Arc::new(Patterns {
                matcher,
                replacements,
                names,
                longest,
            })),
        })
    }

    /// True when no value is known (every call returns its input unchanged).
    pub fn is_empty(&self) -> bool {
        self.patterns.is_none()
    }

    /// The names whose values are redacted.
    pub fn names(&self) -> Vec<&str> {
        self.patterns
            .as_ref()
            .map(|p| p.names.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// `text` with every known value replaced; borrowed when nothing matched.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match &self.patterns {
            Some(p) if p.matcher.is_match(text) => {
                Cow::Owned(p.matcher.replace_all(text, &p.replacements))
            }
            _ => Cow::Borrowed(text),
        }
    }

    /// `bytes` with every known value replaced; borrowed when nothing matched.
    pub fn redact_bytes<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        match &self.patterns {
            Some(p) if p.matcher.is_match(bytes) => {
                Cow::Owned(p.matcher.replace_all_bytes(bytes, &p.replacements))
            }
            _ => Cow::Borrowed(bytes),
        }
    }

    /// Redacts every string of a JSON value in place (object keys included). Returns true when
    /// something was replaced.
    pub fn redact_json(&self, value: &mut Value) -> bool {
        if self.is_empty() {
            return false;
        }
        match value {
            Value::String(s) => self.redact_string(s),
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, v| self.redact_json(v) | changed),
            Value::Object(map) => {
                let mut changed = false;
                let entries = std::mem::take(map);
                for (mut key, mut v) in entries {
                    changed |= self.redact_string(&mut key);
                    changed |= self.redact_json(&mut v);
                    map.insert(key, v);
                }
                changed
            }
            _ => false,
        }
    }

    fn redact_string(&self, s: &mut String) -> bool {
        match self.redact(s) {
            Cow::Owned(clean) => {
                *s = clean;
                true
            }
            Cow::Borrowed(_) => false,
        }
    }

    /// `value` with every string in it redacted, by a round trip through JSON (only strings
    /// change, so the round trip cannot fail for the event and outcome types it is used on;
    /// if it does, `value` is returned as is). Unchanged when nothing matched.
    pub fn redact_serde<T: Serialize + DeserializeOwned>(&self, value: T) -> T {
        if self.is_empty() {
            return value;
        }
        let Ok(mut json) = serde_json::to_value(&value) else {
            return value;
        };
        if !self.redact_json(&mut json) {
            return value;
        }
        serde_json::from_value(json).unwrap_or(value)
    }

    /// `value` serialised as one line of JSON with every string redacted (the transcript's
    /// line format); fields keep their order.
    ///
    /// # Errors
    /// The serialiser's error.
    pub fn to_json_line<T: Serialize>(&self, value: &T) -> serde_json::Result<String> {
        let line = serde_json::to_string(value)?;
        Ok(match self.redact_json_text(&line) {
            Cow::Borrowed(_) => line,
            Cow::Owned(clean) => clean,
        })
    }

    /// JSON text with known values replaced inside its string literals only (numbers and
    /// structure are never touched). Values are matched in their JSON-escaped form too (see
    /// [`Redactor::new`]), and `[REDACTED:<NAME>]` needs no escaping, so the result stays valid
    /// JSON. Expects valid JSON text (e.g. serde_json's output).
    pub fn redact_json_text<'a>(&self, json: &'a str) -> Cow<'a, str> {
        match &self.patterns {
            Some(p) if p.matcher.is_match(json) => {}
            _ => return Cow::Borrowed(json),
        }
        let bytes = json.as_bytes();
        let mut out = String::with_capacity(json.len());
        let mut copied = 0;
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'"' {
                i += 1;
                continue;
            }
            let start = i + 1;
            let mut end = start;
            while end < bytes.len() && bytes[end] != b'"' {
                // An escape's second character is ASCII (`"\/bfnrtu`): skip it.
                end += if bytes[end] == b'\\' { 2 } else { 1 };
            }
            let end = end.min(bytes.len());
            out.push_str(&json[copied..start]);
            out.push_str(&self.redact(&json[start..end]));
            copied = end;
            i = end + 1;
        }
        out.push_str(&json[copied..]);
        Cow::Owned(out)
    }

    /// A streaming redactor over this redactor's values.
    pub fn stream(&self) -> StreamRedactor {
        StreamRedactor {
            patterns: self.patterns.clone(),
            pending: Vec::new(),
            utf8_carry: Vec::new(),
        }
    }
}

/// Redacts output that arrives in chunks. Feed chunks with [`StreamRedactor::push`] (bytes) or
/// [`StreamRedactor::push_str`] (text), then call the matching `finish` once; the pieces
/// returned, concatenated, are the whole input with every known value replaced — also a value
/// split across chunks.
///
/// A chunk's last `longest value − 1` bytes are held back until the next chunk (or `finish`)
/// shows whether they begin a value. With [`Redactor::default`] nothing is held back.
pub struct StreamRedactor {
    patterns: Option<Arc<Patterns>>,
    pending: Vec<u8>,
    /// Bytes of an incomplete UTF-8 character not yet returned by `push_str`.
    utf8_carry: Vec<u8>,
}

impl StreamRedactor {
    /// Takes the next chunk; returns the bytes that are settled (redacted where needed).
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        let Some(p) = self.patterns.clone() else {
            return chunk.to_vec();
        };
        self.pending.extend_from_slice(chunk);
        let len = self.pending.len();
        // A match starting before `settled` has every byte its longest candidate needs, so
        // neither it nor anything before it can change with more input.
        let settled = len.saturating_sub(p.longest - 1);
        let mut out = Vec::with_capacity(len);
        let mut pos = 0;
        for m in p.matcher.find_iter(&self.pending) {
            if m.start() >= settled {
                break;
            }
            out.extend_from_slice(&self.pending[pos..m.start()]);
            out.extend_from_slice(p.replacements[m.pattern().as_usize()].as_bytes());
            pos = m.end();
        }
        let cut = pos.max(settled);
        out.extend_from_slice(&self.pending[pos..cut]);
        self.pending.drain(..cut);
        out
    }

    /// Ends the stream: returns the held-back bytes, redacted.
    pub fn finish(&mut self) -> Vec<u8> {
        let rest = std::mem::take(&mut self.pending);
        match &self.patterns {
            Some(p) => p.matcher.replace_all_bytes(&rest, &p.replacements),
            None => rest,
        }
    }

    /// [`StreamRedactor::push`] for text: returns the settled text (never a partial UTF-8
    /// character).
    pub fn push_str(&mut self, chunk: &str) -> String {
        let bytes = self.push(chunk.as_bytes());
        self.take_utf8(bytes)
    }

    /// [`StreamRedactor::finish`] for text.
    pub fn finish_str(&mut self) -> String {
        let bytes = self.finish();
        let mut text = self.take_utf8(bytes);
        let carry = std::mem::take(&mut self.utf8_carry);
        text.push_str(&String::from_utf8_lossy(&carry));
        text
    }

    fn take_utf8(&mut self, bytes: Vec<u8>) -> String {
        self.utf8_carry.extend(bytes);
        let valid = match std::str::from_utf8(&self.utf8_carry) {
            Ok(_) => self.utf8_carry.len(),
            Err(e) => e.valid_up_to(),
        };
        let rest = self.utf8_carry.split_off(valid);
        let text = std::mem::replace(&mut self.utf8_carry, rest);
        String::from_utf8_lossy(&text).into_owned()
    }
}

/// An [`std::io::Write`] that redacts each buffer before writing it to `inner`. Meant for line
/// writers that hand over one whole record per `write` (the tracing formatter writes one event
/// per call).
pub struct RedactingWriter<W> {
    inner: W,
    redactor: Redactor,
}

impl<W> RedactingWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W, redactor: Redactor) -> Self {
        RedactingWriter { inner, redactor }
    }
}

impl<W: std::io::Write> std::io::Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write_all(&self.redactor.redact_bytes(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KEY: &str = "sk-ant-api03-abcdefghijklmnop";

    fn redactor() -> Redactor {
        Redactor::new([("ANTHROPIC_API_KEY", KEY), ("DB_PASSWORD", "hunter2-long")]).unwrap()
    }

    #[test]
    fn values_are_replaced_by_their_name() {
        let r = redactor();
        assert_eq!(
            r.redact(&format!("key={KEY}; pw=hunter2-long.")),
            "key=[REDACTED:ANTHROPIC_API_KEY]; pw=[REDACTED:DB_PASSWORD]."
        );
        assert!(matches!(r.redact("nothing here"), Cow::Borrowed(_)));
        assert_eq!(r.names(), ["ANTHROPIC_API_KEY", "DB_PASSWORD"]);
        assert!(!format!("{r:?}").contains(KEY));
    }

    #[test]
    fn short_values_are_ignored() {
        let r = Redactor::new([("ANTHROPIC_API_KEY", "x"), ("OTHER", "1234567")]).unwrap();
        assert!(r.is_empty());
        assert_eq!(r.redact("x 1234567"), "x 1234567");
    }

    #[test]
    fn trimmed_and_json_escaped_forms_are_matched() {
        let r = Redactor::new([("K", " pass\"word\\1 \n")]).unwrap();
        assert_eq!(r.redact("a pass\"word\\1 b"), "a [REDACTED:K] b");
        let line = serde_json::to_string(&serde_json::json!({"c": "pass\"word\\1"})).unwrap();
        assert_eq!(r.redact(&line), r#"{"c":"[REDACTED:K]"}"#);
    }

    #[test]
    fn json_values_and_structures_are_redacted() {
        let r = redactor();
        let mut v = serde_json::json!({"a": [KEY, 1], KEY: {"b": format!("x{KEY}x")}});
        assert!(r.redact_json(&mut v));
        assert!(!v.to_string().contains(KEY), "{v}");
        assert_eq!(v["a"][0], "[REDACTED:ANTHROPIC_API_KEY]");
        let line = r.to_json_line(&("z", 1, KEY)).unwrap();
        assert_eq!(line, r#"["z",1,"[REDACTED:ANTHROPIC_API_KEY]"]"#);
        let pair: (String, u32) = r.redact_serde((KEY.to_string(), 7));
        assert_eq!(pair, ("[REDACTED:ANTHROPIC_API_KEY]".to_string(), 7));
    }

    #[test]
    fn json_text_is_redacted_inside_strings_only() {
        let r = Redactor::new([("PIN", "12345678"), ("K", "pa\"ss-word")]).unwrap();
        let text =
            r#"{"n":123456789,"s":"pin 12345678","e":"pa\"ss-word \\ \"q\"","é":"12345678"}"#;
        assert_eq!(
            r.redact_json_text(text),
            r#"{"n":123456789,"s":"pin [REDACTED:PIN]","e":"[REDACTED:K] \\ \"q\"","é":"[REDACTED:PIN]"}"#
        );
        let parsed: Value = serde_json::from_str(&r.redact_json_text(text)).unwrap();
        assert_eq!(parsed["n"], 123456789);
    }

    #[test]
    fn a_value_split_across_chunks_is_replaced() {
        let r = redactor();
        let mut s = r.stream();
        let mut out = Vec::new();
        for chunk in ["start sk-ant-", "api03-abcdefgh", "ijklmnop end"] {
            out.extend(s.push(chunk.as_bytes()));
        }
        out.extend(s.finish());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "start [REDACTED:ANTHROPIC_API_KEY] end"
        );
    }

    #[test]
    fn the_longest_overlapping_value_wins_across_chunks() {
        let r = Redactor::new([("SHORT", "abcdefgh"), ("LONG", "abcdefghijkl")]).unwrap();
        let mut s = r.stream();
        let mut out = s.push(b"..abcdefgh");
        out.extend(s.push(b"ijkl.."));
        out.extend(s.finish());
        assert_eq!(String::from_utf8(out).unwrap(), "..[REDACTED:LONG]..");
    }

    #[test]
    fn text_streams_never_split_a_character() {
        let r = redactor();
        let mut s = r.stream();
        let input = "héllo wörld ".repeat(20);
        let mut out = String::new();
        for chunk in input.as_bytes().chunks(3) {
            // Chunks that cut characters are not valid `&str`; feed bytes, collect text.
            let bytes = s.push(chunk);
            out.push_str(&s.take_utf8(bytes));
        }
        out.push_str(&s.finish_str());
        assert_eq!(out, input);
    }

    #[test]
    fn the_writer_redacts_each_record() {
        use std::io::Write;
        let mut w = RedactingWriter::new(Vec::new(), redactor());
        w.write_all(format!("request failed: key {KEY}\n").as_bytes())
            .unwrap();
        assert_eq!(
            String::from_utf8(w.inner).unwrap(),
            "request failed: key [REDACTED:ANTHROPIC_API_KEY]\n"
        );
    }

    #[test]
    fn an_empty_redactor_passes_everything_through() {
        let r = Redactor::default();
        let mut s = r.stream();
        assert_eq!(s.push(b"abc"), b"abc");
        assert!(s.finish().is_empty());
        assert_eq!(r.redact(KEY), KEY);
    }

    proptest! {
        /// However the output is cut into chunks, the streamed result equals the whole-text
        /// result.
        #[test]
        fn streaming_equals_whole_text(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just(KEY.to_string()),
                    Just("hunter2-long".to_string()),
                    "[a-z -]{0,12}",
                ],
                0..12,
            ),
            cuts in proptest::collection::vec(0usize..40, 0..10),
        ) {
            let r = redactor();
            let text: String = parts.concat();
            let mut s = r.stream();
            let mut out = Vec::new();
            let mut rest = text.as_bytes();
            for c in cuts {
                let c = c.min(rest.len());
                out.extend(s.push(&rest[..c]));
                rest = &rest[c..];
            }
            out.extend(s.push(rest));
            out.extend(s.finish());
            prop_assert_eq!(String::from_utf8(out).unwrap(), r.redact(&text).into_owned());
        }
    }
}
