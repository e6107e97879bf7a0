//! Shell-command analysis for `run_command` permission checks.
//!
//! [`analyze_command`] parses a command line with tree-sitter-bash
//! (<https://github.com/tree-sitter/tree-sitter-bash>) and lists every simple command that will run:
//! through `;` `&&` `||` `|` `&` and newlines, subshells, `$(…)`, backticks, process substitution,
//! `if`/`for`/`while`/`case` bodies and function bodies. Each simple command is given after quote
//! removal (`r''m`, `'rm'`, `\rm`, `$'\x72\x6d'` all become `rm`) and after inert wrappers are
//! stripped (`timeout`, `time`, `nice`, `nohup`, `command`, `env` with assignments, `stdbuf`, `sudo`
//! — the latter marked as elevated). Command-running commands are looked through: `xargs CMD`,
//! `find … -exec CMD … ;`, `sh|bash|dash|zsh -c 'LITERAL'` and `eval LITERAL` (the string is analysed
//! recursively). Whatever is computed at run time (a `$VAR` or `$(…)` command word, `eval` of
//! computed text, `source`, syntax the parser reports as an error) is listed in
//! [`CommandAnalysis::opaque`]. Shells and interpreters whose program is not a literal we analyse
//! (`… | bash`, `bash <<< …`, `bash script.sh`, `python3 -c …`, `node app.js`, `awk` programs
//! calling `system`), `env -S`, `git -c KEY=…` with a key that can run a program, and
//! program-naming environment variables (`PAGER=…`, `GIT_SSH_COMMAND=…`, `BASH_ENV=…`) are opaque
//! code runners ([`OpaquePart::code_runner`]) whose text is the whole command line; invisible or control characters are listed in
//! [`CommandAnalysis::warnings`].
//!
//! The analysis is syntactic: it does not read files or the environment. The decision built on it
//! lives in `super::decide`.

use serde::Serialize;
use std::path::PathBuf;
use tree_sitter::Parser;

pub(crate) mod classify;
mod lexical;
mod simple;
mod unwrap;
mod walker;
mod words;
mod wrappers;

pub(crate) use lexical::{decode_ansi_c, normalize_path};
use walker::Walker;

/// Above this many simple commands the analysis stops listing commands and sets
/// [`CommandAnalysis::over_cap`]; the decision then fails closed (deny if a deny rule could match
/// any visible part, else ask).
pub const MAX_SIMPLE_COMMANDS: usize = 100;
/// Maximum nesting of analysed command strings (`bash -c 'bash -c …'`, `eval`); deeper strings are
/// opaque.
pub const MAX_NESTING: usize = 8;
/// Command lines longer than this many bytes are not parsed at all (over the cap).
pub const MAX_COMMAND_BYTES: usize = 256 * 1024;
/// At most this many possible working directories are tracked through `cd` before the working
/// directory is considered unknown.
const MAX_CWD_CANDIDATES: usize = 8;

/// One shell word after quote removal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Word {
    /// The value after quote removal and escape decoding. Parts computed at run time
    /// (expansions, substitutions) appear as their source text.
    pub text: String,
    /// True when part of the word is computed at run time (`$VAR`, `${…}`, `$(…)`, brace
    /// expansion, `{}` of `find -exec`): its real value is unknown.
    pub dynamic: bool,
    /// True when the word holds unquoted glob characters (`*`, `?`, `[`): the shell may replace it
    /// by file names.
    pub glob: bool,
    /// True when the word starts with an unquoted `~` (home-directory expansion).
    pub tilde: bool,
}

impl Word {
    /// A literal word (no expansion, no glob).
    pub fn literal(text: impl Into<String>) -> Self {
        Word {
            text: text.into(),
            dynamic: false,
            glob: false,
            tilde: false,
        }
    }

    /// The literal value, or `None` when anything in the word is decided at run time.
    pub fn as_literal(&self) -> Option<&str> {
        (!self.dynamic && !self.glob && !self.tilde).then_some(self.text.as_str())
    }
}

/// A `NAME=VALUE` assignment (a prefix of a command, an `env` argument, or standalone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assignment {
    /// Variable name.
    pub name: String,
    /// Value after quote removal.
    pub value: Word,
}

/// What a redirection does to its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RedirectKind {
    /// `<` — reads the target.
    Read,
    /// `>`, `>|`, `&>`, `>& FILE` — truncates or creates the target.
    Write,
    /// `>>`, `&>>` — appends to the target.
    Append,
    /// `2>&1`, `<&0` — duplicates a file descriptor (no file is touched).
    Duplicate,
    /// `<&-`, `>&-` — closes a file descriptor.
    Close,
    /// `<<EOF` — standard input from a here-document.
    HereDocument,
    /// `<<<` — standard input from a string.
    HereString,
}

impl RedirectKind {
    /// True for redirections that create or change a file.
    pub fn writes(self) -> bool {
        matches!(self, RedirectKind::Write | RedirectKind::Append)
    }
}

/// One redirection of a simple command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Redirection {
    /// Explicit file descriptor (`2>`), if any.
    pub fd: Option<u32>,
    /// What it does.
    pub kind: RedirectKind,
    /// The file (or descriptor number) it names; `None` for here-documents and `>&-`.
    pub target: Option<Word>,
}

/// The working directories a command may run in, after the `cd`s that precede it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cwd {
    /// A computed `cd` target (or too many possibilities): unknown.
    Unknown,
    /// One of these directories; a relative entry is relative to the call's cwd (the empty path is
    /// the call's cwd itself).
    Possible(Vec<PathBuf>),
}

impl Cwd {
    fn initial() -> Self {
        Cwd::Possible(vec![PathBuf::new()])
    }
}

/// How a simple command appears in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandKind {
    /// A program or builtin with its arguments.
    Program,
    /// Only assignments (`X=1`) and/or redirections (`> file`), no command word.
    Assignment,
    /// `export`, `declare`, `typeset`, `local`, `readonly`, `unset`: `argv[0]` is the keyword.
    Declaration,
}

/// One simple command that will run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SimpleCommand {
    /// Source text (of the innermost analysed string).
    pub text: String,
    /// Syntactic kind.
    pub kind: CommandKind,
    /// Arguments of the command that actually runs, after quote removal, wrapper stripping and
    /// (for `git`) with global options moved to [`SimpleCommand::global_options`].
    pub argv: Vec<Word>,
    /// Arguments as written, before wrappers were stripped (e.g. starting with `sudo`).
    pub raw_argv: Vec<Word>,
    /// Wrappers stripped from the front, outermost first (`sudo`, `timeout`, `env`, …).
    pub wrappers: Vec<String>,
    /// Environment assignments in effect for the command (prefixes and `env NAME=VALUE`).
    pub assignments: Vec<Assignment>,
    /// Global options of `git` (everything between `git` and its subcommand).
    pub global_options: Vec<Word>,
    /// Redirections applying to the command.
    pub redirections: Vec<Redirection>,
    /// Where it runs.
    pub cwd: Cwd,
    /// True when more arguments are appended at run time (`xargs`).
    pub dynamic_tail: bool,
    /// True when it runs with elevated privileges (`sudo`, `doas`).
    pub elevated: bool,
    /// How it was reached when not written directly: `find -exec`, `xargs`, `bash -c`, `eval`, …
    pub via: Option<String>,
    /// True when a wrapper or command runner's options could not be read, so the real command may
    /// be further inside `argv` (deny rules are then also matched against every later word).
    pub runner_unresolved: bool,
}

/// A part of the command line whose effect cannot be known before it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpaquePart {
    /// Source text of the part.
    pub text: String,
    /// Why it is opaque.
    pub reason: String,
    /// True when the part is a program that runs code the analysis cannot see: a shell or
    /// interpreter reading a script file, standard input, a here-string or a code string
    /// (`bash script.sh`, `… | sh`, `python3 -c '…'`), `env -S`, or git configuration that runs
    /// commands (`git -c alias.x='!…'`). `text` is then the whole command line, so that the
    /// fail-closed scan for denied program names covers piped producers and here-documents.
    /// Such a part is denied when a denied program name appears in it and asks when any deny
    /// rule for commands exists; otherwise the command's own decision stands (an allow rule for
    /// the interpreter already approves the code it runs).
    pub code_runner: bool,
}

/// The result of [`analyze_command`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct CommandAnalysis {
    /// Every simple command that will run, in source order (nested ones after their parent's
    /// substitutions, strings of `bash -c` after the point where they appear).
    pub commands: Vec<SimpleCommand>,
    /// Parts that cannot be analysed.
    pub opaque: Vec<OpaquePart>,
    /// Suspicious characters (invisible, bidirectional, control characters, raw CR).
    pub warnings: Vec<String>,
    /// True when the command exceeded [`MAX_SIMPLE_COMMANDS`] or [`MAX_COMMAND_BYTES`]: the list of
    /// commands is incomplete.
    pub over_cap: bool,
}

/// Analyses one command line (see the module documentation). Creates a tree-sitter parser for
/// the call (about 0.2 µs, measured by `benches/command_analysis.rs`; the whole analysis of a
/// one-word command is about 4 µs); use [`CommandAnalyzer`] to reuse one.
pub fn analyze_command(command: &str) -> CommandAnalysis {
    CommandAnalyzer::new().analyze(command)
}

/// A reusable analyser holding one tree-sitter parser (not `Sync`: keep one per task).
pub struct CommandAnalyzer {
    parser: Parser,
}

impl Default for CommandAnalyzer {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for CommandAnalyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandAnalyzer").finish_non_exhaustive()
    }
}

impl CommandAnalyzer {
    /// A new analyser with the bash grammar loaded.
    pub fn new() -> Self {
        let mut parser = Parser::new();
        parser
            .set_language(&tree_sitter_bash::LANGUAGE.into())
            .expect("the bundled tree-sitter-bash grammar matches the tree-sitter ABI");
        CommandAnalyzer { parser }
    }

    /// Analyses one command line; see [`analyze_command`].
    pub fn analyze(&mut self, command: &str) -> CommandAnalysis {
        let mut out = CommandAnalysis {
            warnings: lexical::suspicious_characters(command),
            ..CommandAnalysis::default()
        };
        if command.len() > MAX_COMMAND_BYTES {
            out.over_cap = true;
            return out;
        }
        let mut walker = Walker::new(&mut self.parser, command, out);
        walker.analyze_source(command);
        walker.out
    }
}

/// The final path component of a command word (`/bin/rm` → `rm`).
pub(crate) fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}
