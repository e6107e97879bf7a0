//! Reading simple commands, declarations and redirections from the syntax tree.

use super::walker::{
    RawCommand, Walker, children_with_fields, group_adjacent, named_children, node_text,
};
use super::words::WordBuf;
use super::{CommandKind, RedirectKind, Redirection, Word};
use tree_sitter::Node;

/// What reading redirections leaves for the command around them.
#[derive(Default)]
struct Spill<'t> {
    /// Words after a redirection target (`> out arg`): arguments of the command.
    args: Vec<Word>,
    /// Statements folded into a here-document node (`cat <<EOF | grep x`): walked after the
    /// command.
    statements: Vec<Node<'t>>,
}

/// The pieces of one redirection node.
#[derive(Default)]
struct RedirectParts<'t> {
    /// Explicit file descriptor (`2>`).
    fd: Option<u32>,
    /// The operator (`>`, `>>`, `<&`, …).
    op: String,
    /// Nodes of the target and of words after it.
    targets: Vec<Node<'t>>,
    /// Redirections nested in this node.
    nested: Vec<Redirection>,
}

/// True for the node kinds of redirections.
fn is_redirect(kind: &str) -> bool {
    matches!(
        kind,
        "file_redirect" | "heredoc_redirect" | "herestring_redirect"
    )
}

/// What a redirection does, from its node kind, operator and target.
fn redirect_kind(node_kind: &str, op: &str, target: Option<&Word>) -> RedirectKind {
    match node_kind {
        "heredoc_redirect" => return RedirectKind::HereDocument,
        "herestring_redirect" => return RedirectKind::HereString,
        _ => {}
    }
    let target_is_fd = target
        .and_then(Word::as_literal)
        .is_some_and(|s| s == "-" || (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())));
    match op {
        "<" => RedirectKind::Read,
        "<&" | ">&" if target_is_fd => RedirectKind::Duplicate,
        "<&-" | ">&-" => RedirectKind::Close,
        "<&" => RedirectKind::Read,
        ">>" | "&>>" => RedirectKind::Append,
        _ => RedirectKind::Write,
    }
}

impl Walker<'_> {
    /// `export`, `declare`, `typeset`, `local`, `readonly`, `unset`.
    pub(super) fn declaration(&mut self, node: Node<'_>, src: &str) {
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

    /// A statement with redirections: a simple command gets them; a compound statement's
    /// redirections apply to everything in it.
    pub(super) fn redirected_statement(&mut self, node: Node<'_>, src: &str) {
        let mut redirections = Vec::new();
        let mut spill = Spill::default();
        let mut body = None;
        for (field, child) in children_with_fields(node) {
            if field == Some("body") {
                body = Some(child);
            } else if child.is_named() && is_redirect(child.kind()) {
                redirections.extend(self.redirection(child, src, &mut spill));
            } else if child.is_error() {
                self.walk(child, src);
            }
        }
        let text = node_text(node, src);
        match body {
            Some(body) if body.kind() == "command" => {
                self.command(body, src, redirections, spill.args);
            }
            Some(body) => {
                self.walk(body, src);
                self.push_raw(RawCommand::redirections_only(
                    text,
                    spill.args,
                    redirections,
                ));
            }
            None => self.push_raw(RawCommand::redirections_only(
                text,
                spill.args,
                redirections,
            )),
        }
        for statement in spill.statements {
            self.walk(statement, src);
        }
    }

    /// A redirection outside a command (e.g. on a function definition).
    pub(super) fn stray_redirection(&mut self, node: Node<'_>, src: &str) {
        let mut spill = Spill::default();
        let redirections = self.redirection(node, src, &mut spill);
        let text = node_text(node, src);
        self.push_raw(RawCommand::redirections_only(
            text,
            spill.args,
            redirections,
        ));
        for statement in spill.statements {
            self.walk(statement, src);
        }
    }

    /// Reads one redirection node (and those nested in it); words and statements that belong
    /// to the command around it go to `spill`.
    fn redirection<'t>(
        &mut self,
        node: Node<'t>,
        src: &str,
        spill: &mut Spill<'t>,
    ) -> Vec<Redirection> {
        let mut parts = RedirectParts::default();
        for (field, child) in children_with_fields(node) {
            self.redirection_part(&mut parts, field, child, src, spill);
        }
        let mut groups = group_adjacent(&parts.targets).into_iter();
        let target = groups.next().map(|g| self.word_from(&g, src));
        for rest in groups {
            let word = self.word_from(&rest, src);
            spill.args.push(word);
        }
        let kind = redirect_kind(node.kind(), &parts.op, target.as_ref());
        let target = if kind == RedirectKind::HereDocument {
            None
        } else {
            target
        };
        let mut out = vec![Redirection {
            fd: parts.fd,
            kind,
            target,
        }];
        out.append(&mut parts.nested);
        out
    }

    /// Sorts one child of a redirection node into `parts` or `spill`.
    fn redirection_part<'t>(
        &mut self,
        parts: &mut RedirectParts<'t>,
        field: Option<&str>,
        child: Node<'t>,
        src: &str,
        spill: &mut Spill<'t>,
    ) {
        match (field, child.kind()) {
            (Some("descriptor"), _) => parts.fd = node_text(child, src).parse().ok(),
            (_, "heredoc_body") => self.heredoc_body(child, src),
            (_, "heredoc_start" | "heredoc_end") => {}
            (_, "file_redirect" | "herestring_redirect") => {
                let nested = self.redirection(child, src, spill);
                parts.nested.extend(nested);
            }
            (Some("argument"), _) => {
                let word = self.word_from(&[child], src);
                spill.args.push(word);
            }
            (Some("right"), _) => spill.statements.push(child),
            (_, "pipeline") if child.is_named() => spill.statements.push(child),
            (_, "comment") => {}
            _ if !child.is_named() && parts.targets.is_empty() => {
                let t = node_text(child, src);
                if t.chars().all(|c| "<>&|-".contains(c)) {
                    parts.op.push_str(t);
                } else {
                    parts.targets.push(child);
                }
            }
            _ if child.is_error() => self.walk(child, src),
            _ => parts.targets.push(child),
        }
    }

    /// Only the expansions of an unquoted here-document run anything.
    fn heredoc_body(&mut self, node: Node<'_>, src: &str) {
        let mut buf = WordBuf::default();
        for part in named_children(node) {
            if part.kind() != "heredoc_content" {
                self.append(&mut buf, part, src);
            }
        }
    }

    /// A simple command, with the `redirections` and `extra_args` of a statement around it.
    pub(super) fn command(
        &mut self,
        node: Node<'_>,
        src: &str,
        mut redirections: Vec<Redirection>,
        extra_args: Vec<Word>,
    ) {
        let mut spill = Spill {
            args: extra_args,
            statements: Vec::new(),
        };
        let mut assignments = Vec::new();
        let mut pieces: Vec<Node<'_>> = Vec::new();
        for (field, child) in children_with_fields(node) {
            match (field, child.kind()) {
                (_, "variable_assignment") if pieces.is_empty() => {
                    let a = self.assignment(child, src);
                    assignments.push(a);
                }
                (Some("redirect"), _) => {
                    let r = self.redirection(child, src, &mut spill);
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
        let mut lines = self.split_joined_lines(pieces, src).into_iter();
        let first = lines.next().unwrap_or_default();
        for later in lines {
            let words = self.words(&later, src);
            self.push_raw(RawCommand::program(words));
        }
        let mut words = self.words(&first, src);
        words.append(&mut spill.args);
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
        for statement in spill.statements {
            self.walk(statement, src);
        }
    }

    /// A newline between two words ends a simple command in every shell; tree-sitter-bash
    /// sometimes joins the lines anyway (`a | b | c⏎d 5`). Splits there, and never trusts the
    /// parse of this string.
    fn split_joined_lines<'t>(&mut self, pieces: Vec<Node<'t>>, src: &str) -> Vec<Vec<Node<'t>>> {
        let mut lines: Vec<Vec<Node<'t>>> = vec![Vec::new()];
        for piece in pieces {
            if let Some(prev) = lines.last().and_then(|s| s.last())
                && src
                    .get(prev.end_byte()..piece.start_byte())
                    .is_some_and(|gap| gap.contains('\n'))
            {
                lines.push(Vec::new());
            }
            if let Some(last) = lines.last_mut() {
                last.push(piece);
            }
        }
        if lines.len() > 1 {
            self.misparsed("the parser joined two lines into one command");
        }
        lines
    }

    /// The words of a command, from its nodes.
    fn words(&mut self, nodes: &[Node<'_>], src: &str) -> Vec<Word> {
        group_adjacent(nodes)
            .into_iter()
            .map(|group| self.word_from(&group, src))
            .collect()
    }
}
