//! Permission rules (`allow` / `ask` / `deny`): their syntax, parsing and display, the rule set
//! of all config layers, and the rule an `a`/`d` answer adds. The decision built on them lives
//! in `super::decide`.
//!
//! Syntax: `tool` (every call of that tool) or `tool(pattern)`:
//! - `run_command(cargo test:*)` — command prefix, word by word: matches `cargo test` and
//!   `cargo test --lib`, not `cargo testx`. Without `:*` the command must match exactly
//!   (`run_command(git status)`). `run_command(*)` is the same as `run_command`. Words are split
//!   like the shell splits them (quotes allowed); no other wildcards.
//! - `edit_file(src/**)`, `read_file(**/.env)` — a glob ([globset] syntax, `*` does not cross
//!   `/`, `**` does) matched against the path relative to the workspace root; a pattern starting
//!   with `/` (or `~/`) is matched against the absolute path.
//!
//! Which tools a rule covers: a rule for `edit_file` or `write_file` covers every edit tool (both
//! edit files); a rule for `read_file` covers every read tool (`read_file`, `grep`, `glob`,
//! `list_dir`); other rules cover the tool they name.
//!
//! Precedence: deny beats ask beats allow, whatever their order; deny rules apply in every mode.
//! Deny and ask rules match command words in any order after the subcommand (`git branch -D:*`
//! denies `git branch -v -D x`; short flags are compared letter by letter, so `rm -rf /` also
//! denies `rm -f -r /`), while an allow rule must be a real prefix of the command as it runs.

use super::command::{CommandKind, analyze_command, basename};
use crate::tools::ToolKind;
use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;

/// Why a rule's text could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleParseError {
    /// The rule text is empty.
    #[error(
        "empty permission rule; write `tool` or `tool(pattern)`, e.g. `run_command(cargo test:*)`"
    )]
    Empty,
    /// The tool name has characters other than letters, digits, `_`, `-`, `.`.
    #[error(
        "invalid tool name `{tool}` in rule `{rule}`; tool names use letters, digits, `_`, `-` and `.`"
    )]
    InvalidToolName {
        /// The whole rule.
        rule: String,
        /// The tool part.
        tool: String,
    },
    /// `(` without a closing `)` at the end.
    #[error("rule `{rule}` has `(` without a closing `)` at the end; write `tool(pattern)`")]
    MissingCloseParen {
        /// The whole rule.
        rule: String,
    },
    /// `tool()`.
    #[error("rule `{rule}` has an empty pattern; write `{tool}` alone to match every call")]
    EmptyPattern {
        /// The whole rule.
        rule: String,
        /// The tool part.
        tool: String,
    },
    /// Unbalanced quote in a command pattern.
    #[error("rule `{rule}` has an unclosed quote in its command pattern")]
    UnclosedQuote {
        /// The whole rule.
        rule: String,
    },
    /// A `*` elsewhere than the trailing `:*` of a command pattern.
    #[error(
        "rule `{rule}`: command patterns only support a trailing `:*` (prefix match), e.g. \
         `run_command(git diff:*)`; other `*` wildcards are not supported"
    )]
    UnsupportedWildcard {
        /// The whole rule.
        rule: String,
    },
    /// The path glob does not compile.
    #[error("rule `{rule}` has an invalid path glob: {message}")]
    InvalidGlob {
        /// The whole rule.
        rule: String,
        /// The glob compiler's message.
        message: String,
    },
}

/// What a rule's pattern matches.
#[derive(Debug, Clone)]
pub enum RulePattern {
    /// Every call of the tool (`tool` or `tool(*)`).
    Any,
    /// Command words (`run_command`).
    Command {
        /// Words after quote removal.
        words: Vec<String>,
        /// True for `:*` (prefix match); false for an exact match.
        prefix: bool,
    },
    /// A path glob (file tools).
    Path {
        /// The glob as written (after `./` is stripped).
        glob: String,
        /// True when the glob is matched against absolute paths (`/…` or `~/…`).
        absolute: bool,
        /// Compiled glob.
        matcher: GlobMatcher,
    },
}

/// One permission rule, e.g. `run_command(cargo test:*)`. Parse with [`PermissionRule::parse`]
/// (or `str::parse`); [`fmt::Display`] gives the canonical text back. (De)serialises as that text.
#[derive(Debug, Clone)]
pub struct PermissionRule {
    /// Tool name (`run_command`, `edit_file`, …).
    pub tool: String,
    /// What it matches.
    pub pattern: RulePattern,
}

impl PartialEq for PermissionRule {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for PermissionRule {}

/// MCP rules as Claude Code writes them: `mcp__github` and `mcp__github__*` cover every tool
/// of the server `github` (`mcp__github__<tool>`); `mcp__git*` every tool whose name starts
/// with `mcp__git`.
fn mcp_rule_covers(rule_tool: &str, tool: &str) -> bool {
    if !rule_tool.starts_with("mcp__") || !tool.starts_with("mcp__") {
        return false;
    }
    match rule_tool.strip_suffix('*') {
        Some(prefix) => tool.starts_with(prefix),
        None => {
            // `mcp__<server>` (no tool part) covers the server's tools.
            rule_tool.matches("__").count() == 1
                && tool
                    .strip_prefix(rule_tool)
                    .is_some_and(|rest| rest.starts_with("__"))
        }
    }
}

/// Tools whose rule patterns are commands.
pub(super) fn is_command_tool(tool: &str) -> bool {
    tool == "run_command"
}

impl PermissionRule {
    /// Parses `tool` or `tool(pattern)`.
    ///
    /// # Errors
    /// [`RuleParseError`] naming the problem (empty rule, bad tool name, missing `)`, empty
    /// pattern, unclosed quote, unsupported wildcard, invalid glob).
    pub fn parse(text: &str) -> Result<Self, RuleParseError> {
        let rule = text.trim();
        if rule.is_empty() {
            return Err(RuleParseError::Empty);
        }
        let (tool, pattern) = match rule.find('(') {
            None => (rule, None),
            Some(open) => {
                let Some(inner) = rule[open + 1..].strip_suffix(')') else {
                    return Err(RuleParseError::MissingCloseParen { rule: rule.into() });
                };
                (rule[..open].trim(), Some(inner.trim()))
            }
        };
        // An MCP rule may end in `*` (`mcp__github__*`: every tool of that server).
        let name_part = match tool.strip_suffix('*') {
            Some(prefix) if prefix.starts_with("mcp__") => prefix,
            _ => tool,
        };
        if name_part.is_empty()
            || !name_part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            return Err(RuleParseError::InvalidToolName {
                rule: rule.into(),
                tool: tool.into(),
            });
        }
        let pattern = match pattern {
            None => RulePattern::Any,
            Some("") => {
                return Err(RuleParseError::EmptyPattern {
                    rule: rule.into(),
                    tool: tool.into(),
                });
            }
            Some("*") => RulePattern::Any,
            Some(p) if is_command_tool(tool) => parse_command_pattern(rule, p)?,
            Some(p) => parse_path_pattern(rule, p)?,
        };
        Ok(PermissionRule {
            tool: tool.to_string(),
            pattern,
        })
    }

    /// True when this rule is about calls of `tool` (of kind `kind`); see the module docs.
    pub fn applies_to(&self, tool: &str, kind: ToolKind) -> bool {
        self.tool == tool
            || mcp_rule_covers(&self.tool, tool)
            || (matches!(self.tool.as_str(), "edit_file" | "write_file") && kind == ToolKind::Edit)
            || (self.tool == "read_file" && kind == ToolKind::Read)
    }
}

fn parse_command_pattern(rule: &str, pattern: &str) -> Result<RulePattern, RuleParseError> {
    let (body, prefix) = if let Some(b) = pattern.strip_suffix(":*") {
        (b, true)
    } else if let Some(b) = pattern.strip_suffix(" *") {
        // opencode-style `git diff *`.
        (b, true)
    } else {
        (pattern, false)
    };
    let words =
        split_words(body).ok_or_else(|| RuleParseError::UnclosedQuote { rule: rule.into() })?;
    if words.iter().any(|w| w.contains('*')) && !pattern_is_quoted_star(body) {
        return Err(RuleParseError::UnsupportedWildcard { rule: rule.into() });
    }
    if words.is_empty() {
        return Ok(RulePattern::Any);
    }
    Ok(RulePattern::Command { words, prefix })
}

fn pattern_is_quoted_star(body: &str) -> bool {
    // A `*` inside quotes is a literal star (`run_command(echo '*')`).
    let mut quote = None;
    for c in body.chars() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '*') => return false,
            _ => {}
        }
    }
    true
}

fn parse_path_pattern(rule: &str, pattern: &str) -> Result<RulePattern, RuleParseError> {
    let mut glob = pattern.trim_start_matches("./").to_string();
    let mut absolute = glob.starts_with('/');
    if let Some(rest) = glob.strip_prefix("~/")
        && let Some(home) = home_dir()
    {
        glob = format!("{}/{rest}", home.display());
        absolute = true;
    }
    let matcher = GlobBuilder::new(&glob)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| RuleParseError::InvalidGlob {
            rule: rule.into(),
            message: e.to_string(),
        })?
        .compile_matcher();
    Ok(RulePattern::Path {
        glob: pattern.trim_start_matches("./").to_string(),
        absolute,
        matcher,
    })
}

/// Splits a command pattern into words like the shell: whitespace separates, `'…'` and `"…"`
/// quote, `\` escapes. `None` when a quote is not closed.
fn split_words(s: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        x => cur.push(x),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => cur.push(chars.next()?),
                        x => cur.push(x),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(x) = chars.next() {
                    cur.push(x);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Some(words)
}

/// Quotes a word for display in a rule when needed.
fn quote_word(w: &str) -> String {
    if !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^{}[]~#".contains(c))
    {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

impl fmt::Display for PermissionRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pattern {
            RulePattern::Any => write!(f, "{}", self.tool),
            RulePattern::Command { words, prefix } => {
                let body = quote_words(words);
                write!(
                    f,
                    "{}({body}{})",
                    self.tool,
                    if *prefix { ":*" } else { "" }
                )
            }
            RulePattern::Path { glob, .. } => write!(f, "{}({glob})", self.tool),
        }
    }
}

impl std::str::FromStr for PermissionRule {
    type Err = RuleParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for PermissionRule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for PermissionRule {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        PermissionRule::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The rules of all config layers and session answers, by effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleSet {
    /// Calls these match run without a prompt (unless an ask or deny rule also matches).
    #[serde(default)]
    pub allow: Vec<PermissionRule>,
    /// Calls these match always prompt (unless a deny rule matches).
    #[serde(default)]
    pub ask: Vec<PermissionRule>,
    /// Calls these match are refused in every mode.
    #[serde(default)]
    pub deny: Vec<PermissionRule>,
    /// Whether the built-in read-only commands (`ls`, `cat`, `git status`, … — see
    /// [`super::command`]) run without a rule. Default `true`.
    #[serde(default = "default_true")]
    pub builtin_read_only: bool,
}

fn default_true() -> bool {
    true
}

impl Default for RuleSet {
    fn default() -> Self {
        RuleSet {
            allow: Vec::new(),
            ask: Vec::new(),
            deny: Vec::new(),
            builtin_read_only: true,
        }
    }
}

impl RuleSet {
    /// Parses three lists of rule texts.
    ///
    /// # Errors
    /// The first [`RuleParseError`].
    pub fn parse<A: AsRef<str>>(
        allow: &[A],
        ask: &[A],
        deny: &[A],
    ) -> Result<Self, RuleParseError> {
        let parse_all = |list: &[A]| {
            list.iter()
                .map(|r| PermissionRule::parse(r.as_ref()))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(RuleSet {
            allow: parse_all(allow)?,
            ask: parse_all(ask)?,
            deny: parse_all(deny)?,
            builtin_read_only: true,
        })
    }
}

/// Programs whose second word is a subcommand (`git commit`, `cargo test`): suggested rules keep
/// two words, and a deny rule's subcommand must be the command's subcommand.
#[rustfmt::skip]
pub(super) const SUBCOMMAND_TOOLS: &[&str] = &[
    "git", "cargo", "npm", "pnpm", "yarn", "bun", "npx", "docker", "podman", "kubectl", "go",
    "pip", "pip3", "uv", "poetry", "gh", "apt", "apt-get", "brew", "systemctl", "make", "just",
    "rustup", "deno", "dotnet", "mvn", "gradle", "terraform", "helm", "conda", "gem", "bundle",
    "composer", "swift", "flutter", "nix",
];

/// The rule an `a`/`d` answer adds for a call: for `run_command`, the first two words of the
/// first command for tools with subcommands (`run_command(cargo test:*)` from `cargo test --lib`),
/// else the first word (`run_command(ls:*)`); for file tools, the exact path given
/// (`edit_file(src/main.rs)`, glob characters escaped).
pub fn suggest_rule(tool: &str, subject: Option<&str>) -> String {
    let Some(subject) = subject.filter(|s| !s.trim().is_empty()) else {
        return tool.to_string();
    };
    if is_command_tool(tool) {
        return suggest_command_rule(tool, subject);
    }
    let mut escaped = String::with_capacity(subject.len());
    for c in subject.trim_start_matches("./").chars() {
        if "*?[]{}\\".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    format!("{tool}({escaped})")
}

/// The prefix rule for the first program of `command`, or the exact command when it has none.
fn suggest_command_rule(tool: &str, command: &str) -> String {
    let analysis = analyze_command(command);
    let first = analysis
        .commands
        .iter()
        .find(|c| c.kind == CommandKind::Program && !c.argv.is_empty());
    if let Some(cmd) = first {
        let literal: Vec<&str> = cmd.argv.iter().map_while(|w| w.as_literal()).collect();
        if let Some(name) = literal.first() {
            let mut words = vec![*name];
            if SUBCOMMAND_TOOLS.contains(&basename(name))
                && let Some(sub) = literal.get(1)
                && !sub.starts_with('-')
            {
                words.push(sub);
            }
            // A prefix rule covers only the concerns about the words it names (`sed -i`).
            let needed = super::command::classify::classify(cmd)
                .concerns
                .iter()
                .filter_map(|c| c.word.map(|w| w + 1))
                .max()
                .unwrap_or(0);
            if needed > literal.len() {
                let words = split_words(command).unwrap_or_else(|| vec![command.to_string()]);
                return format!("{tool}({})", quote_words(&words));
            }
            if needed > words.len() {
                words = literal[..needed].to_vec();
            }
            return format!("{tool}({}:*)", quote_words(&words));
        }
    }
    let words = split_words(command).unwrap_or_else(|| vec![command.to_string()]);
    format!("{tool}({})", quote_words(&words))
}

/// Words quoted where needed ([`quote_word`]) and joined by spaces.
fn quote_words<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| quote_word(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The user's home directory from `HOME` (read only; used for `~` in rules and commands).
pub(super) fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}
