//! Model-controlled text never reaches the terminal raw: escape sequences (OSC 52 clipboard
//! writes, OSC 8 links, `ESC[2J`), C1 controls and bidi overrides in answers, tool results,
//! plans, titles, worker summaries and transcripts are shown as visible escapes in `-p` text
//! output, `swarm` output, `swarm status` and `swarm logs`; JSON output keeps the exact text.

use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::{Script, Turn};
use serde_json::{Value, json};

/// An OSC 52 clipboard write, a screen clear, a C1 CSI and a right-to-left override.
const HOSTILE: &str = "done\x1b]52;c;ZXZpbA==\x07 \x1b[2J \u{9b}31m \u{202e}gnp.exe";

/// A shell command whose output is an OSC 8 hyperlink and a screen clear.
const PRINTS_ESCAPES: &str =
    r"printf 'see \033]8;;http://evil.example\033\\here\033]8;;\033\\ \033[2J\n'";

/// Asserts that `output` holds no character a terminal would act on: no C0 control but `\n`
/// and `\t`, no DEL, no C1 control, no bidi embedding, override or isolate.
#[track_caller]
fn assert_inert(output: &[u8], what: &str) {
    let text = String::from_utf8_lossy(output);
    let bad: Vec<String> = text
        .chars()
        .filter(|c| {
            matches!(c, '\0'..='\x08' | '\x0b'..='\x1f' | '\x7f'..='\u{9f}')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .map(|c| format!("U+{:04X}", c as u32))
        .collect();
    assert!(bad.is_empty(), "{what} holds raw {bad:?}:\n{text}");
}

fn hostile_answer_script() -> Script {
    agent([runs(PRINTS_ESCAPES), Turn::text(HOSTILE)])
}

#[test]
fn print_mode_text_shows_escapes_visibly() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(hostile_answer_script());
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "go", "-v", "--permission-mode", "bypass"])
        .assert()
        .success()
        .get_output()
        .clone();
    assert_inert(&out.stdout, "stdout of -p");
    assert_inert(&out.stderr, "stderr of -p -v");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(r"done\x1b]52;c;ZXZpbA==\x07 \x1b[2J \u{9b}31m \u{202e}gnp.exe"),
        "{stdout}"
    );
}

#[test]
fn print_mode_json_keeps_the_exact_text() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(hostile_answer_script());
    for format in ["json", "stream-json"] {
        let text = stdout_of(
            ahelper(&repo, &server, Wire::Anthropic)
                .args(["-p", "go", "--output-format", format])
                .args(["--permission-mode", "bypass"]),
        );
        let result: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(result["result"], HOSTILE, "{format}");
    }
}

/// A run whose plan summary, subtask title, worker tool result and worker summary carry escapes.
fn hostile_swarm() -> Script {
    let plan = json!({
        "summary": format!("plan {HOSTILE}"),
        "subtasks": [{
            "id": "s1",
            "title": format!("Title \x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\ \u{2066}x"),
            "instructions": "Do s1.",
            "scope": ["a.txt"],
        }],
    });
    coordinator(Turn::text(plan.to_string())).with_conversation(worker(
        "s1",
        [
            runs(PRINTS_ESCAPES),
            writes("a.txt", "A\n"),
            Turn::text(format!("worker summary {HOSTILE}")),
        ],
    ))
}

#[test]
fn swarm_output_status_and_logs_show_escapes_visibly() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(hostile_swarm());
    let run = |args: &[&str]| {
        ahelper(&repo, &server, Wire::Anthropic)
            .args(args)
            .assert()
            .success()
            .get_output()
            .clone()
    };
    let out = run(&["swarm", "task", "--yes", "--permission-mode", "bypass"]);
    assert_inert(&out.stdout, "stdout of swarm");
    assert_inert(&out.stderr, "stderr of swarm (the plan)");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(r"Title \x1b]8;;http://evil.example"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs = repo.path().join(".ahelper/runs");
    let run_id = std::fs::read_dir(runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name()
        .into_string()
        .unwrap();

    let status = run(&["swarm", "status", &run_id]);
    assert_inert(&status.stdout, "swarm status");
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(
        shown.contains(r"Title \x1b]8;;http://evil.example"),
        "{shown}"
    );

    // the coordinator's answer is JSON (its ESC already `\u001b`); the worker's is plain text
    for (worker, shown) in [
        (None, r"\u{202e}gnp.exe"),
        (Some("w1"), r"worker summary done\x1b]52;c;ZXZpbA=="),
    ] {
        let mut args = vec!["swarm", "logs", &run_id];
        args.extend(worker);
        let logs = run(&args);
        assert_inert(&logs.stdout, "swarm logs");
        assert_inert(&logs.stderr, "swarm logs (stderr)");
        assert!(
            String::from_utf8_lossy(&logs.stdout).contains(shown),
            "{}",
            String::from_utf8_lossy(&logs.stdout)
        );
    }
    // --json keeps the transcript lines exact (JSON escapes the controls itself)
    let json_logs = run(&["swarm", "logs", &run_id, "w1", "--json"]);
    let lines = String::from_utf8(json_logs.stdout).unwrap();
    assert!(
        lines
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|v| v.to_string().contains("worker summary done\\u001b]52;c;")),
        "{lines}"
    );
}
