//! Per-program knowledge of wrappers (`sudo`, `timeout`, `env`, `xargs`, …), shells and
//! interpreters: which options they take and where the command they run starts.
//! [`unwrap_step`] looks at one command word; the walker applies the [`Step`] it returns (see
//! `unwrap.rs`) and asks again for the command that remains.
//!
//! Sources for the option tables: the GNU coreutils manual (`nice`, `timeout`, `stdbuf`, `env`),
//! sudo(8), setsid(1), GNU and BSD xargs(1), bash(1).

use super::{Assignment, Word};

/// What to do with a command whose first word is a wrapper, a runner or a shell.
pub(super) enum Step {
    /// Not a wrapper.
    Done,
    /// A wrapper or runner whose options could not be read.
    Unresolved,
    /// Drop the wrapper and its options.
    Strip(Strip),
    /// `sh -c SCRIPT`: `script_index` is the index of the script in the arguments.
    Shell {
        /// Index of the command string among the arguments (after the shell's name).
        script_index: usize,
    },
    /// A shell keyword (`then`, `{`, `fi`, …) where a command name should be: tree-sitter-bash
    /// misread the structure (e.g. `! if …`). The keyword is dropped and the rest analysed, and
    /// the command is opaque.
    Keyword,
    /// `eval WORDS`: literal words are analysed as a command string.
    Eval,
    /// `trap HANDLER SIGNALS`: a literal handler is analysed as a command string.
    Trap,
    /// `find … -exec CMD ;`: the commands it runs are split off.
    Find,
    /// `git`: its global options are set aside.
    Git,
    /// The command cannot be analysed, for this reason.
    Opaque(&'static str),
    /// A shell or interpreter that runs code the analysis cannot see (see
    /// [`super::OpaquePart::code_runner`]); the command itself stays as it is.
    CodeRunner(String),
}

/// How to strip a wrapper.
pub(super) struct Strip {
    /// How many arguments after the wrapper's name are its own (options and their values).
    pub(super) skip: usize,
    /// Environment assignments the wrapper makes (`env NAME=VALUE`).
    pub(super) assignments: Vec<Assignment>,
    /// True for `sudo`/`doas`.
    pub(super) elevated: bool,
    /// True for `xargs`: arguments are appended at run time.
    pub(super) dynamic_tail: bool,
}

/// Strips the wrapper and its first `skip` arguments.
fn strip(skip: usize) -> Step {
    Step::Strip(Strip {
        skip,
        assignments: Vec::new(),
        elevated: false,
        dynamic_tail: false,
    })
}

/// The options a wrapper takes.
struct WrapperOptions {
    /// Options without a value.
    flags: &'static [&'static str],
    /// Options that take the next argument as their value.
    with_value: &'static [&'static str],
    /// Prefixes of options with an attached value (`-n5`, `--signal=KILL`).
    attached: &'static [&'static str],
}

const COMMAND_OPTIONS: WrapperOptions = WrapperOptions {
    flags: &["-p"],
    with_value: &[],
    attached: &[],
};
const TIME_OPTIONS: WrapperOptions = COMMAND_OPTIONS;
const NICE_OPTIONS: WrapperOptions = WrapperOptions {
    flags: &[],
    with_value: &["-n", "--adjustment"],
    attached: &["-n", "--adjustment="],
};
#[rustfmt::skip]
const TIMEOUT_OPTIONS: WrapperOptions = WrapperOptions {
    flags: &["--preserve-status", "--foreground", "-v", "--verbose"],
    with_value: &["-s", "--signal", "-k", "--kill-after"],
    attached: &["-s", "--signal=", "-k", "--kill-after="],
};
#[rustfmt::skip]
const STDBUF_OPTIONS: WrapperOptions = WrapperOptions {
    flags: &[],
    with_value: &["-i", "-o", "-e", "--input", "--output", "--error"],
    attached: &["-i", "-o", "-e", "--input=", "--output=", "--error="],
};
const SETSID_OPTIONS: WrapperOptions = WrapperOptions {
    flags: &["-c", "-f", "-w", "--ctty", "--fork", "--wait"],
    with_value: &[],
    attached: &[],
};
#[rustfmt::skip]
const SUDO_OPTIONS: WrapperOptions = WrapperOptions {
    flags: &[
        "-E", "-H", "-n", "-S", "-k", "-K", "-b", "-P", "-A", "-B", "-N", "-i", "-s",
        "--preserve-env", "--set-home", "--non-interactive", "--stdin", "--reset-timestamp",
        "--background", "--login", "--shell",
    ],
    with_value: &[
        "-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-T", "-U",
        "--user", "--group", "--chdir", "--host", "--prompt", "--role", "--type",
        "--command-timeout", "--other-user",
    ],
    attached: &["-u", "-g", "--user=", "--group=", "--chdir=", "--preserve-env="],
};
const EXEC_OPTIONS: WrapperOptions = WrapperOptions {
    flags: &["-c", "-l"],
    with_value: &["-a"],
    attached: &[],
};

/// Options of `env` without a value.
#[rustfmt::skip]
const ENV_FLAGS: &[&str] = &["-i", "--ignore-environment", "-0", "--null", "-", "-v", "--debug"];
/// Options of `env` that take the next argument as their value.
const ENV_VALUE_OPTIONS: &[&str] = &["-u", "--unset"];

/// Options of GNU and BSD xargs that take the next argument as their value.
#[rustfmt::skip]
const XARGS_VALUE_OPTIONS: &[&str] = &[
    "-I", "-L", "-n", "-P", "-s", "-d", "-E", "-a", "-J", "-R", "-S",
];
/// Short options of GNU and BSD xargs without a value.
#[rustfmt::skip]
const XARGS_FLAGS: &[&str] = &["-0", "-r", "-t", "-p", "-x", "-o", "-e", "-i", "-l"];

/// Options of the `sh` family that take the next argument as their value.
#[rustfmt::skip]
const SHELL_VALUE_OPTIONS: &[&str] = &["-o", "+o", "-O", "+O", "--rcfile", "--init-file"];

/// Options of `awk` that make it run a program from a file or start programs.
#[rustfmt::skip]
const AWK_RUNNING_OPTIONS: &[&str] = &["-f", "--file", "-E", "--exec", "-i", "--include"];

/// Reads the options of a wrapper. Returns how many arguments are options, or `None` when an
/// option is unknown or computed.
fn skip_options(args: &[Word], options: &WrapperOptions) -> Option<usize> {
    let mut i = 0;
    while i < args.len() {
        let t = args[i].as_literal()?;
        if t == "--" {
            return Some(i + 1);
        }
        if !t.starts_with('-') || t == "-" {
            return Some(i);
        }
        if options.flags.contains(&t) {
            i += 1;
        } else if options.with_value.contains(&t) {
            i += 2;
        } else if options
            .attached
            .iter()
            .any(|p| t.starts_with(p) && t.len() > p.len())
        {
            i += 1;
        } else {
            return None;
        }
    }
    Some(i)
}

/// Strips the options [`skip_options`] reads, or [`Step::Unresolved`].
fn strip_options(args: &[Word], options: &WrapperOptions) -> Step {
    skip_options(args, options).map_or(Step::Unresolved, strip)
}

/// The first argument, when literal.
fn first_literal(args: &[Word]) -> Option<&str> {
    args.first().and_then(Word::as_literal)
}

/// What to do with a command named `base` (the basename of its first word) and arguments
/// `args`.
pub(super) fn unwrap_step(base: &str, args: &[Word]) -> Step {
    match base {
        "nohup" | "builtin" | "coproc" | "rtk" => {
            strip(usize::from(first_literal(args) == Some("--")))
        }
        "command" => command_builtin(args),
        "time" => strip_options(args, &TIME_OPTIONS),
        "nice" => nice(args),
        "timeout" => timeout(args),
        "stdbuf" => strip_options(args, &STDBUF_OPTIONS),
        "setsid" => strip_options(args, &SETSID_OPTIONS),
        "sudo" | "doas" => sudo(args),
        "env" => env(args),
        "exec" => skip_options(args, &EXEC_OPTIONS).map_or(
            Step::Opaque("`exec` with options computed at run time"),
            strip,
        ),
        "xargs" => xargs(args),
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" | "posh" | "yash" => {
            shell(base, args)
        }
        _ if interpreter(base) => interpreter_step(base, args),
        "awk" | "gawk" | "mawk" | "nawk" => awk(base, args),
        "!" | "{" | "}" | "if" | "then" | "else" | "elif" | "fi" | "case" | "esac" | "for"
        | "select" | "while" | "until" | "do" | "done" | "in" | "function" | "[[" | "]]" => {
            Step::Keyword
        }
        "eval" => Step::Eval,
        "trap" => Step::Trap,
        "source" | "." => Step::Opaque("`source` runs the commands of a file"),
        "find" => Step::Find,
        "git" => Step::Git,
        // Programs that run another command given in their arguments, with options we do not
        // model: deny rules are matched against their later words.
        "watch" | "strace" | "ltrace" | "valgrind" | "flock" | "chroot" | "unshare" | "nsenter"
        | "ionice" | "chrt" | "taskset" | "su" | "runuser" | "pkexec" | "firejail" | "bwrap"
        | "systemd-run" | "xvfb-run" | "script" | "parallel" | "ssh" | "busybox" | "catchsegv" => {
            Step::Unresolved
        }
        _ => Step::Done,
    }
}

/// `command CMD` runs CMD; `command -v`/`-V` only looks it up.
fn command_builtin(args: &[Word]) -> Step {
    if matches!(first_literal(args), Some("-v" | "-V")) {
        return Step::Done;
    }
    strip_options(args, &COMMAND_OPTIONS)
}

/// `nice [-n N | -N] CMD`.
fn nice(args: &[Word]) -> Step {
    if let Some(n) = skip_options(args, &NICE_OPTIONS) {
        return strip(n);
    }
    // `nice -5 cmd`
    let numeric = first_literal(args).is_some_and(|t| {
        t.len() > 1 && t.starts_with('-') && t[1..].bytes().all(|b| b.is_ascii_digit())
    });
    if numeric { strip(1) } else { Step::Unresolved }
}

/// `timeout [OPTIONS] DURATION CMD`: the duration follows the options.
fn timeout(args: &[Word]) -> Step {
    match skip_options(args, &TIMEOUT_OPTIONS) {
        Some(n) if args.get(n).is_some_and(|d| d.as_literal().is_some()) => strip(n + 1),
        _ => Step::Unresolved,
    }
}

/// `sudo`/`doas [OPTIONS] CMD`; `sudo -e` (sudoedit) edits files instead.
fn sudo(args: &[Word]) -> Step {
    if matches!(first_literal(args), Some("-e" | "--edit")) {
        return Step::Unresolved;
    }
    match skip_options(args, &SUDO_OPTIONS) {
        Some(skip) => Step::Strip(Strip {
            skip,
            assignments: Vec::new(),
            elevated: true,
            dynamic_tail: false,
        }),
        None => Step::Unresolved,
    }
}

/// `env [OPTIONS] [NAME=VALUE…] CMD`; `env` alone prints the environment.
fn env(args: &[Word]) -> Step {
    let mut i = 0;
    let mut assignments = Vec::new();
    while i < args.len() {
        let Some(t) = args[i].as_literal() else {
            // A computed word may be an assignment or the command: cannot tell.
            return Step::Unresolved;
        };
        if t == "--" || ENV_FLAGS.contains(&t) {
            i += 1;
        } else if ENV_VALUE_OPTIONS.contains(&t) {
            i += 2;
        } else if t.starts_with("--unset=") || (t.starts_with("-u") && t.len() > 2) {
            i += 1;
        } else if env_splits_string(t) {
            return Step::CodeRunner("`env -S` splits a string into the command it runs".into());
        } else if t.starts_with('-') {
            // -C/--chdir and signal options: not inert.
            return Step::Unresolved;
        } else if let Some(assignment) = env_assignment(t) {
            assignments.push(assignment);
            i += 1;
        } else {
            break;
        }
    }
    if i >= args.len() {
        return Step::Done;
    }
    Step::Strip(Strip {
        skip: i,
        assignments,
        elevated: false,
        dynamic_tail: false,
    })
}

/// `env -S STRING`, `--split-string`, or `-S` in a cluster of short options.
fn env_splits_string(t: &str) -> bool {
    t.starts_with("--split-string")
        || t.starts_with("-S")
        || (t.starts_with('-') && !t.starts_with("--") && t.contains('S'))
}

/// `NAME=VALUE` with a valid variable name.
fn env_assignment(t: &str) -> Option<Assignment> {
    let (name, value) = t.split_once('=')?;
    let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then(|| Assignment {
        name: name.to_string(),
        value: Word::literal(value),
    })
}

/// `xargs [OPTIONS] CMD`: the rest is the command, with arguments appended from standard input
/// at run time.
fn xargs(args: &[Word]) -> Step {
    let mut i = 0;
    while i < args.len() {
        let Some(t) = args[i].as_literal() else {
            return Step::Unresolved;
        };
        if t == "--" {
            i += 1;
            break;
        }
        if !t.starts_with('-') || t == "-" {
            break;
        }
        if XARGS_VALUE_OPTIONS.contains(&t) {
            i += 2;
        } else if t.starts_with("--") || t.len() > 2 || XARGS_FLAGS.contains(&t) {
            // Long options carry their value after `=`; short ones may have it attached.
            i += 1;
        } else {
            return Step::Unresolved;
        }
    }
    Step::Strip(Strip {
        skip: i,
        assignments: Vec::new(),
        elevated: false,
        dynamic_tail: true,
    })
}

/// A shell of the `sh` family: `-c STRING` is analysed; a script file or standard input is a
/// code runner; `--version`/`--help` runs nothing.
fn shell(base: &str, args: &[Word]) -> Step {
    let mut i = 0;
    let mut has_c = false;
    while i < args.len() {
        let Some(t) = args[i].as_literal() else {
            return if has_c {
                Step::Shell { script_index: i }
            } else {
                Step::CodeRunner(format!(
                    "`{base}` runs a script named at run time, which is not analysed"
                ))
            };
        };
        if t == "--" || t == "-" {
            i += 1;
            break;
        }
        if SHELL_VALUE_OPTIONS.contains(&t) {
            i += 2;
        } else if t.starts_with("--") {
            i += 1;
        } else if (t.starts_with('-') || t.starts_with('+')) && t.len() > 1 {
            has_c |= t[1..].contains('c');
            i += 1;
        } else {
            break;
        }
    }
    shell_after_options(base, args, i, has_c)
}

/// The step for a shell once its options (the first `i` arguments) are read.
fn shell_after_options(base: &str, args: &[Word], i: usize, has_c: bool) -> Step {
    if has_c {
        if i < args.len() {
            Step::Shell { script_index: i }
        } else {
            Step::CodeRunner(format!(
                "`{base} -c` takes its command string from arguments added at run time"
            ))
        }
    } else if info_only(base, args) {
        Step::Done
    } else {
        Step::CodeRunner(format!(
            "`{base}` runs a script from a file or standard input, which is not analysed"
        ))
    }
}

/// An interpreter runs a program the analysis cannot see, unless it only prints its version.
fn interpreter_step(base: &str, args: &[Word]) -> Step {
    if info_only(base, args) {
        Step::Done
    } else {
        Step::CodeRunner(format!(
            "`{base}` runs a program (code string, script file or standard input) that is not \
             analysed"
        ))
    }
}

/// `awk` runs code from a file or starts programs (`system`, pipes) when asked to.
fn awk(base: &str, args: &[Word]) -> Step {
    let runs = args.iter().any(|w| match w.as_literal() {
        None => true,
        Some(t) => {
            AWK_RUNNING_OPTIONS.contains(&t)
                || t.starts_with("--file=")
                || t.contains("system")
                || t.contains('|')
        }
    });
    if runs {
        Step::CodeRunner(format!(
            "`{base}` runs a program that can start commands (`system`, pipes) or comes from a \
             file"
        ))
    } else {
        Step::Done
    }
}

/// Interpreter names that may carry a version suffix (`python3`, `python3.12`, `perl5.36`).
#[rustfmt::skip]
const VERSIONED_INTERPRETERS: &[&str] = &[
    "python", "pypy", "perl", "ruby", "php", "lua", "tclsh", "wish",
];

/// Interpreters whose program text (a code string, a script file or standard input) is not
/// analysed. Shells of the `sh` family are handled separately (their `-c` string is analysed).
fn interpreter(base: &str) -> bool {
    let versioned = |prefix: &&str| {
        base.strip_prefix(prefix)
            .is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
    };
    // A match on literals: this runs for every command that is not a wrapper.
    #[rustfmt::skip]
    let other = matches!(
        base,
        "node" | "nodejs" | "deno" | "bun" | "luajit" | "Rscript" | "R" | "julia" | "osascript"
            | "expect" | "fish" | "csh" | "tcsh" | "nu" | "elvish" | "pwsh" | "powershell"
            | "xonsh" | "ipython" | "ipython3" | "irb" | "jshell" | "groovy" | "scala" | "guile"
            | "racket" | "sbcl" | "clisp" | "ghci" | "runghc" | "erl" | "escript" | "elixir"
            | "iex"
    );
    VERSIONED_INTERPRETERS.iter().any(versioned) || other
}

/// Arguments that only ask for a version or help text.
#[rustfmt::skip]
const INFO_OPTIONS: &[&str] = &["--version", "-V", "--help", "-h", "-version", "-help"];

/// True when the arguments of a shell or interpreter only ask for its version or help (no
/// program runs): `python3 --version`, `bash --help`, `node -v`.
fn info_only(base: &str, args: &[Word]) -> bool {
    // `-v` is "verbose" for Python, Lua and the shells, which then still run a program.
    let dash_v_is_version = matches!(base, "node" | "nodejs" | "deno" | "bun")
        || base.starts_with("perl")
        || base.starts_with("ruby")
        || base.starts_with("php");
    !args.is_empty()
        && args.iter().all(|w| {
            w.as_literal()
                .is_some_and(|t| INFO_OPTIONS.contains(&t) || (t == "-v" && dash_v_is_version))
        })
}

/// Environment variables whose value is a program git, a pager, a shell or an interpreter
/// runs, or a file of code it loads.
#[rustfmt::skip]
const CODE_VARIABLES: &[&str] = &[
    "BASH_ENV", "LD_PRELOAD", "LD_AUDIT", "PAGER", "MANPAGER", "EDITOR", "VISUAL", "LESSOPEN",
    "LESSCLOSE", "PERL5OPT", "RUBYOPT", "NODE_OPTIONS", "PYTHONSTARTUP", "PROMPT_COMMAND",
    "SSH_ASKPASS", "SUDO_ASKPASS",
];
/// `GIT_*` variables that name no program (every other `GIT_*` variable may: `GIT_SSH_COMMAND`,
/// `GIT_EDITOR`, `GIT_EXTERNAL_DIFF`, …).
#[rustfmt::skip]
const INERT_GIT_VARIABLES: &[&str] = &[
    "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE", "GIT_TERMINAL_PROMPT", "GIT_PAGER_IN_USE",
    "GIT_OPTIONAL_LOCKS", "GIT_TRACE", "GIT_FLUSH", "GIT_CEILING_DIRECTORIES",
    "GIT_LITERAL_PATHSPECS", "GIT_ADVICE",
];

/// Environment variables whose value is a program git, a pager, a shell or an interpreter runs,
/// or a file of code it loads (`BASH_ENV`, `LD_PRELOAD`, `GIT_SSH_COMMAND`, …).
pub(super) fn runs_code_env(name: &str) -> bool {
    CODE_VARIABLES.contains(&name)
        || (name.starts_with("GIT_") && !INERT_GIT_VARIABLES.contains(&name))
}

/// Values of program-naming variables that run nothing else: `PAGER=cat`, `GIT_EDITOR=true`.
#[rustfmt::skip]
const HARMLESS_PROGRAM_VALUES: &[&str] = &[
    "", "cat", "less", "less -R", "less -FRX", "less -FR", "more", "true", ":",
];

/// True when `value` is one of [`HARMLESS_PROGRAM_VALUES`].
pub(super) fn harmless_program_value(value: &Word) -> bool {
    value
        .as_literal()
        .is_some_and(|v| HARMLESS_PROGRAM_VALUES.contains(&v.trim()))
}
