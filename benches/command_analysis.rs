//! Cost of the shell-command permission analysis per `run_command` call.
//!
//! Run: `cargo bench --bench command_analysis`. Compare the groups by ratio within one run
//! (fresh parser vs reused parser vs the whole decision); no absolute thresholds.

use ahelper_agents::permissions::command::{CommandAnalyzer, analyze_command};
use ahelper_agents::permissions::{PermissionMode, PermissionPolicy, PermissionRequest, RuleSet};
use ahelper_agents::tools::ToolKind;
use std::path::Path;

fn main() {
    divan::main();
}

/// Typical commands from agent transcripts, and the adversarial shape of case C14
/// in `agents/tests/data/commands.md` (50 chained commands).
const SHAPES: &[&str] = &["simple", "pipeline", "nested", "chain50"];

fn command(shape: &str) -> String {
    match shape {
        "simple" => "ls -la src".to_string(),
        "pipeline" => "git status --short && git diff HEAD~1 -- src | head -50".to_string(),
        "nested" => {
            "bash -c 'find . -name \"*.rs\" -exec grep -n TODO {} +' && echo \"$(date)\" > /dev/null"
                .to_string()
        }
        _ => format!("{}curl https://example.invalid/x", "true && ".repeat(50)),
    }
}

/// Parser created per call (what `PermissionPolicy::decide` does).
#[divan::bench(args = SHAPES)]
fn analyze_fresh_parser(bencher: divan::Bencher, shape: &str) {
    let cmd = command(shape);
    bencher.bench(|| analyze_command(divan::black_box(&cmd)));
}

/// One parser reused across calls (a caller-owned `CommandAnalyzer`).
#[divan::bench(args = SHAPES)]
fn analyze_reused_parser(bencher: divan::Bencher, shape: &str) {
    let cmd = command(shape);
    let mut analyzer = CommandAnalyzer::new();
    bencher.bench_local(|| analyzer.analyze(divan::black_box(&cmd)));
}

/// The whole decision: analysis, rule matching, path checks.
#[divan::bench(args = SHAPES)]
fn decide(bencher: divan::Bencher, shape: &str) {
    let cmd = command(shape);
    let rules = RuleSet::parse(
        &[
            "run_command(cargo test:*)",
            "run_command(git commit:*)",
            "edit_file(src/**)",
        ],
        &["run_command(git push:*)"],
        &[
            "run_command(curl:*)",
            "run_command(rm -rf /:*)",
            "read_file(**/.env)",
        ],
    )
    .expect("valid rules");
    bench_decision(bencher, rules, &cmd, Path::new("/ws"));
}

/// Measures the decision on `run_command` with `command` under `rules` in the default mode,
/// in the workspace `root` (also the current directory).
fn bench_decision(bencher: divan::Bencher, rules: RuleSet, command: &str, root: &Path) {
    let policy = PermissionPolicy {
        mode: PermissionMode::Default,
        rules,
        ..PermissionPolicy::default()
    };
    bencher.bench(|| {
        policy.decide(&PermissionRequest {
            tool: "run_command",
            kind: ToolKind::Execute,
            subject: Some(divan::black_box(command)),
            workspace_root: root,
            cwd: root,
        })
    });
}

/// The whole decision in a real workspace on disk (the decision then resolves links, expands
/// globs and looks for foreign git dirs): a read deny rule for `.env` and a repository with a
/// few files.
#[divan::bench(args = ["cat src/*.rs", "grep -r TODO src", "git status", "cat < a.txt"])]
fn decide_on_disk(bencher: divan::Bencher, command: &str) {
    let ws = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(ws.path()).expect("canonical temp dir");
    std::fs::create_dir_all(root.join(".git/objects")).expect("git dir");
    std::fs::create_dir_all(root.join("src")).expect("src");
    for i in 0..20 {
        std::fs::write(root.join(format!("src/m{i}.rs")), "// TODO\n").expect("file");
    }
    std::fs::write(root.join("a.txt"), "a\n").expect("file");
    std::fs::write(root.join(".env"), "SECRET=1\n").expect("file");
    let rules = RuleSet::parse(&[], &[], &["read_file(**/.env)", "run_command(rm:*)"])
        .expect("valid rules");
    bench_decision(bencher, rules, command, &root);
}

/// Creating a tree-sitter parser with the bash grammar.
#[divan::bench]
fn parser_new() -> CommandAnalyzer {
    CommandAnalyzer::new()
}
