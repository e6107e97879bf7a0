//! Property: a compound command that hides a denied command — behind random separators, inert
//! wrappers, command runners, nesting, quoting styles, shells fed from standard input or
//! here-strings, `env -S` and git aliases — is always denied (never allowed, not even turned into
//! a prompt), in every mode. Inside interpreter code (`python3 -c`), whose quoting the scan
//! only approximates, such a command is never allowed (denied or asked).

use super::support::permissions::{decide_command, policy};
use ahelper_agents::permissions::{Decision, PermissionMode};
use proptest::prelude::*;

/// `rm` spelled in ways the shell resolves to `rm`.
#[rustfmt::skip]
const SPELLED_RM: &[&str] = &[
    "rm", "'rm'", "\"rm\"", "r''m", "r\"\"m", "\\rm", "r\\m", "$'\\x72\\x6d'", "$'r\\155'",
    "$'\\162m'", "/bin/rm", "/usr/bin/rm", "r\\\nm",
];

fn spelled_rm() -> impl Strategy<Value = String> {
    prop::sample::select(SPELLED_RM).prop_map(str::to_string)
}

fn args() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["-rf /tmp/x", "-f a.txt", "x", "-r -f build", ""])
        .prop_map(str::to_string)
}

/// Single-quotes `s` for the shell.
fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `inner`'s command between `before` and `after`; `simple` says whether the result is a simple
/// command that can take a prefix wrapper.
fn around(
    inner: &BoxedStrategy<(String, bool)>,
    before: &'static str,
    after: &'static str,
    simple: bool,
) -> BoxedStrategy<(String, bool)> {
    inner
        .clone()
        .prop_map(move |(cmd, _)| (format!("{before}{cmd}{after}"), simple))
        .boxed()
}

/// `inner` with the command single-quoted for the shell.
fn quote(inner: &BoxedStrategy<(String, bool)>) -> BoxedStrategy<(String, bool)> {
    inner
        .clone()
        .prop_map(|(cmd, simple)| (sq(&cmd), simple))
        .boxed()
}

/// (command text, is it a simple command that can take a prefix wrapper)
fn hidden() -> impl Strategy<Value = (String, bool)> {
    let leaf = (spelled_rm(), args())
        .prop_map(|(rm, a)| (format!("{rm} {a}").trim_end().to_string(), true));
    leaf.prop_recursive(4, 16, 1, |inner| {
        prop_oneof![
            // Inert wrappers (only in front of a simple command).
            (
                inner.clone(),
                prop::sample::select(vec![
                    "timeout 5",
                    "time",
                    "nice -n 5",
                    "nohup",
                    "command",
                    "env CI=1",
                    "stdbuf -oL",
                    "sudo",
                    "sudo -u root",
                    "builtin",
                ])
            )
                .prop_map(|((cmd, simple), w)| if simple {
                    (format!("{w} {cmd}"), true)
                } else {
                    (format!("( {cmd} )"), false)
                }),
            // Command runners.
            (
                inner.clone(),
                prop::sample::select(vec!["bash -c", "sh -c", "bash -lc", "dash -c"])
            )
                .prop_map(|((cmd, _), runner)| (format!("{runner} {}", sq(&cmd)), true)),
            // `eval` is a builtin: programs that exec their arguments (`timeout`, `find -exec`)
            // cannot run it, so it is not offered to them as a simple command.
            around(&quote(&inner), "eval ", "", false),
            inner.clone().prop_map(|(cmd, simple)| if simple {
                (format!("echo a | xargs {cmd}"), false)
            } else {
                (format!("{{ {cmd}; }}"), false)
            }),
            inner.clone().prop_map(|(cmd, simple)| if simple {
                (format!("find . -name '*.o' -exec {cmd} {{}} \\;"), true)
            } else {
                (format!("( {cmd} )"), false)
            }),
            // Nesting constructs.
            around(&inner, "echo \"$( ", " )\"", true),
            inner.clone().prop_map(|(cmd, _)| if cmd.contains('`') {
                (format!("echo $( {cmd} )"), true)
            } else {
                (format!("echo `{cmd}`"), true)
            }),
            around(&inner, "( ", " )", false),
            around(&inner, "if true; then ", "; fi", false),
            around(&inner, "for i in 1 2; do ", "; done", false),
            around(
                &inner,
                "while false; do :; done; until true; do ",
                "; done",
                false
            ),
            around(&inner, "case x in x) ", ";; esac", false),
            around(&inner, "f() { ", "; }; f", false),
            around(&inner, "cat <( ", " )", true),
            around(&inner, "! ", "", false),
            // Shells and interpreters that read the program from standard input, a here-string,
            // a here-document or a code string.
            (
                inner.clone(),
                prop::sample::select(vec!["bash", "sh", "sh -s", "dash", "python3", "perl"])
            )
                .prop_map(|((cmd, _), shell)| (
                    format!("printf '%s\\n' {} | {shell}", sq(&cmd)),
                    false
                )),
            around(&quote(&inner), "bash <<< ", "", true),
            around(&inner, "{ sh <<'EOF'\n", "\nEOF\n}", false),
            around(&quote(&inner), "echo ", " | xargs -0 sh -c", false),
            // `env -S` splits a string into a command; git aliases run `!` commands.
            around(&quote(&inner), "env -S ", "", true),
            inner.prop_map(|(cmd, _)| (
                format!("git -c alias.x={} x", sq(&format!("!{cmd}"))),
                true
            )),
        ]
    })
}

/// Commands allowed on their own, around the hidden one.
#[rustfmt::skip]
const BENIGN: &[&str] = &[
    "ls", "echo hi", "git status", "true", "cat README.md", "cargo test", "pwd", "git diff HEAD",
    "wc -l src/main.rs",
];

fn benign() -> impl Strategy<Value = String> {
    prop::sample::select(BENIGN).prop_map(str::to_string)
}

fn separator() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["; ", " && ", " || ", " | ", " & ", "\n", " |& "])
}

fn compound() -> impl Strategy<Value = String> {
    (
        prop::collection::vec((benign(), separator()), 0..4),
        hidden(),
        prop::collection::vec((separator(), benign()), 0..4),
        any::<bool>(),
    )
        .prop_map(|(before, (cmd, simple), after, prefix)| {
            // An assignment prefix only works where the shell reads the command (not after
            // `find -exec` or `timeout`, which exec `LANG=C` as a program name).
            let cmd = if simple && prefix {
                format!("LANG=C {cmd}")
            } else {
                cmd
            };
            let mut s = String::new();
            for (b, sep) in before {
                s.push_str(&b);
                s.push_str(sep);
            }
            s.push_str(&cmd);
            for (sep, b) in after {
                s.push_str(sep);
                s.push_str(&b);
            }
            s
        })
}

/// 1,000 cases from a fixed seed, so CI always checks the same commands and never flakes;
/// `AHELPER_PROPTEST_SEED=<n>` explores other ones (a failure there becomes a table test).
fn config() -> ProptestConfig {
    let seed = std::env::var("AHELPER_PROPTEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_c0de);
    ProptestConfig {
        cases: 1000,
        rng_seed: proptest::test_runner::RngSeed::Fixed(seed),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn mode() -> impl Strategy<Value = PermissionMode> {
    prop::sample::select(vec![
        PermissionMode::Default,
        PermissionMode::AcceptEdits,
        PermissionMode::Plan,
        PermissionMode::Bypass,
    ])
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn hidden_denied_command_is_always_denied(command in compound(), mode in mode()) {
        let p = policy(
            mode,
            &["run_command", "run_command(echo:*)", "run_command(find:*)", "run_command(cargo test:*)"],
            &[],
            &["run_command(rm:*)"],
        );
        let decision = decide_command(&p, &command);
        prop_assert!(
            matches!(decision, Decision::Deny { .. }),
            "{command:?} in {mode:?} gave {decision:?}"
        );
    }

    #[test]
    fn hidden_in_interpreter_code_is_never_allowed(
        command in compound(),
        interpreter in prop::sample::select(vec![
            "python3 -c 'import os; os.system(CODE)'",
            "perl -e 'system(CODE)'",
            "ruby -e 'system(CODE)'",
            "node -e 'require(\"child_process\").execSync(CODE)'",
        ]),
        mode in mode(),
    ) {
        let code = interpreter.replace("CODE", &format!("{command:?}").replace('\'', "'\\''"));
        let p = policy(
            mode,
            &["run_command", "run_command(python3:*)", "run_command(perl:*)"],
            &[],
            &["run_command(rm:*)"],
        );
        let decision = decide_command(&p, &code);
        prop_assert!(decision != Decision::Allow, "{code:?} in {mode:?} was allowed");
    }
}
