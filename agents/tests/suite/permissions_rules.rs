//! Rule syntax, precedence, modes and file-tool decisions.

use super::support::permissions::check_table;
use ahelper_agents::permissions::rules::{RuleParseError, RulePattern, suggest_rule};
use ahelper_agents::permissions::{PermissionRule, RuleSet};

#[test]
fn parse_and_display_round_trip() {
    for (text, canonical) in [
        ("run_command(cargo test:*)", "run_command(cargo test:*)"),
        ("run_command( cargo   test :*)", "run_command(cargo test:*)"),
        ("run_command(git diff *)", "run_command(git diff:*)"),
        ("run_command(git status)", "run_command(git status)"),
        (
            "run_command(git commit -m 'a b')",
            "run_command(git commit -m 'a b')",
        ),
        ("run_command", "run_command"),
        ("run_command(*)", "run_command"),
        ("edit_file(src/**)", "edit_file(src/**)"),
        ("edit_file(./src/**)", "edit_file(src/**)"),
        ("read_file(**/.env)", "read_file(**/.env)"),
        ("mcp__server__tool", "mcp__server__tool"),
    ] {
        let rule = PermissionRule::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(rule.to_string(), canonical, "{text}");
        let again = PermissionRule::parse(&rule.to_string()).expect("canonical text parses");
        assert_eq!(again, rule, "{text}");
    }
    let rule: PermissionRule = "run_command(cargo test:*)".parse().expect("parses");
    match rule.pattern {
        RulePattern::Command { words, prefix } => {
            assert_eq!(words, ["cargo", "test"]);
            assert!(prefix);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn parse_errors_are_clear() {
    assert_eq!(PermissionRule::parse("  "), Err(RuleParseError::Empty));
    for (text, variant) in [
        ("run_command(cargo test", "MissingCloseParen"),
        ("run command(x)", "InvalidToolName"),
        ("edit_file()", "EmptyPattern"),
        ("run_command(echo 'x)", "UnclosedQuote"),
        // `git diff*` would also match `git difftool` (C41): refused with a pointer to `:*`.
        ("run_command(git diff*)", "UnsupportedWildcard"),
        ("edit_file(src/[)", "InvalidGlob"),
    ] {
        let err = PermissionRule::parse(text).expect_err(text);
        let debug = format!("{err:?}");
        assert!(debug.starts_with(variant), "{text}: {debug}");
    }
    let err = PermissionRule::parse("run_command(git diff*)").unwrap_err();
    assert!(err.to_string().contains(":*"), "{err}");
}

#[test]
fn rules_serialise_as_their_text() {
    let set = RuleSet::parse(&["run_command(cargo test:*)"], &[], &["read_file(**/.env)"]).unwrap();
    let json = serde_json::to_string(&set).unwrap();
    assert!(json.contains("\"run_command(cargo test:*)\""), "{json}");
    let back: RuleSet = serde_json::from_str(&json).unwrap();
    assert_eq!(back, set);
    let bad = serde_json::from_str::<RuleSet>(r#"{"allow": ["run_command(x"]}"#);
    assert!(bad.is_err());
}

#[test]
fn suggested_rules() {
    for (tool, subject, suggested) in [
        (
            "run_command",
            Some("cargo test --lib"),
            "run_command(cargo test:*)",
        ),
        (
            "run_command",
            Some("git -C sub commit -m x"),
            "run_command(git commit:*)",
        ),
        ("run_command", Some("ls -la src"), "run_command(ls:*)"),
        (
            "run_command",
            Some("timeout 5 npm run build && ls"),
            "run_command(npm run:*)",
        ),
        (
            "run_command",
            Some("cargo --version"),
            "run_command(cargo:*)",
        ),
        ("edit_file", Some("src/main.rs"), "edit_file(src/main.rs)"),
        ("write_file", Some("./a[1].txt"), "write_file(a\\[1\\].txt)"),
        ("list_dir", None, "list_dir"),
    ] {
        assert_eq!(suggest_rule(tool, subject), suggested, "{tool} {subject:?}");
    }
    // Every suggestion parses back.
    for s in [
        suggest_rule("run_command", Some("cargo test --lib")),
        suggest_rule("write_file", Some("./a[1].txt")),
        suggest_rule("run_command", Some("'my tool' x")),
    ] {
        PermissionRule::parse(&s).unwrap_or_else(|e| panic!("{s}: {e}"));
    }
}

/// The suggested prefix rule names the words the command analysis is concerned about, so that
/// it allows the call it was suggested for and the same program's other such calls (the group
/// `suggested_rules_cover_the_analysis_concerns` of the decision table checks the decisions).
#[test]
fn suggested_rules_cover_the_analysis_concerns() {
    let rule = suggest_rule("run_command", Some("sed -i s/a/A/ a.txt"));
    assert_eq!(rule, "run_command(sed -i:*)");
}

/// Precedence, modes, prefix and file rules, redirections, wrappers: every group of
/// `tests/data/decisions/rules.toml`.
#[test]
fn decision_table() {
    check_table(include_str!("../data/decisions/rules.toml"));
}
