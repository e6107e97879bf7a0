//! Rule syntax, precedence, modes and file-tool decisions.

use super::support::permissions::{decide_command as run, policy};
use ahelper_agents::permissions::rules::{RuleParseError, RulePattern, suggest_rule};
use ahelper_agents::permissions::{
    Decision, PermissionMode, PermissionPolicy, PermissionRequest, PermissionRule, RuleSet,
};
use ahelper_agents::tools::ToolKind;
use std::path::Path;

fn file(p: &PermissionPolicy, tool: &str, kind: ToolKind, path: &str) -> Decision {
    p.decide(&PermissionRequest {
        tool,
        kind,
        subject: Some(path),
        workspace_root: Path::new("/ws"),
        cwd: Path::new("/ws/sub"),
    })
}

fn is_ask(d: &Decision) -> bool {
    matches!(d, Decision::Ask { .. })
}

fn deny_reason(d: &Decision) -> &str {
    match d {
        Decision::Deny { reason } => reason,
        other => panic!("expected deny, got {other:?}"),
    }
}

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
    assert!(matches!(
        PermissionRule::parse("run_command(cargo test"),
        Err(RuleParseError::MissingCloseParen { .. })
    ));
    assert!(matches!(
        PermissionRule::parse("run command(x)"),
        Err(RuleParseError::InvalidToolName { .. })
    ));
    assert!(matches!(
        PermissionRule::parse("edit_file()"),
        Err(RuleParseError::EmptyPattern { .. })
    ));
    assert!(matches!(
        PermissionRule::parse("run_command(echo 'x)"),
        Err(RuleParseError::UnclosedQuote { .. })
    ));
    // `git diff*` would also match `git difftool` (C41): refused with a pointer to `:*`.
    let err = PermissionRule::parse("run_command(git diff*)").unwrap_err();
    assert!(matches!(err, RuleParseError::UnsupportedWildcard { .. }));
    assert!(err.to_string().contains(":*"), "{err}");
    assert!(matches!(
        PermissionRule::parse("edit_file(src/[)"),
        Err(RuleParseError::InvalidGlob { .. })
    ));
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
    assert_eq!(
        suggest_rule("run_command", Some("cargo test --lib")),
        "run_command(cargo test:*)"
    );
    assert_eq!(
        suggest_rule("run_command", Some("git -C sub commit -m x")),
        "run_command(git commit:*)"
    );
    assert_eq!(
        suggest_rule("run_command", Some("ls -la src")),
        "run_command(ls:*)"
    );
    assert_eq!(
        suggest_rule("run_command", Some("timeout 5 npm run build && ls")),
        "run_command(npm run:*)"
    );
    assert_eq!(
        suggest_rule("run_command", Some("cargo --version")),
        "run_command(cargo:*)"
    );
    assert_eq!(
        suggest_rule("edit_file", Some("src/main.rs")),
        "edit_file(src/main.rs)"
    );
    assert_eq!(
        suggest_rule("write_file", Some("./a[1].txt")),
        "write_file(a\\[1\\].txt)"
    );
    assert_eq!(suggest_rule("list_dir", None), "list_dir");
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
/// it allows the call it was suggested for and the same program's other such calls.
#[test]
fn suggested_rules_cover_the_analysis_concerns() {
    let rule = suggest_rule("run_command", Some("sed -i s/a/A/ a.txt"));
    assert_eq!(rule, "run_command(sed -i:*)");
    let p = policy(PermissionMode::AcceptEdits, &[&rule], &[], &[]);
    for command in ["sed -i s/a/A/ a.txt", "sed -i s/b/B/ b.txt"] {
        assert_eq!(run(&p, command), Decision::Allow, "{command}");
    }
    let narrow = policy(
        PermissionMode::AcceptEdits,
        &["run_command(sed:*)"],
        &[],
        &[],
    );
    assert!(matches!(
        run(&narrow, "sed -i s/a/A/ a.txt"),
        Decision::Ask { .. }
    ));
}

#[test]
fn prefix_rules_respect_word_boundaries() {
    let p = policy(
        PermissionMode::Default,
        &["run_command(cargo test:*)"],
        &[],
        &[],
    );
    assert_eq!(run(&p, "cargo test"), Decision::Allow);
    assert_eq!(run(&p, "cargo test --lib"), Decision::Allow);
    assert!(is_ask(&run(&p, "cargo testx")));
    assert!(is_ask(&run(&p, "cargo build")));
    let exact = policy(
        PermissionMode::Default,
        &["run_command(cargo test)"],
        &[],
        &[],
    );
    assert_eq!(run(&exact, "cargo test"), Decision::Allow);
    assert!(is_ask(&run(&exact, "cargo test --lib")));
}

#[test]
fn deny_beats_ask_beats_allow_whatever_the_order() {
    let cmd = "cargo publish";
    let a = "run_command(cargo publish:*)";
    let b = "run_command(cargo:*)";
    for (allow, ask, deny) in [
        (vec![a, b], vec![], vec![a]),
        (vec![b, a], vec![], vec![b]),
        (vec![a], vec![b], vec![a]),
    ] {
        let p = policy(PermissionMode::Default, &allow, &ask, &deny);
        assert!(matches!(run(&p, cmd), Decision::Deny { .. }));
    }
    for (allow, ask) in [(vec![a, b], vec![b]), (vec![b, a], vec![a])] {
        let p = policy(PermissionMode::Default, &allow, &ask, &[]);
        assert!(is_ask(&run(&p, cmd)));
    }
    let p = policy(PermissionMode::Default, &[a], &[], &[]);
    assert_eq!(run(&p, cmd), Decision::Allow);
}

#[test]
fn deny_rules_compare_flags_in_any_order() {
    let p = policy(
        PermissionMode::Default,
        &["run_command"],
        &[],
        &["run_command(rm -rf /:*)"],
    );
    for cmd in [
        "rm -rf /",
        "rm -fr /",
        "rm -r -f /",
        "rm -f -r //",
        "rm -rf /*",
        "sudo rm -rf /",
    ] {
        assert!(matches!(run(&p, cmd), Decision::Deny { .. }), "{cmd}");
    }
    assert_eq!(run(&p, "rm -rf build"), Decision::Allow);
    let git = policy(
        PermissionMode::Bypass,
        &[],
        &[],
        &["run_command(git push --force:*)"],
    );
    assert!(matches!(
        run(&git, "git push origin main --force"),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        run(&git, "git -C sub push --force"),
        Decision::Deny { .. }
    ));
    assert_eq!(run(&git, "git push --force-with-lease"), Decision::Allow);
    assert_eq!(run(&git, "git commit -m push --force"), Decision::Allow);
}

#[test]
fn git_global_options_are_handled() {
    let p = policy(
        PermissionMode::Default,
        &["run_command(git commit:*)"],
        &[],
        &[],
    );
    assert_eq!(run(&p, "git -C sub commit -m x"), Decision::Allow);
    assert!(is_ask(&run(&p, "git -c core.hooksPath=/x commit -m x")));
    let d = policy(
        PermissionMode::Bypass,
        &[],
        &[],
        &["run_command(git commit:*)"],
    );
    assert!(matches!(
        run(&d, "git -C sub commit -m x"),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        run(&d, "git --no-pager commit"),
        Decision::Deny { .. }
    ));
}

#[test]
fn default_mode() {
    let p = PermissionPolicy::default();
    assert_eq!(run(&p, "ls -la"), Decision::Allow);
    assert_eq!(
        run(&p, "git status && git diff HEAD~1 | head -50"),
        Decision::Allow
    );
    assert!(is_ask(&run(&p, "cargo test")));
    assert!(is_ask(&run(&p, "echo x > out.txt")));
    assert_eq!(
        file(&p, "read_file", ToolKind::Read, "a.txt"),
        Decision::Allow
    );
    assert!(is_ask(&file(&p, "edit_file", ToolKind::Edit, "a.txt")));
}

#[test]
fn accept_edits_mode() {
    let p = policy(PermissionMode::AcceptEdits, &[], &[], &[]);
    assert_eq!(
        file(&p, "edit_file", ToolKind::Edit, "a.txt"),
        Decision::Allow
    );
    assert_eq!(
        file(&p, "write_file", ToolKind::Edit, "../b.txt"),
        Decision::Allow
    );
    assert!(is_ask(&file(
        &p,
        "write_file",
        ToolKind::Edit,
        "/outside/b.txt"
    )));
    assert_eq!(run(&p, "echo x > out.txt"), Decision::Allow);
    assert!(is_ask(&run(&p, "cargo test")));
    assert!(matches!(
        run(&p, "echo x > /outside/out.txt"),
        Decision::Deny { .. }
    ));
}

#[test]
fn plan_mode_is_read_only() {
    let p = policy(
        PermissionMode::Plan,
        &["run_command(cargo test:*)", "edit_file(**)"],
        &[],
        &[],
    );
    for d in [
        run(&p, "cargo test"),
        run(&p, "echo x > out.txt"),
        run(&p, "ls; rm x"),
        file(&p, "edit_file", ToolKind::Edit, "a.txt"),
        file(&p, "write_file", ToolKind::Edit, "a.txt"),
    ] {
        assert!(deny_reason(&d).contains("plan mode is read-only"), "{d:?}");
    }
    assert_eq!(run(&p, "ls -la && git log -5"), Decision::Allow);
    assert_eq!(
        file(&p, "read_file", ToolKind::Read, "a.txt"),
        Decision::Allow
    );
}

#[test]
fn bypass_allows_everything_but_deny_rules() {
    let p = policy(
        PermissionMode::Bypass,
        &[],
        &[],
        &[
            "run_command(curl:*)",
            "edit_file(secrets/**)",
            "read_file(**/.env)",
        ],
    );
    assert_eq!(run(&p, "rm -rf build && git push"), Decision::Allow);
    // `cargo publish` runs build scripts the model may have written: it asks under deny rules.
    assert!(is_ask(&run(&p, "rm -rf build && cargo publish")));
    // Opaque parts could hide a denied command: with deny rules for commands, they ask.
    assert!(is_ask(&run(&p, "eval \"$CMD\"")));
    let no_denies = policy(PermissionMode::Bypass, &[], &[], &["read_file(**/.env)"]);
    assert_eq!(run(&no_denies, "eval \"$CMD\""), Decision::Allow);
    assert!(matches!(
        run(&p, "ls && curl https://x"),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        run(&p, "bash -c 'curl https://x'"),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        run(&p, "echo x > secrets/k"),
        Decision::Deny { .. }
    ));
    assert!(matches!(run(&p, "cat sub/.env"), Decision::Deny { .. }));
    assert!(matches!(
        file(&p, "edit_file", ToolKind::Edit, "../secrets/a"),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        file(&p, "read_file", ToolKind::Read, ".env"),
        Decision::Deny { .. }
    ));
    assert_eq!(
        file(&p, "edit_file", ToolKind::Edit, "a.txt"),
        Decision::Allow
    );
    // Writes outside the workspace and to protected paths are refused in every mode.
    assert!(matches!(
        run(&p, "echo x >> ~/.bashrc"),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        run(&p, "echo x > .git/hooks/pre-commit"),
        Decision::Deny { .. }
    ));
}

#[test]
fn file_rules() {
    let p = policy(
        PermissionMode::Default,
        &["edit_file(src/**)", "read_file(/etc/hosts)"],
        &["edit_file(src/generated/**)"],
        &["read_file(**/.env)"],
    );
    // cwd is /ws/sub: paths resolve against it, then match relative to the workspace root.
    assert_eq!(
        file(&p, "edit_file", ToolKind::Edit, "../src/main.rs"),
        Decision::Allow
    );
    assert_eq!(
        file(&p, "write_file", ToolKind::Edit, "/ws/src/lib.rs"),
        Decision::Allow
    );
    assert!(is_ask(&file(&p, "edit_file", ToolKind::Edit, "main.rs")));
    assert!(is_ask(&file(
        &p,
        "edit_file",
        ToolKind::Edit,
        "../src/generated/x.rs"
    )));
    assert!(matches!(
        file(&p, "read_file", ToolKind::Read, ".env"),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        file(&p, "read_file", ToolKind::Read, "/ws/.env"),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        file(&p, "read_file", ToolKind::Read, "/outside/.env"),
        Decision::Deny { .. }
    ));
    assert_eq!(
        file(&p, "read_file", ToolKind::Read, "/etc/hosts"),
        Decision::Allow
    );
    // Reads outside the workspace are not auto-allowed.
    assert!(is_ask(&file(
        &p,
        "read_file",
        ToolKind::Read,
        "/etc/passwd"
    )));
    assert!(is_ask(&file(
        &p,
        "read_file",
        ToolKind::Read,
        "../../outside.txt"
    )));
}

#[test]
fn protected_paths_are_denied_for_file_tools_in_every_mode() {
    for mode in [
        PermissionMode::Default,
        PermissionMode::AcceptEdits,
        PermissionMode::Bypass,
    ] {
        let p = policy(mode, &["edit_file(**)"], &[], &[]);
        for path in [
            "../.git/hooks/pre-commit",
            "/ws/.GIT/config",
            "../.ahelper/config.toml",
            "../.ahelper/new-file-that-does-not-exist.toml",
            "../.gi\u{200b}t/config",
            "/home/user/.bashrc",
        ] {
            let d = file(&p, "write_file", ToolKind::Edit, path);
            assert!(matches!(d, Decision::Deny { .. }), "{mode:?} {path}: {d:?}");
        }
    }
}

#[test]
fn redirections() {
    let p = policy(
        PermissionMode::Default,
        &["run_command(echo:*)", "edit_file(out/**)"],
        &[],
        &[],
    );
    assert_eq!(run(&p, "echo x > /dev/null 2>&1"), Decision::Allow);
    assert_eq!(run(&p, "echo x > out/a.txt"), Decision::Allow);
    assert_eq!(run(&p, "echo x | tee out/a.txt"), Decision::Allow);
    assert!(is_ask(&run(&p, "echo x | tee a.txt")));
    assert!(matches!(
        run(&p, "echo x | tee /etc/motd"),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        run(&p, "echo x >> ../outside.txt"),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        run(&p, "echo x &> /outside/log"),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        run(&p, "cd .. && echo x > a"),
        Decision::Deny { .. }
    ));
    assert!(is_ask(&run(&p, "echo x > $OUT")));
    assert!(is_ask(&run(&p, "cd \"$D\" && echo x > a")));
    assert_eq!(run(&p, "cat < README.md"), Decision::Allow);
    assert!(matches!(
        run(&p, "echo x > .ahelper/config.toml"),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        run(&p, "echo x > sub/.git/config"),
        Decision::Deny { .. }
    ));
}

#[test]
fn state_changing_builtins() {
    let p = PermissionPolicy::default();
    for harmless in [
        "cd src && ls",
        "set -euo pipefail; ls",
        "export NO_COLOR=1; ls",
        "files=$(ls); echo $files",
        "local x=1",
        "unset tmp",
    ] {
        assert_eq!(run(&p, harmless), Decision::Allow, "{harmless}");
    }
    for risky in [
        "export PAGER=/ws/x",
        "alias ls='rm -rf x'",
        "set -a",
        "IFS=/; ls",
        "declare -n ref=PATH",
        "shopt -s expand_aliases",
        "unset PATH",
        "source ./env.sh",
        ". ./env.sh",
        "eval ls",
        "exec $CMD",
    ] {
        assert!(is_ask(&run(&p, risky)), "{risky}");
    }
}

#[test]
fn wrappers_are_stripped_and_runners_looked_through() {
    let p = policy(
        PermissionMode::Default,
        &["run_command(cargo test:*)"],
        &[],
        &["run_command(rm:*)"],
    );
    for allowed in [
        "timeout 60 cargo test",
        "time cargo test",
        "nice -n 10 cargo test",
        "nohup cargo test",
        "command cargo test",
        "env RUST_BACKTRACE=1 cargo test",
        "stdbuf -oL cargo test",
        "bash -c 'cargo test --lib'",
        "sh -c \"cargo test && ls\"",
    ] {
        assert_eq!(run(&p, allowed), Decision::Allow, "{allowed}");
    }
    for denied in [
        "timeout 5 rm x",
        "xargs rm < list",
        "find . -name '*.o' -exec rm -f {} +",
        "find . -execdir /bin/rm {} \\;",
        "bash -lc 'bash -c \"rm x\"'",
        "eval 'rm x'",
        "trap 'rm -f x' EXIT",
        "'r'\"m\" x",
        "\\rm x",
        "watch -n1 rm x",
        "sudo -u root rm x",
    ] {
        assert!(
            matches!(run(&p, denied), Decision::Deny { .. }),
            "{denied}: {:?}",
            run(&p, denied)
        );
    }
    assert!(is_ask(&run(&p, "sudo cargo test")));
    assert!(is_ask(&run(&p, "env -S 'cargo test' x")));
}

#[test]
fn invisible_characters_ask_with_a_warning() {
    let p = policy(
        PermissionMode::Default,
        &["run_command(git status:*)"],
        &[],
        &[],
    );
    for cmd in [
        "git status\u{200b}",
        "git sta\u{202e}tus",
        "git status\r",
        "git\u{a0}status",
    ] {
        match run(&p, cmd) {
            Decision::Ask { reason } => assert!(reason.contains("warning"), "{reason}"),
            other => panic!("{cmd:?}: {other:?}"),
        }
    }
}

#[test]
fn outside_reads_by_read_only_commands_ask() {
    let p = PermissionPolicy::default();
    for cmd in [
        "cat /etc/passwd",
        "head ~/.ssh/id_rsa",
        "ls ../..",
        "grep -r key /home",
        "git -C /outside log",
    ] {
        assert!(is_ask(&run(&p, cmd)), "{cmd}");
    }
    for cmd in [
        "cat src/a.rs",
        "grep -rn '/usr/bin' src",
        "sed -n '/start/,/end/p' f.txt",
        "ls ../ws/src",
    ] {
        assert_eq!(run(&p, cmd), Decision::Allow, "{cmd}");
    }
}
