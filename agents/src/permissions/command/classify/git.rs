//! `git`: which global options and subcommand options run programs or write files, and which
//! subcommands only read (git(1) "OPTIONS", and the subcommands' manuals).

use super::{ConcernKind, Facts, SimpleCommand, Word, dynamic_words, is_option, option_name};

/// Global options of git that change nothing about what runs (git(1), "OPTIONS").
#[rustfmt::skip]
const INERT_GLOBAL_OPTIONS: &[&str] = &[
    "-P", "--no-pager", "--no-replace-objects", "--literal-pathspecs", "--glob-pathspecs",
    "--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks", "--bare",
    "--no-lazy-fetch", "--no-advice", "--version", "--help", "-h",
];
/// Global options of git that take the next word as their value (`-C` is read separately).
#[rustfmt::skip]
const GLOBAL_VALUE_OPTIONS: &[&str] = &[
    "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env",
    "--list-cmds", "--attr-source",
];
/// Options that write a file or run a program, for every subcommand.
#[rustfmt::skip]
const HAZARD_OPTIONS: &[(&str, &str)] = &[
    ("--output", "`--output` writes to a file"),
    ("--ext-diff", "`--ext-diff` runs an external diff program"),
    ("--extcmd", "`--extcmd` runs a program"),
    ("--upload-pack", "runs a program named in the arguments"),
    ("--receive-pack", "runs a program named in the arguments"),
];
/// Options that run a program for some subcommands: (option, subcommands, why).
#[rustfmt::skip]
const SUBCOMMAND_HAZARD_OPTIONS: &[(&str, &[&str], &str)] = &[
    ("--exec", &["push", "archive", "rebase", "send-pack", "fetch-pack"], "`--exec` runs a program"),
    ("-x", &["rebase", "difftool"], "`-x` runs a command"),
    ("-u", &["clone", "ls-remote"], "`-u` names an upload-pack program"),
    ("-O", &["grep"], "opens a pager program"),
    ("--open-files-in-pager", &["grep"], "opens a pager program"),
];
/// Subcommands that only read (`git branch` only with listing options).
const READ_ONLY_SUBCOMMANDS: &[&str] =
    &["", "status", "diff", "log", "show", "ls-files", "rev-parse"];
/// Options of `git branch` that only list.
#[rustfmt::skip]
const BRANCH_LIST_OPTIONS: &[&str] = &[
    "-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose", "-l", "--list", "--show-current",
    "--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "--sort", "--format",
    "--color", "--no-color", "--column", "--no-column", "-i", "--ignore-case", "--abbrev",
    "--no-abbrev", "-q", "--quiet",
];
/// Listing options of `git branch` that take a commit as the next word.
#[rustfmt::skip]
const BRANCH_COMMIT_OPTIONS: &[&str] = &[
    "--contains", "--no-contains", "--merged", "--no-merged", "--points-at",
];

/// `git`: global options, hazardous subcommand options, commands run from the arguments, and
/// the files a read-only subcommand reads.
pub(super) fn git(facts: &mut Facts, cmd: &SimpleCommand) {
    global_options(facts, &cmd.global_options);
    let sub = cmd.argv.get(1).map(|w| w.text.as_str()).unwrap_or("");
    dynamic_words(facts, cmd);
    for (i, w) in cmd.argv.iter().enumerate().skip(2) {
        if let Some(reason) = option_hazard(&w.text, sub) {
            facts.hazard(i, reason);
        }
    }
    if (sub == "bisect" && cmd.argv.get(2).is_some_and(|w| w.text == "run"))
        || (sub == "submodule" && cmd.argv.iter().any(|w| w.text == "foreach"))
    {
        facts.hazard(
            1,
            format!("`git {sub}` runs commands given in its arguments"),
        );
    }
    let read_only_sub = READ_ONLY_SUBCOMMANDS.contains(&sub)
        || (sub == "branch" && branch_lists_only(&cmd.argv[2..]));
    if read_only_sub {
        facts.read_only = true;
        for (i, w) in cmd.argv.iter().enumerate().skip(2) {
            if !is_option(w) && !w.dynamic {
                facts.read(Some(i), w);
            }
        }
    }
    object_paths(facts, cmd, sub);
    if !sub.is_empty() && !KNOWN_SUBCOMMANDS.contains(&sub) && !sub.starts_with('-') {
        facts.workspace_code = Some(format!(
            "`git {sub}` is not a git command: an alias from git's configuration, which can run \
             any program (`!cmd`)"
        ));
    }
}

/// Git's own commands (git(1) "GIT COMMANDS"); any other subcommand is an alias or an external
/// `git-NAME` program.
#[rustfmt::skip]
const KNOWN_SUBCOMMANDS: &[&str] = &[
    "add", "am", "annotate", "apply", "archive", "bisect", "blame", "branch", "bundle",
    "cat-file", "check-attr", "check-ignore", "check-mailmap", "check-ref-format", "checkout",
    "cherry", "cherry-pick", "clean", "clone", "commit", "commit-graph", "commit-tree", "config",
    "count-objects", "describe", "diff", "diff-files", "diff-index", "diff-tree", "difftool",
    "fetch", "for-each-ref", "format-patch", "fsck", "gc", "grep", "hash-object", "help",
    "init", "log", "ls-files", "ls-remote", "ls-tree", "merge", "merge-base", "merge-file",
    "mergetool", "mktree", "mv", "name-rev", "notes", "pull", "push", "range-diff", "read-tree",
    "rebase", "reflog", "remote", "repack", "replace", "reset", "restore", "rev-list",
    "rev-parse", "revert", "rm", "shortlog", "show", "show-branch", "show-ref", "sparse-checkout",
    "stash", "status", "submodule", "switch", "symbolic-ref", "tag", "update-index",
    "update-ref", "var", "verify-commit", "verify-tag", "version", "whatchanged", "worktree",
    "write-tree", "maintenance", "prune", "send-email", "request-pull", "instaweb", "blame",
];

/// Subcommands that print file contents from the repository's history or index (patches,
/// blobs, matching lines, archives): with `read_file` deny rules they could print a tracked
/// denied file, so they ask (see `decide/simple/hidden.rs`).
pub(crate) const CONTENT_PRINTERS: &[&str] = &[
    "diff",
    "show",
    "grep",
    "cat-file",
    "archive",
    "blame",
    "annotate",
    "format-patch",
    "range-diff",
    "diff-tree",
    "diff-index",
    "diff-files",
    "bundle",
    "fast-export",
    "difftool",
    "notes",
];

/// Subcommands that print the contents of `REV:PATH` objects.
const OBJECT_READERS: &[&str] = &["show", "cat-file", "grep", "archive", "diff", "log"];

/// `git show REV:PATH`, `git cat-file -p REV:PATH`: the file at PATH (from the repository's
/// top, or from the working directory when it starts with `./` or `../`) is read.
fn object_paths(facts: &mut Facts, cmd: &SimpleCommand, sub: &str) {
    if !OBJECT_READERS.contains(&sub) {
        return;
    }
    for w in cmd.argv.iter().skip(2) {
        if is_option(w) {
            continue;
        }
        if let Some((_, path)) = w.text.split_once(':')
            && !path.is_empty()
        {
            let path = path.trim_start_matches('/');
            facts.read(
                None,
                &Word {
                    text: path.to_string(),
                    ..w.clone()
                },
            );
        }
    }
}

/// Global options (already moved out of `argv`): `-C DIR` is read; anything not inert is a
/// hazard.
fn global_options(facts: &mut Facts, globals: &[Word]) {
    let mut i = 0;
    while i < globals.len() {
        let w = &globals[i];
        let t = w.text.as_str();
        if t == "-C" {
            if let Some(dir) = globals.get(i + 1) {
                facts.read(None, dir);
            }
            i += 2;
            continue;
        }
        if !INERT_GLOBAL_OPTIONS.contains(&t) || w.dynamic {
            facts.concern(None, ConcernKind::Hazard, global_option_hazard(t));
        }
        i += 1 + usize::from(GLOBAL_VALUE_OPTIONS.contains(&t));
    }
}

/// Why a global option that is not inert matters.
fn global_option_hazard(t: &str) -> &'static str {
    match option_name(t) {
        "-c" | "--config-env" => {
            "`git -c` sets configuration (core.pager, aliases, hooks) that runs programs"
        }
        "-p" | "--paginate" => "`git -p` forces a pager, which runs a program",
        "--git-dir" | "--work-tree" => {
            "`--git-dir`/`--work-tree` point git at another repository and its config"
        }
        "--exec-path" => "`--exec-path` makes git run helpers from another directory",
        _ => "a git global option that changes what git runs",
    }
}

/// Why the argument `t` of `git SUB` runs a program or writes a file, if it does.
fn option_hazard(t: &str, sub: &str) -> Option<&'static str> {
    let name = option_name(t);
    if let Some((_, reason)) = HAZARD_OPTIONS.iter().find(|(o, _)| *o == name) {
        return Some(reason);
    }
    let for_sub = SUBCOMMAND_HAZARD_OPTIONS
        .iter()
        .find(|(o, subs, _)| *o == name && subs.contains(&sub));
    if let Some((_, _, reason)) = for_sub {
        return Some(reason);
    }
    (sub == "grep" && t.starts_with("-O")).then_some("opens a pager program")
}

/// `git branch` with only listing options (no branch is created, deleted, moved or configured).
fn branch_lists_only(args: &[Word]) -> bool {
    let list_mode = args
        .iter()
        .any(|w| matches!(w.text.as_str(), "-l" | "--list"));
    let mut prev_takes_commit = false;
    for w in args {
        let t = w.text.as_str();
        if w.dynamic {
            return false;
        }
        if t.starts_with('-') {
            let name = option_name(t);
            if !BRANCH_LIST_OPTIONS.contains(&name) {
                return false;
            }
            prev_takes_commit = !t.contains('=') && BRANCH_COMMIT_OPTIONS.contains(&name);
            continue;
        }
        if !(list_mode || prev_takes_commit) {
            return false;
        }
        prev_takes_commit = false;
    }
    true
}
