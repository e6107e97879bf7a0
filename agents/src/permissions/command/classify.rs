//! What one simple command does, as far as permissions care: is it on the built-in read-only
//! list, which of its words are execution primitives or file writes, which files it reads.
//!
//! Sources for the option tables: GNU coreutils, findutils, grep and sed manuals, ripgrep's
//! `rg --help`, git's `git(1)` (global options) and the per-command manuals.

use super::{CommandKind, SimpleCommand, Word, basename};

/// Why a command needs more than a matching prefix rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConcernKind {
    /// An option or script command that runs programs or writes files (`git -c`, `--output`,
    /// `rg --pre`, `sed e`, `find -delete`, …).
    Hazard,
    /// An argument computed at run time where the program's options matter.
    Dynamic,
    /// An environment prefix outside the curated inert set.
    Environment,
    /// `sudo`/`doas`.
    Elevated,
    /// `ln` without `-s`: a hard link the path sandbox cannot tell apart later.
    HardLink,
    /// A builtin that changes how later commands run (`export PATH=…`, `alias`, `set -a`).
    StateChange,
    /// Reads a file outside the workspace (added by the decision, which knows the workspace).
    OutsideRead,
    /// Runs a program from the workspace: the agent can change it, and its contents are not
    /// analysed (added by the decision).
    WorkspaceProgram,
}

/// One reason a command is not trivially safe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Concern {
    /// Index into `argv` of the word responsible: an allow rule whose prefix includes this word
    /// names it explicitly and covers the concern. `None`: no prefix rule covers it.
    pub word: Option<usize>,
    pub kind: ConcernKind,
    pub reason: String,
}

/// The classification of one simple command.
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    /// On the built-in read-only list (needs no rule when `concerns` is empty).
    pub read_only: bool,
    /// True when the program is one whose arguments we understand (so later words are not
    /// commands it runs).
    pub known: bool,
    pub concerns: Vec<Concern>,
    /// Words naming files the command reads: (index into `argv` when the whole word is the path,
    /// the path word).
    pub reads: Vec<(Option<usize>, Word)>,
    /// Files the command writes besides its redirections (`tee FILE`).
    pub writes: Vec<Word>,
    /// Files the command creates, changes, moves or deletes as its main effect: destinations of
    /// `cp`/`mv`/`install`/`ln`/`rsync`, sources of `mv`, operands of `touch`/`truncate`/
    /// `chmod`/`chown`/`chgrp`, `dd of=`, files of `sed -i`, and the configuration file
    /// `git config` sets. The decision denies protected paths, paths outside the workspace and
    /// paths an edit deny rule refuses; the command itself stays decided by command rules.
    pub modified: Vec<Word>,
}

/// Environment variables that only change formatting, locale or logging: they may prefix a
/// command without affecting what it runs.
pub(crate) fn is_inert_variable(name: &str) -> bool {
    matches!(
        name,
        "CI" | "TZ"
            | "LANG"
            | "LANGUAGE"
            | "NO_COLOR"
            | "FORCE_COLOR"
            | "CLICOLOR"
            | "CLICOLOR_FORCE"
            | "TERM"
            | "COLUMNS"
            | "LINES"
            | "RUST_BACKTRACE"
            | "RUST_LOG"
            | "CARGO_TERM_COLOR"
    ) || name.starts_with("LC_")
}

/// Shell variables whose value changes what later commands do even when not exported
/// (`PATH`, `IFS`, …): every upper-case name that is not inert. Lower-case names are, by
/// convention, private shell variables.
fn is_sensitive_shell_variable(name: &str) -> bool {
    !is_inert_variable(name) && !name.chars().any(|c| c.is_ascii_lowercase())
}

/// True when `word` is a bare program name or a path in a system binary directory (so `./ls`,
/// a script in the workspace, is not mistaken for `ls`).
pub(crate) fn is_system_program(word: &str) -> bool {
    if !word.contains('/') {
        return true;
    }
    [
        "/bin/",
        "/usr/bin/",
        "/usr/local/bin/",
        "/sbin/",
        "/usr/sbin/",
    ]
    .iter()
    .any(|dir| {
        word.strip_prefix(dir)
            .is_some_and(|rest| !rest.contains('/'))
    })
}

fn lit(w: &Word) -> Option<&str> {
    w.as_literal()
}

fn is_option(w: &Word) -> bool {
    w.text.starts_with('-') && w.text.len() > 1
}

impl Facts {
    fn concern(&mut self, word: Option<usize>, kind: ConcernKind, reason: impl Into<String>) {
        self.concerns.push(Concern {
            word,
            kind,
            reason: reason.into(),
        });
    }

    fn hazard(&mut self, word: usize, reason: impl Into<String>) {
        self.concern(Some(word), ConcernKind::Hazard, reason);
    }

    fn read(&mut self, index: Option<usize>, word: &Word) {
        self.reads.push((index, word.clone()));
    }
}

/// Options that take a separate value, per program (so their value is not taken for an
/// operand).
const GREP_VALUE_OPTIONS: &[&str] = &[
    "-e",
    "-f",
    "-m",
    "-A",
    "-B",
    "-C",
    "-d",
    "-D",
    "--regexp",
    "--file",
    "--max-count",
    "--after-context",
    "--before-context",
    "--context",
    "--directories",
    "--devices",
    "--label",
    "--include",
    "--exclude",
    "--exclude-dir",
    "--exclude-from",
    "--binary-files",
    "--group-separator",
];
const RG_VALUE_OPTIONS: &[&str] = &[
    "-e",
    "-f",
    "-g",
    "-t",
    "-T",
    "-m",
    "-A",
    "-B",
    "-C",
    "-j",
    "-M",
    "-E",
    "-r",
    "-d",
    "--regexp",
    "--file",
    "--glob",
    "--iglob",
    "--type",
    "--type-not",
    "--type-add",
    "--type-clear",
    "--max-count",
    "--after-context",
    "--before-context",
    "--context",
    "--threads",
    "--max-columns",
    "--encoding",
    "--replace",
    "--max-depth",
    "--pre",
    "--pre-glob",
    "--sort",
    "--sortr",
    "--colors",
    "--color",
    "--context-separator",
    "--field-match-separator",
    "--field-context-separator",
    "--path-separator",
    "--ignore-file",
    "--max-filesize",
    "--dfa-size-limit",
    "--regex-size-limit",
    "--engine",
    "--hostname-bin",
    "--hyperlink-format",
];
const HEAD_TAIL_VALUE_OPTIONS: &[&str] = &[
    "-n",
    "-c",
    "--lines",
    "--bytes",
    "-s",
    "--sleep-interval",
    "--pid",
];

/// Walks the arguments after the program name: returns (index, word) of operands, skipping
/// options and the values of options in `with_value`. Everything after `--` is an operand.
fn operands<'a>(argv: &'a [Word], with_value: &[&str]) -> Vec<(usize, &'a Word)> {
    let mut out = Vec::new();
    let mut i = 1;
    let mut options_done = false;
    while i < argv.len() {
        let w = &argv[i];
        if !options_done && w.text == "--" && !w.dynamic {
            options_done = true;
        } else if !options_done && is_option(w) {
            if with_value.contains(&w.text.as_str()) {
                i += 1;
            }
        } else {
            out.push((i, w));
        }
        i += 1;
    }
    out
}

/// Values of `--option=VALUE` words that name files (`--file=…`, `--files0-from=…`).
fn file_option_values(facts: &mut Facts, argv: &[Word], names: &[&str]) {
    for w in argv.iter().skip(1) {
        if let Some((name, value)) = w.text.split_once('=')
            && names.contains(&name)
        {
            facts.read(
                None,
                &Word {
                    text: value.to_string(),
                    ..w.clone()
                },
            );
        }
    }
}

/// A file-reading program: every operand is a file (after skipping `skip_first` operands that are
/// patterns or scripts).
fn reader(facts: &mut Facts, cmd: &SimpleCommand, with_value: &[&str], pattern_first: bool) {
    facts.read_only = true;
    let ops = operands(&cmd.argv, with_value);
    let skip = usize::from(pattern_first);
    for (i, w) in ops.into_iter().skip(skip) {
        if w.dynamic {
            facts.concern(
                Some(i),
                ConcernKind::Dynamic,
                format!(
                    "`{}` is computed at run time (it may name any file or option)",
                    w.text
                ),
            );
        } else {
            facts.read(Some(i), w);
        }
    }
    // A computed option may be anything too.
    for (i, w) in cmd.argv.iter().enumerate().skip(1) {
        if w.dynamic && is_option(w) {
            facts.concern(
                Some(i),
                ConcernKind::Dynamic,
                format!("`{}` is computed at run time", w.text),
            );
        }
    }
    if cmd.dynamic_tail {
        facts.concern(
            None,
            ConcernKind::Dynamic,
            "xargs appends arguments read at run time (file names may be options or outside paths)",
        );
    }
}

/// Any computed word makes the command's options unknown.
fn dynamic_words(facts: &mut Facts, cmd: &SimpleCommand) {
    for (i, w) in cmd.argv.iter().enumerate().skip(1) {
        if w.dynamic {
            facts.concern(
                Some(i),
                ConcernKind::Dynamic,
                format!(
                    "`{}` is computed at run time and could be an option",
                    w.text
                ),
            );
        }
    }
    if cmd.dynamic_tail {
        facts.concern(
            None,
            ConcernKind::Dynamic,
            "xargs appends arguments read at run time (they could be options)",
        );
    }
}

/// Classifies one simple command.
pub(crate) fn classify(cmd: &SimpleCommand) -> Facts {
    let mut facts = Facts::default();
    for a in &cmd.assignments {
        if !is_inert_variable(&a.name) && cmd.kind == CommandKind::Program {
            facts.concern(
                None,
                ConcernKind::Environment,
                format!(
                    "the environment prefix `{}=` can change what the program loads or runs",
                    a.name
                ),
            );
        }
    }
    if cmd.elevated {
        facts.concern(
            None,
            ConcernKind::Elevated,
            "runs with elevated privileges (sudo)",
        );
    }
    match cmd.kind {
        CommandKind::Assignment => {
            facts.known = true;
            facts.read_only = true;
            for a in &cmd.assignments {
                if is_sensitive_shell_variable(&a.name) {
                    facts.concern(
                        None,
                        ConcernKind::StateChange,
                        format!(
                            "assigning `{}` changes how later commands run (it may already be \
                             exported)",
                            a.name
                        ),
                    );
                }
            }
            return facts;
        }
        CommandKind::Declaration => {
            declaration(&mut facts, cmd);
            return facts;
        }
        CommandKind::Program => {}
    }
    let Some(first) = cmd.argv.first().and_then(lit) else {
        return facts;
    };
    if !is_system_program(first) {
        return facts;
    }
    let name = basename(first);
    modified_files(&mut facts, cmd, name);
    match name {
        "pwd" | "echo" | "printf" | "true" | "false" | "which" | "type" | ":" | "test" | "["
        | "sleep" | "exit" | "return" | "break" | "continue" | "shift" | "wait" | "basename"
        | "dirname" | "cd" | "pushd" | "popd" | "dirs" | "command" => {
            facts.known = true;
            facts.read_only = true;
        }
        "ls" | "cat" | "wc" => {
            facts.known = true;
            reader(&mut facts, cmd, &[], false);
            file_option_values(&mut facts, &cmd.argv, &["--files0-from"]);
        }
        "head" | "tail" => {
            facts.known = true;
            reader(&mut facts, cmd, HEAD_TAIL_VALUE_OPTIONS, false);
        }
        "date" => {
            facts.known = true;
            facts.read_only = true;
            for (i, w) in cmd.argv.iter().enumerate().skip(1) {
                let t = w.text.as_str();
                let short_set = t.starts_with('-') && !t.starts_with("--") && t.contains('s');
                if short_set || t.starts_with("--set") {
                    facts.hazard(i, "`date -s` sets the system clock");
                }
            }
            file_option_values(&mut facts, &cmd.argv, &["--file"]);
            dynamic_words(&mut facts, cmd);
        }
        "grep" | "egrep" | "fgrep" | "rg" => {
            facts.known = true;
            let is_rg = name == "rg";
            let value_options = if is_rg {
                RG_VALUE_OPTIONS
            } else {
                GREP_VALUE_OPTIONS
            };
            let explicit_pattern = cmd.argv.iter().skip(1).any(|w| {
                let t = w.text.as_str();
                matches!(t, "-e" | "-f" | "--regexp" | "--file")
                    || t.starts_with("--regexp=")
                    || t.starts_with("--file=")
                    || (t.starts_with("-e") && !t.starts_with("--"))
            });
            reader(&mut facts, cmd, value_options, !explicit_pattern);
            file_option_values(
                &mut facts,
                &cmd.argv,
                &["--file", "--exclude-from", "--ignore-file"],
            );
            if is_rg {
                for (i, w) in cmd.argv.iter().enumerate().skip(1) {
                    let t = w.text.as_str();
                    if t == "--pre"
                        || t.starts_with("--pre=")
                        || t == "--pre-glob"
                        || t.starts_with("--pre-glob=")
                    {
                        facts.hazard(i, "`rg --pre` runs a program on every file searched");
                    }
                    if t == "--hostname-bin" || t.starts_with("--hostname-bin=") {
                        facts.hazard(i, "`rg --hostname-bin` runs a program");
                    }
                }
            }
        }
        "find" => {
            facts.known = true;
            find(&mut facts, cmd);
        }
        "sed" => {
            facts.known = true;
            sed(&mut facts, cmd);
        }
        "git" => {
            facts.known = true;
            git(&mut facts, cmd);
        }
        "tee" => {
            facts.known = true;
            facts.read_only = true;
            for (i, w) in operands(&cmd.argv, &["--output-error"]) {
                let _ = i;
                facts.writes.push(w.clone());
            }
        }
        "ln" => {
            facts.known = true;
            let symbolic = cmd.argv.iter().skip(1).any(|w| {
                let t = w.text.as_str();
                t == "--symbolic" || (t.starts_with('-') && !t.starts_with("--") && t.contains('s'))
            });
            if !symbolic {
                facts.concern(
                    None,
                    ConcernKind::HardLink,
                    "`ln` without -s creates a hard link, which the path sandbox cannot tell \
                     apart from the original file later",
                );
            }
        }
        "set" => {
            facts.known = true;
            set_builtin(&mut facts, cmd);
        }
        "alias" | "unalias" | "shopt" | "enable" | "hash" | "bind" | "umask" | "ulimit"
        | "complete" => {
            facts.known = true;
            facts.concern(
                Some(0),
                ConcernKind::StateChange,
                format!("`{name}` changes how later commands in the shell run"),
            );
        }
        "exec" => {
            // Only redirections (`exec 3>file`): the redirections are checked as writes.
            facts.known = true;
            facts.read_only = cmd.argv.len() == 1;
        }
        _ => {}
    }
    facts
}

/// Lists the files `cp`, `mv`, `install`, `ln`, `rsync`, `touch`, `truncate`, `chmod`, `chown`,
/// `chgrp`, `dd` and `git config` modify (see [`Facts::modified`]). Option tables: GNU
/// coreutils manual, rsync(1), git-config(1).
fn modified_files(facts: &mut Facts, cmd: &SimpleCommand, name: &str) {
    let argv = &cmd.argv;
    // `-t DIR`, `--target-directory[=]DIR`: the destination of cp/mv/install/ln.
    let target_dir = |facts: &mut Facts| -> bool {
        let mut found = false;
        for (i, w) in argv.iter().enumerate().skip(1) {
            let t = w.text.as_str();
            if t == "-t" || t == "--target-directory" {
                if let Some(dir) = argv.get(i + 1) {
                    facts.modified.push(dir.clone());
                    found = true;
                }
            } else if let Some(dir) = t.strip_prefix("--target-directory=") {
                facts.modified.push(Word {
                    text: dir.to_string(),
                    ..w.clone()
                });
                found = true;
            } else if t.len() > 2 && t.starts_with("-t") {
                facts.modified.push(Word {
                    text: t[2..].to_string(),
                    ..w.clone()
                });
                found = true;
            }
        }
        found
    };
    match name {
        "cp" | "mv" | "install" | "ln" | "rsync" => {
            let with_value: &[&str] = match name {
                "install" => &[
                    "-m",
                    "--mode",
                    "-o",
                    "--owner",
                    "-g",
                    "--group",
                    "-S",
                    "--suffix",
                    "-t",
                    "--target-directory",
                ],
                "rsync" => &[
                    "-e",
                    "--rsh",
                    "--rsync-path",
                    "--exclude",
                    "--include",
                    "--exclude-from",
                    "--include-from",
                    "--files-from",
                    "--filter",
                    "-f",
                    "--backup-dir",
                    "--suffix",
                    "--chmod",
                    "--log-file",
                    "--password-file",
                    "-T",
                    "--temp-dir",
                    "--partial-dir",
                    "--compare-dest",
                    "--copy-dest",
                    "--link-dest",
                    "--max-size",
                    "--min-size",
                    "--timeout",
                    "--port",
                    "--bwlimit",
                    "--chown",
                    "--usermap",
                    "--groupmap",
                    "--out-format",
                    "--log-file-format",
                    "-M",
                    "--remote-option",
                ],
                _ => &["-S", "--suffix", "-t", "--target-directory"],
            };
            let ops = operands(argv, with_value);
            let explicit = name != "rsync" && target_dir(facts);
            let directory_mode = name == "install"
                && argv.iter().skip(1).any(|w| {
                    let t = w.text.as_str();
                    t == "--directory"
                        || (t.starts_with('-') && !t.starts_with("--") && t.contains('d'))
                });
            if name == "mv" || directory_mode {
                // `mv` removes its sources; `install -d` creates every operand.
                facts.modified.extend(ops.iter().map(|(_, w)| (*w).clone()));
            } else if !explicit
                && ops.len() >= 2
                && let Some((_, last)) = ops.last()
            {
                facts.modified.push((*last).clone());
            }
            if name == "rsync" && argv.iter().any(|w| w.text == "--remove-source-files") {
                facts.modified.extend(ops.iter().map(|(_, w)| (*w).clone()));
            }
        }
        "touch" | "truncate" => {
            let with_value: &[&str] = if name == "touch" {
                &["-r", "--reference", "-d", "--date", "-t"]
            } else {
                &["-s", "--size", "-r", "--reference", "-o"]
            };
            facts.modified.extend(
                operands(argv, with_value)
                    .into_iter()
                    .map(|(_, w)| w.clone()),
            );
        }
        "chmod" | "chown" | "chgrp" => {
            // A symbolic mode may look like an option (`chmod -x FILE`).
            let mode_as_option = name == "chmod"
                && argv.iter().skip(1).any(|w| {
                    let t = w.text.as_str();
                    t.len() > 1
                        && t.starts_with('-')
                        && t[1..].chars().all(|c| "rwxXst".contains(c))
                });
            let reference = argv.iter().any(|w| w.text.starts_with("--reference"));
            let skip = usize::from(!mode_as_option && !reference);
            facts.modified.extend(
                operands(argv, &[])
                    .into_iter()
                    .skip(skip)
                    .map(|(_, w)| w.clone()),
            );
        }
        "dd" => {
            for w in argv.iter().skip(1) {
                if let Some(path) = w.text.strip_prefix("of=") {
                    facts.modified.push(Word {
                        text: path.to_string(),
                        ..w.clone()
                    });
                }
            }
        }
        "git" if argv.get(1).is_some_and(|w| w.text == "config") => {
            if let Some(file) = git_config_write(&argv[2..]) {
                facts.modified.push(file);
            }
        }
        _ => {}
    }
}

/// The configuration file `git config ARGS` writes, or `None` when it only reads
/// (git-config(1): `--get*`, `--list`, `get`, `list`, or a single key).
fn git_config_write(args: &[Word]) -> Option<Word> {
    let mut file = Word::literal(".git/config");
    let mut operands = 0;
    let mut writes = false;
    let mut i = 0;
    while i < args.len() {
        let w = &args[i];
        let t = w.text.as_str();
        match t {
            "--global" => {
                file = Word {
                    tilde: true,
                    ..Word::literal("~/.gitconfig")
                }
            }
            "--system" => file = Word::literal("/etc/gitconfig"),
            "--worktree" => file = Word::literal(".git/config.worktree"),
            "--local" => file = Word::literal(".git/config"),
            "-f" | "--file" => {
                if let Some(f) = args.get(i + 1) {
                    file = f.clone();
                }
                i += 1;
            }
            "--blob" | "--type" | "--default" | "--comment" | "--value" => i += 1,
            "get" | "list" if operands == 0 => return None,
            "set" | "unset" | "rename-section" | "remove-section" | "edit" if operands == 0 => {
                writes = true;
                operands += 1;
            }
            _ if t.starts_with("--file=") => {
                file = Word {
                    text: t["--file=".len()..].to_string(),
                    ..w.clone()
                };
            }
            _ if t.starts_with("--get") || t == "--list" || t == "-l" => return None,
            _ if t.starts_with("--unset")
                || matches!(
                    t,
                    "--add"
                        | "--replace-all"
                        | "--rename-section"
                        | "--remove-section"
                        | "--edit"
                        | "-e"
                ) =>
            {
                writes = true;
            }
            _ if t.starts_with('-') => {}
            _ => operands += 1,
        }
        i += 1;
    }
    (writes || operands >= 2).then_some(file)
}

fn declaration(facts: &mut Facts, cmd: &SimpleCommand) {
    facts.known = true;
    facts.read_only = true;
    let keyword = cmd.argv.first().map(|w| w.text.as_str()).unwrap_or("");
    let mut exports = keyword == "export";
    let mut names = 0;
    for (i, w) in cmd.argv.iter().enumerate().skip(1) {
        let t = w.text.as_str();
        if (t.starts_with('-') || t.starts_with('+')) && t.len() > 1 && !t.contains('=') {
            let letters = &t[1..];
            if letters.contains('x') {
                exports = true;
            }
            let harmless = letters
                .chars()
                .all(|c| matches!(c, 'a' | 'A' | 'r' | 'l' | 'u' | 'g' | 't' | 'x'));
            if !harmless {
                facts.concern(
                    Some(i),
                    ConcernKind::StateChange,
                    format!("`{keyword} {t}` prints or changes variables or functions"),
                );
            }
            continue;
        }
        names += 1;
        let name = t.split_once('=').map_or(t, |(n, _)| n);
        let unsafe_name = if exports {
            !is_inert_variable(name)
        } else {
            is_sensitive_shell_variable(name)
        };
        if unsafe_name {
            let what = if exports { "exports" } else { "changes" };
            facts.concern(
                Some(i),
                ConcernKind::StateChange,
                format!("`{keyword}` {what} `{name}`, which changes how later commands run"),
            );
        }
    }
    if names == 0 && keyword != "local" {
        facts.concern(
            Some(0),
            ConcernKind::StateChange,
            format!("`{keyword}` without names lists variables (including secrets)"),
        );
    }
}

fn set_builtin(facts: &mut Facts, cmd: &SimpleCommand) {
    facts.read_only = true;
    if cmd.argv.len() == 1 {
        facts.concern(
            Some(0),
            ConcernKind::StateChange,
            "`set` without arguments lists variables (including secrets)",
        );
        return;
    }
    let mut i = 1;
    while i < cmd.argv.len() {
        let t = cmd.argv[i].text.as_str();
        if t == "--" || t == "-" || !(t.starts_with('-') || t.starts_with('+')) {
            break;
        }
        let letters = &t[1..];
        if letters.contains('a') || letters.contains('k') {
            facts.concern(
                Some(i),
                ConcernKind::StateChange,
                "`set -a`/`set -k` exports later assignments to every command",
            );
        }
        if letters.contains('o') {
            let option = cmd.argv.get(i + 1).map(|w| w.text.as_str()).unwrap_or("");
            if matches!(option, "allexport" | "keyword" | "") {
                facts.concern(
                    Some(i),
                    ConcernKind::StateChange,
                    format!("`set -o {option}` changes how later commands run"),
                );
            }
            i += 1;
        }
        i += 1;
    }
}

fn find(facts: &mut Facts, cmd: &SimpleCommand) {
    facts.read_only = true;
    let mut in_expression = false;
    for (i, w) in cmd.argv.iter().enumerate().skip(1) {
        let t = w.text.as_str();
        if !in_expression
            && (t.starts_with('-') || matches!(t, "(" | ")" | "!" | ","))
            && !matches!(t, "-H" | "-L" | "-P")
            && !t.starts_with("-O")
            && !t.starts_with("-D")
        {
            in_expression = true;
        }
        if w.dynamic {
            facts.concern(
                Some(i),
                ConcernKind::Dynamic,
                format!("`{t}` is computed at run time and could be a find action"),
            );
            continue;
        }
        if !in_expression {
            if !t.starts_with('-') {
                facts.read(Some(i), w);
            }
            continue;
        }
        match t {
            "-delete" => facts.hazard(i, "`find -delete` deletes files"),
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                facts.hazard(i, format!("`find {t}` writes a file"))
            }
            _ => {}
        }
    }
    if cmd.dynamic_tail {
        facts.concern(
            None,
            ConcernKind::Dynamic,
            "xargs appends arguments read at run time",
        );
    }
}

fn sed(facts: &mut Facts, cmd: &SimpleCommand) {
    facts.read_only = true;
    let mut scripts: Vec<(usize, &Word)> = Vec::new();
    let mut explicit_script = false;
    let mut in_place = false;
    let mut files: Vec<(usize, &Word)> = Vec::new();
    let mut i = 1;
    let mut options_done = false;
    while i < cmd.argv.len() {
        let w = &cmd.argv[i];
        let t = w.text.as_str();
        if w.dynamic {
            facts.concern(
                Some(i),
                ConcernKind::Dynamic,
                format!("`{t}` is computed at run time and could be a sed option or script"),
            );
            i += 1;
            continue;
        }
        if !options_done && t == "--" {
            options_done = true;
        } else if !options_done && t.starts_with("--") {
            let (name, value) = t.split_once('=').map_or((t, None), |(n, v)| (n, Some(v)));
            match name {
                "--in-place" => {
                    in_place = true;
                    facts.hazard(i, "`sed --in-place` edits files")
                }
                "--expression" => {
                    explicit_script = true;
                    match value {
                        Some(_) => scripts.push((i, w)),
                        None => {
                            if let Some(next) = cmd.argv.get(i + 1) {
                                scripts.push((i + 1, next));
                            }
                            i += 1;
                        }
                    }
                }
                "--file" => {
                    explicit_script = true;
                    facts.hazard(i, "`sed --file` runs a script the analysis cannot see");
                    if value.is_none() {
                        i += 1;
                    }
                }
                "--line-length" => {
                    if value.is_none() {
                        i += 1;
                    }
                }
                "--quiet" | "--silent" | "--regexp-extended" | "--separate" | "--unbuffered"
                | "--null-data" | "--zero-terminated" | "--posix" | "--debug" | "--sandbox"
                | "--follow-symlinks" | "--binary" => {}
                _ => facts.hazard(i, format!("unknown sed option `{t}`")),
            }
        } else if !options_done && t.starts_with('-') && t.len() > 1 {
            let letters: Vec<char> = t[1..].chars().collect();
            let mut j = 0;
            while j < letters.len() {
                match letters[j] {
                    'n' | 'E' | 'r' | 's' | 'u' | 'z' => {}
                    'i' => {
                        in_place = true;
                        facts.hazard(i, "`sed -i` edits files in place");
                        break;
                    }
                    'e' => {
                        explicit_script = true;
                        if j + 1 < letters.len() {
                            scripts.push((i, w));
                        } else if let Some(next) = cmd.argv.get(i + 1) {
                            scripts.push((i + 1, next));
                            i += 1;
                        }
                        break;
                    }
                    'f' => {
                        explicit_script = true;
                        facts.hazard(i, "`sed -f` runs a script the analysis cannot see");
                        if j + 1 == letters.len() {
                            i += 1;
                        }
                        break;
                    }
                    'l' => {
                        if j + 1 == letters.len() {
                            i += 1;
                        }
                        break;
                    }
                    other => {
                        facts.hazard(i, format!("unknown sed option `-{other}`"));
                        break;
                    }
                }
                j += 1;
            }
        } else {
            files.push((i, w));
        }
        i += 1;
    }
    let files = if explicit_script {
        files
    } else {
        match files.split_first() {
            Some((script, rest)) => {
                scripts.push(*script);
                rest.to_vec()
            }
            None => files,
        }
    };
    for (i, script) in scripts {
        let text = script
            .text
            .strip_prefix("--expression=")
            .or_else(|| {
                // `-e SCRIPT` attached: `-eSCRIPT` or `-nes/x/y/`.
                script
                    .text
                    .starts_with('-')
                    .then(|| script.text.find('e').map_or("", |p| &script.text[p + 1..]))
            })
            .unwrap_or(&script.text);
        if let Some(problem) = sed_script_hazard(text) {
            facts.hazard(i, problem);
        }
    }
    for (i, w) in files {
        facts.read(Some(i), w);
        if in_place {
            facts.modified.push(w.clone());
        }
    }
    if cmd.dynamic_tail {
        facts.concern(
            None,
            ConcernKind::Dynamic,
            "xargs appends arguments read at run time",
        );
    }
}

/// Scans a sed script for commands that run programs or write files (GNU sed manual, "sed
/// commands summary"): `e`, `w`, `W`, and the `e`/`w` flags of `s`. Unknown commands count as
/// hazards (fail closed).
pub(crate) fn sed_script_hazard(script: &str) -> Option<String> {
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    let n = chars.len();
    // Skips a delimited part starting after the delimiter; returns the index after the closing one.
    let skip_delimited = |mut i: usize, delim: char| -> usize {
        while i < n {
            if chars[i] == '\\' {
                i += 2;
                continue;
            }
            if chars[i] == delim {
                return i + 1;
            }
            if chars[i] == '\n' && delim != '\n' {
                return n;
            }
            i += 1;
        }
        n
    };
    let to_line_end = |mut i: usize| -> usize {
        while i < n && chars[i] != '\n' {
            i += 1;
        }
        i
    };
    while i < n {
        let c = chars[i];
        // Separators and addresses.
        if c.is_whitespace() || c == ';' || c == '{' || c == '}' || c == '!' || c == ',' {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() || c == '$' || c == '~' || c == '+' {
            i += 1;
            continue;
        }
        if c == '/' {
            i = skip_delimited(i + 1, '/');
            // Regex flags `I` and `M`.
            while i < n && (chars[i] == 'I' || chars[i] == 'M') {
                i += 1;
            }
            continue;
        }
        if c == '\\' && i + 1 < n {
            let delim = chars[i + 1];
            i = skip_delimited(i + 2, delim);
            while i < n && (chars[i] == 'I' || chars[i] == 'M') {
                i += 1;
            }
            continue;
        }
        match c {
            '#' => i = to_line_end(i),
            'e' => return Some("the sed `e` command runs a shell command".into()),
            'w' | 'W' => return Some("the sed `w` command writes a file".into()),
            'r' | 'R' | 'a' | 'i' | 'c' | ':' | 'b' | 't' | 'T' => {
                // Text or file name or label up to the end of the line (labels also end at `;`).
                let stop_at_semicolon = matches!(c, 'b' | 't' | 'T');
                i += 1;
                while i < n && chars[i] != '\n' && !(stop_at_semicolon && chars[i] == ';') {
                    i += 1;
                }
            }
            's' | 'y' => {
                if i + 1 >= n {
                    return Some("incomplete sed `s` command".into());
                }
                let delim = chars[i + 1];
                if delim == '\n' || delim == '\\' {
                    return Some("unusual sed `s` delimiter".into());
                }
                i = skip_delimited(i + 2, delim);
                i = skip_delimited(i, delim);
                if c == 's' {
                    while i < n && !matches!(chars[i], ';' | '\n' | '}') {
                        match chars[i] {
                            'e' => {
                                return Some(
                                    "the sed `s///e` flag runs the result as a command".into(),
                                );
                            }
                            'w' => return Some("the sed `s///w` flag writes a file".into()),
                            'g' | 'p' | 'i' | 'I' | 'm' | 'M' | ' ' | '\t' => {}
                            d if d.is_ascii_digit() => {}
                            other => return Some(format!("unknown sed `s` flag `{other}`")),
                        }
                        i += 1;
                    }
                }
            }
            'q' | 'Q' | 'l' | 'L' => {
                i += 1;
                while i < n && (chars[i].is_ascii_digit() || chars[i] == ' ') {
                    i += 1;
                }
            }
            '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z' | 'F' => {
                i += 1
            }
            other => return Some(format!("unknown sed command `{other}`")),
        }
    }
    None
}

/// Global options of git that change nothing about what runs (git(1), "OPTIONS").
fn inert_git_global(t: &str) -> bool {
    matches!(
        t,
        "-P" | "--no-pager"
            | "--no-replace-objects"
            | "--literal-pathspecs"
            | "--glob-pathspecs"
            | "--noglob-pathspecs"
            | "--icase-pathspecs"
            | "--no-optional-locks"
            | "--bare"
            | "--no-lazy-fetch"
            | "--no-advice"
            | "--version"
            | "--help"
            | "-h"
    )
}

fn git(facts: &mut Facts, cmd: &SimpleCommand) {
    // Global options (already moved out of argv).
    let mut i = 0;
    while i < cmd.global_options.len() {
        let w = &cmd.global_options[i];
        let t = w.text.as_str();
        if t == "-C" {
            if let Some(dir) = cmd.global_options.get(i + 1) {
                facts.read(None, dir);
            }
            i += 2;
            continue;
        }
        if !inert_git_global(t) || w.dynamic {
            let reason = match t.split_once('=').map_or(t, |(n, _)| n) {
                "-c" | "--config-env" => {
                    "`git -c` sets configuration (core.pager, aliases, hooks) that runs programs"
                }
                "-p" | "--paginate" => "`git -p` forces a pager, which runs a program",
                "--git-dir" | "--work-tree" => {
                    "`--git-dir`/`--work-tree` point git at another repository and its config"
                }
                "--exec-path" => "`--exec-path` makes git run helpers from another directory",
                _ => "a git global option that changes what git runs",
            };
            facts.concern(None, ConcernKind::Hazard, reason);
        }
        if matches!(
            t,
            "-c" | "--git-dir"
                | "--work-tree"
                | "--namespace"
                | "--super-prefix"
                | "--config-env"
                | "--list-cmds"
                | "--attr-source"
        ) {
            i += 1;
        }
        i += 1;
    }
    let sub = cmd.argv.get(1).map(|w| w.text.as_str()).unwrap_or("");
    dynamic_words(facts, cmd);
    for (i, w) in cmd.argv.iter().enumerate().skip(2) {
        let t = w.text.as_str();
        let name = t.split_once('=').map_or(t, |(n, _)| n);
        let hazard = match name {
            "--output" => Some("`--output` writes to a file"),
            "--ext-diff" => Some("`--ext-diff` runs an external diff program"),
            "--extcmd" => Some("`--extcmd` runs a program"),
            "--upload-pack" | "--receive-pack" => Some("runs a program named in the arguments"),
            "--exec"
                if matches!(
                    sub,
                    "push" | "archive" | "rebase" | "send-pack" | "fetch-pack"
                ) =>
            {
                Some("`--exec` runs a program")
            }
            "-x" if matches!(sub, "rebase" | "difftool") => Some("`-x` runs a command"),
            "-u" if matches!(sub, "clone" | "ls-remote") => {
                Some("`-u` names an upload-pack program")
            }
            "-O" | "--open-files-in-pager" if sub == "grep" => Some("opens a pager program"),
            _ if sub == "grep" && t.starts_with("-O") => Some("opens a pager program"),
            _ => None,
        };
        if let Some(reason) = hazard {
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
    let read_only_sub = match sub {
        "" | "status" | "diff" | "log" | "show" | "ls-files" | "rev-parse" => true,
        "branch" => git_branch_lists_only(&cmd.argv[2..]),
        _ => false,
    };
    if read_only_sub {
        facts.read_only = true;
        for (i, w) in cmd.argv.iter().enumerate().skip(2) {
            if !is_option(w) && !w.dynamic {
                facts.read(Some(i), w);
            }
        }
    }
}

/// `git branch` with only listing options (no branch is created, deleted, moved or configured).
fn git_branch_lists_only(args: &[Word]) -> bool {
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
            let name = t.split_once('=').map_or(t, |(n, _)| n);
            let ok = matches!(
                name,
                "-a" | "--all"
                    | "-r"
                    | "--remotes"
                    | "-v"
                    | "-vv"
                    | "--verbose"
                    | "-l"
                    | "--list"
                    | "--show-current"
                    | "--contains"
                    | "--no-contains"
                    | "--merged"
                    | "--no-merged"
                    | "--points-at"
                    | "--sort"
                    | "--format"
                    | "--color"
                    | "--no-color"
                    | "--column"
                    | "--no-column"
                    | "-i"
                    | "--ignore-case"
                    | "--abbrev"
                    | "--no-abbrev"
                    | "-q"
                    | "--quiet"
            );
            if !ok {
                return false;
            }
            prev_takes_commit = !t.contains('=')
                && matches!(
                    name,
                    "--contains" | "--no-contains" | "--merged" | "--no-merged" | "--points-at"
                );
            continue;
        }
        if !(list_mode || prev_takes_commit) {
            return false;
        }
        prev_takes_commit = false;
    }
    true
}
