//! Every row of `tests/data/commands.md` (written as data below): the decision ahelper
//! makes for the row's command with exactly the row's rule set. Rule notation of the file:
//! "allow X" / "deny X" is a prefix rule, written `run_command(X:*)` here. The workspace is
//! `/ws` and commands run in `/ws` (pure path math; nothing touches the disk).

use super::support::permissions::decide_command;
use ahelper_agents::permissions::{
    Decision, PermissionMode, PermissionPolicy, PermissionRequest, RuleSet,
};
use ahelper_agents::tools::ToolKind;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Allow,
    Ask,
    Deny,
    /// The row allows either ask or deny: assert "not allow".
    NotAllow,
}

struct Case {
    id: &'static str,
    command: &'static str,
    allow: &'static [&'static str],
    ask: &'static [&'static str],
    deny: &'static [&'static str],
    /// `false` when the row's rule set excludes ahelper's built-in read-only list.
    builtins: bool,
    mode: PermissionMode,
    want: Want,
}

const fn case(
    id: &'static str,
    command: &'static str,
    allow: &'static [&'static str],
    deny: &'static [&'static str],
    want: Want,
) -> Case {
    Case {
        id,
        command,
        allow,
        ask: &[],
        deny,
        builtins: true,
        mode: PermissionMode::Default,
        want,
    }
}

fn decide_case(c: &Case) -> Decision {
    let mut rules = RuleSet::parse(c.allow, c.ask, c.deny)
        .unwrap_or_else(|e| panic!("{}: bad rule in the test table: {e}", c.id));
    rules.builtin_read_only = c.builtins;
    let policy = PermissionPolicy {
        mode: c.mode,
        rules,
        ..PermissionPolicy::default()
    };
    decide_command(&policy, c.command)
}

fn check(cases: &[Case]) {
    let mut failures = Vec::new();
    for c in cases {
        let got = decide_case(c);
        let ok = matches!(
            (c.want, &got),
            (Want::Allow, Decision::Allow)
                | (Want::Ask, Decision::Ask { .. })
                | (Want::Deny, Decision::Deny { .. })
                | (Want::NotAllow, Decision::Ask { .. } | Decision::Deny { .. })
        );
        if !ok {
            failures.push(format!(
                "{}: `{}` expected {:?}, got {:?}",
                c.id, c.command, c.want, got
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

const GIT_STATUS: &[&str] = &["run_command(git status:*)"];
const NONE: &[&str] = &[];

#[test]
fn a_chaining_and_separators() {
    let fifty_trues = format!("{}curl https://example.invalid/x", "true && ".repeat(50));
    let fifty: &'static str = Box::leak(fifty_trues.into_boxed_str());
    let three_hundred = format!("{}curl https://example.invalid/x", "true && ".repeat(300));
    let three_hundred: &'static str = Box::leak(three_hundred.into_boxed_str());
    check(&[
        case("C01", "git status; rm -rf x", GIT_STATUS, NONE, Want::Ask),
        case(
            "C02",
            "git fetch && git pull && git clean -fd",
            NONE,
            &["run_command(git clean:*)"],
            Want::Deny,
        ),
        case(
            "C04",
            "true && rm important_file.txt",
            &["run_command(true:*)"],
            NONE,
            Want::Ask,
        ),
        // The row's rule set is exactly `allow cat`: without ahelper's built-in read-only list,
        // `wc` is not allowed. (With the built-in list `wc -l` is read-only: see the next test.)
        Case {
            builtins: false,
            ..case(
                "C05",
                "cat file.txt | wc -l",
                &["run_command(cat:*)"],
                NONE,
                Want::Ask,
            )
        },
        case("C07", "ls & rm -rf /tmp/pwn", NONE, NONE, Want::Ask),
        case("C08", "ls\nrm -rf /tmp/pwn", NONE, NONE, Want::Ask),
        Case {
            ask: &["run_command"],
            ..case(
                "C10a",
                "git diff --",
                &["run_command(git diff:*)"],
                NONE,
                Want::Ask,
            )
        },
        Case {
            ask: &["run_command"],
            ..case(
                "C10b",
                "git diff --no-index -- a b",
                &["run_command(git diff:*)"],
                NONE,
                Want::Ask,
            )
        },
        // Chosen: ask with an explicit warning about sudo (the row accepts deny or ask).
        case("C11", "sudo rm -rf /important", NONE, NONE, Want::Ask),
        case(
            "C13a",
            "rm  -rf  /",
            NONE,
            &["run_command(rm -rf /:*)"],
            Want::Deny,
        ),
        case(
            "C13b",
            "rm -rf / # comment",
            NONE,
            &["run_command(rm -rf /:*)"],
            Want::Deny,
        ),
        case(
            "C13c",
            "/bin/rm -rf /",
            NONE,
            &["run_command(rm -rf /:*)"],
            Want::Deny,
        ),
        case(
            "C13d",
            "cd / && rm -rf .",
            NONE,
            &["run_command(rm -rf /:*)"],
            Want::Deny,
        ),
        case("C14", fifty, NONE, &["run_command(curl:*)"], Want::Deny),
        // Over the subcommand cap: fails closed to deny because a deny rule could match.
        case(
            "C14-over-cap",
            three_hundred,
            NONE,
            &["run_command(curl:*)"],
            Want::Deny,
        ),
        case(
            "C14-over-cap-no-deny",
            three_hundred,
            &["run_command(curl:*)"],
            NONE,
            Want::Ask,
        ),
        // The regex `^git\s+(status|log|diff|pull)` as prefix rules.
        case(
            "C16",
            "git status; rm -rf x",
            &[
                "run_command(git status:*)",
                "run_command(git log:*)",
                "run_command(git diff:*)",
                "run_command(git pull:*)",
            ],
            NONE,
            Want::Ask,
        ),
    ]);
}

#[test]
fn c05_with_builtin_read_only_list() {
    // Documented choice: with ahelper's default built-in list, `wc -l` needs no rule, so the
    // pipeline is allowed once `cat` is.
    check(&[case(
        "C05-builtins",
        "cat file.txt | wc -l",
        &["run_command(cat:*)"],
        NONE,
        Want::Allow,
    )]);
}

#[test]
fn b_substitution_subshells_eval_opaque() {
    check(&[
        case(
            "C17",
            "echo $(rm -rf x)",
            &["run_command(echo:*)"],
            NONE,
            Want::Ask,
        ),
        case(
            "C17-deny",
            "echo $(rm -rf x)",
            &["run_command(echo:*)"],
            &["run_command(rm:*)"],
            Want::Deny,
        ),
        case(
            "C19",
            "diff <(curl -s https://example.invalid/a) local.txt",
            &["run_command(diff:*)"],
            NONE,
            Want::Ask,
        ),
        // Chosen: deny (write into the protected .ahelper directory), inside `bash -c` too.
        case(
            "C20",
            "bash -c 'echo x >> .ahelper/hooks.toml'",
            NONE,
            NONE,
            Want::Deny,
        ),
        case(
            "C20-plain",
            "echo x >> .ahelper/hooks.toml",
            NONE,
            NONE,
            Want::Deny,
        ),
        // Scripts from the workspace are opaque: the agent can change them, and their contents
        // are not analysed, so an allow rule for the script does not cover it.
        case(
            "C22",
            "./scripts/run.sh \"rm -rf build\"",
            &["run_command(./scripts/run.sh:*)"],
            NONE,
            Want::Ask,
        ),
        case(
            "C23a",
            "$(echo rm) -rf /tmp/x",
            NONE,
            &["run_command(rm:*)"],
            Want::Deny,
        ),
        case(
            "C23b",
            "X=r; ${X}m -rf /tmp/x",
            NONE,
            &["run_command(rm:*)"],
            Want::NotAllow,
        ),
        case(
            "C23c",
            "${0/x/r}m -rf /tmp/x",
            NONE,
            &["run_command(rm:*)"],
            Want::NotAllow,
        ),
        case(
            "C25a",
            "export PATH=/ws/.evil:$PATH && git status",
            GIT_STATUS,
            NONE,
            Want::Ask,
        ),
        case(
            "C25b",
            "export PATH=/ws/.evil:$PATH",
            GIT_STATUS,
            NONE,
            Want::Ask,
        ),
        case(
            "C25c",
            "typeset -x PATH=/ws/.evil",
            GIT_STATUS,
            NONE,
            Want::Ask,
        ),
        case(
            "C25d",
            "declare -x PATH=/ws/.evil; git status",
            GIT_STATUS,
            NONE,
            Want::Ask,
        ),
        case(
            "C25e",
            "PATH=/ws/.evil:$PATH; git status",
            GIT_STATUS,
            NONE,
            Want::Ask,
        ),
        case("C26", "cat =(ls)", &["run_command(cat:*)"], NONE, Want::Ask),
    ]);
}

#[test]
fn c_read_only_tools_that_execute_or_write() {
    let find = &["run_command(find:*)"][..];
    let sed = &["run_command(sed:*)"][..];
    check(&[
        case(
            "C28a",
            "find /ws -exec rm {} \\;",
            NONE,
            &["run_command(rm:*)"],
            Want::Deny,
        ),
        case("C28b", "find . -delete", find, NONE, Want::Ask),
        case("C28c", "find . -fprint out", find, NONE, Want::Ask),
        case(
            "C29",
            "find . -name f -exec env rm -f {} \\;",
            NONE,
            &["run_command(rm:*)"],
            Want::Deny,
        ),
        case(
            "C31",
            "rg --pre=/ws/payload.sh '' .",
            &["run_command(rg:*)"],
            NONE,
            Want::Ask,
        ),
        case("C34a", "sed -n '1e id' file.txt", sed, NONE, Want::Ask),
        case(
            "C34b",
            "sed 's/a/b/w /home/user/.bashrc' file.txt",
            sed,
            NONE,
            Want::Ask,
        ),
        case("C34c", "sed -i 's/x/y/' file", sed, NONE, Want::Ask),
        // Chosen: ask (the `--output` hazard is not covered by the allow rule).
        case(
            "C35a",
            "git diff --output=.git/hooks/pre-commit",
            &["run_command(git diff:*)"],
            NONE,
            Want::NotAllow,
        ),
        case(
            "C35b",
            "git log --output=/home/user/.bashrc",
            &["run_command(git log:*)"],
            NONE,
            Want::NotAllow,
        ),
        case("C37a", "git -p status", GIT_STATUS, NONE, Want::Ask),
        case(
            "C37b",
            "git --paginate show HEAD",
            &["run_command(git show:*)"],
            NONE,
            Want::Ask,
        ),
        case(
            "C37c",
            "git log -p",
            &["run_command(git log:*)"],
            NONE,
            Want::Allow,
        ),
        case(
            "C38a",
            "git --git-dir=/outside/.git log",
            &["run_command(git log:*)"],
            NONE,
            Want::Ask,
        ),
        case(
            "C38b",
            "git --work-tree=/outside status",
            GIT_STATUS,
            NONE,
            Want::Ask,
        ),
        case(
            "C38c",
            "git --exec-path=/ws/bin status",
            GIT_STATUS,
            NONE,
            Want::Ask,
        ),
        case(
            "C40",
            "git branch -v -D feature",
            &["run_command(git branch -v:*)"],
            &["run_command(git branch -D:*)"],
            Want::Deny,
        ),
        case(
            "C41",
            "git difftool --extcmd=/ws/x",
            &["run_command(git diff:*)"],
            NONE,
            Want::Ask,
        ),
        case(
            "C43",
            "git push --force-with-lease",
            NONE,
            &["run_command(git push --force:*)"],
            Want::Ask,
        ),
    ]);
}

#[test]
fn c_same_read_only_commands_without_rules() {
    // The built-in list alone must not auto-allow the same primitives.
    check(&[
        case("C28b-builtin", "find . -delete", NONE, NONE, Want::Ask),
        case("C28c-builtin", "find . -fprint out", NONE, NONE, Want::Ask),
        case(
            "C31-builtin",
            "rg --pre=/ws/payload.sh '' .",
            NONE,
            NONE,
            Want::Ask,
        ),
        case(
            "C34a-builtin",
            "sed -n '1e id' file.txt",
            NONE,
            NONE,
            Want::Ask,
        ),
        case(
            "C34c-builtin",
            "sed -i 's/x/y/' file",
            NONE,
            NONE,
            Want::Ask,
        ),
        case(
            "C35a-builtin",
            "git diff --output=.git/hooks/pre-commit",
            NONE,
            NONE,
            Want::Ask,
        ),
        case("C37a-builtin", "git -p status", NONE, NONE, Want::Ask),
        case("C37c-builtin", "git log -p", NONE, NONE, Want::Allow),
        case(
            "C38a-builtin",
            "git --git-dir=/outside/.git log",
            NONE,
            NONE,
            Want::Ask,
        ),
        case(
            "C41-builtin",
            "git difftool --extcmd=/ws/x",
            NONE,
            NONE,
            Want::Ask,
        ),
        case(
            "builtin-git-c",
            "git -c core.pager='sh -c id' log",
            NONE,
            NONE,
            Want::Ask,
        ),
        case(
            "builtin-sed-n",
            "sed -n '1,5p' file.txt",
            NONE,
            NONE,
            Want::Allow,
        ),
        case(
            "builtin-find",
            "find . -name '*.rs' -type f",
            NONE,
            NONE,
            Want::Allow,
        ),
        case("builtin-rg", "rg -n 'fn main' src", NONE, NONE, Want::Allow),
        case(
            "builtin-branch-list",
            "git branch -a -v",
            NONE,
            NONE,
            Want::Allow,
        ),
        case(
            "builtin-branch-create",
            "git branch newbranch",
            NONE,
            NONE,
            Want::Ask,
        ),
    ]);
}

#[test]
fn d_environment_prefixes() {
    check(&[
        Case {
            ask: &["run_command(git:*)"],
            ..case(
                "C44",
                "CI=true git commit -m x",
                &["run_command"],
                NONE,
                Want::Ask,
            )
        },
        case(
            "C46a",
            "LD_PRELOAD=/tmp/evil.so ls",
            &["run_command(ls:*)"],
            NONE,
            Want::Ask,
        ),
        case(
            "C46b",
            "GIT_SSH_COMMAND=/ws/x git fetch",
            &["run_command(git fetch:*)"],
            NONE,
            Want::Ask,
        ),
        case(
            "C46c",
            "DOCKER_HOST=tcp://other docker ps",
            &["run_command(docker ps:*)"],
            NONE,
            Want::Ask,
        ),
        case(
            "C47",
            "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0='sh -c id' git log",
            &["run_command(git log:*)"],
            NONE,
            Want::Ask,
        ),
        // The run_command tool has no env parameter: a PATH override can only come through the
        // command line, where it is an environment prefix or assignment.
        case(
            "C49a",
            "PATH=/ws/bin:$PATH git status",
            GIT_STATUS,
            NONE,
            Want::Ask,
        ),
        case(
            "C49b",
            "env PATH=/ws/bin git status",
            GIT_STATUS,
            NONE,
            Want::Ask,
        ),
        case(
            "inert-prefix",
            "CI=true RUST_LOG=debug git status",
            GIT_STATUS,
            NONE,
            Want::Allow,
        ),
    ]);
}

#[test]
fn e_redirections_and_sensitive_files() {
    let echo = &["run_command(echo:*)"][..];
    check(&[
        case("C50", "echo 'payload' > ~/.bashrc", echo, NONE, Want::Deny),
        case(
            "C52",
            "mkdir -p bar && echo x > bar/test.md",
            &["run_command(echo:*)", "run_command(mkdir:*)"],
            NONE,
            Want::Ask,
        ),
        // Chosen: deny (outside the workspace) — ask when HOME is unknown.
        case(
            "C53",
            "wc README.md > ~/wc_output",
            &["run_command(wc:*)"],
            NONE,
            Want::NotAllow,
        ),
        case(
            "C55",
            "ls .env 2>/dev/null || echo \"Not found\"",
            &["run_command(ls:*)", "run_command(echo:*)"],
            NONE,
            Want::Allow,
        ),
        // The "explicit allow-redirection flag" is an edit rule for the target.
        case(
            "C56",
            "echo \"hello\" > test.txt",
            &["run_command(echo:*)", "edit_file(test.txt)"],
            NONE,
            Want::Allow,
        ),
        Case {
            mode: PermissionMode::AcceptEdits,
            ..case(
                "C56-accept-edits",
                "echo \"hello\" > test.txt",
                echo,
                NONE,
                Want::Allow,
            )
        },
        case(
            "C56-no-opt-in",
            "echo \"hello\" > test.txt",
            echo,
            NONE,
            Want::Ask,
        ),
    ]);
}

#[test]
fn f_obfuscation() {
    let rm = &["run_command(rm:*)"][..];
    check(&[
        case(
            "C58",
            "cat${IFS:0:1}${HOME}/.ssh/id_rsa",
            &["run_command(cat:*)"],
            NONE,
            Want::Ask,
        ),
        // Chosen: ask (also with an allow rule for `ln`).
        case("C59", "ln /outside/secret /ws/h", NONE, NONE, Want::Ask),
        case(
            "C59-rule",
            "ln /outside/secret /ws/h",
            &["run_command(ln:*)"],
            NONE,
            Want::Ask,
        ),
        case("C61a", "$'\\x72\\x6d' -rf /tmp/x", NONE, rm, Want::Deny),
        case("C61b", "$'r\\155' -rf /tmp/x", NONE, rm, Want::Deny),
        case(
            "C62",
            "bash -c $\"\\r\\m -rf /tmp/x\"",
            NONE,
            rm,
            Want::Deny,
        ),
        case("C64", "ls\r -la", &["run_command(ls:*)"], NONE, Want::Ask),
        case(
            "C65a",
            "files=$(git ls-files)",
            &[
                "run_command(git ls-files:*)",
                "run_command(echo:*)",
                "run_command(date:*)",
            ],
            NONE,
            Want::Allow,
        ),
        case(
            "C65b",
            "echo \"$(date)\"",
            &[
                "run_command(git ls-files:*)",
                "run_command(echo:*)",
                "run_command(date:*)",
            ],
            NONE,
            Want::Allow,
        ),
    ]);
}

#[test]
fn g_rule_semantics_and_false_positives() {
    check(&[
        case(
            "C67",
            "git commit -m 'it'\\''s working'",
            &["run_command(git commit:*)"],
            NONE,
            Want::Allow,
        ),
        case(
            "C68",
            "python3 -c \"import sys\nprint(sys.argv)\"",
            &["run_command(python3 -c:*)"],
            NONE,
            Want::Allow,
        ),
        // Allowed by the (too broad) rule; the defaults are narrow: without it, it asks.
        case(
            "C70",
            "git push --force origin main",
            &["run_command(git:*)"],
            NONE,
            Want::Allow,
        ),
        case(
            "C70-defaults",
            "git push --force origin main",
            NONE,
            NONE,
            Want::Ask,
        ),
        case(
            "C71",
            "rtk git reset --hard abc",
            NONE,
            &["run_command(git reset --hard:*)"],
            Want::Deny,
        ),
        // Chosen: ask. Auto-approving commands does not approve reading outside the workspace,
        // but it does apply to commands inside it.
        case(
            "C73",
            "cat /home/user/.ssh/id_rsa",
            &["run_command"],
            NONE,
            Want::Ask,
        ),
        case(
            "C73-inside",
            "cat README.md",
            &["run_command"],
            NONE,
            Want::Allow,
        ),
        case(
            "C73-builtin",
            "cat /home/user/.ssh/id_rsa",
            NONE,
            NONE,
            Want::Ask,
        ),
    ]);
}

#[test]
fn c32_grep_tool_pattern_is_a_read_in_the_workspace() {
    // C32 is about ahelper's own grep tool: the permission layer sees a read of the search root
    // (allowed inside the workspace); passing the pattern after `-e`/`--` so that it is never
    // an option is the grep tool's job, tested with the tool.
    let policy = PermissionPolicy::default();
    let d = policy.decide(&PermissionRequest {
        tool: "grep",
        kind: ToolKind::Read,
        subject: Some("."),
        workspace_root: Path::new("/ws"),
        cwd: Path::new("/ws"),
    });
    assert_eq!(d, Decision::Allow);
}
