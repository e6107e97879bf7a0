//! Every case file of `tests/data/toolcall-text/` (see `tests/data/README.md`) parsed as its
//! `INDEX.md` row says, plus variants that pin the rules down.

use ahelper_agents::model::ToolSpec;
use ahelper_agents::model::text_protocol::{
    ParsedText, Repair, TextToolCallError, parse_assistant_text,
};
use serde_json::{Value, json};
use std::path::PathBuf;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/toolcall-text")
}

fn case(name: &str) -> String {
    std::fs::read_to_string(data_dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn spec(name: &str, props: Value, required: &[&str]) -> ToolSpec {
    ToolSpec {
        name: name.to_string(),
        description: format!("The {name} tool."),
        input_schema: json!({"type": "object", "properties": props, "required": required}),
    }
}

/// The standard tools with the argument types the parser may look at.
fn tools() -> Vec<ToolSpec> {
    vec![
        spec(
            "read_file",
            json!({"path": {"type": "string"}, "offset": {"type": ["integer", "null"]}, "limit": {"type": ["integer", "null"]}}),
            &["path"],
        ),
        spec(
            "write_file",
            json!({"path": {"type": "string"}, "content": {"type": "string"}}),
            &["path", "content"],
        ),
        spec(
            "edit_file",
            json!({"path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}, "replace_all": {"type": "boolean"}}),
            &["path", "old_string", "new_string"],
        ),
        spec("list_dir", json!({"path": {"type": "string"}}), &[]),
        spec("glob", json!({"pattern": {"type": "string"}}), &["pattern"]),
        spec(
            "grep",
            json!({"pattern": {"type": "string"}, "path": {"type": "string"}, "max_results": {"type": "integer"}}),
            &["pattern"],
        ),
        spec(
            "run_command",
            json!({"command": {"type": "string"}, "timeout_ms": {"type": "integer"}}),
            &["command"],
        ),
    ]
}

fn read_only(name: &str) -> bool {
    matches!(name, "read_file" | "list_dir" | "glob" | "grep")
}

fn parse(text: &str) -> ParsedText {
    parse_assistant_text(text, &tools(), &read_only)
}

/// The accepted calls as (name, input); panics on any error.
fn ok_calls(p: &ParsedText) -> Vec<(String, Value)> {
    p.calls
        .iter()
        .map(|c| match c {
            Ok(c) => (c.name.clone(), c.input.clone()),
            Err(e) => panic!("unexpected error: {}", e.error),
        })
        .collect()
}

/// Asserts that the accepted calls of `p` are `expected`, as (name, input), and that there is no
/// error.
#[track_caller]
fn assert_calls(p: &ParsedText, expected: &[(&str, Value)]) {
    let expected: Vec<(String, Value)> = expected
        .iter()
        .map(|(name, input)| (name.to_string(), input.clone()))
        .collect();
    assert_eq!(ok_calls(p), expected);
}

/// Asserts that each of `texts` parses to no call, its text unchanged.
#[track_caller]
fn assert_plain_text(texts: &[&str]) {
    for text in texts {
        let p = parse(text);
        assert!(p.calls.is_empty(), "{text}");
        assert_eq!(p.text, *text);
    }
}

fn single_error(p: &ParsedText) -> TextToolCallError {
    assert_eq!(p.calls.len(), 1, "{:?}", p.calls);
    p.calls[0].clone().expect_err("expected an error")
}

fn repairs_of(p: &ParsedText) -> Vec<Repair> {
    p.repairs.iter().flat_map(|r| r.repairs.clone()).collect()
}

/// An error message must say what is wrong, quote the raw text and give the format.
fn assert_good_error(e: &TextToolCallError, what: &str, quoted: &str) {
    assert!(e.error.contains(what), "missing {what:?} in {}", e.error);
    assert!(
        e.error.contains(quoted),
        "missing quote {quoted:?} in {}",
        e.error
    );
    assert!(e.error.contains("<tool_call>"), "no format in {}", e.error);
    assert!(
        e.error.contains("\"arguments\""),
        "no format in {}",
        e.error
    );
}

const HANDLED: &[&str] = &[
    "01-baseline-hermes-json.txt",
    "02-bare-json-no-tags.txt",
    "04-trailing-comma.txt",
    "05-single-quotes.txt",
    "07-literal-backslash-n-outside-string.txt",
    "08-truncated-missing-braces.txt",
    "10-two-objects-in-one-block.txt",
    "11-two-separate-blocks.txt",
    "13-unbalanced-brace-inside-string.txt",
    "14-qwen3-coder-xml.txt",
    "16-bare-function-xml-truncated.txt",
    "17-broken-xml-missing-function-opener.txt",
    "19-invoke-inside-code-fence-is-documentation.txt",
    "20-mistral-tool-calls-formats.txt",
    "22-special-token-suffix-and-unquoted-key.txt",
    "23-prose-inside-tool-block.txt",
    "25-unknown-tool-name.txt",
];

#[test]
fn every_case_file_has_a_test() {
    let mut files: Vec<String> = std::fs::read_dir(data_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".txt"))
        .collect();
    files.sort();
    assert_eq!(files, HANDLED);
    let index = case("INDEX.md");
    for f in HANDLED {
        assert!(index.contains(f), "{f} not in INDEX.md");
    }
}

#[test]
fn case_01_baseline_hermes_json() {
    let p = parse(&case("01-baseline-hermes-json.txt"));
    assert_eq!(p.text, "I'll read the file first.");
    assert_calls(&p, &[("read_file", json!({"path": "src/lib.rs"}))]);
    assert_eq!(p.calls[0].as_ref().unwrap().id, "call_text_1");
    assert!(p.repairs.is_empty());
}

#[test]
fn case_02_bare_json_only_when_whole_message_is_a_registered_call() {
    let text = case("02-bare-json-no-tags.txt");
    let p = parse(&text);
    assert_eq!(p.text, "");
    assert_calls(&p, &[("read_file", json!({"path": "src/lib.rs"}))]);
    // Not the whole message → text.
    let with_prose = format!("Here is what I would call:\n{text}");
    let p = parse(&with_prose);
    assert!(p.calls.is_empty());
    assert_eq!(p.text, with_prose);
    // Unregistered name → text.
    let unknown = r#"{"name": "read_files", "arguments": {"path": "src/lib.rs"}}"#;
    let p = parse(unknown);
    assert!(p.calls.is_empty());
    assert_eq!(p.text, unknown);
    // No arguments object → text.
    let p = parse(r#"{"name": "read_file", "path": "x"}"#);
    assert!(p.calls.is_empty());
    // Two objects → text.
    let p = parse(&format!("{}{}", text.trim(), text.trim()));
    assert!(p.calls.is_empty());
}

#[test]
fn case_04_trailing_comma_is_repaired_never_empty_args() {
    let p = parse(&case("04-trailing-comma.txt"));
    let input = json!({"path": "notes.md", "content": "hello"});
    assert_calls(&p, &[("write_file", input)]);
    assert_eq!(repairs_of(&p), vec![Repair::TrailingComma]);
}

#[test]
fn case_05_single_quotes_repaired_for_simple_read_only_call_only() {
    let p = parse(&case("05-single-quotes.txt"));
    assert_calls(&p, &[("read_file", json!({"path": "README.md"}))]);
    assert!(repairs_of(&p).contains(&Repair::SingleQuotes));

    // An apostrophe inside a single-quoted string → error.
    let p =
        parse("<tool_call>\n{'name': 'read_file', 'arguments': {'path': 'it's.md'}}\n</tool_call>");
    let e = single_error(&p);
    assert_good_error(&e, "invalid", "it's.md");
    // Escapes inside a single-quoted string → error.
    let p = parse(
        "<tool_call>\n{'name': 'read_file', 'arguments': {'path': 'a\\'b.md'}}\n</tool_call>",
    );
    single_error(&p);
    // The same repair on a mutating tool → error.
    let p = parse(
        "<tool_call>\n{'name': 'write_file', 'arguments': {'path': 'a.md', 'content': 'x'}}\n</tool_call>",
    );
    let e = single_error(&p);
    assert_eq!(e.name.as_deref(), Some("write_file"));
    assert_good_error(&e, "not repaired by guessing", "a.md");
}

#[test]
fn case_07_literal_backslash_n_between_tokens() {
    let p = parse(&case("07-literal-backslash-n-outside-string.txt"));
    let input = json!({"path": "query.py", "view_range": [2142, 2250]});
    assert_calls(&p, &[("read_file", input)]);
    assert!(repairs_of(&p).contains(&Repair::LiteralEscapeBetweenTokens));
}

#[test]
fn case_08_truncated_call_is_an_error_for_mutating_tools() {
    let text = case("08-truncated-missing-braces.txt");
    let p = parse(&text);
    let e = single_error(&p);
    assert_eq!(e.name.as_deref(), Some("run_command"));
    assert!(e.truncated);
    assert_good_error(&e, "cut off", "find . -name 'messages.py' -type f");
    assert_eq!(p.text, "");

    // A read-only tool cut off after a complete value may be closed.
    let p = parse("<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.rs\"\n");
    assert_calls(&p, &[("read_file", json!({"path": "a.rs"}))]);
    assert!(repairs_of(&p).contains(&Repair::ClosedTruncatedJson));

    // Cut inside a string: never repaired, whatever the tool.
    let p = parse("<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.r");
    let e = single_error(&p);
    assert!(e.truncated);
    assert_eq!(e.name.as_deref(), Some("read_file"));
}

#[test]
fn case_10_two_objects_in_one_block() {
    let text = case("10-two-objects-in-one-block.txt");
    let p = parse(&text);
    assert_calls(
        &p,
        &[
            ("read_file", json!({"path": "a.rs"})),
            ("read_file", json!({"path": "b.rs"})),
        ],
    );
    let ids: Vec<_> = p
        .calls
        .iter()
        .map(|c| c.as_ref().unwrap().id.clone())
        .collect();
    assert_eq!(ids, ["call_text_1", "call_text_2"]);

    // Identical objects run once.
    let p = parse(
        "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.rs\"}}{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.rs\"}}\n</tool_call>",
    );
    assert_eq!(ok_calls(&p).len(), 1);
    assert!(repairs_of(&p).contains(&Repair::DuplicateCallDropped));

    // `}{` inside a string is not a boundary.
    let p = parse(
        "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"x\", \"content\": \"}{\"}}{\"name\": \"read_file\", \"arguments\": {\"path\": \"b.rs\"}}\n</tool_call>",
    );
    assert_calls(
        &p,
        &[
            ("write_file", json!({"path": "x", "content": "}{"})),
            ("read_file", json!({"path": "b.rs"})),
        ],
    );

    // A JSON array of calls in one block.
    let p = parse(
        "<tool_call>[{\"name\": \"glob\", \"arguments\": {\"pattern\": \"*.rs\"}}, {\"name\": \"list_dir\", \"arguments\": {}}]</tool_call>",
    );
    assert_eq!(ok_calls(&p).len(), 2);
}

#[test]
fn case_11_two_separate_blocks_in_order() {
    let p = parse(&case("11-two-separate-blocks.txt"));
    assert_eq!(p.text, "Reading both files.");
    assert_calls(
        &p,
        &[
            ("read_file", json!({"path": "a.rs"})),
            ("read_file", json!({"path": "b.rs"})),
        ],
    );
}

#[test]
fn case_13_brace_inside_string() {
    let p = parse(&case("13-unbalanced-brace-inside-string.txt"));
    let input = json!({"command": "mkdir -p test/{test1,test2"});
    assert_calls(&p, &[("run_command", input)]);
    assert!(p.repairs.is_empty());
}

#[test]
fn case_14_qwen3_coder_xml() {
    let p = parse(&case("14-qwen3-coder-xml.txt"));
    let input = json!({"path": "src/app.py", "old_string": "def f():\n    return 1", "new_string": "def f():\n    return 2"});
    assert_calls(&p, &[("edit_file", input)]);
    assert_eq!(p.text, "");
    assert!(p.repairs.is_empty());

    // Exactly one newline is stripped on each side; typed values follow the schema.
    let input = json!({"pattern": "\nfn main\n", "max_results": 5, "path": "7"});
    let p = parse(
        "<tool_call>
<function=grep>
<parameter=pattern>

fn main

</parameter>
<parameter=max_results>
5
</parameter>
<parameter=path>
7
</parameter>
</function>
</tool_call>",
    );
    assert_calls(&p, &[("grep", input)]);

    // `</parameter>` inside a value does not end it when more text of the value follows.
    let input = json!({"path": "x.xml", "content": "a</parameter>b"});
    let p = parse(
        "<function=write_file>
<parameter=path>
x.xml
</parameter>
<parameter=content>
a</parameter>b
</parameter>
</function>",
    );
    assert_calls(&p, &[("write_file", input)]);
}

#[test]
fn case_16_bare_function_xml_truncated() {
    let p = parse(&case("16-bare-function-xml-truncated.txt"));
    let e = single_error(&p);
    assert_eq!(e.name.as_deref(), Some("run_command"));
    assert!(e.truncated);
    assert_good_error(&e, "cut off", "percentage");

    // A read-only call cut after its last complete parameter is salvaged.
    let p = parse(
        "<function=grep>\n<parameter=pattern>\npercentage\n</parameter>\n<parameter=path>\nsrc\n</parameter>\n",
    );
    assert_calls(
        &p,
        &[("grep", json!({"pattern": "percentage", "path": "src"}))],
    );
    assert!(repairs_of(&p).contains(&Repair::TruncatedXmlCall));

    // A value without `</parameter>` and no `</function>` is never used.
    let p = parse("<function=grep>\n<parameter=pattern>\nperc");
    assert!(single_error(&p).truncated);
}

#[test]
fn case_17_broken_xml_without_function_opener() {
    let text = case("17-broken-xml-missing-function-opener.txt");
    let p = parse(&text);
    let e = single_error(&p);
    assert_eq!(e.name, None);
    assert_good_error(&e, "cannot be recovered", "Add timestamp comment");
    assert_eq!(e.raw.trim(), text.trim());
    assert_eq!(p.text, "");
}

#[test]
fn case_19_calls_in_code_fences_or_quotes_are_text() {
    let text = case("19-invoke-inside-code-fence-is-documentation.txt");
    assert_plain_text(&[text.as_str()]);
    assert_plain_text(&[
        "Format:\n```\n<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"command\": \"rm -rf /\"}}\n</tool_call>\n```\n",
        "Write `<tool_call>{\"name\": \"run_command\", \"arguments\": {\"command\": \"ls\"}}</tool_call>` to run.",
        "> <tool_call>{\"name\": \"run_command\", \"arguments\": {\"command\": \"ls\"}}</tool_call>\nquoted",
        "~~~\n<function=run_command>\n<parameter=command>\nls\n</parameter>\n</function>\n~~~",
        "Call it like this:\n```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n```",
    ]);
}

/// Seen with Qwen2.5-Coder-1.5B-Instruct under `tool_protocol = "text"`: the whole reply is one
/// fenced JSON call. It is not run (fenced text never is) but must not pass as the final answer
/// either: it becomes an error result telling the model to use a `<tool_call>` block.
#[test]
fn whole_message_fenced_call_is_an_error_not_an_answer() {
    for text in [
        "```json\n{\n  \"name\": \"read_file\",\n  \"arguments\": {\n    \"path\": \"hello.py\"\n  }\n}\n```",
        "```\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"hello.py\"}}\n```\n",
        "~~~json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"hello.py\"}}\n~~~",
    ] {
        let p = parse(text);
        assert_eq!(p.text, "", "{text}");
        assert_eq!(p.calls.len(), 1, "{text}");
        let e = p.calls[0].as_ref().unwrap_err();
        assert_eq!(e.name.as_deref(), Some("read_file"));
        assert!(e.error.contains("code fence"), "{}", e.error);
        assert!(e.error.contains("<tool_call>"), "{}", e.error);
        assert!(!e.truncated);
    }
    // Prose around it, an unknown tool, two fences, no arguments object: plain text.
    assert_plain_text(&[
        "Call it like this:\n```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n```",
        "```json\n{\"name\": \"read_files\", \"arguments\": {\"path\": \"a\"}}\n```",
        "```json\n{\"name\": \"read_file\", \"path\": \"a\"}\n```",
        "```\n{\"name\": \"read_file\", \"arguments\": {}}\n```\n```\n{}\n```",
    ]);
}

/// Splits the Mistral case file into its `--- shape X ... ---` variants.
fn mistral_variants() -> Vec<(char, String)> {
    let text = case("20-mistral-tool-calls-formats.txt");
    let mut out: Vec<(char, String)> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("--- shape ") {
            out.push((rest.chars().next().unwrap(), String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}

#[test]
fn case_20_mistral_tool_calls_formats() {
    let variants = mistral_variants();
    assert_eq!(
        variants.iter().map(|v| v.0).collect::<String>(),
        "ABC",
        "{variants:?}"
    );
    let a = json!({"path": "a.rs"});
    let b = json!({"path": "b.rs"});
    for (shape, body) in &variants {
        let p = parse(body);
        let expected = match shape {
            'A' | 'C' => vec![
                ("read_file".to_string(), a.clone()),
                ("read_file".to_string(), b.clone()),
            ],
            _ => vec![("read_file".to_string(), a.clone())],
        };
        assert_eq!(ok_calls(&p), expected, "shape {shape}");
        assert_eq!(p.text, "", "shape {shape}");
    }
    // Split right after the marker, and a trailing end-of-sequence token.
    let p = parse("[TOOL_CALLS]\nglob{\"pattern\": \"*.md\"}</s>");
    assert_calls(&p, &[("glob", json!({"pattern": "*.md"}))]);
    // An empty reply is plain (empty) text: the agent loop decides what it means.
    let p = parse("");
    assert!(p.calls.is_empty());
    assert_eq!(p.text, "");
}

#[test]
fn case_22_special_token_suffix_and_unquoted_key() {
    let p = parse(&case("22-special-token-suffix-and-unquoted-key.txt"));
    assert_calls(&p, &[("glob", json!({"pattern": "**/*.rs"}))]);
    let reps = repairs_of(&p);
    assert!(reps.contains(&Repair::StrippedSpecialToken), "{reps:?}");
    assert!(reps.contains(&Repair::UnquotedKey), "{reps:?}");

    // The special token alone is fine for any tool.
    let p = parse(
        "<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"command\": \"ls\"}}<|call|>\n</tool_call>",
    );
    assert_calls(&p, &[("run_command", json!({"command": "ls"}))]);
    // The key repair on a mutating tool → error.
    let p = parse(
        "<tool_call>\n{\"name\": \"run_command\", \"arguments\": {command\": \"ls\"}}\n</tool_call>",
    );
    let e = single_error(&p);
    assert_good_error(&e, "not repaired by guessing", "command");
    // Two unquoted keys are ambiguous even for a read-only tool.
    let p = parse(
        "<tool_call>\n{\"name\": \"grep\", \"arguments\": {pattern\": \"x\", path\": \"src\"}}\n</tool_call>",
    );
    single_error(&p);
}

#[test]
fn case_23_prose_inside_tool_block() {
    let p = parse(&case("23-prose-inside-tool-block.txt"));
    assert_calls(&p, &[("read_file", json!({"path": "Cargo.toml"}))]);
    assert!(repairs_of(&p).contains(&Repair::ProseAroundJson));

    // More than one candidate object with prose → error.
    let p = parse(
        "<tool_call>\nEither {\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}} or maybe {\"name\": \"write_file\", \"arguments\": {\"path\": \"a\", \"content\": \"\"}}\n</tool_call>",
    );
    let e = single_error(&p);
    assert_good_error(&e, "not clear which one", "Either");
}

#[test]
fn case_25_unknown_tool_name() {
    let p = parse(&case("25-unknown-tool-name.txt"));
    let e = single_error(&p);
    assert_eq!(e.name.as_deref(), Some("security-review"));
    assert!(
        e.error.starts_with(
            "unknown tool `security-review`; available: read_file, write_file, edit_file, list_dir, glob, grep, run_command"
        ),
        "{}",
        e.error
    );
    assert_good_error(&e, "unknown tool", "packages/contracts");
}

#[test]
fn closing_tag_inside_a_string_argument() {
    let input = json!({"path": "doc.md", "content": "end a call with </tool_call> and <tool_call> starts one"});
    let p = parse(
        "Writing the docs.\n<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"doc.md\", \"content\": \"end a call with </tool_call> and <tool_call> starts one\"}}\n</tool_call>\nDone.",
    );
    assert_calls(&p, &[("write_file", input)]);
    assert_eq!(p.text, "Writing the docs.\n\nDone.");
}

#[test]
fn fences_aliases_and_wrappers_inside_blocks() {
    let p = parse(
        "<tool_call>\n```json\n{\"name\": \"read_file\", \"parameters\": {\"path\": \"a\"}}\n```\n</tool_call>\n<tool_call>{\"function\": {\"name\": \"glob\", \"input\": {\"pattern\": \"*\"}}}</tool_call><tool_call>{\"type\": \"function\", \"function\": {\"name\": \"grep\", \"arguments\": \"{\\\"pattern\\\": \\\"x\\\"}\"}}</tool_call>",
    );
    assert_calls(
        &p,
        &[
            ("read_file", json!({"path": "a"})),
            ("glob", json!({"pattern": "*"})),
            ("grep", json!({"pattern": "x"})),
        ],
    );
    let reps = repairs_of(&p);
    assert!(reps.contains(&Repair::StrippedCodeFence));
    assert!(reps.contains(&Repair::StringifiedArguments));
}

#[test]
fn raw_newlines_in_strings_are_kept_for_any_tool() {
    let input = json!({"path": "a.py", "content": "x = 1\n\ty = 2\n"});
    let p = parse(
        "<tool_call>
{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.py\", \"content\": \"x = 1
\ty = 2
\"}}
</tool_call>",
    );
    assert_calls(&p, &[("write_file", input)]);
}

#[test]
fn missing_closing_tag_with_complete_json_is_accepted() {
    let p = parse(
        "<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"command\": \"cargo test\"}}",
    );
    assert_calls(&p, &[("run_command", json!({"command": "cargo test"}))]);
    assert!(repairs_of(&p).contains(&Repair::MissingClosingTag));
}

#[test]
fn malformed_blocks_are_errors_not_dropped() {
    for (text, what) in [
        (
            "<tool_call>\nread the file please\n</tool_call>",
            "no JSON object",
        ),
        (
            "<tool_call>\n{\"arguments\": {\"path\": \"a\"}}\n</tool_call>",
            "no string \"name\"",
        ),
        (
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": [1]}\n</tool_call>",
            "must be a JSON object",
        ),
        (
            "<tool_call>\n{\"name\": \"read_file\", \"path\": \"a\"}\n</tool_call>",
            "inside an \"arguments\" object",
        ),
        (
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\" \"a\"}}\n</tool_call>",
            "expected `:`",
        ),
        ("Let me look.\n<tool_call>", "empty"),
    ] {
        let p = parse(text);
        let e = single_error(&p);
        assert!(e.error.contains(what), "{text}: {}", e.error);
        assert!(e.error.contains("Expected format"), "{}", e.error);
    }
}

#[test]
fn error_messages_truncate_long_raw_text() {
    let long = "x".repeat(5000);
    let p = parse(&format!(
        "<tool_call>\n{{\"name\": \"write_file\", \"arguments\": {{\"path\": \"a\", \"content\": \"{long}\" oops}}}}\n</tool_call>"
    ));
    let e = single_error(&p);
    assert!(e.raw.len() > 5000);
    assert!(e.error.len() < 1500, "{}", e.error.len());
    assert!(e.error.contains("characters cut"));
}

#[test]
fn doubled_opener_counts_once() {
    let p = parse(
        "Reading.\n<tool_call>\n<tool_call>{\"name\": \"glob\", \"arguments\": {\"pattern\": \"*\"}}</tool_call>",
    );
    assert_calls(&p, &[("glob", json!({"pattern": "*"}))]);
    assert_eq!(p.text, "Reading.");
}

mod fuzz {
    use super::*;
    use ahelper_agents::model::text_protocol::DisplayGate;
    use proptest::prelude::*;

    const TOKENS: &[&str] = &[
        "<tool_call>",
        "</tool_call>",
        "<function=",
        "</function>",
        "<parameter=",
        "</parameter>",
        "[TOOL_CALLS]",
        "[ARGS]",
        "{",
        "}",
        "[",
        "]",
        "\"",
        "'",
        ":",
        ",",
        "\\",
        "\\n",
        "\n",
        "`",
        "```",
        "> ",
        "name",
        "\"name\": \"read_file\"",
        "\"arguments\": ",
        "run_command",
        "é",
        "😀",
        "<|call|>",
        " ",
        "1",
        "true",
        "<",
        ">",
        "|",
    ];

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 400,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x7e47),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn parser_and_gate_never_panic(
            picks in proptest::collection::vec(0..TOKENS.len(), 0..40),
            cuts in proptest::collection::vec(1usize..6, 1..20),
        ) {
            let text: String = picks.iter().map(|&i| TOKENS[i]).collect();
            let p = parse(&text);
            for c in p.calls.iter().flatten() {
                prop_assert!(c.input.is_object());
            }
            let mut gate = DisplayGate::new();
            let chars: Vec<char> = text.chars().collect();
            let mut i = 0;
            let mut k = 0;
            let mut shown = String::new();
            while i < chars.len() {
                let end = (i + cuts[k % cuts.len()]).min(chars.len());
                shown.push_str(&gate.push(&chars[i..end].iter().collect::<String>()));
                i = end;
                k += 1;
            }
            prop_assert!(text.starts_with(&shown));
            prop_assert_eq!(gate.shown(), shown.as_str());
            let rest = gate.finish(&p.text);
            if p.calls.is_empty() {
                prop_assert_eq!(format!("{shown}{rest}"), text);
            }
        }
    }
}

#[test]
fn lone_function_closing_tag_in_prose_is_text() {
    let text = "In JSX you never write </function>; that is not HTML.";
    let p = parse(text);
    assert!(p.calls.is_empty());
    assert_eq!(p.text, text);
    // But a stray `</tool_call>` is broken call markup.
    let p = parse("{\"path\": \"a\"}\n</tool_call>");
    let e = single_error(&p);
    assert!(e.error.contains("</tool_call>"), "{}", e.error);
}
