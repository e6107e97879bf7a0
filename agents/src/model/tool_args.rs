//! Validation of streamed tool-call arguments, shared by both providers.
//!
//! A tool call is executed only when its arguments parse as a complete JSON object. Anything
//! else (cut off by the output-token limit, malformed, not an object) becomes a
//! [`ModelEvent::InvalidToolCall`](super::ModelEvent::InvalidToolCall) whose error text is
//! written for the model to read and act on.

use serde_json::Value;

/// Error text for a tool call cut off by the output-token limit.
pub const TRUNCATED_BY_MAX_TOKENS: &str = "output truncated by max_tokens before the arguments of \
this tool call were complete; the call was not executed. Send it again with smaller arguments \
(for example, write a large file in several smaller edits).";

/// Checks the raw argument text of one tool call.
///
/// * `raw` — the concatenated argument text as streamed.
/// * `empty_default` — the arguments to use when `raw` is empty (Anthropic's
///   `content_block_start` input, normally `{}`); `None` means `{}`.
/// * `truncated` — the output-token limit ended the turn while this call may have been cut
///   off; an empty or unparseable `raw` is then reported with [`TRUNCATED_BY_MAX_TOKENS`].
///
/// Returns the arguments object, or the error text for an invalid tool call.
pub fn validate_arguments(
    raw: &str,
    empty_default: Option<&Value>,
    truncated: bool,
) -> Result<Value, String> {
    if raw.trim().is_empty() {
        if truncated {
            return Err(TRUNCATED_BY_MAX_TOKENS.to_string());
        }
        return match empty_default {
            Some(v @ Value::Object(_)) => Ok(v.clone()),
            _ => Ok(Value::Object(Default::default())),
        };
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(v) => check_object(v),
        Err(_) if truncated => Err(TRUNCATED_BY_MAX_TOKENS.to_string()),
        Err(e) => Err(format!(
            "the arguments of this tool call are not valid JSON ({e}); they were probably cut \
             off. The call was not executed; send it again with complete arguments."
        )),
    }
}

/// What kind of JSON value `v` is, as an error message names it: `null`, `a boolean`, `a
/// number`, `a string`, `an array`, `an object`.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `Ok(v)` when `v` is a JSON object, else the error text for an invalid tool call.
pub fn check_object(v: Value) -> Result<Value, String> {
    if v.is_object() {
        return Ok(v);
    }
    let kind = json_kind(&v);
    Err(format!(
        "the arguments of a tool call must be a JSON object, but they were {kind}; the call was \
         not executed. Send it again with an object of named arguments."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn complete_objects_pass() {
        assert_eq!(
            validate_arguments(r#"{"a":1}"#, None, false),
            Ok(json!({"a":1}))
        );
        assert_eq!(
            validate_arguments(r#"{"a":1}"#, None, true),
            Ok(json!({"a":1})),
            "a complete object is complete even when the turn hit the limit"
        );
    }

    #[test]
    fn empty_arguments_mean_no_arguments_unless_truncated() {
        assert_eq!(validate_arguments("", None, false), Ok(json!({})));
        assert_eq!(
            validate_arguments(" ", Some(&json!({"x": 1})), false),
            Ok(json!({"x": 1}))
        );
        assert_eq!(
            validate_arguments("", None, true),
            Err(TRUNCATED_BY_MAX_TOKENS.to_string())
        );
    }

    #[test]
    fn broken_and_non_object_arguments_are_errors() {
        let e = validate_arguments(r#"{"path": "a"#, None, false).unwrap_err();
        assert!(
            e.contains("not valid JSON") && e.contains("not executed"),
            "{e}"
        );
        let e = validate_arguments(r#"{"path": "a"#, None, true).unwrap_err();
        assert!(e.starts_with("output truncated by max_tokens"), "{e}");
        let e = validate_arguments("[1]", None, false).unwrap_err();
        assert!(e.contains("an array"), "{e}");
        assert!(validate_arguments(r#"{"a":1}{"b":2}"#, None, false).is_err());
    }
}
