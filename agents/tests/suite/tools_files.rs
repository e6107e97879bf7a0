//! File and search tools through the registry, on real files in temp directories:
//! `read_file`, `write_file`, `edit_file`, `list_dir`, `glob`, `grep`.

use super::support::tools::Workspace;
use ahelper_agents::tools::{FileClaims, ToolKind, ToolRegistry};
use dashmap::DashMap;
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// A workspace that is a git repository, so that `.gitignore` applies (ripgrep's rule).
fn fixture() -> Workspace {
    let f = Workspace::new();
    fs::create_dir_all(f.ws.join(".git")).unwrap();
    f
}

/// `edit_file` arguments: replace `old` by `new` in `path`.
fn edit_args(path: &str, old: &str, new: &str) -> Value {
    json!({"path": path, "old_string": old, "new_string": new})
}

/// `write_file` arguments: write `content` to `path`.
fn write_args(path: &str, content: &str) -> Value {
    json!({"path": path, "content": content})
}

// ----------------------------------------------------------------------------- schemas, args

#[tokio::test]
async fn every_tool_has_a_schema_description_kind_and_subject() {
    let tools = ToolRegistry::standard();
    let expect = [
        ("read_file", ToolKind::Read, "path"),
        ("write_file", ToolKind::Edit, "path"),
        ("edit_file", ToolKind::Edit, "path"),
        ("list_dir", ToolKind::Read, "path"),
        ("glob", ToolKind::Read, "pattern"),
        ("grep", ToolKind::Read, "pattern"),
        ("run_command", ToolKind::Execute, "command"),
    ];
    assert_eq!(tools.names().len(), expect.len());
    for (name, kind, prop) in expect {
        let t = tools.get(name).unwrap();
        assert_eq!(t.kind(), kind, "{name}");
        assert!(t.description().len() > 80, "{name}");
        let schema = t.input_schema();
        assert_eq!(schema["type"], "object", "{name}: {schema}");
        assert!(schema["properties"][prop].is_object(), "{name}: {schema}");
        assert!(schema.get("$schema").is_none());
    }
    let read = tools.get("read_file").unwrap();
    assert_eq!(
        read.permission_subject(&json!({"path": "./src/a.rs"})),
        Some("./src/a.rs".into())
    );
    assert_eq!(
        tools
            .get("run_command")
            .unwrap()
            .permission_subject(&json!({"command": "cargo test"})),
        Some("cargo test".into())
    );
    assert_eq!(tools.read_only().names().len(), 4);
}

#[tokio::test]
async fn invalid_arguments_explain_the_expected_shape() {
    let f = fixture();
    let needles = [
        "invalid arguments for read_file",
        "unknown field `file`",
        "`path`",
        r#""path""#,
    ];
    f.err_says("read_file", json!({"file": "a.txt"}), &needles)
        .await;
    f.err_says(
        "edit_file",
        json!({"path": "a", "old_string": 3}),
        &["edit_file", "old_string"],
    )
    .await;
    f.err_says("grep", json!("just a string"), &["Expected a JSON object"])
        .await;
    // Unknown arguments are rejected, never silently dropped (toolcall-text case 07).
    f.put("query.py", "x\n");
    f.err_says(
        "read_file",
        json!({"path": "query.py", "view_range": [2142, 2250]}),
        &["unknown field `view_range`"],
    )
    .await;
    f.err_says(
        "grep",
        json!({"pattern": "fn", "timeout_ms": null}),
        &["timeout_ms"],
    )
    .await;
    for tool in f.tools.names() {
        let schema = f.tools.get(tool).unwrap().input_schema();
        assert_eq!(
            schema["additionalProperties"],
            json!(false),
            "{tool}: {schema}"
        );
    }
}

// ----------------------------------------------------------------------------- read_file

#[tokio::test]
async fn read_file_numbers_lines_and_pages() {
    let f = fixture();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    f.put("a.txt", &text);
    let out = f.ok("read_file", json!({"path": "a.txt"})).await;
    assert!(out.starts_with("     1\tline 1\n     2\tline 2\n"), "{out}");
    assert!(out.contains("    10\tline 10\n"));
    assert!(!out.contains("more lines"));

    let out = f
        .ok(
            "read_file",
            json!({"path": "a.txt", "offset": 3, "limit": 2}),
        )
        .await;
    assert_eq!(
        out,
        "     3\tline 3\n     4\tline 4\n[… 6 more lines (file has 10); call read_file with offset=5 to continue]\n"
    );
    f.err_says(
        "read_file",
        json!({"path": "a.txt", "offset": 11}),
        &["past the end", "10 lines"],
    )
    .await;
    f.err_says(
        "read_file",
        json!({"path": "a.txt", "offset": 0}),
        &["1-based"],
    )
    .await;
}

#[tokio::test]
async fn read_file_default_limit_is_2000_lines() {
    let f = fixture();
    let text: String = (1..=2500).map(|i| format!("{i}\n")).collect();
    f.put("big.txt", &text);
    let mut ctx = f.ctx.clone();
    ctx.max_output_chars = 1_000_000;
    let out = f
        .call_in(&ctx, "read_file", json!({"path": "big.txt"}))
        .await
        .unwrap()
        .content;
    assert!(out.contains("  2000\t2000\n"));
    assert!(!out.contains("\t2001\n"));
    assert!(
        out.contains("500 more lines") && out.contains("offset=2001"),
        "{}",
        &out[out.len() - 200..]
    );
}

#[tokio::test]
async fn read_file_stops_at_the_output_budget_and_says_where_to_continue() {
    let f = fixture();
    // 2,000 lines of 101 characters: more than the output budget.
    let wide_line = |i: usize| format!("{i:0>100}\n");
    f.put("wide.txt", (1..=2000).map(wide_line).collect::<String>());
    let out = f.ok("read_file", json!({"path": "wide.txt"})).await;
    assert!(out.len() <= f.ctx.max_output_chars + 200, "{}", out.len());
    assert!(
        out.contains("call read_file with offset="),
        "{}",
        &out[out.len() - 200..]
    );
}

#[tokio::test]
async fn read_file_cuts_long_lines_and_strips_crlf() {
    let f = fixture();
    let long = "x".repeat(5000);
    f.put("l.txt", format!("a\r\n{long}\r\nb"));
    let out = f.ok("read_file", json!({"path": "l.txt"})).await;
    assert!(out.starts_with("     1\ta\n"), "{out:?}");
    assert!(
        out.contains("[…line cut at 2000 characters: 5000 in total]"),
        "{out}"
    );
    assert!(out.ends_with("     3\tb\n"));
    assert!(!out.contains('\r'));
}

#[tokio::test]
async fn read_file_refuses_binary_directories_and_missing_files_clearly() {
    let f = fixture();
    let mut bin = b"\x7fELF".to_vec();
    bin.extend([0u8; 100]);
    f.put("prog", &bin);
    f.err_says("read_file", json!({"path": "prog"}), &["binary file"])
        .await;
    fs::create_dir_all(f.ws.join("d")).unwrap();
    f.err_says(
        "read_file",
        json!({"path": "d"}),
        &["is a directory", "list_dir"],
    )
    .await;
    f.err_says(
        "read_file",
        json!({"path": "nope/x.rs"}),
        &["file not found", "glob"],
    )
    .await;
    f.put("empty", "");
    let out = f.ok("read_file", json!({"path": "empty"})).await;
    assert!(out.contains("empty"), "{out}");
}

// ----------------------------------------------------------------------------- write_file

#[tokio::test]
async fn write_file_creates_parents_and_reports_bytes() {
    let f = fixture();
    let out = f
        .ok("write_file", write_args("deep/er/new.rs", "fn main() {}\n"))
        .await;
    assert!(
        out.contains("Created `deep/er/new.rs` (13 bytes written)"),
        "{out}"
    );
    assert_eq!(f.get("deep/er/new.rs"), b"fn main() {}\n");
    let out = f.ok("write_file", write_args("deep/er/new.rs", "x")).await;
    assert!(
        out.contains("Overwrote") && out.contains("(1 bytes written)"),
        "{out}"
    );
    assert_eq!(f.get("deep/er/new.rs"), b"x");
    f.err_says("write_file", write_args("deep", "x"), &["directory"])
        .await;
    f.put("file", "f");
    let e = f.err("write_file", write_args("file/child.txt", "x")).await;
    assert!(!e.is_empty());
    assert_eq!(f.get("file"), b"f");
}

fn claims(map: &Arc<DashMap<PathBuf, String>>, owner: &str) -> Option<FileClaims> {
    Some(FileClaims {
        map: map.clone(),
        owner: owner.into(),
    })
}

#[tokio::test]
async fn write_and_edit_claim_files_and_refuse_files_claimed_by_others() {
    let f = fixture();
    let map = Arc::new(DashMap::new());
    let mut w1 = f.ctx.clone();
    w1.claims = claims(&map, "w1");
    let mut w2 = f.ctx.clone();
    w2.claims = claims(&map, "w2");
    let write = f.tools.get("write_file").unwrap();
    let edit = f.tools.get("edit_file").unwrap();
    write
        .call(write_args("./src/a.rs", "a\n"), &w1)
        .await
        .unwrap();
    assert_eq!(map.get(Path::new("src/a.rs")).unwrap().as_str(), "w1");
    let e = write
        .call(write_args("src/a.rs", "b\n"), &w2)
        .await
        .unwrap_err();
    assert!(
        e.message().contains("claimed by worker `w2`")
            || e.message().contains("claimed by worker `w1`")
    );
    assert!(e.message().contains("`w1`"), "{e}");
    let e = edit
        .call(edit_args("src/a.rs", "a", "b"), &w2)
        .await
        .unwrap_err();
    assert!(e.message().contains("`w1`"), "{e}");
    assert_eq!(f.get("src/a.rs"), b"a\n");
    // The owner keeps editing.
    edit.call(edit_args("src/a.rs", "a", "c"), &w1)
        .await
        .unwrap();
    assert_eq!(f.get("src/a.rs"), b"c\n");
}

// ----------------------------------------------------------------------------- edit_file

#[tokio::test]
async fn edit_file_replaces_a_unique_string_and_returns_a_diff() {
    let f = fixture();
    f.put("src/lib.rs", "fn a() {\n    1\n}\n\nfn b() {\n    2\n}\n");
    let out = f
        .ok("edit_file", edit_args("src/lib.rs", "    2\n", "    20\n"))
        .await;
    assert!(out.contains("replaced 1 occurrence."), "{out}");
    assert!(
        out.contains("--- a/src/lib.rs") && out.contains("+++ b/src/lib.rs"),
        "{out}"
    );
    assert!(
        out.contains("\n-    2\n") && out.contains("\n+    20\n"),
        "{out}"
    );
    assert_eq!(
        f.get("src/lib.rs"),
        b"fn a() {\n    1\n}\n\nfn b() {\n    20\n}\n"
    );
}

#[tokio::test]
async fn edit_file_errors_say_what_to_do() {
    let f = fixture();
    f.put("a.txt", "x = 1\nx = 1\ny = 2\n");
    f.err_says(
        "edit_file",
        edit_args("a.txt", "z = 3", "z = 4"),
        &["not found", "read_file"],
    )
    .await;
    f.err_says(
        "edit_file",
        edit_args("a.txt", "x = 1", "x = 9"),
        &["appears 2 times", "replace_all"],
    )
    .await;
    f.err_says(
        "edit_file",
        edit_args("a.txt", "y = 2", "y = 2"),
        &["identical"],
    )
    .await;
    f.err_says(
        "edit_file",
        edit_args("missing.txt", "a", "b"),
        &["file not found"],
    )
    .await;
    assert_eq!(f.get("a.txt"), b"x = 1\nx = 1\ny = 2\n");

    let out = f
        .ok(
            "edit_file",
            json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 9", "replace_all": true}),
        )
        .await;
    assert!(out.contains("replaced 2 occurrences"), "{out}");
    assert_eq!(f.get("a.txt"), b"x = 9\nx = 9\ny = 2\n");
}

#[tokio::test]
async fn edit_file_keeps_every_other_byte() {
    let f = fixture();
    // CRLF, BOM, no trailing newline, tabs, a lone CR: all kept.
    let original = "\u{FEFF}first\r\n\tsecond\r\nthird\rstill third\r\nlast";
    f.put("w.txt", original);
    f.ok("edit_file", edit_args("w.txt", "second", "2nd")).await;
    assert_eq!(
        f.get("w.txt"),
        "\u{FEFF}first\r\n\t2nd\r\nthird\rstill third\r\nlast".as_bytes()
    );
    // The model writes LF while the file uses CRLF: the file keeps CRLF.
    f.ok(
        "edit_file",
        edit_args("w.txt", "first\n\t2nd\n", "one\n\ttwo\n"),
    )
    .await;
    assert_eq!(
        f.get("w.txt"),
        "\u{FEFF}one\r\n\ttwo\r\nthird\rstill third\r\nlast".as_bytes()
    );
    f.ok("edit_file", edit_args("w.txt", "last", "end")).await;
    assert!(f.get("w.txt").ends_with(b"\r\nend"));
}

#[tokio::test]
async fn edit_file_refuses_non_utf8_files() {
    let f = fixture();
    let bytes = b"caf\xe9 latin-1\n".to_vec();
    f.put("l1.txt", &bytes);
    f.err_says(
        "edit_file",
        edit_args("l1.txt", "latin", "x"),
        &["not valid UTF-8", "offset 3"],
    )
    .await;
    assert_eq!(f.get("l1.txt"), bytes);
}

// ----------------------------------------------------------------------------- list_dir

#[tokio::test]
async fn list_dir_sorts_marks_dirs_and_respects_gitignore() {
    let f = fixture();
    f.put(".gitignore", "target/\n*.log\n");
    f.put(".git/HEAD", "ref: refs/heads/main\n");
    for empty in [
        "b.rs",
        "a.rs",
        "debug.log",
        "src/main.rs",
        "target/x",
        ".env",
    ] {
        f.put(empty, "");
    }
    std::os::unix::fs::symlink("/etc", f.ws.join("etc-link")).unwrap();
    let out = f.ok("list_dir", json!({})).await;
    assert_eq!(
        out,
        "./\n  .env\n  .gitignore\n  a.rs\n  b.rs\n  etc-link -> /etc\n  src/\n"
    );
    let out = f.ok("list_dir", json!({"path": "src"})).await;
    assert_eq!(out, "src/\n  main.rs\n");
    f.err_says("list_dir", json!({"path": "a.rs"}), &["not a directory"])
        .await;
    f.err_says("list_dir", json!({"path": "nope"}), &["not found"])
        .await;
}

/// `list_dir` stops at 1,000 entries and `glob` at 500 files; both say how many they left out.
#[tokio::test]
async fn list_dir_and_glob_are_capped() {
    let f = fixture();
    for i in 0..1010 {
        f.put(&format!("many/f{i:04}"), "");
    }
    for i in 0..520 {
        f.put(&format!("g/f{i:03}.txt"), "");
    }
    let listed = f.ok("list_dir", json!({"path": "many"})).await;
    assert!(listed.contains("f0999") && !listed.contains("f1000"));
    assert!(listed.contains("10 more entries omitted"), "{listed}");
    let globbed = f.ok("glob", json!({"pattern": "*.txt"})).await;
    let files = globbed.lines().filter(|l| l.ends_with(".txt")).count();
    assert_eq!(files, 500);
    assert!(globbed.contains("20 more files omitted"), "{globbed}");
}

// ----------------------------------------------------------------------------- glob

#[tokio::test]
async fn glob_matches_paths_and_names_newest_first() {
    let f = fixture();
    f.put(".gitignore", "target/\n");
    for empty in [
        "src/old.rs",
        "src/new.rs",
        "src/deep/mid.rs",
        "top.rs",
        "target/gen.rs",
        "README.md",
    ] {
        f.put(empty, "");
    }
    let now = SystemTime::now();
    let set = |rel: &str, secs: u64| {
        fs::File::options()
            .write(true)
            .open(f.ws.join(rel))
            .unwrap()
            .set_modified(now - Duration::from_secs(secs))
            .unwrap();
    };
    set("src/old.rs", 300);
    set("src/deep/mid.rs", 200);
    set("src/new.rs", 100);
    set("top.rs", 400);
    let out = f.ok("glob", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(out, "src/new.rs\nsrc/deep/mid.rs\nsrc/old.rs\ntop.rs\n");
    let out = f.ok("glob", json!({"pattern": "src/*.rs"})).await;
    assert_eq!(out, "src/new.rs\nsrc/old.rs\n");
    // No `/`: file names at any depth.
    let out = f.ok("glob", json!({"pattern": "mid.rs"})).await;
    assert_eq!(out, "src/deep/mid.rs\n");
    // Relative to the searched directory, reported relative to the workspace.
    let out = f
        .ok("glob", json!({"pattern": "deep/*.rs", "path": "src"}))
        .await;
    assert_eq!(out, "src/deep/mid.rs\n");
    let out = f.ok("glob", json!({"pattern": "*.{md,toml}"})).await;
    assert_eq!(out, "README.md\n");
    let out = f.ok("glob", json!({"pattern": "*.py"})).await;
    assert!(out.starts_with("No files match"), "{out}");
    f.err_says("glob", json!({"pattern": "a[b"}), &["invalid glob"])
        .await;
}

#[tokio::test]
async fn glob_reports_symlinks_only_when_they_stay_inside() {
    let f = fixture();
    f.put("real.txt", "");
    std::os::unix::fs::symlink(f.ws.join("real.txt"), f.ws.join("alias.txt")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", f.ws.join("out.txt")).unwrap();
    let out = f.ok("glob", json!({"pattern": "*.txt"})).await;
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(lines, ["alias.txt", "real.txt"]);
}

// ----------------------------------------------------------------------------- grep

#[tokio::test]
async fn grep_reports_path_line_content() {
    let f = fixture();
    f.put(".gitignore", "ignored.rs\n");
    f.put("src/a.rs", "fn main() {\n    helper();\n}\n");
    f.put("src/b.rs", "fn helper() {}\n");
    f.put("ignored.rs", "fn helper() {}\n");
    f.put("notes.md", "Helper notes\n");
    let mut bin = b"helper\0\0".to_vec();
    bin.extend([0u8; 64]);
    f.put("blob.bin", &bin);
    let out = f.ok("grep", json!({"pattern": "helper"})).await;
    assert_eq!(out, "src/a.rs:2:    helper();\nsrc/b.rs:1:fn helper() {}\n");
    let out = f
        .ok(
            "grep",
            json!({"pattern": "helper", "case_insensitive": true}),
        )
        .await;
    assert!(out.contains("notes.md:1:Helper notes"), "{out}");
    let out = f
        .ok(
            "grep",
            json!({"pattern": "help\\w+", "glob": "*.md", "case_insensitive": true}),
        )
        .await;
    assert_eq!(out, "notes.md:1:Helper notes\n");
    let out = f
        .ok("grep", json!({"pattern": "helper", "path": "src/b.rs"}))
        .await;
    assert_eq!(out, "src/b.rs:1:fn helper() {}\n");
    let mut ctx = f.ctx.clone();
    ctx.cwd = f.ws.join("src");
    let out = f
        .call_in(&ctx, "grep", json!({"pattern": "fn main"}))
        .await
        .unwrap()
        .content;
    assert_eq!(out, "src/a.rs:1:fn main() {\n");
    // Seen with Qwen2.5-Coder-1.5B: the glob repeats the path; it used to match nothing.
    for glob in ["src/**/*.rs", "./src/*.rs", "**/*.rs", "*.rs"] {
        let out = f
            .ok(
                "grep",
                json!({"pattern": "fn helper", "path": "src", "glob": glob}),
            )
            .await;
        assert_eq!(out, "src/b.rs:1:fn helper() {}\n", "{glob}");
    }
    let out = f
        .ok(
            "grep",
            json!({"pattern": "fn helper", "path": "src/", "glob": "lib/*.rs"}),
        )
        .await;
    assert!(out.starts_with("No matches"), "{out}");
    let out = f.ok("grep", json!({"pattern": "nothing_here"})).await;
    assert!(out.starts_with("No matches"), "{out}");
    let e = f.err("grep", json!({"pattern": "fn (main"})).await;
    assert!(e.contains("invalid regular expression"), "{e}");
}

#[tokio::test]
async fn grep_caps_results_with_omitted_count() {
    let f = fixture();
    let text: String = (0..300).map(|i| format!("match {i}\n")).collect();
    f.put("m.txt", &text);
    let out = f.ok("grep", json!({"pattern": "match"})).await;
    assert_eq!(out.lines().filter(|l| l.starts_with("m.txt:")).count(), 200);
    assert!(out.ends_with("[… 100 more matches omitted; narrow the pattern, path or glob]\n"));
    let out = f
        .ok("grep", json!({"pattern": "match", "max_results": 5}))
        .await;
    assert!(out.starts_with("m.txt:1:match 0\n"));
    assert!(out.contains("295 more matches omitted"), "{out}");
}

#[tokio::test]
async fn c32_pattern_starting_with_dash_is_a_pattern_not_an_option() {
    let f = fixture();
    let payload = f.ws.join("payload.sh");
    let marker = f.ws.join("pwned");
    f.put(
        "payload.sh",
        format!("#!/bin/sh\ntouch {}\n", marker.display()),
    );
    fs::set_permissions(
        &payload,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let pattern = format!("--pre={}", payload.display());
    f.put("doc.txt", format!("use {pattern} carefully\n"));
    let out = f.ok("grep", json!({"pattern": pattern})).await;
    assert_eq!(out, format!("doc.txt:1:use {pattern} carefully\n"));
    assert!(!marker.exists(), "the pattern was executed");
    let out = f
        .ok("grep", json!({"pattern": "-pre=", "glob": "*.txt"}))
        .await;
    assert!(out.starts_with("doc.txt:1:"), "{out}");
}
