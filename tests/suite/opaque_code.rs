//! A hostile model running code ahelper cannot analyse (issue 15, items 4 and 5 continued):
//! programs whose behaviour files of the workspace define (test runners, build tools, package
//! scripts, interpreters, shell scripts, git aliases) are never treated as known-safe, and git
//! commands that print file contents never leak a tracked file a read deny rule covers — in
//! every permission mode, through the built binary.

use super::support::scripts::runs;
use super::support::*;

/// A repository whose files make ordinary-looking commands run the model's code: each form
/// creates the marker `mN` when it runs.
fn repo_with_workspace_code() -> TestRepo {
    let repo = repo_with(&[
        ("x.sh", "touch m3\n"),
        ("evil.py", "open('m2', 'w').close()\n"),
        (
            "package.json",
            "{\"name\":\"t\",\"version\":\"1.0.0\",\"scripts\":{\"test\":\"touch m5\"}}\n",
        ),
    ]);
    repo.git(&["config", "alias.st", "!touch m4"]);
    repo
}

/// The forms, each touching its marker `m1`…`m7`.
const FORMS: &[&str] = &[
    "python3 -c 'open(\"m1\", \"w\").close()'",
    "python3 -m evil",
    "bash x.sh",
    "git st",
    "npm test --silent",
    "awk 'BEGIN { system(\"touch m6\") }'",
    "node -e 'require(\"fs\").writeFileSync(\"m7\", \"\")'",
];

/// Which markers exist.
fn markers(repo: &TestRepo) -> Vec<usize> {
    (1..=FORMS.len())
        .filter(|n| repo.path().join(format!("m{n}")).exists())
        .collect()
}

/// Item 4 of issue 15: test runners, package scripts, interpreters, shell scripts and git
/// aliases are asked about (so refused in `-p`) in default, accept-edits and plan mode, and in
/// bypass mode when deny rules exist (a command deny rule, or a read deny rule the code could
/// read around); an allow rule naming the program, or bypass mode without deny rules, runs them.
#[test]
fn workspace_code_is_never_known_safe_in_any_mode() {
    let refusing: &[&[&str]] = &[
        &["--permission-mode", "default"],
        &["--permission-mode", "accept-edits"],
        &["--permission-mode", "plan"],
        &[
            "--permission-mode",
            "bypass",
            "--disallowedTools",
            "run_command(rm:*)",
        ],
        &[
            "--permission-mode",
            "bypass",
            "--disallowedTools",
            "read_file(**/.env)",
        ],
    ];
    for args in refusing {
        let repo = repo_with_workspace_code();
        let (_, stderr) = play(&repo, args, FORMS.iter().map(|f| runs(f)));
        assert_eq!(
            markers(&repo),
            Vec::<usize>::new(),
            "{args:?} ran code\n{stderr}"
        );
        if args[1] != "plan" {
            // Plan mode's refusals are its normal answers, not reported as refusals.
            assert_eq!(refused_commands(&stderr), FORMS.len(), "{args:?}\n{stderr}");
        }
    }
    // The user's explicit rule, or bypass mode without deny rules, lets them run.
    let repo = repo_with_workspace_code();
    let (_, stderr) = play(
        &repo,
        &[
            "--permission-mode",
            "bypass",
            "--disallowedTools",
            "run_command(rm:*)",
            "--allowedTools",
            "run_command(npm test:*)",
        ],
        [runs(FORMS[4]), runs(FORMS[3])],
    );
    assert_eq!(markers(&repo), vec![5], "{stderr}");
    let repo = repo_with_workspace_code();
    let turns = FORMS.iter().map(|f| runs(f));
    let (_, stderr) = play(&repo, &["--permission-mode", "bypass"], turns);
    assert_eq!(refused_commands(&stderr), 0, "{stderr}");
    assert!(markers(&repo).contains(&1), "{stderr}");
}

/// Items 2 and 3 of the follow-up: with `read_file(**/.env)` denied, a tracked `.env` reaches
/// the model through no git command that prints contents (`git diff`, `git log -p`, `git show`,
/// `git grep`, `git cat-file`, `git blame`, `git archive`) and no interpreter given inline code,
/// in default and bypass mode; `git status` and `git log --oneline` still run.
#[test]
fn git_and_interpreters_do_not_print_a_tracked_denied_file() {
    let repo = repo_with_changed_env(
        "SECRET=hunter2-9f1c\n",
        "SECRET=hunter2-9f1c\nMORE=hunter2-77aa\n",
    );
    let forms = [
        "git diff",
        "git log -p",
        "git show HEAD",
        "git grep SECRET",
        "git cat-file blob HEAD:.env",
        "git blame .env",
        "git archive HEAD | tar -xO",
        "python3 -c 'print(open(\".env\").read())'",
        "node -e 'console.log(require(\"fs\").readFileSync(\".env\", \"utf8\"))'",
        "perl -ne print .e''nv",
        "awk '{ while ((getline l < \".env\") > 0) print l }' a.txt",
    ];
    for mode in ["default", "bypass"] {
        let turns = forms
            .iter()
            .map(|c| runs(c))
            .chain([runs("git status --short; git log --oneline")]);
        let (requests, stderr) = play(
            &repo,
            &[
                "--permission-mode",
                mode,
                "--disallowedTools",
                "read_file(**/.env)",
            ],
            turns,
        );
        assert_never_sent(&requests, "hunter2", &format!("{mode}\n{stderr}"));
        assert_eq!(refused_commands(&stderr), forms.len(), "{mode}\n{stderr}");
        let last = requests.last().unwrap().body.to_string();
        assert!(
            last.contains("initial"),
            "{mode}: `git log --oneline` ran: {last}"
        );
    }
}
