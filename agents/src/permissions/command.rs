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
//! lives in [`super::rules`].

use crate::sandbox::is_invisible;
use serde::Serialize;
use std::path::{Component, Path, PathBuf};
use tree_sitter::{Node, Parser, TreeCursor};

pub(crate) mod classify;

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
        let mut walker = Walker {
            parser: &mut self.parser,
            out: CommandAnalysis::default(),
            cwd: Cwd::initial(),
            depth: 0,
            via: None,
            source: String::new(),
            root: command.to_string(),
        };
        walker.out.warnings = suspicious_characters(command);
        if command.len() > MAX_COMMAND_BYTES {
            walker.out.over_cap = true;
            return walker.out;
        }
        walker.analyze_source(command);
        walker.out
    }
}

/// Lists invisible, bidirectional and control characters (other than tab and newline) and
/// non-ASCII spaces in `command`.
fn suspicious_characters(command: &str) -> Vec<String> {
    let mut warnings = Vec::new();
    for (offset, c) in command.char_indices() {
        let what = if c == '\r' {
            Some("a raw carriage return (bash keeps it inside the word; displays hide it)")
        } else if c.is_control() && c != '\n' && c != '\t' {
            Some("a control character")
        } else if c.is_whitespace() && !c.is_ascii() {
            Some("a non-ASCII space (bash does not split words on it)")
        } else if is_invisible(c) {
            Some("an invisible or bidirectional formatting character")
        } else {
            None
        };
        if let Some(what) = what {
            warnings.push(format!(
                "the command contains {what} (U+{:04X}) at byte {offset}",
                c as u32
            ));
        }
    }
    warnings
}

/// Removes backslash-newline line continuations outside single quotes, as the shell does before
/// splitting words (tree-sitter-bash would otherwise split `r\⏎m` into two words).
fn join_continuations(src: &str) -> std::borrow::Cow<'_, str> {
    if !src.contains("\\\n") {
        return std::borrow::Cow::Borrowed(src);
    }
    #[derive(PartialEq)]
    enum State {
        Normal,
        Single,
        AnsiC,
        Double,
        Comment,
    }
    let mut out = String::with_capacity(src.len());
    let mut state = State::Normal;
    let mut chars = src.chars().peekable();
    let mut prev: Option<char> = None;
    while let Some(c) = chars.next() {
        match state {
            State::Normal | State::Double => {
                if c == '\\' {
                    match chars.peek() {
                        Some('\n') => {
                            chars.next();
                            continue;
                        }
                        Some(&next) => {
                            out.push(c);
                            out.push(next);
                            chars.next();
                            prev = Some(next);
                            continue;
                        }
                        None => {}
                    }
                } else if state == State::Normal {
                    if c == '\'' {
                        state = if prev == Some('$') {
                            State::AnsiC
                        } else {
                            State::Single
                        };
                    } else if c == '"' {
                        state = State::Double;
                    } else if c == '#' && prev.is_none_or(|p| p.is_whitespace() || p == ';') {
                        state = State::Comment;
                    }
                } else if c == '"' {
                    state = State::Normal;
                }
            }
            State::Single => {
                if c == '\'' {
                    state = State::Normal;
                }
            }
            State::AnsiC => {
                if c == '\\' {
                    out.push(c);
                    if let Some(next) = chars.next() {
                        out.push(next);
                    }
                    prev = None;
                    continue;
                }
                if c == '\'' {
                    state = State::Normal;
                }
            }
            State::Comment => {
                if c == '\n' {
                    state = State::Normal;
                }
            }
        }
        out.push(c);
        prev = Some(c);
    }
    std::borrow::Cow::Owned(out)
}

/// Decodes the body of an ANSI-C quoted string (`$'…'` without the quotes), per the bash manual
/// ("ANSI-C Quoting").
pub(crate) fn decode_ansi_c(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        match e {
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'e' | 'E' => out.push('\u{1b}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            '\\' | '\'' | '"' | '?' => out.push(e),
            '0'..='7' => {
                let mut value = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(value & 0xff).unwrap_or('\u{fffd}'));
            }
            'x' | 'u' | 'U' => {
                let max = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut value = 0u32;
                let mut n = 0;
                while n < max {
                    match chars.peek().and_then(|d| d.to_digit(16)) {
                        Some(d) => {
                            value = value.wrapping_mul(16).wrapping_add(d);
                            chars.next();
                            n += 1;
                        }
                        None => break,
                    }
                }
                if n == 0 {
                    out.push('\\');
                    out.push(e);
                } else {
                    out.push(char::from_u32(value).unwrap_or('\u{fffd}'));
                }
            }
            'c' => {
                if let Some(x) = chars.next() {
                    out.push(char::from_u32((x as u32) & 0x1f).unwrap_or('\u{fffd}'));
                }
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    out
}

/// Lexically normalises a path: removes `.` and resolves `..` against the preceding component
/// (never above the root of an absolute path). A relative path keeps leading `..`.
pub(crate) fn normalize_path(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::CurDir => {}
            Component::ParentDir => {
                let last_is_normal =
                    matches!(out.components().next_back(), Some(Component::Normal(_)));
                if last_is_normal {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Accumulates one word from its pieces.
#[derive(Default)]
struct WordBuf {
    text: String,
    dynamic: bool,
    glob: bool,
    tilde: bool,
    started: bool,
}

impl WordBuf {
    fn finish(self) -> Word {
        Word {
            text: self.text,
            dynamic: self.dynamic,
            glob: self.glob,
            tilde: self.tilde,
        }
    }

    /// Unquoted text: backslash escapes, glob characters, brace expansion, leading tilde.
    fn unquoted(&mut self, s: &str) {
        let at_start = !self.started;
        self.started = true;
        let mut chars = s.chars().peekable();
        let mut first = at_start;
        let mut brace_open = false;
        let mut brace_list = false;
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    if let Some(n) = chars.next() {
                        self.text.push(n);
                    }
                }
                '*' | '?' | '[' => {
                    self.glob = true;
                    self.text.push(c);
                }
                '~' if first => {
                    self.tilde = true;
                    self.text.push(c);
                }
                '{' => {
                    brace_open = true;
                    self.text.push(c);
                }
                ',' if brace_open => {
                    brace_list = true;
                    self.text.push(c);
                }
                '.' if brace_open && chars.peek() == Some(&'.') => {
                    brace_list = true;
                    self.text.push(c);
                }
                '}' if brace_open => {
                    if brace_list {
                        // Brace expansion turns one word into several.
                        self.dynamic = true;
                    }
                    self.text.push(c);
                }
                _ => self.text.push(c),
            }
            first = false;
        }
    }

    /// Text inside double quotes: only `\$`, `` \` ``, `\"`, `\\` and backslash-newline are escapes.
    fn double_quoted(&mut self, s: &str) {
        self.started = true;
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.peek() {
                    Some('$' | '`' | '"' | '\\') => {
                        self.text.push(chars.next().unwrap_or('\\'));
                    }
                    Some('\n') => {
                        chars.next();
                    }
                    _ => self.text.push('\\'),
                }
            } else {
                self.text.push(c);
            }
        }
    }

    fn literal(&mut self, s: &str) {
        self.started = true;
        self.text.push_str(s);
    }

    fn computed(&mut self, source: &str) {
        self.started = true;
        self.dynamic = true;
        self.text.push_str(source);
    }
}

/// A raw command collected from the syntax tree, before wrappers are stripped.
struct RawCommand {
    text: String,
    kind: CommandKind,
    assignments: Vec<Assignment>,
    words: Vec<Word>,
    redirections: Vec<Redirection>,
}

struct Walker<'p> {
    parser: &'p mut Parser,
    out: CommandAnalysis,
    cwd: Cwd,
    depth: usize,
    via: Option<String>,
    /// The command string being analysed (the innermost `bash -c` string when nested).
    source: String,
    /// The whole command line given to [`CommandAnalyzer::analyze`].
    root: String,
}

fn node_text<'s>(node: Node<'_>, src: &'s str) -> &'s str {
    src.get(node.byte_range()).unwrap_or("")
}

/// Children of `node` with their field names.
fn children_with_fields<'t>(node: Node<'t>) -> Vec<(Option<&'static str>, Node<'t>)> {
    let mut cursor: TreeCursor<'t> = node.walk();
    let mut out = Vec::new();
    if cursor.goto_first_child() {
        loop {
            out.push((cursor.field_name(), cursor.node()));
            if !cursor.goto_next_sibling() {
                break;
            }
        }
    }
    out
}

/// Groups nodes that touch each other (no whitespace between them) into words.
fn group_adjacent<'t>(nodes: &[Node<'t>]) -> Vec<Vec<Node<'t>>> {
    let mut groups: Vec<Vec<Node<'t>>> = Vec::new();
    for node in nodes {
        match groups.last_mut() {
            Some(group)
                if group
                    .last()
                    .is_some_and(|last| last.end_byte() == node.start_byte()) =>
            {
                group.push(*node)
            }
            _ => groups.push(vec![*node]),
        }
    }
    groups
}

impl Walker<'_> {
    fn opaque(&mut self, text: &str, reason: impl Into<String>) {
        let reason = reason.into();
        let text = text.trim().to_string();
        if !self
            .out
            .opaque
            .iter()
            .any(|o| o.text == text && o.reason == reason)
        {
            self.out.opaque.push(OpaquePart {
                text,
                reason,
                code_runner: false,
            });
        }
    }

    /// Records a program that runs code the analysis cannot see (see
    /// [`OpaquePart::code_runner`]); the part's text is the whole command line.
    fn code_runner(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        if !self
            .out
            .opaque
            .iter()
            .any(|o| o.code_runner && o.reason == reason)
        {
            self.out.opaque.push(OpaquePart {
                text: self.root.trim().to_string(),
                reason,
                code_runner: true,
            });
        }
    }

    /// Parses and walks one command string.
    fn analyze_source(&mut self, source: &str) {
        let src = join_continuations(source);
        let src: &str = &src;
        let saved = std::mem::replace(&mut self.source, src.to_string());
        match self.parser.parse(src, None) {
            Some(tree) => self.walk(tree.root_node(), src),
            None => self.opaque(src, "the shell parser gave up on this command"),
        }
        self.source = saved;
    }

    /// Records that the parser misread the current string: the whole string is opaque, so
    /// that the fail-closed scan for denied commands covers text the parser took for data.
    fn misparsed(&mut self, reason: impl Into<String>) {
        let source = self.source.clone();
        self.opaque(&source, reason);
    }

    /// Analyses a string that a shell will run (`bash -c`, `eval`, `trap`), one level deeper.
    fn nested(&mut self, source: &str, via: &str) {
        if self.depth >= MAX_NESTING {
            self.opaque(
                source,
                format!("{via} strings nested more than {MAX_NESTING} deep"),
            );
            return;
        }
        self.depth += 1;
        let saved = self.via.replace(via.to_string());
        self.analyze_source(source);
        self.via = saved;
        self.depth -= 1;
    }

    fn walk_children(&mut self, node: Node<'_>, src: &str) {
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
        for child in children {
            self.walk(child, src);
        }
    }

    /// Walks `node` in a subshell: `cd` inside does not change the cwd of what follows.
    fn walk_scoped(&mut self, node: Node<'_>, src: &str, children_only: bool) {
        let saved = self.cwd.clone();
        if children_only {
            self.walk_children(node, src);
        } else {
            self.walk(node, src);
        }
        self.cwd = saved;
    }

    /// Walks a body that may run several times or never (loops, functions): a `cd` inside makes
    /// the cwd unknown afterwards.
    fn walk_conditional_body(&mut self, node: Node<'_>, src: &str) {
        let before = self.cwd.clone();
        self.walk_children(node, src);
        if self.cwd != before {
            self.cwd = Cwd::Unknown;
        }
    }

    fn walk(&mut self, node: Node<'_>, src: &str) {
        if node.is_error() {
            self.misparsed(format!(
                "syntax the bash parser cannot read (e.g. zsh-only syntax) near `{}`",
                node_text(node, src).trim()
            ));
            self.walk_children(node, src);
            return;
        }
        if node.is_missing() {
            self.misparsed(format!("incomplete command (missing `{}`)", node.kind()));
            return;
        }
        match node.kind() {
            "comment" | "heredoc_start" | "heredoc_end" | "heredoc_content" => {}
            "command" => self.command(node, src, Vec::new()),
            "redirected_statement" => self.redirected_statement(node, src),
            "variable_assignment" => {
                let assignment = self.assignment(node, src);
                self.push_raw(RawCommand {
                    text: node_text(node, src).to_string(),
                    kind: CommandKind::Assignment,
                    assignments: vec![assignment],
                    words: Vec::new(),
                    redirections: Vec::new(),
                });
            }
            "variable_assignments" => {
                let mut assignments = Vec::new();
                for (_, child) in children_with_fields(node) {
                    if child.kind() == "variable_assignment" {
                        assignments.push(self.assignment(child, src));
                    }
                }
                self.push_raw(RawCommand {
                    text: node_text(node, src).to_string(),
                    kind: CommandKind::Assignment,
                    assignments,
                    words: Vec::new(),
                    redirections: Vec::new(),
                });
            }
            "declaration_command" | "unset_command" => self.declaration(node, src),
            "pipeline" => {
                let stages: Vec<Node<'_>> = {
                    let mut cursor = node.walk();
                    node.named_children(&mut cursor).collect()
                };
                if stages.len() > 1 {
                    for stage in stages {
                        self.walk_scoped(stage, src, false);
                    }
                } else {
                    self.walk_children(node, src);
                }
            }
            "subshell" | "command_substitution" | "process_substitution" => {
                self.walk_scoped(node, src, true)
            }
            "function_definition" => {
                let before = self.cwd.clone();
                if let Some(body) = node.child_by_field_name("body") {
                    self.walk(body, src);
                }
                for (field, child) in children_with_fields(node) {
                    if field == Some("redirect") {
                        self.walk(child, src);
                    }
                }
                if self.cwd != before {
                    self.cwd = Cwd::Unknown;
                }
            }
            "for_statement" | "c_style_for_statement" | "while_statement" => {
                self.walk_conditional_body(node, src)
            }
            "file_redirect" | "herestring_redirect" | "heredoc_redirect" => {
                // A redirection outside a command (e.g. on a function definition).
                let mut extra = Vec::new();
                let mut deferred = Vec::new();
                let redirections = self.redirection(node, src, &mut extra, &mut deferred);
                self.push_raw(RawCommand {
                    text: node_text(node, src).to_string(),
                    kind: CommandKind::Assignment,
                    assignments: Vec::new(),
                    words: extra,
                    redirections,
                });
                for statement in deferred {
                    self.walk(statement, src);
                }
            }
            "word"
            | "string"
            | "raw_string"
            | "ansi_c_string"
            | "translated_string"
            | "concatenation"
            | "simple_expansion"
            | "expansion"
            | "arithmetic_expansion"
            | "number"
            | "brace_expression"
            | "array" => {
                // A word outside a command (for-list, case value, test operand): only its
                // substitutions run.
                let mut buf = WordBuf::default();
                self.append(&mut buf, node, src);
            }
            _ => self.walk_children(node, src),
        }
    }

    /// Builds one word from adjacent nodes.
    fn word_from(&mut self, nodes: &[Node<'_>], src: &str) -> Word {
        let mut buf = WordBuf::default();
        self.append_all(&mut buf, nodes, src);
        buf.finish()
    }

    fn append_all(&mut self, buf: &mut WordBuf, nodes: &[Node<'_>], src: &str) {
        for (i, node) in nodes.iter().enumerate() {
            // `$"…"` is a locale-translated double-quoted string; the `$` is not literal.
            if !node.is_named()
                && node_text(*node, src) == "$"
                && nodes.get(i + 1).is_some_and(|next| {
                    next.kind() == "string" && next.start_byte() == node.end_byte()
                })
            {
                continue;
            }
            self.append(buf, *node, src);
        }
    }

    fn append(&mut self, buf: &mut WordBuf, node: Node<'_>, src: &str) {
        let text = node_text(node, src);
        if node.is_error() || node.is_missing() {
            buf.computed(text);
            self.misparsed(format!(
                "syntax the bash parser cannot read near `{}`",
                text.trim()
            ));
            self.walk_children(node, src);
            return;
        }
        if !node.is_named() {
            buf.unquoted(text);
            return;
        }
        match node.kind() {
            "word"
            | "regex"
            | "extglob_pattern"
            | "special_variable_name"
            | "variable_name"
            | "test_operator" => buf.unquoted(text),
            "number" => {
                if node.named_child_count() > 0 {
                    buf.computed(text);
                    self.walk_children(node, src);
                } else {
                    buf.unquoted(text);
                }
            }
            "raw_string" => {
                let inner = text
                    .strip_prefix('\'')
                    .and_then(|t| t.strip_suffix('\''))
                    .unwrap_or(text);
                buf.literal(inner);
            }
            "ansi_c_string" => {
                let inner = text
                    .strip_prefix("$'")
                    .and_then(|t| t.strip_suffix('\''))
                    .unwrap_or(text);
                buf.literal(&decode_ansi_c(inner));
            }
            "string" => self.double_quoted(buf, node, src),
            "translated_string" => {
                let children: Vec<Node<'_>> = {
                    let mut cursor = node.walk();
                    node.named_children(&mut cursor).collect()
                };
                match children.first() {
                    Some(string) => self.double_quoted(buf, *string, src),
                    None => buf.literal(text.trim_start_matches('$').trim_matches('"')),
                }
            }
            "concatenation" | "command_name" => {
                let children: Vec<Node<'_>> = {
                    let mut cursor = node.walk();
                    node.children(&mut cursor).collect()
                };
                self.append_all(buf, &children, src);
            }
            "simple_expansion"
            | "expansion"
            | "arithmetic_expansion"
            | "brace_expression"
            | "array" => {
                buf.computed(text);
                self.walk_children(node, src);
            }
            "command_substitution" | "process_substitution" => {
                buf.computed(text);
                self.walk_scoped(node, src, true);
            }
            _ => {
                buf.computed(text);
                self.opaque(text, format!("unrecognised word syntax `{}`", node.kind()));
                self.walk_children(node, src);
            }
        }
    }

    fn double_quoted(&mut self, buf: &mut WordBuf, node: Node<'_>, src: &str) {
        buf.started = true;
        let start = node.start_byte() + 1;
        let end = node.end_byte().saturating_sub(1).max(start);
        let mut pos = start;
        let children: Vec<Node<'_>> = {
            let mut cursor = node.walk();
            node.named_children(&mut cursor).collect()
        };
        for child in children {
            if child.start_byte() > pos {
                buf.double_quoted(src.get(pos..child.start_byte()).unwrap_or(""));
            }
            if child.kind() == "string_content" {
                buf.double_quoted(node_text(child, src));
            } else {
                self.append(buf, child, src);
            }
            pos = child.end_byte().max(pos);
        }
        if end > pos {
            buf.double_quoted(src.get(pos..end).unwrap_or(""));
        }
    }

    fn assignment(&mut self, node: Node<'_>, src: &str) -> Assignment {
        let name = node
            .child_by_field_name("name")
            .map(|n| node_text(n, src).to_string())
            .unwrap_or_default();
        let mut value_nodes = Vec::new();
        let mut after_eq = false;
        for (field, child) in children_with_fields(node) {
            if field == Some("value") || (after_eq && field.is_none()) {
                value_nodes.push(child);
            }
            if !child.is_named() && node_text(child, src).ends_with('=') {
                after_eq = true;
            }
        }
        let value = self.word_from(&value_nodes, src);
        let value_text = &value.text;
        if !value.dynamic && (value_text.contains("$(") || value_text.contains('`')) {
            self.opaque(
                node_text(node, src),
                "the value holds command-substitution text that a later eval or arithmetic \
                 expansion could run",
            );
        }
        Assignment { name, value }
    }

    /// `export`, `declare`, `typeset`, `local`, `readonly`, `unset`.
    fn declaration(&mut self, node: Node<'_>, src: &str) {
        let mut words = Vec::new();
        let mut assignments = Vec::new();
        for (_, child) in children_with_fields(node) {
            if !child.is_named() {
                let t = node_text(child, src);
                if t.chars().all(|c| c.is_ascii_alphabetic()) && words.is_empty() {
                    words.push(Word::literal(t));
                }
                continue;
            }
            match child.kind() {
                "variable_assignment" => {
                    let a = self.assignment(child, src);
                    words.push(Word {
                        text: format!("{}={}", a.name, a.value.text),
                        dynamic: a.value.dynamic,
                        glob: false,
                        tilde: false,
                    });
                    assignments.push(a);
                }
                "comment" => {}
                _ => {
                    let w = self.word_from(&[child], src);
                    words.push(w);
                }
            }
        }
        if words.is_empty() {
            words.push(Word::literal(
                node_text(node, src).split_whitespace().next().unwrap_or(""),
            ));
        }
        self.push_raw(RawCommand {
            text: node_text(node, src).to_string(),
            kind: CommandKind::Declaration,
            assignments,
            words,
            redirections: Vec::new(),
        });
    }

    fn redirected_statement(&mut self, node: Node<'_>, src: &str) {
        let mut redirections = Vec::new();
        let mut extra = Vec::new();
        let mut deferred = Vec::new();
        let mut body = None;
        for (field, child) in children_with_fields(node) {
            match field {
                Some("body") => body = Some(child),
                _ if child.is_named()
                    && matches!(
                        child.kind(),
                        "file_redirect" | "heredoc_redirect" | "herestring_redirect"
                    ) =>
                {
                    redirections.extend(self.redirection(child, src, &mut extra, &mut deferred));
                }
                _ if child.is_error() => self.walk(child, src),
                _ => {}
            }
        }
        match body {
            Some(body) if body.kind() == "command" => {
                self.command_with(body, src, redirections, extra);
            }
            Some(body) => {
                self.walk(body, src);
                // Redirections of a compound statement apply to everything in it.
                self.push_raw(RawCommand {
                    text: node_text(node, src).to_string(),
                    kind: CommandKind::Assignment,
                    assignments: Vec::new(),
                    words: extra,
                    redirections,
                });
            }
            None => {
                self.push_raw(RawCommand {
                    text: node_text(node, src).to_string(),
                    kind: CommandKind::Assignment,
                    assignments: Vec::new(),
                    words: extra,
                    redirections,
                });
            }
        }
        for statement in deferred {
            self.walk(statement, src);
        }
    }

    /// Reads one redirection node. Words that follow the target (`> out arg`) are arguments of
    /// the command and go to `extra_args`; statements folded into a here-document node
    /// (`cat <<EOF | grep x`) go to `deferred`.
    fn redirection<'t>(
        &mut self,
        node: Node<'t>,
        src: &str,
        extra_args: &mut Vec<Word>,
        deferred: &mut Vec<Node<'t>>,
    ) -> Vec<Redirection> {
        let mut out = Vec::new();
        let mut fd = None;
        let mut op = String::new();
        let mut targets: Vec<Node<'t>> = Vec::new();
        for (field, child) in children_with_fields(node) {
            match (field, child.kind()) {
                (Some("descriptor"), _) => fd = node_text(child, src).parse().ok(),
                (_, "heredoc_body") => {
                    // Only the expansions of an unquoted here-document run anything.
                    let mut buf = WordBuf::default();
                    let children: Vec<Node<'t>> = {
                        let mut cursor = child.walk();
                        child.named_children(&mut cursor).collect()
                    };
                    for part in children {
                        if part.kind() != "heredoc_content" {
                            self.append(&mut buf, part, src);
                        }
                    }
                }
                (_, "heredoc_start" | "heredoc_end") => {}
                (_, "file_redirect" | "herestring_redirect") => {
                    out.extend(self.redirection(child, src, extra_args, deferred));
                }
                (Some("argument"), _) => {
                    let w = self.word_from(&[child], src);
                    extra_args.push(w);
                }
                (Some("right"), _) => deferred.push(child),
                (_, "pipeline") if child.is_named() => deferred.push(child),
                (_, "comment") => {}
                _ if !child.is_named() && targets.is_empty() => {
                    let t = node_text(child, src);
                    if t.chars().all(|c| "<>&|-".contains(c)) {
                        op.push_str(t);
                    } else {
                        targets.push(child);
                    }
                }
                _ if child.is_error() => self.walk(child, src),
                _ => targets.push(child),
            }
        }
        let kind_of_node = node.kind();
        let groups = group_adjacent(&targets);
        let mut groups = groups.into_iter();
        let target = groups.next().map(|g| self.word_from(&g, src));
        for rest in groups {
            let w = self.word_from(&rest, src);
            extra_args.push(w);
        }
        let kind = match kind_of_node {
            "heredoc_redirect" => RedirectKind::HereDocument,
            "herestring_redirect" => RedirectKind::HereString,
            _ => {
                let target_is_fd = target.as_ref().is_some_and(|t| {
                    t.as_literal().is_some_and(|s| {
                        s == "-" || (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                    })
                });
                match op.as_str() {
                    "<" => RedirectKind::Read,
                    "<&" | ">&" if target_is_fd => RedirectKind::Duplicate,
                    "<&-" | ">&-" => RedirectKind::Close,
                    "<&" => RedirectKind::Read,
                    ">>" | "&>>" => RedirectKind::Append,
                    _ => RedirectKind::Write,
                }
            }
        };
        if !matches!(kind, RedirectKind::HereDocument) || target.is_some() {
            out.insert(
                0,
                Redirection {
                    fd,
                    kind,
                    target: if kind == RedirectKind::HereDocument {
                        None
                    } else {
                        target
                    },
                },
            );
        } else {
            out.insert(
                0,
                Redirection {
                    fd,
                    kind,
                    target: None,
                },
            );
        }
        out
    }

    fn command(&mut self, node: Node<'_>, src: &str, redirections: Vec<Redirection>) {
        self.command_with(node, src, redirections, Vec::new());
    }

    fn command_with(
        &mut self,
        node: Node<'_>,
        src: &str,
        mut redirections: Vec<Redirection>,
        extra_args: Vec<Word>,
    ) {
        let mut assignments = Vec::new();
        let mut pieces: Vec<Node<'_>> = Vec::new();
        let mut extra = extra_args;
        let mut deferred = Vec::new();
        for (field, child) in children_with_fields(node) {
            match (field, child.kind()) {
                (_, "variable_assignment") if pieces.is_empty() => {
                    let a = self.assignment(child, src);
                    assignments.push(a);
                }
                (Some("redirect"), _) => {
                    let r = self.redirection(child, src, &mut extra, &mut deferred);
                    redirections.extend(r);
                }
                (Some("name" | "argument"), _) => pieces.push(child),
                (_, "comment") => {}
                _ if child.is_error() || child.kind() == "subshell" => {
                    self.misparsed(format!(
                        "syntax the bash parser cannot read inside a command near `{}`",
                        node_text(child, src).trim()
                    ));
                    self.walk(child, src);
                }
                _ if child.is_named() => pieces.push(child),
                _ => {}
            }
        }
        // A newline between two words ends a simple command in every shell; tree-sitter-bash
        // sometimes joins the lines anyway (`a | b | c⏎d 5`). Split there, and never trust
        // the parse of this string.
        let mut segments: Vec<Vec<Node<'_>>> = vec![Vec::new()];
        for piece in pieces {
            if let Some(prev) = segments.last().and_then(|s| s.last())
                && src
                    .get(prev.end_byte()..piece.start_byte())
                    .is_some_and(|gap| gap.contains('\n'))
            {
                segments.push(Vec::new());
            }
            if let Some(last) = segments.last_mut() {
                last.push(piece);
            }
        }
        if segments.len() > 1 {
            self.misparsed("the parser joined two lines into one command");
        }
        let mut segments = segments.into_iter();
        let pieces = segments.next().unwrap_or_default();
        for later in segments {
            let mut words = Vec::new();
            for group in group_adjacent(&later) {
                let w = self.word_from(&group, src);
                words.push(w);
            }
            let text = words
                .iter()
                .map(|w| w.text.as_str())
                .collect::<Vec<_>>()
                .join(" ");
            self.push_raw(RawCommand {
                text,
                kind: CommandKind::Program,
                assignments: Vec::new(),
                words,
                redirections: Vec::new(),
            });
        }
        let groups = group_adjacent(&pieces);
        let mut words = Vec::with_capacity(groups.len() + extra.len());
        for group in groups {
            let w = self.word_from(&group, src);
            words.push(w);
        }
        words.append(&mut extra);
        let kind = if words.is_empty() {
            CommandKind::Assignment
        } else {
            CommandKind::Program
        };
        self.push_raw(RawCommand {
            text: node_text(node, src).to_string(),
            kind,
            assignments,
            words,
            redirections,
        });
        for statement in deferred {
            self.walk(statement, src);
        }
    }

    /// Strips wrappers, looks through command runners, tracks `cd`, and records the command.
    fn push_raw(&mut self, raw: RawCommand) {
        let RawCommand {
            text,
            kind,
            assignments,
            words,
            redirections,
        } = raw;
        let mut cmd = SimpleCommand {
            text,
            kind,
            raw_argv: words.clone(),
            argv: words,
            wrappers: Vec::new(),
            assignments,
            global_options: Vec::new(),
            redirections,
            cwd: self.cwd.clone(),
            dynamic_tail: false,
            elevated: false,
            via: self.via.clone(),
            runner_unresolved: false,
        };
        if kind == CommandKind::Program {
            self.unwrap(&mut cmd);
        }
        if kind == CommandKind::Program
            && let Some(a) = cmd
                .assignments
                .iter()
                .find(|a| runs_code_env(&a.name) && !harmless_program_value(&a.value))
        {
            let reason = format!(
                "the environment variable `{}` names a program or file of code that runs",
                a.name
            );
            self.code_runner(reason);
        }
        if cmd.kind == CommandKind::Program
            && let Some(first) = cmd.argv.first()
        {
            if first.as_literal().is_none() {
                let what = if first.glob {
                    "the command name is a glob pattern the shell expands at run time"
                } else {
                    "the command name is computed at run time"
                };
                self.opaque(&cmd.text.clone(), what);
            } else {
                self.track_cwd(&cmd);
            }
        }
        self.record(cmd);
    }

    fn record(&mut self, cmd: SimpleCommand) {
        if self.out.commands.len() >= MAX_SIMPLE_COMMANDS {
            self.out.over_cap = true;
            return;
        }
        self.out.commands.push(cmd);
    }

    /// Updates the possible working directories after `cd`/`pushd`/`popd`. A `cd` may fail, so
    /// the old directories stay possible.
    fn track_cwd(&mut self, cmd: &SimpleCommand) {
        let name = cmd.argv[0].text.as_str();
        if !matches!(name, "cd" | "pushd" | "popd") {
            return;
        }
        let operands: Vec<&Word> = cmd.argv[1..]
            .iter()
            .filter(|w| !(w.text.starts_with('-') && w.text.len() > 1) && w.text != "--")
            .collect();
        let target = match (name, operands.as_slice()) {
            ("popd", _) => None,
            (_, [one]) => one.as_literal().filter(|t| *t != "-"),
            _ => None,
        };
        let Some(target) = target else {
            self.cwd = Cwd::Unknown;
            return;
        };
        if let Cwd::Possible(list) = &self.cwd {
            let mut next = list.clone();
            for base in list {
                let joined = normalize_path(&base.join(target));
                if !next.contains(&joined) {
                    next.push(joined);
                }
            }
            self.cwd = if next.len() > MAX_CWD_CANDIDATES {
                Cwd::Unknown
            } else {
                Cwd::Possible(next)
            };
        }
    }

    /// Strips inert wrappers and looks through command runners, in place.
    fn unwrap(&mut self, cmd: &mut SimpleCommand) {
        let mut guard = 0;
        loop {
            guard += 1;
            if guard > 32 {
                break;
            }
            let Some(first) = cmd.argv.first() else { break };
            let Some(name) = first.as_literal() else {
                break;
            };
            let base = basename(name).to_string();
            let args = &cmd.argv[1..];
            let step = unwrap_step(&base, args);
            match step {
                Step::Done => break,
                Step::Unresolved => {
                    cmd.runner_unresolved = true;
                    break;
                }
                Step::Strip {
                    skip,
                    assignments,
                    elevated,
                    dynamic_tail,
                } => {
                    cmd.wrappers.push(base.clone());
                    cmd.assignments.extend(assignments);
                    cmd.elevated |= elevated;
                    if dynamic_tail {
                        cmd.dynamic_tail = true;
                        cmd.via = Some(base.clone());
                    }
                    let rest: Vec<Word> = cmd.argv.drain(1 + skip..).collect();
                    if rest.is_empty() {
                        if base == "xargs" {
                            cmd.argv = vec![Word::literal("echo")];
                            continue;
                        }
                        // `nohup` or `sudo` with nothing to run: keep the wrapper as the command.
                        cmd.argv.truncate(1);
                        cmd.wrappers.pop();
                        break;
                    }
                    cmd.argv = rest;
                }
                Step::Shell { script_index } => {
                    let script = cmd.argv[1 + script_index].clone();
                    cmd.wrappers.push(base.clone());
                    match script.as_literal() {
                        Some(s) if !script.glob => {
                            let s = s.to_string();
                            if base == "zsh" {
                                self.opaque(
                                    &cmd.text.clone(),
                                    "zsh syntax differs from bash; its -c string cannot be fully analysed",
                                );
                            }
                            self.nested(&s, &format!("{base} -c"));
                        }
                        _ => self.opaque(
                            &cmd.text.clone(),
                            format!("`{base} -c` runs a string computed at run time"),
                        ),
                    }
                    cmd.kind = CommandKind::Assignment;
                    cmd.argv.clear();
                    break;
                }
                Step::Keyword => {
                    self.misparsed(format!(
                        "the shell keyword `{base}` appears where the parser expected a \
                             command: the structure around it was misread"
                    ));
                    cmd.wrappers.push(base.clone());
                    cmd.runner_unresolved = true;
                    cmd.argv.remove(0);
                    if cmd.argv.is_empty() {
                        cmd.kind = CommandKind::Assignment;
                        break;
                    }
                }
                Step::Eval => {
                    let words = &cmd.argv[1..];
                    let text = cmd.text.clone();
                    if words.iter().all(|w| w.as_literal().is_some()) {
                        let joined = words
                            .iter()
                            .map(|w| w.text.as_str())
                            .collect::<Vec<_>>()
                            .join(" ");
                        self.nested(&joined, "eval");
                    }
                    self.opaque(&text, "`eval` runs text as a command");
                    break;
                }
                Step::Trap => {
                    if let Some(handler) = cmd.argv.get(1) {
                        match handler.as_literal() {
                            Some(h) if !h.starts_with('-') => {
                                let h = h.to_string();
                                self.nested(&h, "trap");
                            }
                            Some(_) => {}
                            None => self.opaque(
                                &cmd.text.clone(),
                                "`trap` installs a handler computed at run time",
                            ),
                        }
                    }
                    break;
                }
                Step::Find => {
                    self.split_find(cmd);
                    break;
                }
                Step::Git => {
                    split_git_globals(cmd);
                    if let Some(reason) = git_runs_configured_code(cmd) {
                        self.code_runner(reason);
                    }
                    break;
                }
                Step::CodeRunner(reason) => {
                    self.code_runner(reason);
                    break;
                }
                Step::Opaque(reason) => {
                    self.opaque(&cmd.text.clone(), reason);
                    break;
                }
            }
        }
    }

    /// Splits `find … -exec CMD … ;` into the find itself and the commands it runs.
    fn split_find(&mut self, cmd: &mut SimpleCommand) {
        let mut kept = vec![cmd.argv[0].clone()];
        let mut inner: Vec<(String, Vec<Word>)> = Vec::new();
        let mut i = 1;
        let argv = std::mem::take(&mut cmd.argv);
        while i < argv.len() {
            let w = &argv[i];
            let action = w
                .as_literal()
                .filter(|t| matches!(*t, "-exec" | "-execdir" | "-ok" | "-okdir"));
            if let Some(action) = action {
                let action = action.to_string();
                let mut j = i + 1;
                let mut words = Vec::new();
                let mut terminated = false;
                while j < argv.len() {
                    let t = argv[j].as_literal();
                    if t == Some(";")
                        || (t == Some("+") && words.last().is_some_and(|l: &Word| l.text == "{}"))
                    {
                        terminated = true;
                        break;
                    }
                    let mut word = argv[j].clone();
                    if word.text.contains("{}") {
                        word.dynamic = true;
                    }
                    words.push(word);
                    j += 1;
                }
                if !terminated || words.is_empty() {
                    self.opaque(
                        &cmd.text.clone(),
                        format!("`find {action}` without a command and `;` or `+`"),
                    );
                }
                // Keep the action word on find itself so that rules and displays see it.
                kept.push(argv[i].clone());
                inner.push((action, words));
                i = j + 1;
            } else {
                kept.push(w.clone());
                i += 1;
            }
        }
        cmd.argv = kept;
        for (action, words) in inner {
            if words.is_empty() {
                continue;
            }
            let sub = RawCommand {
                text: words
                    .iter()
                    .map(|w| w.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                kind: CommandKind::Program,
                assignments: Vec::new(),
                words,
                redirections: Vec::new(),
            };
            let saved = self.via.replace(format!("find {action}"));
            self.push_raw(sub);
            self.via = saved;
        }
    }
}

/// The final path component of a command word (`/bin/rm` → `rm`).
pub(crate) fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

enum Step {
    /// Not a wrapper.
    Done,
    /// A wrapper or runner whose options could not be read.
    Unresolved,
    /// Drop the wrapper and its first `skip` arguments.
    Strip {
        skip: usize,
        assignments: Vec<Assignment>,
        elevated: bool,
        dynamic_tail: bool,
    },
    /// `sh -c SCRIPT`: `script_index` is the index of the script in the arguments.
    Shell {
        script_index: usize,
    },
    /// A shell keyword (`then`, `{`, `fi`, …) where a command name should be: tree-sitter-bash
    /// misread the structure (e.g. `! if …`). The keyword is dropped and the rest analysed, and
    /// the command is opaque.
    Keyword,
    Eval,
    Trap,
    Find,
    Git,
    Opaque(&'static str),
    /// A shell or interpreter that runs code the analysis cannot see (see
    /// [`OpaquePart::code_runner`]); the command itself stays as it is.
    CodeRunner(String),
}

fn strip(skip: usize) -> Step {
    Step::Strip {
        skip,
        assignments: Vec::new(),
        elevated: false,
        dynamic_tail: false,
    }
}

/// Reads the options of a wrapper. `with_value` lists options that take a separate value,
/// `flags` options without one; `prefixed` lists options whose value may be attached (`-n5`,
/// `--signal=KILL`). Returns how many arguments are options, or `None` when an option is unknown
/// or computed.
fn skip_options(
    args: &[Word],
    flags: &[&str],
    with_value: &[&str],
    attached: &[&str],
) -> Option<usize> {
    let mut i = 0;
    while i < args.len() {
        let t = args[i].as_literal()?;
        if t == "--" {
            return Some(i + 1);
        }
        if !t.starts_with('-') || t == "-" {
            return Some(i);
        }
        if flags.contains(&t) {
            i += 1;
        } else if with_value.contains(&t) {
            i += 2;
        } else if attached
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

fn unwrap_step(base: &str, args: &[Word]) -> Step {
    match base {
        "nohup" | "builtin" | "coproc" | "rtk" => match args.first().and_then(|a| a.as_literal()) {
            Some("--") => strip(1),
            _ => strip(0),
        },
        "command" => {
            if args
                .first()
                .and_then(|a| a.as_literal())
                .is_some_and(|t| t == "-v" || t == "-V")
            {
                return Step::Done;
            }
            match skip_options(args, &["-p"], &[], &[]) {
                Some(n) => strip(n),
                None => Step::Unresolved,
            }
        }
        "time" => match skip_options(args, &["-p"], &[], &[]) {
            Some(n) => strip(n),
            None => Step::Unresolved,
        },
        "nice" => {
            match skip_options(args, &[], &["-n", "--adjustment"], &["-n", "--adjustment="]) {
                Some(n) => strip(n),
                None => {
                    // `nice -5 cmd`
                    if args.first().and_then(|a| a.as_literal()).is_some_and(|t| {
                        t.len() > 1
                            && t.starts_with('-')
                            && t[1..].bytes().all(|b| b.is_ascii_digit())
                    }) {
                        strip(1)
                    } else {
                        Step::Unresolved
                    }
                }
            }
        }
        "timeout" => {
            match skip_options(
                args,
                &["--preserve-status", "--foreground", "-v", "--verbose"],
                &["-s", "--signal", "-k", "--kill-after"],
                &["-s", "--signal=", "-k", "--kill-after="],
            ) {
                // The duration follows the options.
                Some(n) if args.get(n).is_some_and(|d| d.as_literal().is_some()) => strip(n + 1),
                _ => Step::Unresolved,
            }
        }
        "stdbuf" => match skip_options(
            args,
            &[],
            &["-i", "-o", "-e", "--input", "--output", "--error"],
            &["-i", "-o", "-e", "--input=", "--output=", "--error="],
        ) {
            Some(n) => strip(n),
            None => Step::Unresolved,
        },
        "setsid" => match skip_options(
            args,
            &["-c", "-f", "-w", "--ctty", "--fork", "--wait"],
            &[],
            &[],
        ) {
            Some(n) => strip(n),
            None => Step::Unresolved,
        },
        "sudo" | "doas" => {
            if args
                .first()
                .and_then(|a| a.as_literal())
                .is_some_and(|t| t == "-e" || t == "--edit")
            {
                return Step::Unresolved;
            }
            match skip_options(
                args,
                &[
                    "-E",
                    "-H",
                    "-n",
                    "-S",
                    "-k",
                    "-K",
                    "-b",
                    "-P",
                    "-A",
                    "-B",
                    "-N",
                    "--preserve-env",
                    "--set-home",
                    "--non-interactive",
                    "--stdin",
                    "--reset-timestamp",
                    "--background",
                    "--login",
                    "-i",
                    "-s",
                    "--shell",
                ],
                &[
                    "-u",
                    "-g",
                    "-C",
                    "-D",
                    "-h",
                    "-p",
                    "-r",
                    "-t",
                    "-T",
                    "-U",
                    "--user",
                    "--group",
                    "--chdir",
                    "--host",
                    "--prompt",
                    "--role",
                    "--type",
                    "--command-timeout",
                    "--other-user",
                ],
                &[
                    "-u",
                    "-g",
                    "--user=",
                    "--group=",
                    "--chdir=",
                    "--preserve-env=",
                ],
            ) {
                Some(n) => Step::Strip {
                    skip: n,
                    assignments: Vec::new(),
                    elevated: true,
                    dynamic_tail: false,
                },
                None => Step::Unresolved,
            }
        }
        "env" => {
            let mut i = 0;
            let mut assignments = Vec::new();
            while i < args.len() {
                let Some(t) = args[i].as_literal() else {
                    // A computed word may be an assignment or the command: cannot tell.
                    return Step::Unresolved;
                };
                if t == "--" {
                    i += 1;
                    continue;
                }
                if matches!(
                    t,
                    "-i" | "--ignore-environment" | "-0" | "--null" | "-" | "-v" | "--debug"
                ) {
                    i += 1;
                } else if matches!(t, "-u" | "--unset") {
                    i += 2;
                } else if t.starts_with("--unset=") || (t.starts_with("-u") && t.len() > 2) {
                    i += 1;
                } else if t.starts_with("--split-string")
                    || (t.starts_with("-S")
                        || (t.starts_with('-') && !t.starts_with("--") && t.contains('S')))
                {
                    return Step::CodeRunner(
                        "`env -S` splits a string into the command it runs".to_string(),
                    );
                } else if t.starts_with('-') {
                    // -C/--chdir and signal options: not inert.
                    return Step::Unresolved;
                } else if let Some((name, value)) = t.split_once('=') {
                    if name.is_empty()
                        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        break;
                    }
                    assignments.push(Assignment {
                        name: name.to_string(),
                        value: Word::literal(value),
                    });
                    i += 1;
                } else {
                    break;
                }
            }
            if i >= args.len() {
                // `env` alone prints the environment.
                return Step::Done;
            }
            Step::Strip {
                skip: i,
                assignments,
                elevated: false,
                dynamic_tail: false,
            }
        }
        "exec" => match skip_options(args, &["-c", "-l"], &["-a"], &[]) {
            Some(n) => strip(n),
            None => Step::Opaque("`exec` with options computed at run time"),
        },
        "xargs" => {
            // Options of GNU and BSD xargs; the rest is the command, with arguments appended
            // from standard input at run time.
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
                if matches!(
                    t,
                    "-I" | "-L" | "-n" | "-P" | "-s" | "-d" | "-E" | "-a" | "-J" | "-R" | "-S"
                ) {
                    i += 2;
                } else if t.starts_with("--")
                    || t.len() > 2 && !t.starts_with("--")
                    || matches!(
                        t,
                        "-0" | "-r" | "-t" | "-p" | "-x" | "-o" | "-e" | "-i" | "-l"
                    )
                {
                    // Long options carry their value after `=`; short ones may have it attached.
                    i += 1;
                } else {
                    return Step::Unresolved;
                }
            }
            Step::Strip {
                skip: i,
                assignments: Vec::new(),
                elevated: false,
                dynamic_tail: true,
            }
        }
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" | "posh" | "yash" => {
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
                if matches!(t, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
                    i += 2;
                    continue;
                }
                if t.starts_with("--") {
                    i += 1;
                    continue;
                }
                if (t.starts_with('-') || t.starts_with('+')) && t.len() > 1 {
                    if t[1..].contains('c') {
                        has_c = true;
                    }
                    i += 1;
                    continue;
                }
                break;
            }
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
        _ if interpreter(base) => {
            if info_only(base, args) {
                Step::Done
            } else {
                Step::CodeRunner(format!(
                    "`{base}` runs a program (code string, script file or standard input) that \
                     is not analysed"
                ))
            }
        }
        "awk" | "gawk" | "mawk" | "nawk" => {
            let runs = args.iter().any(|w| match w.as_literal() {
                None => true,
                Some(t) => {
                    matches!(t, "-f" | "--file" | "-E" | "--exec" | "-i" | "--include")
                        || t.starts_with("--file=")
                        || t.contains("system")
                        || t.contains('|')
                }
            });
            if runs {
                Step::CodeRunner(format!(
                    "`{base}` runs a program that can start commands (`system`, pipes) or comes \
                     from a file"
                ))
            } else {
                Step::Done
            }
        }
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

/// Interpreters whose program text (a code string, a script file or standard input) is not
/// analysed. Shells of the `sh` family are handled separately (their `-c` string is analysed).
fn interpreter(base: &str) -> bool {
    let versioned = |prefix: &str| {
        base.strip_prefix(prefix)
            .is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
    };
    versioned("python")
        || versioned("pypy")
        || versioned("perl")
        || versioned("ruby")
        || versioned("php")
        || versioned("lua")
        || versioned("tclsh")
        || versioned("wish")
        || matches!(
            base,
            "node"
                | "nodejs"
                | "deno"
                | "bun"
                | "luajit"
                | "Rscript"
                | "R"
                | "julia"
                | "osascript"
                | "expect"
                | "fish"
                | "csh"
                | "tcsh"
                | "nu"
                | "elvish"
                | "pwsh"
                | "powershell"
                | "xonsh"
                | "ipython"
                | "ipython3"
                | "irb"
                | "jshell"
                | "groovy"
                | "scala"
                | "guile"
                | "racket"
                | "sbcl"
                | "clisp"
                | "ghci"
                | "runghc"
                | "erl"
                | "escript"
                | "elixir"
                | "iex"
        )
}

/// True when the arguments of a shell or interpreter only ask for its version or help (no
/// program runs): `python3 --version`, `bash --help`, `node -v`.
fn info_only(base: &str, args: &[Word]) -> bool {
    // `-v` is "verbose" for Python, Lua and the shells, which then still run a program.
    let dash_v_is_version = matches!(
        base,
        "node" | "nodejs" | "deno" | "bun" | "perl" | "ruby" | "php"
    ) || base.starts_with("perl")
        || base.starts_with("ruby")
        || base.starts_with("php");
    !args.is_empty()
        && args.iter().all(|w| {
            w.as_literal().is_some_and(|t| {
                matches!(
                    t,
                    "--version" | "-V" | "--help" | "-h" | "-version" | "-help"
                ) || (t == "-v" && dash_v_is_version)
            })
        })
}

/// Environment variables whose value is a program git, a pager, a shell or an interpreter runs,
/// or a file of code it loads (`BASH_ENV`, `LD_PRELOAD`, `GIT_SSH_COMMAND`, …).
pub(crate) fn runs_code_env(name: &str) -> bool {
    matches!(
        name,
        "BASH_ENV"
            | "LD_PRELOAD"
            | "LD_AUDIT"
            | "PAGER"
            | "MANPAGER"
            | "EDITOR"
            | "VISUAL"
            | "LESSOPEN"
            | "LESSCLOSE"
            | "PERL5OPT"
            | "RUBYOPT"
            | "NODE_OPTIONS"
            | "PYTHONSTARTUP"
            | "PROMPT_COMMAND"
            | "SSH_ASKPASS"
            | "SUDO_ASKPASS"
    ) || (name.starts_with("GIT_")
        && !matches!(
            name,
            "GIT_AUTHOR_NAME"
                | "GIT_AUTHOR_EMAIL"
                | "GIT_AUTHOR_DATE"
                | "GIT_COMMITTER_NAME"
                | "GIT_COMMITTER_EMAIL"
                | "GIT_COMMITTER_DATE"
                | "GIT_TERMINAL_PROMPT"
                | "GIT_PAGER_IN_USE"
                | "GIT_OPTIONAL_LOCKS"
                | "GIT_TRACE"
                | "GIT_FLUSH"
                | "GIT_CEILING_DIRECTORIES"
                | "GIT_LITERAL_PATHSPECS"
                | "GIT_ADVICE"
        ))
}

/// Values of program-naming variables that run nothing else: `PAGER=cat`, `GIT_EDITOR=true`.
fn harmless_program_value(value: &Word) -> bool {
    value.as_literal().is_some_and(|v| {
        matches!(
            v.trim(),
            "" | "cat" | "less" | "less -R" | "less -FRX" | "less -FR" | "more" | "true" | ":"
        )
    })
}

/// Configuration keys git may be given with `-c` that change nothing about which programs run
/// (git-config(1)): colours, identity, output formatting, advice. Every other key (`alias.*`,
/// `core.pager`, `core.editor`, `core.sshCommand`, `core.hooksPath`, `core.fsmonitor`,
/// `diff.external`, `*.textconv`, `filter.*`, `credential.helper`, `include.path`, …) may run
/// a program.
fn inert_git_config_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    let section = key.split('.').next().unwrap_or("");
    matches!(section, "color" | "user" | "advice" | "i18n" | "column")
        || matches!(
            key.as_str(),
            "core.quotepath"
                | "core.autocrlf"
                | "core.safecrlf"
                | "core.abbrev"
                | "core.ignorecase"
                | "core.filemode"
                | "init.defaultbranch"
                | "log.decorate"
                | "log.date"
                | "log.abbrevcommit"
                | "diff.noprefix"
                | "diff.renames"
                | "diff.algorithm"
                | "diff.colormoved"
                | "merge.conflictstyle"
                | "pull.rebase"
                | "pull.ff"
                | "protocol.version"
                | "safe.directory"
                | "status.short"
                | "status.branch"
                | "commit.gpgsign"
                | "tag.gpgsign"
                | "gc.auto"
                | "maintenance.auto"
        )
}

/// Why a `git` command (after [`split_git_globals`]) runs code from configuration it is given on
/// the command line, if it does: `-c KEY=VALUE` with a key outside [`inert_git_config_key`],
/// `--config-env`, `--exec-path=DIR`.
fn git_runs_configured_code(cmd: &SimpleCommand) -> Option<String> {
    let globals = &cmd.global_options;
    let mut i = 0;
    while i < globals.len() {
        let w = &globals[i];
        let t = w.text.as_str();
        let value = |i: usize| globals.get(i + 1);
        match t {
            "-c" => {
                let Some(v) = value(i) else {
                    return Some("`git -c` without a value".to_string());
                };
                let key = v.text.split_once('=').map_or(v.text.as_str(), |(k, _)| k);
                if v.dynamic || v.glob || !inert_git_config_key(key) {
                    return Some(format!(
                        "`git -c {key}=…` sets configuration that can make git run a program"
                    ));
                }
                i += 2;
                continue;
            }
            "--config-env" => {
                return Some(
                    "`git --config-env` sets configuration (from the environment) that can make \
                     git run a program"
                        .to_string(),
                );
            }
            _ if t.starts_with("--config-env=") => {
                return Some(
                    "`git --config-env` sets configuration (from the environment) that can make \
                     git run a program"
                        .to_string(),
                );
            }
            _ if t.starts_with("--exec-path=") => {
                return Some("`git --exec-path=DIR` runs git helpers from DIR".to_string());
            }
            _ if t.starts_with("-c") && t.len() > 2 => {
                let rest = &t[2..];
                let key = rest.split_once('=').map_or(rest, |(k, _)| k);
                if !inert_git_config_key(key) {
                    return Some(format!(
                        "`git -c {key}=…` sets configuration that can make git run a program"
                    ));
                }
            }
            _ => {}
        }
        if w.dynamic {
            return Some(format!(
                "the git global option `{t}` is computed at run time"
            ));
        }
        i += 1;
    }
    None
}

/// Moves `git`'s global options (`-C dir`, `-c k=v`, `--git-dir=…`, `-p`, …) out of `argv` into
/// `global_options`, so that `argv` is `git SUBCOMMAND ARGS…` as git will run it.
fn split_git_globals(cmd: &mut SimpleCommand) {
    let mut i = 1;
    let argv = &cmd.argv;
    let mut globals = Vec::new();
    while i < argv.len() {
        let w = &argv[i];
        let Some(t) = w.as_literal() else { break };
        if !t.starts_with('-') {
            break;
        }
        globals.push(w.clone());
        let takes_value = matches!(
            t,
            "-C" | "-c"
                | "--git-dir"
                | "--work-tree"
                | "--namespace"
                | "--super-prefix"
                | "--config-env"
                | "--exec-path-unused"
                | "--list-cmds"
                | "--attr-source"
        );
        if takes_value && i + 1 < argv.len() {
            globals.push(argv[i + 1].clone());
            i += 2;
        } else {
            i += 1;
        }
    }
    if globals.is_empty() {
        return;
    }
    let mut rest = vec![cmd.argv[0].clone()];
    rest.extend(cmd.argv[i..].iter().cloned());
    cmd.argv = rest;
    cmd.global_options = globals;
}
