//! What one simple command does, as far as permissions care: is it on the built-in read-only
//! list, which of its words are execution primitives or file writes, which files it reads.
//! [`classify`] dispatches on the program name; the per-program knowledge is in option tables
//! next to short functions (`files.rs`: files a command modifies; `sed.rs`; `git.rs`;
//! `shell.rs`: declarations and `set`).
//!
//! Sources for the option tables: GNU coreutils, findutils, grep and sed manuals, ripgrep's
//! `rg --help`, git's `git(1)` (global options) and the per-command manuals.

use super::{CommandKind, SimpleCommand, Word, basename};

mod files;
mod git;
pub(crate) use git::CONTENT_PRINTERS;
mod runners;
mod sed;
mod shell;

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
    /// Why the command runs code the analysis cannot see (`sed e`, `tar --to-command`, `vim`,
    /// `make`, `hash -p`, …; see `runners.rs`): refused when deny rules for commands exist.
    pub runs_code: Option<String>,
    /// Why the command runs code defined by files of the workspace or given inline (`cargo
    /// test`, `npm test`, `python3 -c`, `bash x.sh`, a git alias; see `runners.rs`): never
    /// read-only; refused when deny rules for commands exist unless an allow rule names it.
    pub workspace_code: Option<String>,
    /// True when the command reads directories among [`Facts::reads`] recursively (`grep -r`,
    /// `rg`): every file beneath them is read.
    pub recursive: bool,
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
pub(super) fn is_sensitive_shell_variable(name: &str) -> bool {
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

/// The literal value of `w`, if any.
fn lit(w: &Word) -> Option<&str> {
    w.as_literal()
}

/// True when `w` looks like an option (`-x`, `--long`).
fn is_option(w: &Word) -> bool {
    w.text.starts_with('-') && w.text.len() > 1
}

/// `w` with another text (the value part of `--option=VALUE`, `of=PATH`, …).
fn with_text(w: &Word, text: &str) -> Word {
    Word {
        text: text.to_string(),
        ..w.clone()
    }
}

/// The name part of `--option=VALUE` (the whole word when there is no `=`).
fn option_name(t: &str) -> &str {
    t.split_once('=').map_or(t, |(name, _)| name)
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

    /// `xargs` appends arguments at run time: they may be anything.
    fn dynamic_tail(&mut self, cmd: &SimpleCommand, what: &str) {
        if cmd.dynamic_tail {
            self.concern(None, ConcernKind::Dynamic, what);
        }
    }
}

/// Options of grep that take a separate value (so their value is not taken for an operand).
#[rustfmt::skip]
const GREP_VALUE_OPTIONS: &[&str] = &[
    "-e", "-f", "-m", "-A", "-B", "-C", "-d", "-D", "--regexp", "--file", "--max-count",
    "--after-context", "--before-context", "--context", "--directories", "--devices", "--label",
    "--include", "--exclude", "--exclude-dir", "--exclude-from", "--binary-files",
    "--group-separator",
];
/// Options of ripgrep that take a separate value.
#[rustfmt::skip]
const RG_VALUE_OPTIONS: &[&str] = &[
    "-e", "-f", "-g", "-t", "-T", "-m", "-A", "-B", "-C", "-j", "-M", "-E", "-r", "-d",
    "--regexp", "--file", "--glob", "--iglob", "--type", "--type-not", "--type-add",
    "--type-clear", "--max-count", "--after-context", "--before-context", "--context",
    "--threads", "--max-columns", "--encoding", "--replace", "--max-depth", "--pre",
    "--pre-glob", "--sort", "--sortr", "--colors", "--color", "--context-separator",
    "--field-match-separator", "--field-context-separator", "--path-separator", "--ignore-file",
    "--max-filesize", "--dfa-size-limit", "--regex-size-limit", "--engine", "--hostname-bin",
    "--hyperlink-format",
];
/// Options of head and tail that take a separate value.
#[rustfmt::skip]
const HEAD_TAIL_VALUE_OPTIONS: &[&str] = &[
    "-n", "-c", "--lines", "--bytes", "-s", "--sleep-interval", "--pid",
];
/// Options of grep and rg that give the pattern (every operand is then a file).
const PATTERN_OPTIONS: &[&str] = &["-e", "-f", "--regexp", "--file"];
/// `--option=FILE` options of grep and rg whose file is read.
const GREP_FILE_OPTIONS: &[&str] = &["--file", "--exclude-from", "--ignore-file"];
/// Options of rg that run a program, and why that matters.
#[rustfmt::skip]
const RG_PROGRAM_OPTIONS: &[(&str, &str)] = &[
    ("--pre", "`rg --pre` runs a program on every file searched"),
    ("--pre-glob", "`rg --pre` runs a program on every file searched"),
    ("--hostname-bin", "`rg --hostname-bin` runs a program"),
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
            facts.read(None, &with_text(w, value));
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
        }
        facts.read(Some(i), w);
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
    facts.dynamic_tail(
        cmd,
        "xargs appends arguments read at run time (file names may be options or outside paths)",
    );
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
    facts.dynamic_tail(
        cmd,
        "xargs appends arguments read at run time (they could be options)",
    );
}

/// Classifies one simple command.
pub(crate) fn classify(cmd: &SimpleCommand) -> Facts {
    let mut facts = Facts::default();
    environment_concerns(&mut facts, cmd);
    match cmd.kind {
        CommandKind::Assignment => assignment_facts(&mut facts, cmd),
        CommandKind::Declaration => shell::declaration(&mut facts, cmd),
        CommandKind::Program => {
            if let Some(first) = cmd.argv.first().and_then(lit)
                && is_system_program(first)
            {
                let name = basename(first);
                facts.runs_code = runners::hidden_code(cmd, name);
                facts.workspace_code = runners::workspace_code(cmd, name);
                files::modified_files(&mut facts, cmd, name);
                program_facts(&mut facts, cmd, name);
            }
        }
    }
    facts
}

/// Environment prefixes outside the inert set, and `sudo`.
fn environment_concerns(facts: &mut Facts, cmd: &SimpleCommand) {
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
}

/// `X=1` alone: read-only, unless it sets a variable later commands use (`PATH=…`).
fn assignment_facts(facts: &mut Facts, cmd: &SimpleCommand) {
    facts.known = true;
    facts.read_only = true;
    for a in &cmd.assignments {
        if is_sensitive_shell_variable(&a.name) {
            facts.concern(
                None,
                ConcernKind::StateChange,
                format!(
                    "assigning `{}` changes how later commands run (it may already be exported)",
                    a.name
                ),
            );
        }
    }
}

/// The facts of a program we know, by name (a system program: see [`is_system_program`]).
fn program_facts(facts: &mut Facts, cmd: &SimpleCommand, name: &str) {
    match name {
        "pwd" | "echo" | "printf" | "true" | "false" | "which" | "type" | ":" | "test" | "["
        | "sleep" | "exit" | "return" | "break" | "continue" | "shift" | "wait" | "basename"
        | "dirname" | "cd" | "pushd" | "popd" | "dirs" | "command" => facts.read_only = true,
        "ls" | "cat" | "wc" => {
            reader(facts, cmd, &[], false);
            file_option_values(facts, &cmd.argv, &["--files0-from"]);
        }
        "head" | "tail" => reader(facts, cmd, HEAD_TAIL_VALUE_OPTIONS, false),
        "date" => date(facts, cmd),
        "grep" | "egrep" | "fgrep" => {
            grep(facts, cmd, GREP_VALUE_OPTIONS);
            facts.recursive = grep_recursive(&cmd.argv);
        }
        "rg" => {
            grep(facts, cmd, RG_VALUE_OPTIONS);
            facts.recursive = true;
            rg_programs(facts, cmd);
        }
        "find" => find(facts, cmd),
        "sed" => sed::sed(facts, cmd),
        "git" => git::git(facts, cmd),
        "tee" => tee(facts, cmd),
        "ln" => ln(facts, cmd),
        "set" => shell::set_builtin(facts, cmd),
        "alias" | "unalias" | "shopt" | "enable" | "hash" | "bind" | "umask" | "ulimit"
        | "complete" => facts.concern(
            Some(0),
            ConcernKind::StateChange,
            format!("`{name}` changes how later commands in the shell run"),
        ),
        // Only redirections (`exec 3>file`): the redirections are checked as writes.
        "exec" => facts.read_only = cmd.argv.len() == 1,
        _ => return,
    }
    facts.known = true;
}

/// `date` is read-only unless it sets the clock.
fn date(facts: &mut Facts, cmd: &SimpleCommand) {
    facts.read_only = true;
    for (i, w) in cmd.argv.iter().enumerate().skip(1) {
        let t = w.text.as_str();
        let short_set = t.starts_with('-') && !t.starts_with("--") && t.contains('s');
        if short_set || t.starts_with("--set") {
            facts.hazard(i, "`date -s` sets the system clock");
        }
    }
    file_option_values(facts, &cmd.argv, &["--file"]);
    for (i, w) in cmd.argv.iter().enumerate().skip(1) {
        let t = w.text.as_str();
        if t == "-f" {
            if let Some(file) = cmd.argv.get(i + 1) {
                facts.read(Some(i + 1), file);
            }
        } else if let Some(file) = t.strip_prefix("-f").filter(|f| !f.is_empty()) {
            facts.read(None, &with_text(w, file));
        }
    }
    dynamic_words(facts, cmd);
}

/// `grep -r`, `-R`, `--recursive`, `--dereference-recursive`, `-d recurse`,
/// `--directories=recurse`.
fn grep_recursive(argv: &[Word]) -> bool {
    argv.iter().enumerate().skip(1).any(|(i, w)| {
        let t = w.text.as_str();
        let short =
            t.starts_with('-') && !t.starts_with("--") && (t.contains('r') || t.contains('R'));
        short
            || matches!(
                t,
                "--recursive" | "--dereference-recursive" | "--directories=recurse"
            )
            || (t == "-d" && argv.get(i + 1).is_some_and(|v| v.text == "recurse"))
    })
}

/// `grep`/`rg`: the first operand is the pattern unless an option gives it.
fn grep(facts: &mut Facts, cmd: &SimpleCommand, value_options: &[&str]) {
    let explicit_pattern = cmd.argv.iter().skip(1).any(|w| {
        let t = w.text.as_str();
        PATTERN_OPTIONS.contains(&t)
            || (t.starts_with("--") && PATTERN_OPTIONS.contains(&option_name(t)))
            || (t.starts_with("-e") && !t.starts_with("--"))
    });
    reader(facts, cmd, value_options, !explicit_pattern);
    file_option_values(facts, &cmd.argv, GREP_FILE_OPTIONS);
}

/// `rg --pre`, `--hostname-bin`: programs rg runs.
fn rg_programs(facts: &mut Facts, cmd: &SimpleCommand) {
    for (i, w) in cmd.argv.iter().enumerate().skip(1) {
        let name = option_name(&w.text);
        if let Some((_, reason)) = RG_PROGRAM_OPTIONS.iter().find(|(o, _)| *o == name) {
            facts.hazard(i, *reason);
        }
    }
}

/// `tee FILE…` writes its operands.
fn tee(facts: &mut Facts, cmd: &SimpleCommand) {
    facts.read_only = true;
    for (_, w) in operands(&cmd.argv, &["--output-error"]) {
        facts.writes.push(w.clone());
    }
}

/// `ln` without `-s` makes a hard link.
fn ln(facts: &mut Facts, cmd: &SimpleCommand) {
    let symbolic = cmd.argv.iter().skip(1).any(|w| {
        let t = w.text.as_str();
        t == "--symbolic" || (t.starts_with('-') && !t.starts_with("--") && t.contains('s'))
    });
    if !symbolic {
        facts.concern(
            None,
            ConcernKind::HardLink,
            "`ln` without -s creates a hard link, which the path sandbox cannot tell apart from \
             the original file later",
        );
    }
}

/// `find` is read-only unless an action deletes or writes files (`-exec` is split off by
/// the analysis).
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
            // The command it runs reads the files found (`{}`): everything beneath.
            "-exec" | "-execdir" | "-ok" | "-okdir" => facts.recursive = true,
            "-delete" => facts.hazard(i, "`find -delete` deletes files"),
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                facts.hazard(i, format!("`find {t}` writes a file"))
            }
            _ => {}
        }
    }
    facts.dynamic_tail(cmd, "xargs appends arguments read at run time");
}
