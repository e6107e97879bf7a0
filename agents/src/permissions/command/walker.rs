//! Walks the tree-sitter-bash syntax tree of a command line and collects its simple commands,
//! tracking `cd` on the way. Words are read in `words.rs`, commands and redirections in
//! `simple.rs`, wrappers looked through in `unwrap.rs`.

use super::lexical::{join_continuations, normalize_path};
use super::unwrap::join_texts;
use super::words::WordBuf;
use super::wrappers::{harmless_program_value, runs_code_env};
use super::{
    Assignment, CommandAnalysis, CommandKind, Cwd, MAX_CWD_CANDIDATES, MAX_NESTING,
    MAX_SIMPLE_COMMANDS, OpaquePart, Redirection, SimpleCommand, Word,
};
use tree_sitter::{Node, Parser, TreeCursor};

/// A raw command collected from the syntax tree, before wrappers are stripped.
pub(super) struct RawCommand {
    pub(super) text: String,
    pub(super) kind: CommandKind,
    pub(super) assignments: Vec<Assignment>,
    pub(super) words: Vec<Word>,
    pub(super) redirections: Vec<Redirection>,
}

impl RawCommand {
    /// A program run with `words` (no assignments, no redirections); its text is the words.
    pub(super) fn program(words: Vec<Word>) -> Self {
        RawCommand {
            text: join_texts(&words),
            kind: CommandKind::Program,
            assignments: Vec::new(),
            words,
            redirections: Vec::new(),
        }
    }

    /// Redirections without a command word (`> file`, or those of a compound statement);
    /// `words` are those that followed a redirection target.
    pub(super) fn redirections_only(
        text: &str,
        words: Vec<Word>,
        redirections: Vec<Redirection>,
    ) -> Self {
        RawCommand {
            text: text.to_string(),
            kind: CommandKind::Assignment,
            assignments: Vec::new(),
            words,
            redirections,
        }
    }
}

/// The state of one analysis: the parser, what was found so far, and where commands run.
pub(super) struct Walker<'p> {
    parser: &'p mut Parser,
    pub(super) out: CommandAnalysis,
    /// The working directories of the next command.
    pub(super) cwd: Cwd,
    /// How many command strings deep (`bash -c`, `eval`) the walk is.
    depth: usize,
    /// How the commands being walked are reached (`bash -c`, `find -exec`, …).
    pub(super) via: Option<String>,
    /// The command string being analysed (the innermost `bash -c` string when nested).
    source: String,
    /// The whole command line given to [`super::CommandAnalyzer::analyze`].
    root: String,
}

/// The source text of `node`.
pub(super) fn node_text<'s>(node: Node<'_>, src: &'s str) -> &'s str {
    src.get(node.byte_range()).unwrap_or("")
}

/// Children of `node` with their field names.
pub(super) fn children_with_fields<'t>(node: Node<'t>) -> Vec<(Option<&'static str>, Node<'t>)> {
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

/// All children of `node`.
pub(super) fn children(node: Node<'_>) -> Vec<Node<'_>> {
    let mut cursor = node.walk();
    node.children(&mut cursor).collect()
}

/// The named children of `node` (no punctuation).
pub(super) fn named_children(node: Node<'_>) -> Vec<Node<'_>> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor).collect()
}

/// Groups nodes that touch each other (no whitespace between them) into words.
pub(super) fn group_adjacent<'t>(nodes: &[Node<'t>]) -> Vec<Vec<Node<'t>>> {
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

impl<'p> Walker<'p> {
    /// A walker for the command line `root`, adding to `out`.
    pub(super) fn new(parser: &'p mut Parser, root: &str, out: CommandAnalysis) -> Self {
        Walker {
            parser,
            out,
            cwd: Cwd::initial(),
            depth: 0,
            via: None,
            source: String::new(),
            root: root.to_string(),
        }
    }
}

impl Walker<'_> {
    /// Records a part that cannot be analysed (once per text and reason).
    pub(super) fn opaque(&mut self, text: &str, reason: impl Into<String>) {
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
    pub(super) fn code_runner(&mut self, reason: impl Into<String>) {
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
    pub(super) fn analyze_source(&mut self, source: &str) {
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
    pub(super) fn misparsed(&mut self, reason: impl Into<String>) {
        let source = self.source.clone();
        self.opaque(&source, reason);
    }

    /// Analyses a string that a shell will run (`bash -c`, `eval`, `trap`), one level deeper.
    pub(super) fn nested(&mut self, source: &str, via: &str) {
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

    /// Walks every child of `node`.
    pub(super) fn walk_children(&mut self, node: Node<'_>, src: &str) {
        for child in children(node) {
            self.walk(child, src);
        }
    }

    /// Walks `node` in a subshell: `cd` inside does not change the cwd of what follows.
    pub(super) fn walk_scoped(&mut self, node: Node<'_>, src: &str, children_only: bool) {
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

    /// Walks one node of the syntax tree.
    pub(super) fn walk(&mut self, node: Node<'_>, src: &str) {
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
            "command" => self.command(node, src, Vec::new(), Vec::new()),
            "redirected_statement" => self.redirected_statement(node, src),
            "variable_assignment" | "variable_assignments" => self.assignment_statement(node, src),
            "declaration_command" | "unset_command" => self.declaration(node, src),
            "pipeline" => self.pipeline(node, src),
            "subshell" | "command_substitution" | "process_substitution" => {
                self.walk_scoped(node, src, true)
            }
            "function_definition" => self.function_definition(node, src),
            "for_statement" | "c_style_for_statement" | "while_statement" => {
                self.walk_conditional_body(node, src)
            }
            "file_redirect" | "herestring_redirect" | "heredoc_redirect" => {
                self.stray_redirection(node, src)
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

    /// `X=1` or `X=1 Y=2` alone: a command of assignments only.
    fn assignment_statement(&mut self, node: Node<'_>, src: &str) {
        let mut assignments = Vec::new();
        if node.kind() == "variable_assignment" {
            assignments.push(self.assignment(node, src));
        } else {
            for (_, child) in children_with_fields(node) {
                if child.kind() == "variable_assignment" {
                    assignments.push(self.assignment(child, src));
                }
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

    /// Each stage of a pipeline runs in a subshell.
    fn pipeline(&mut self, node: Node<'_>, src: &str) {
        let stages = named_children(node);
        if stages.len() > 1 {
            for stage in stages {
                self.walk_scoped(stage, src, false);
            }
        } else {
            self.walk_children(node, src);
        }
    }

    /// A function body may run any number of times: a `cd` inside makes the cwd unknown.
    fn function_definition(&mut self, node: Node<'_>, src: &str) {
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

    /// Strips wrappers, looks through command runners, tracks `cd`, and records the command.
    pub(super) fn push_raw(&mut self, raw: RawCommand) {
        let raw_kind = raw.kind;
        let mut cmd = self.simple_command(raw);
        if raw_kind == CommandKind::Program {
            self.unwrap(&mut cmd);
            self.code_environment(&cmd);
        }
        if cmd.kind == CommandKind::Program {
            self.command_word(&cmd);
        }
        self.record(cmd);
    }

    /// `raw` as a simple command running in the current directories, before unwrapping.
    fn simple_command(&self, raw: RawCommand) -> SimpleCommand {
        SimpleCommand {
            text: raw.text,
            kind: raw.kind,
            raw_argv: raw.words.clone(),
            argv: raw.words,
            wrappers: Vec::new(),
            assignments: raw.assignments,
            global_options: Vec::new(),
            redirections: raw.redirections,
            cwd: self.cwd.clone(),
            dynamic_tail: false,
            elevated: false,
            via: self.via.clone(),
            runner_unresolved: false,
        }
    }

    /// An environment assignment naming a program that runs (`PAGER=…`, `GIT_SSH_COMMAND=…`)
    /// makes the command a code runner.
    fn code_environment(&mut self, cmd: &SimpleCommand) {
        if let Some(a) = cmd
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
    }

    /// A command name computed at run time is opaque; a literal one may change the cwd.
    fn command_word(&mut self, cmd: &SimpleCommand) {
        let Some(first) = cmd.argv.first() else {
            return;
        };
        if first.as_literal().is_some() {
            self.track_cwd(cmd);
            return;
        }
        let what = if first.glob {
            "the command name is a glob pattern the shell expands at run time"
        } else {
            "the command name is computed at run time"
        };
        self.opaque(&cmd.text, what);
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
}
