//! The pure parser: assistant text of one turn → prose and tool calls.

use super::lenient_json::{Repair, parse_lenient, skip_balanced};
use super::scan::{Opener, ProseScanner};
use crate::model::tool_args::json_kind;
use crate::model::{ToolCall, ToolSpec};
use crate::tools::truncate_middle;
use serde_json::{Map, Value};

/// Prefix of the ids given to tool calls parsed from text: `call_text_1`, `call_text_2`, …
pub const TEXT_CALL_ID_PREFIX: &str = "call_text_";

/// Characters of raw text quoted in an error message.
const RAW_QUOTE_CHARS: usize = 400;

const BLOCK_OPEN: &str = "<tool_call>";
const BLOCK_CLOSE: &str = "</tool_call>";
const FUNCTION_OPEN: &str = "<function=";
const FUNCTION_CLOSE: &str = "</function>";
const PARAMETER_OPEN: &str = "<parameter=";
const PARAMETER_CLOSE: &str = "</parameter>";
const MISTRAL_OPEN: &str = "[TOOL_CALLS]";

/// The calling format, as quoted in error messages.
pub const EXPECTED_FORMAT: &str = "<tool_call>\n{\"name\": \"<tool name>\", \"arguments\": {<arguments as a JSON object>}}\n</tool_call>";

/// A tool call written as text that must not be run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextToolCallError {
    /// The raw text of the call (whole block or the part that failed), untruncated.
    pub raw: String,
    /// The tool name when it could be read.
    pub name: Option<String>,
    /// What is wrong, for the model: quotes the (truncated) raw text and gives the expected
    /// format.
    pub error: String,
    /// True when the call looks cut off (e.g. by the output-token limit).
    pub truncated: bool,
}

/// One call found in the text, in order of appearance.
pub type ParsedCall = Result<ToolCall, TextToolCallError>;

/// Repairs applied to one accepted call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedRepairs {
    /// The call's id (`call_text_<n>`).
    pub call_id: String,
    /// The tool name.
    pub tool: String,
    /// Repairs in the order applied (deduplicated).
    pub repairs: Vec<Repair>,
}

/// Result of [`parse_assistant_text`].
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedText {
    /// The prose: the text with every call region removed (trailing whitespace trimmed when a
    /// region was removed).
    pub text: String,
    /// Calls in order; accepted calls get ids `call_text_1`, `call_text_2`, … by position in
    /// this list (errors use up a number too).
    pub calls: Vec<ParsedCall>,
    /// Repairs applied to accepted calls (empty when every call was well-formed).
    pub repairs: Vec<AppliedRepairs>,
}

/// Parses the complete assistant text of one turn written under the text tool protocol.
///
/// Recognised forms: `<tool_call>{"name": …, "arguments": {…}}</tool_call>` (also with
/// `"parameters"`/`"input"` for `"arguments"`, a `"function"` wrapper, a code fence inside the
/// block, several objects or a JSON array in one block, prose around a single object), the
/// Qwen3-coder XML form `<function=NAME><parameter=K>V</parameter></function>` with or without
/// the outer block, Mistral `[TOOL_CALLS]` forms (`[{…}]`, `name[ARGS]{…}`, `name{…}` repeated),
/// and a whole message that is one JSON call object of an offered tool. Calls inside code
/// fences, inline code or block quotes are text and never run — except that a whole message
/// that is nothing but one code fence holding one JSON call object of an offered tool (what
/// small models such as Qwen2.5-Coder-1.5B write instead of a `<tool_call>` block) becomes a
/// [`TextToolCallError`] telling the model to use the block, instead of passing as a final
/// answer.
///
/// Repairs that keep content ([`Repair::guesses_content`] false) apply to every tool; repairs
/// that guess apply only to tools for which `is_read_only(name)` is true. A call that cannot
/// be used becomes a [`TextToolCallError`]; nothing is dropped silently. Identical calls in one
/// block are kept once.
pub fn parse_assistant_text(
    text: &str,
    tools: &[ToolSpec],
    is_read_only: &dyn Fn(&str) -> bool,
) -> ParsedText {
    let ctx = Ctx {
        tools,
        is_read_only,
    };
    let mut raws: Vec<RawCall> = Vec::new();
    let mut prose = String::new();
    let mut cursor = 0;
    let mut any_region = false;
    let mut scanner = ProseScanner::new(text);
    while let Some((at, kind)) = scanner.next_opener() {
        if at < cursor {
            continue;
        }
        let (start, end, calls) = match kind {
            Opener::Block => {
                let (end, calls) = parse_block(text, at, &ctx);
                (at, end, calls)
            }
            Opener::Function => {
                let (end, call) = parse_bare_function(text, at, &ctx);
                (at, end, vec![call])
            }
            Opener::Mistral => {
                let (end, calls) = parse_mistral(text, at);
                (at, end, calls)
            }
            Opener::Orphan => match orphan_region(text, cursor, at, &scanner) {
                Some((start, end, call)) => (start, end, vec![call]),
                // A lone `</function>` in prose stays text.
                None => continue,
            },
        };
        prose.push_str(&text[cursor..start]);
        cursor = end.max(start);
        scanner.resume_at(cursor);
        raws.extend(calls);
        any_region = true;
    }
    prose.push_str(&text[cursor..]);
    if any_region {
        prose.truncate(prose.trim_end().len());
    } else if let Some(call) = bare_json_call(text, &ctx) {
        raws.push(call);
        prose.clear();
    } else if let Some(call) = fenced_json_call(text, &ctx) {
        raws.push(call);
        prose.clear();
    }

    let mut calls = Vec::with_capacity(raws.len());
    let mut repairs = Vec::new();
    for (i, raw) in raws.into_iter().enumerate() {
        let id = format!("{TEXT_CALL_ID_PREFIX}{}", i + 1);
        match finalize(raw, &ctx) {
            Ok((name, input, applied)) => {
                if !applied.is_empty() {
                    tracing::info!(call_id = %id, tool = %name, repairs = ?applied, "repaired a tool call written as text");
                    repairs.push(AppliedRepairs {
                        call_id: id.clone(),
                        tool: name.clone(),
                        repairs: applied,
                    });
                }
                calls.push(Ok(ToolCall { id, name, input }));
            }
            Err(e) => {
                tracing::info!(call_id = %id, error = %e.error, "tool call written as text could not be used");
                calls.push(Err(e));
            }
        }
    }
    ParsedText {
        text: prose,
        calls,
        repairs,
    }
}

struct Ctx<'a> {
    tools: &'a [ToolSpec],
    is_read_only: &'a dyn Fn(&str) -> bool,
}

impl Ctx<'_> {
    fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// A call before the tool-specific checks.
#[derive(Debug, Clone)]
struct RawCall {
    raw: String,
    outcome: Result<(String, Value), (Option<String>, String)>,
    repairs: Vec<Repair>,
    truncated: bool,
}

impl RawCall {
    fn error(raw: &str, name: Option<String>, what: impl Into<String>, truncated: bool) -> Self {
        RawCall {
            raw: raw.to_string(),
            outcome: Err((name, what.into())),
            repairs: Vec::new(),
            truncated,
        }
    }
}

fn error_text(what: &str, raw: &str) -> String {
    let quoted =
        serde_json::to_string(&truncate_middle(raw.trim(), RAW_QUOTE_CHARS)).unwrap_or_default();
    format!(
        "{what}. Nothing was run.\nYour text (as a JSON string, truncated): {quoted}\n\
         Expected format, one block per call, strict JSON with double quotes:\n{EXPECTED_FORMAT}"
    )
}

/// Applies the tool-specific checks: the tool exists, and repairs that guess content are only
/// used for read-only tools.
fn finalize(
    raw: RawCall,
    ctx: &Ctx<'_>,
) -> Result<(String, Value, Vec<Repair>), TextToolCallError> {
    let (name, input) = match raw.outcome {
        Ok(ok) => ok,
        Err((name, what)) => {
            return Err(TextToolCallError {
                error: error_text(&what, &raw.raw),
                raw: raw.raw,
                name,
                truncated: raw.truncated,
            });
        }
    };
    let fail = |what: String, truncated: bool| TextToolCallError {
        error: error_text(&what, &raw.raw),
        raw: raw.raw.clone(),
        name: Some(name.clone()),
        truncated,
    };
    if ctx.tool(&name).is_none() {
        let available: Vec<&str> = ctx.tools.iter().map(|t| t.name.as_str()).collect();
        let available = if available.is_empty() {
            "(none)".to_string()
        } else {
            available.join(", ")
        };
        return Err(fail(
            format!("unknown tool `{name}`; available: {available}"),
            false,
        ));
    }
    let mut applied: Vec<Repair> = Vec::new();
    for r in &raw.repairs {
        if !applied.contains(r) {
            applied.push(*r);
        }
    }
    let unquoted = raw
        .repairs
        .iter()
        .filter(|r| **r == Repair::UnquotedKey)
        .count();
    if unquoted > 1 {
        return Err(fail(
            format!(
                "{unquoted} object keys lack their double quotes; fixing that would be a guess"
            ),
            false,
        ));
    }
    let guessed: Vec<&str> = applied
        .iter()
        .filter(|r| r.guesses_content())
        .map(|r| r.describe())
        .collect();
    if !guessed.is_empty() && !(ctx.is_read_only)(&name) {
        let cut = applied
            .iter()
            .any(|r| matches!(r, Repair::ClosedTruncatedJson | Repair::TruncatedXmlCall));
        let what = if cut {
            format!(
                "the call to `{name}` is cut off before its end (missing closing brackets or tags; \
                 the reply may have hit the output-token limit). `{name}` changes files or runs \
                 commands, so an incomplete call is not completed by guessing; write the whole \
                 call again"
            )
        } else {
            format!(
                "the call to `{name}` is not valid JSON as written (it would need: {}). `{name}` \
                 changes files or runs commands, so it is not repaired by guessing",
                guessed.join("; ")
            )
        };
        return Err(fail(what, cut || raw.truncated));
    }
    Ok((name, input, applied))
}

fn skip_ws(text: &str, mut q: usize) -> usize {
    while let Some(c) = text[q..].chars().next() {
        if !c.is_whitespace() {
            break;
        }
        q += c.len_utf8();
    }
    q
}

fn line_end(text: &str, q: usize) -> usize {
    text[q..].find('\n').map_or(text.len(), |n| q + n + 1)
}

/// Reads `"name"` from text that failed to parse, for error messages.
fn name_hint(raw: &str) -> Option<String> {
    let at = raw.find("\"name\"")?;
    let rest = raw[at + 6..].trim_start().strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let end = rest.find('"')?;
    let name = &rest[..end];
    (!name.is_empty() && name.len() <= 64).then(|| name.to_string())
}

/// A JSON value read from text: strictly when possible, else leniently.
type Candidate = Result<(Value, Vec<Repair>), super::lenient_json::LenientError>;

/// Reads the JSON object or array starting at `q`; returns its end and the value.
fn read_candidate(text: &str, q: usize) -> (usize, Candidate) {
    if let Some(end) = skip_balanced(text, q)
        && let Ok(v) = serde_json::from_str::<Value>(&text[q..end])
    {
        return (end, Ok((v, Vec::new())));
    }
    match parse_lenient(text, q) {
        Ok(lv) => (lv.end, Ok((lv.value, lv.repairs))),
        Err(e) => {
            let end = skip_balanced(text, q)
                .or_else(|| text[q..].find(BLOCK_CLOSE).map(|n| q + n))
                .unwrap_or(text.len());
            (end, Err(e))
        }
    }
}

/// Reads a call object: `{"name", "arguments"|"parameters"|"input"}`, possibly inside a
/// `"function"` wrapper. Returns name, arguments, extra repairs and whether an arguments key was
/// present.
#[allow(clippy::type_complexity)]
fn interpret_call(
    value: &Value,
) -> Result<(String, Value, Vec<Repair>, bool), (Option<String>, String)> {
    let Some(mut obj) = value.as_object() else {
        return Err((
            None,
            format!(
                "expected a JSON object with \"name\" and \"arguments\", found {}",
                json_kind(value)
            ),
        ));
    };
    if !obj.contains_key("name")
        && let Some(Value::Object(inner)) = obj.get("function")
    {
        obj = inner;
    }
    let name = match obj.get("name") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        _ => {
            return Err((
                None,
                "the JSON object has no string \"name\" naming the tool".to_string(),
            ));
        }
    };
    let args = ["arguments", "parameters", "input"]
        .iter()
        .find_map(|k| obj.get(*k));
    match args {
        None => {
            let extra: Vec<&str> = obj
                .keys()
                .map(String::as_str)
                .filter(|k| !matches!(*k, "name" | "id" | "type"))
                .collect();
            if extra.is_empty() {
                Ok((name, Value::Object(Map::new()), Vec::new(), false))
            } else {
                Err((
                    Some(name),
                    format!(
                        "the arguments must be inside an \"arguments\" object, but the call has \
                         the keys {} next to \"name\"",
                        extra
                            .iter()
                            .map(|k| format!("\"{k}\""))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ))
            }
        }
        Some(Value::Object(_)) => Ok((name, args.cloned().unwrap_or_default(), Vec::new(), true)),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => Ok((name, v, vec![Repair::StringifiedArguments], true)),
            _ => Err((
                Some(name),
                "\"arguments\" is a string that does not hold a JSON object; it must be a JSON \
                 object"
                    .to_string(),
            )),
        },
        Some(other) => Err((
            Some(name),
            format!(
                "\"arguments\" must be a JSON object, found {}",
                json_kind(other)
            ),
        )),
    }
}

/// Turns one candidate value into calls (an array holds several).
fn candidate_calls(raw: &str, value: Value, repairs: Vec<Repair>, out: &mut Vec<RawCall>) {
    let truncated = repairs.contains(&Repair::ClosedTruncatedJson);
    let items = match value {
        Value::Array(items) if !items.is_empty() => items,
        Value::Array(_) => {
            out.push(RawCall::error(
                raw,
                None,
                "the JSON array of calls is empty",
                truncated,
            ));
            return;
        }
        other => vec![other],
    };
    for item in items {
        let call = match interpret_call(&item) {
            Ok((name, args, extra, _)) => {
                let mut reps = repairs.clone();
                reps.extend(extra);
                RawCall {
                    raw: raw.to_string(),
                    outcome: Ok((name, args)),
                    repairs: reps,
                    truncated,
                }
            }
            Err((name, what)) => RawCall {
                raw: raw.to_string(),
                outcome: Err((name, what)),
                repairs: repairs.clone(),
                truncated,
            },
        };
        out.push(call);
    }
}

fn lenient_error_call(raw: &str, e: &super::lenient_json::LenientError, closed: bool) -> RawCall {
    let what = if e.truncated {
        format!(
            "the tool call is cut off ({}){}; the reply may have hit the output-token limit",
            e.message,
            if closed {
                ""
            } else {
                " and has no closing </tool_call>"
            }
        )
    } else {
        format!("the JSON of the tool call is invalid: {}", e.message)
    };
    RawCall::error(raw, name_hint(raw), what, e.truncated)
}

/// Keeps the first of identical accepted calls.
fn dedupe(calls: Vec<RawCall>) -> Vec<RawCall> {
    let mut out: Vec<RawCall> = Vec::with_capacity(calls.len());
    for call in calls {
        if let Ok(ok) = &call.outcome
            && let Some(first) = out.iter_mut().find(|c| c.outcome.as_ref().ok() == Some(ok))
        {
            first.repairs.push(Repair::DuplicateCallDropped);
            continue;
        }
        out.push(call);
    }
    out
}

/// Parses a `<tool_call>` block starting at `at`; returns the end of the block and its calls.
fn parse_block(text: &str, at: usize, ctx: &Ctx<'_>) -> (usize, Vec<RawCall>) {
    let body = at + BLOCK_OPEN.len();
    let p = skip_ws(text, body);
    if text[p..].starts_with(BLOCK_OPEN) {
        // A doubled opener (`<tool_call><tool_call>{…}`): the second one starts the block.
        return (p, Vec::new());
    }
    if text[p..].starts_with(FUNCTION_OPEN) {
        let f = parse_function(text, p);
        let q = skip_ws(text, f.end);
        let block_closed = text[q..].starts_with(BLOCK_CLOSE);
        let end = if block_closed {
            q + BLOCK_CLOSE.len()
        } else {
            f.end
        };
        return (end, vec![xml_call(f, block_closed, &text[at..end], ctx)]);
    }
    let scan = scan_block(text, body);
    let raw_block = &text[at..scan.end];
    if scan.candidates.is_empty() {
        return block_without_json(text, at, body, &scan, ctx);
    }
    if !scan.clean && scan.candidates.len() > 1 {
        let what = format!(
            "the <tool_call> block holds {} JSON objects mixed with other text, so it is not \
             clear which one is the call; put exactly one call object in each block",
            scan.candidates.len()
        );
        return (scan.end, vec![RawCall::error(raw_block, None, what, false)]);
    }
    (scan.end, block_calls(text, raw_block, scan))
}

/// What the inside of a `<tool_call>` block holds.
struct BlockScan {
    /// The end of the block: after `</tool_call>`, at the next `<tool_call>`, or at the end.
    end: usize,
    /// True when `</tool_call>` closes the block.
    closed: bool,
    /// True when nothing but white space and commas surrounds the JSON.
    clean: bool,
    /// True when a code fence (` ``` `, `~~~`) was skipped.
    fence: bool,
    /// True when a special token (`<|…|>`) was skipped.
    special: bool,
    /// JSON candidates: start, end and what parsing found.
    candidates: Vec<(usize, usize, Candidate)>,
}

/// Scans a block's body from `body` up to its end, collecting JSON candidates.
fn scan_block(text: &str, body: usize) -> BlockScan {
    let mut scan = BlockScan {
        end: text.len(),
        closed: false,
        clean: true,
        fence: false,
        special: false,
        candidates: Vec::new(),
    };
    let mut q = body;
    while q < text.len() {
        let rest = &text[q..];
        if rest.starts_with(BLOCK_CLOSE) {
            (scan.end, scan.closed) = (q + BLOCK_CLOSE.len(), true);
            return scan;
        }
        if rest.starts_with(BLOCK_OPEN) {
            scan.end = q;
            return scan;
        }
        let c = rest.chars().next().unwrap_or(' ');
        if c == '{' || (c == '[' && rest[1..].trim_start().starts_with('{')) {
            let (cend, cand) = read_candidate(text, q);
            scan.candidates.push((q, cend, cand));
            q = cend.max(q + 1);
        } else if rest.starts_with("```") || rest.starts_with("~~~") {
            scan.fence = true;
            q = line_end(text, q);
        } else if let Some(len) = special_token_len(rest) {
            scan.special = true;
            q += len;
        } else {
            if !(c.is_whitespace() || c == ',') {
                scan.clean = false;
            }
            q += c.len_utf8();
        }
    }
    scan
}

/// A block with no JSON object: XML after prose, an empty block cut off, or an error.
fn block_without_json(
    text: &str,
    at: usize,
    body: usize,
    scan: &BlockScan,
    ctx: &Ctx<'_>,
) -> (usize, Vec<RawCall>) {
    let (end, closed) = (scan.end, scan.closed);
    let raw_block = &text[at..end];
    let empty = text[body..end]
        .trim_end_matches(BLOCK_CLOSE)
        .trim()
        .is_empty();
    let call = if !closed && empty {
        RawCall::error(
            raw_block,
            None,
            "the <tool_call> block is empty and has no closing </tool_call>; the reply may \
             have been cut off",
            true,
        )
    } else if let Some(f) = text[body..end].find(FUNCTION_OPEN) {
        // XML after prose inside the block.
        let f = parse_function(text, body + f);
        return (end.max(f.end), vec![xml_call(f, closed, raw_block, ctx)]);
    } else {
        RawCall::error(
            raw_block,
            None,
            "the <tool_call> block holds no JSON object",
            !closed,
        )
    };
    (end, vec![call])
}

/// The calls of a block's JSON candidates, with the repairs the block needed.
fn block_calls(text: &str, raw_block: &str, scan: BlockScan) -> Vec<RawCall> {
    let block_repairs: Vec<Repair> = [
        (scan.fence, Repair::StrippedCodeFence),
        (scan.special, Repair::StrippedSpecialToken),
        (!scan.clean, Repair::ProseAroundJson),
        (!scan.closed, Repair::MissingClosingTag),
    ]
    .into_iter()
    .filter_map(|(applies, repair)| applies.then_some(repair))
    .collect();
    let single = scan.candidates.len() == 1;
    let mut calls = Vec::new();
    for (cs, ce, cand) in scan.candidates {
        let raw = if single {
            raw_block
        } else {
            &text[cs..ce.min(text.len())]
        };
        match cand {
            Ok((value, mut reps)) => {
                reps.extend(block_repairs.iter().copied());
                candidate_calls(raw, value, reps, &mut calls);
            }
            Err(e) => calls.push(lenient_error_call(raw, &e, scan.closed)),
        }
    }
    dedupe(calls)
}

/// Length of a special token at the start of `rest` (`<|call|>`, `<|im_end|>`, `</s>`).
fn special_token_len(rest: &str) -> Option<usize> {
    if rest.starts_with("</s>") {
        return Some(4);
    }
    let inner = rest.strip_prefix("<|")?;
    let n = inner.find("|>")?;
    (n <= 40 && !inner[..n].contains(char::is_whitespace)).then_some(n + 4)
}

/// A parsed Qwen3-coder XML function call.
struct XmlFunction {
    name: String,
    params: Vec<(String, String)>,
    end: usize,
    /// `</function>` was present.
    closed: bool,
    /// What is wrong, and whether it looks cut off.
    problem: Option<(String, bool)>,
    repairs: Vec<Repair>,
}

/// Strips exactly one leading and one trailing newline (`\n` or `\r\n`) from a parameter value.
fn strip_one_newline(v: &str) -> &str {
    let v = v
        .strip_prefix("\r\n")
        .or_else(|| v.strip_prefix('\n'))
        .unwrap_or(v);
    v.strip_suffix("\r\n")
        .or_else(|| v.strip_suffix('\n'))
        .unwrap_or(v)
}

/// Parses `<function=NAME>…</function>` starting at `p`.
fn parse_function(text: &str, p: usize) -> XmlFunction {
    let name_start = p + FUNCTION_OPEN.len();
    let line = line_end(text, name_start);
    let mut f = XmlFunction {
        name: String::new(),
        params: Vec::new(),
        end: text.len(),
        closed: false,
        problem: None,
        repairs: Vec::new(),
    };
    let Some(gt) = text[name_start..line].find('>') else {
        f.name = text[name_start..line].trim().to_string();
        f.end = line;
        f.problem = Some((
            "the `<function=NAME>` opener has no closing `>`".to_string(),
            line == text.len(),
        ));
        return f;
    };
    f.name = text[name_start..name_start + gt]
        .trim()
        .trim_matches(|c| c == '"' || c == '\'')
        .to_string();
    let mut q = name_start + gt + 1;
    loop {
        q = skip_ws(text, q);
        let rest = &text[q..];
        if rest.is_empty() {
            f.end = text.len();
            return f;
        }
        if rest.starts_with(FUNCTION_CLOSE) {
            f.closed = true;
            f.end = q + FUNCTION_CLOSE.len();
            return f;
        }
        if rest.starts_with(BLOCK_CLOSE) {
            f.end = q;
            return f;
        }
        if !rest.starts_with(PARAMETER_OPEN) {
            let shown: String = rest.chars().take(40).collect();
            f.problem = Some((
                format!(
                    "unexpected text inside `<function={}>`: `{shown}`; expected \
                     `<parameter=NAME>value</parameter>` or `</function>`",
                    f.name
                ),
                false,
            ));
            f.end = text[q..]
                .find(FUNCTION_CLOSE)
                .map_or(text.len(), |n| q + n + FUNCTION_CLOSE.len());
            return f;
        }
        let key_start = q + PARAMETER_OPEN.len();
        let key_line = line_end(text, key_start);
        let Some(kgt) = text[key_start..key_line].find('>') else {
            f.problem = Some((
                "a `<parameter=NAME>` tag has no closing `>`".to_string(),
                key_line == text.len(),
            ));
            f.end = key_line;
            return f;
        };
        let key = text[key_start..key_start + kgt]
            .trim()
            .trim_matches(|c| c == '"' || c == '\'')
            .to_string();
        let vstart = key_start + kgt + 1;
        if let Some((vend, after)) = parameter_end(text, vstart) {
            f.params
                .push((key, strip_one_newline(&text[vstart..vend]).to_string()));
            q = after;
        } else if let Some(n) = text[vstart..].find(FUNCTION_CLOSE) {
            f.params.push((
                key,
                strip_one_newline(&text[vstart..vstart + n]).to_string(),
            ));
            f.repairs.push(Repair::MissingParameterClose);
            q = vstart + n;
        } else {
            f.problem = Some((
                format!(
                    "the parameter `{key}` of `{}` has no `</parameter>`; the reply seems cut \
                     off, so its value may be incomplete",
                    f.name
                ),
                true,
            ));
            f.end = text.len();
            return f;
        }
    }
}

/// The `</parameter>` ending a value that starts at `vstart`: the first one followed by another
/// parameter, `</function>`, `</tool_call>` or the end of the text (so the tag may appear inside
/// a value); else the first one. Returns (value end, offset after the tag).
fn parameter_end(text: &str, vstart: usize) -> Option<(usize, usize)> {
    let mut first = None;
    let mut from = vstart;
    while let Some(n) = text[from..].find(PARAMETER_CLOSE) {
        let at = from + n;
        let after = at + PARAMETER_CLOSE.len();
        first.get_or_insert((at, after));
        let next = &text[skip_ws(text, after)..];
        if next.is_empty()
            || next.starts_with(PARAMETER_OPEN)
            || next.starts_with(FUNCTION_CLOSE)
            || next.starts_with(BLOCK_CLOSE)
        {
            return Some((at, after));
        }
        from = after;
    }
    first
}

/// Converts an XML parameter value per the tool's JSON Schema `type`: kept as a string unless
/// the schema gives only non-string types and the value parses as JSON of one of them.
fn convert_param(tool: Option<&ToolSpec>, key: &str, value: &str) -> Value {
    let ty = tool.and_then(|t| t.input_schema.get("properties")?.get(key)?.get("type"));
    let types: Vec<&str> = match ty {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if types.is_empty() || types.contains(&"string") {
        return Value::String(value.to_string());
    }
    match serde_json::from_str::<Value>(value.trim()) {
        Ok(v) if types.iter().any(|t| matches_type(&v, t)) => v,
        _ => Value::String(value.to_string()),
    }
}

fn matches_type(v: &Value, ty: &str) -> bool {
    match ty {
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "null" => v.is_null(),
        _ => false,
    }
}

fn xml_call(f: XmlFunction, block_closed: bool, raw: &str, ctx: &Ctx<'_>) -> RawCall {
    let name = (!f.name.is_empty()).then(|| f.name.clone());
    if let Some((what, truncated)) = f.problem {
        return RawCall::error(raw, name, what, truncated);
    }
    let Some(name) = name else {
        return RawCall::error(raw, None, "`<function=>` names no tool", false);
    };
    let tool = ctx.tool(&name);
    let mut args = Map::new();
    for (k, v) in &f.params {
        args.insert(k.clone(), convert_param(tool, k, v));
    }
    let mut repairs = f.repairs;
    let mut truncated = false;
    if !f.closed {
        if block_closed {
            repairs.push(Repair::MissingClosingTag);
        } else {
            repairs.push(Repair::TruncatedXmlCall);
            truncated = true;
        }
    }
    RawCall {
        raw: raw.to_string(),
        outcome: Ok((name, Value::Object(args))),
        repairs,
        truncated,
    }
}

/// Parses `<function=…>` outside a block; a stray `</tool_call>` right after it is consumed.
fn parse_bare_function(text: &str, at: usize, ctx: &Ctx<'_>) -> (usize, RawCall) {
    let f = parse_function(text, at);
    let q = skip_ws(text, f.end);
    let (end, closed) = if text[q..].starts_with(BLOCK_CLOSE) {
        (q + BLOCK_CLOSE.len(), true)
    } else {
        (f.end, false)
    };
    (end, xml_call(f, closed, &text[at..end], ctx))
}

/// Parses Mistral `[TOOL_CALLS]` forms starting at `at`.
fn parse_mistral(text: &str, at: usize) -> (usize, Vec<RawCall>) {
    let mut q = at + MISTRAL_OPEN.len();
    let mut calls = Vec::new();
    loop {
        q = skip_ws(text, q);
        let start = q;
        let rest = &text[q..];
        if rest.starts_with('[') || rest.starts_with('{') {
            let (cend, cand) = read_candidate(text, q);
            let raw = &text[start..cend];
            match cand {
                Ok((value, reps)) => candidate_calls(raw, value, reps, &mut calls),
                Err(e) => calls.push(lenient_error_call(raw, &e, true)),
            }
            q = cend;
        } else {
            let name_len = rest
                .bytes()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
                .count();
            if name_len == 0 {
                let end = line_end(text, q);
                calls.push(RawCall::error(
                    &text[at..end],
                    None,
                    "expected a tool name or JSON after [TOOL_CALLS]",
                    q == text.len(),
                ));
                return (end, calls);
            }
            let name = rest[..name_len].to_string();
            let mut r = q + name_len;
            if let Some(id_rest) = text[r..].strip_prefix("[CALL_ID]") {
                r += "[CALL_ID]".len()
                    + id_rest
                        .bytes()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-')
                        .count();
            }
            if text[r..].starts_with("[ARGS]") {
                r += "[ARGS]".len();
            }
            r = skip_ws(text, r);
            if !text[r..].starts_with('{') {
                let end = line_end(text, r);
                calls.push(RawCall::error(
                    &text[start..end],
                    Some(name.clone()),
                    format!("expected the JSON arguments object of `{name}` after its name"),
                    r == text.len(),
                ));
                return (end, calls);
            }
            let (cend, cand) = read_candidate(text, r);
            let raw = &text[start..cend];
            match cand {
                Ok((Value::Object(args), reps)) => {
                    let truncated = reps.contains(&Repair::ClosedTruncatedJson);
                    calls.push(RawCall {
                        raw: raw.to_string(),
                        outcome: Ok((name, Value::Object(args))),
                        repairs: reps,
                        truncated,
                    });
                }
                Ok((other, _)) => calls.push(RawCall::error(
                    raw,
                    Some(name),
                    format!(
                        "the arguments must be a JSON object, found {}",
                        json_kind(&other)
                    ),
                    false,
                )),
                Err(e) => {
                    let mut call = lenient_error_call(raw, &e, true);
                    if let Err((n, _)) = &mut call.outcome {
                        *n = Some(name);
                    }
                    calls.push(call);
                }
            }
            q = cend;
        }
        let r = skip_ws(text, q);
        if text[r..].starts_with(MISTRAL_OPEN) {
            q = r + MISTRAL_OPEN.len();
            continue;
        }
        if text[r..].starts_with("</s>") {
            q = r + 4;
        }
        return (q, dedupe(calls));
    }
}

/// A region of call markup whose opener is missing (e.g. `</parameter>` … `</function>` with
/// no `<function=NAME>`): from the markup lines before the first marker to the line of the last
/// marker before any real opener. `None` when the region has no parameter tag and no
/// `</tool_call>` (a lone `</function>` is too common in prose to call it a broken call).
fn orphan_region(
    text: &str,
    cursor: usize,
    at: usize,
    scanner: &ProseScanner<'_>,
) -> Option<(usize, usize, RawCall)> {
    let line_start = |pos: usize| text[..pos].rfind('\n').map_or(0, |n| n + 1);
    let mut start = line_start(at).max(cursor);
    while start > cursor {
        let prev = line_start(start - 1).max(cursor);
        let line = text[prev..start].trim();
        if line.starts_with('<') && !line.is_empty() {
            start = prev;
        } else {
            break;
        }
    }
    let is_specific = |p: usize| {
        [PARAMETER_OPEN, PARAMETER_CLOSE, BLOCK_CLOSE]
            .iter()
            .any(|m| text[p..].starts_with(m))
    };
    let mut specific = is_specific(at);
    let mut look = scanner.clone();
    let mut last = at;
    let mut limit = text.len();
    while let Some((p, kind)) = look.next_opener() {
        if kind != Opener::Orphan {
            limit = p;
            break;
        }
        specific |= is_specific(p);
        last = p;
    }
    if !specific {
        return None;
    }
    let end = line_end(text, last).min(limit);
    let marker = super::scan::opener_at(&text[at..]).map_or("", |(m, _)| m);
    let call = RawCall::error(
        &text[start..end],
        None,
        format!(
            "found tool-call markup (`{marker}`) without a `<function=NAME>` or `<tool_call>` \
             opener, so the tool name cannot be recovered"
        ),
        false,
    );
    Some((start, end, call))
}

/// A whole message that is exactly one code fence (```` ``` ```` or `~~~`, any info string)
/// holding one JSON call object of an offered tool with an arguments object. Such a call is not
/// run (fenced text never is) but reported as an error, so the model learns the block form
/// instead of the turn ending with the JSON as the answer.
fn fenced_json_call(text: &str, ctx: &Ctx<'_>) -> Option<RawCall> {
    let t = text.trim();
    let fence = if t.starts_with("```") {
        "```"
    } else if t.starts_with("~~~") {
        "~~~"
    } else {
        return None;
    };
    let after_open = &t[fence.len()..];
    let body_start = after_open.find('\n')? + 1;
    let inner = after_open[body_start..].strip_suffix(fence)?;
    if inner.contains(fence) {
        return None;
    }
    let value: Value = serde_json::from_str(inner.trim()).ok()?;
    let (name, args, _, had_args) = interpret_call(&value).ok()?;
    if !had_args || !args.is_object() || ctx.tool(&name).is_none() {
        return None;
    }
    Some(RawCall::error(
        t,
        Some(name),
        "this tool call was written inside a code fence, where calls are never run; \
         write it as a <tool_call> block without the fence",
        false,
    ))
}

/// A whole message that is exactly one JSON call object of an offered tool, with an arguments
/// object (strict JSON only).
fn bare_json_call(text: &str, ctx: &Ctx<'_>) -> Option<RawCall> {
    let t = text.trim();
    if !t.starts_with('{') {
        return None;
    }
    let value: Value = serde_json::from_str(t).ok()?;
    let (name, args, repairs, had_args) = interpret_call(&value).ok()?;
    if !had_args || !args.is_object() || ctx.tool(&name).is_none() {
        return None;
    }
    Some(RawCall {
        raw: t.to_string(),
        outcome: Ok((name, args)),
        repairs,
        truncated: false,
    })
}
