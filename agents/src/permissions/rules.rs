//! Permission rules (`allow` / `ask` / `deny`), their syntax, and the decision for one tool call.
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

use super::command::classify::{ConcernKind, Facts, classify};
use super::command::{
    CommandAnalysis, CommandKind, Cwd, SimpleCommand, Word, analyze_command, basename,
    is_invisible, normalize_path,
};
use super::*;
use globset::{GlobBuilder, GlobMatcher};
use std::fmt;
use std::path::PathBuf;
use unicode_normalization::UnicodeNormalization;

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
fn is_command_tool(tool: &str) -> bool {
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
                let body = words
                    .iter()
                    .map(|w| quote_word(w))
                    .collect::<Vec<_>>()
                    .join(" ");
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
const SUBCOMMAND_TOOLS: &[&str] = &[
    "git",
    "cargo",
    "npm",
    "pnpm",
    "yarn",
    "bun",
    "npx",
    "docker",
    "podman",
    "kubectl",
    "go",
    "pip",
    "pip3",
    "uv",
    "poetry",
    "gh",
    "apt",
    "apt-get",
    "brew",
    "systemctl",
    "make",
    "just",
    "rustup",
    "deno",
    "dotnet",
    "mvn",
    "gradle",
    "terraform",
    "helm",
    "conda",
    "gem",
    "bundle",
    "composer",
    "swift",
    "flutter",
    "nix",
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
        let analysis = analyze_command(subject);
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
                let body = words
                    .iter()
                    .map(|w| quote_word(w))
                    .collect::<Vec<_>>()
                    .join(" ");
                return format!("{tool}({body}:*)");
            }
        }
        let words = split_words(subject).unwrap_or_else(|| vec![subject.to_string()]);
        let body = words
            .iter()
            .map(|w| quote_word(w))
            .collect::<Vec<_>>()
            .join(" ");
        return format!("{tool}({body})");
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

/// The user's home directory from `HOME` (read only; used for `~` in rules and commands).
fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// Names of shell start-up files: writing one runs code in the user's next shell.
const STARTUP_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".cshrc",
    ".tcshrc",
    ".kshrc",
    ".mkshrc",
    ".inputrc",
    "config.fish",
];

/// Folds a path component for protected-path comparison: NFKC, lower case, invisible
/// characters removed (so `.GIT`, `.gi\u{200b}t` and fullwidth look-alikes all compare as `.git`).
fn fold_component(s: &str) -> String {
    s.nfkc()
        .filter(|c| !is_invisible(*c))
        .collect::<String>()
        .to_lowercase()
}

/// Why writing `path` needs an explicit decision, if it does: `.git` internals (hooks and config
/// run code), `.ahelper` (ahelper's own configuration and permission rules), shell start-up
/// files. Compared case-insensitively after Unicode (NFKC) normalisation; `path` is relative to
/// the workspace root or absolute.
pub fn protected_reason(path: &Path) -> Option<&'static str> {
    let folded: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(s) => Some(fold_component(&s.to_string_lossy())),
            _ => None,
        })
        .collect();
    if folded.iter().any(|c| c == ".git") {
        return Some("it is inside .git (hooks and config there run code)");
    }
    if folded.iter().any(|c| c == ".ahelper") {
        return Some("it is ahelper's own configuration and permission directory (.ahelper)");
    }
    if folded
        .last()
        .is_some_and(|last| STARTUP_FILES.contains(&last.as_str()))
    {
        return Some("it is a shell start-up file");
    }
    None
}

/// Where a path lies relative to the workspace.
#[derive(Debug, Clone)]
struct Placed {
    abs: PathBuf,
    /// Relative to the workspace root, when inside it.
    rel: Option<PathBuf>,
}

/// Resolves a path as written (relative to `cwd`; `~` is the home directory) without touching
/// the file system.
fn place(path: &str, tilde: bool, cwd: &Path, root: &Path) -> Option<Placed> {
    let abs = if tilde {
        let rest = path.strip_prefix('~')?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            // `~user`: another user's home, certainly outside.
            return Some(Placed {
                abs: PathBuf::from("/home").join(rest),
                rel: None,
            });
        }
        let home = home_dir()?;
        home.join(rest.trim_start_matches('/'))
    } else {
        cwd.join(path)
    };
    let abs = normalize_path(&abs);
    let rel = abs.strip_prefix(root).ok().map(Path::to_path_buf);
    Some(Placed { abs, rel })
}

fn path_rule_matches(rule: &PermissionRule, placed: &Placed, restrictive: bool) -> bool {
    match &rule.pattern {
        RulePattern::Any => true,
        RulePattern::Command { .. } => false,
        RulePattern::Path {
            absolute, matcher, ..
        } => {
            if *absolute {
                matcher.is_match(&placed.abs)
            } else {
                let rel_match = placed
                    .rel
                    .as_ref()
                    .is_some_and(|r| !r.as_os_str().is_empty() && matcher.is_match(r));
                rel_match || (restrictive && matcher.is_match(&placed.abs))
            }
        }
    }
}

fn plan_denied(what: &str) -> Decision {
    Decision::Deny {
        reason: format!(
            "plan mode is read-only: {what} is not allowed; present the plan instead, and the \
             user can leave plan mode to carry it out"
        ),
    }
}

/// The decision for one call; see [`PermissionPolicy::decide`].
pub(crate) fn decide(policy: &PermissionPolicy, request: &PermissionRequest<'_>) -> Decision {
    if is_command_tool(request.tool) {
        return decide_command(policy, request);
    }
    decide_tool(policy, request)
}

/// File tools and other non-shell tools.
fn decide_tool(policy: &PermissionPolicy, request: &PermissionRequest<'_>) -> Decision {
    let rules = &policy.rules;
    let placed = request
        .subject
        .and_then(|s| place(s, s.starts_with('~'), request.cwd, request.workspace_root));
    let matching = |list: &[PermissionRule], restrictive: bool| -> Option<String> {
        list.iter()
            .filter(|r| r.applies_to(request.tool, request.kind))
            .find(|r| match (&r.pattern, &placed) {
                (RulePattern::Any, _) => true,
                (_, Some(p)) => path_rule_matches(r, p, restrictive),
                (_, None) => false,
            })
            .map(ToString::to_string)
    };
    if let Some(rule) = matching(&rules.deny, true) {
        return Decision::Deny {
            reason: format!("denied by the rule `{rule}`"),
        };
    }
    let subject = request.subject.unwrap_or("(no path)");
    let inside = placed.as_ref().is_some_and(|p| p.rel.is_some());
    match request.kind {
        ToolKind::Read => {
            if let Some(rule) = matching(&rules.ask, true) {
                return Decision::Ask {
                    reason: format!("the rule `{rule}` asks before reading {subject}"),
                };
            }
            if request.subject.is_none() || inside || policy.mode == PermissionMode::Bypass {
                return Decision::Allow;
            }
            if matching(&rules.allow, false).is_some() {
                return Decision::Allow;
            }
            Decision::Ask {
                reason: format!("{subject} is outside the workspace"),
            }
        }
        ToolKind::Edit => {
            if policy.mode == PermissionMode::Plan {
                return plan_denied(&format!("editing {subject}"));
            }
            let protected = placed
                .as_ref()
                .and_then(|p| protected_reason(p.rel.as_deref().unwrap_or(&p.abs)));
            // The file tools refuse protected paths outright (sandbox::is_protected), so asking
            // would only lead to a refusal after a "yes": deny at once, saying why.
            if let Some(why) = protected {
                return Decision::Deny {
                    reason: format!(
                        "{subject} is protected ({why}); ahelper's tools never write it — the user can edit it by hand"
                    ),
                };
            }
            if let Some(rule) = matching(&rules.ask, true) {
                return Decision::Ask {
                    reason: format!("the rule `{rule}` asks before editing {subject}"),
                };
            }
            if policy.mode == PermissionMode::Bypass || matching(&rules.allow, false).is_some() {
                return Decision::Allow;
            }
            if policy.mode == PermissionMode::AcceptEdits && inside {
                return Decision::Allow;
            }
            Decision::Ask {
                reason: if inside {
                    format!("edit {subject}")
                } else {
                    format!("edit {subject}, which is outside the workspace")
                },
            }
        }
        ToolKind::Execute => {
            if policy.mode == PermissionMode::Plan {
                return plan_denied(&format!("running `{}`", request.tool));
            }
            if let Some(rule) = matching(&rules.ask, true) {
                return Decision::Ask {
                    reason: format!("the rule `{rule}` asks before `{}`", request.tool),
                };
            }
            if policy.mode == PermissionMode::Bypass || matching(&rules.allow, false).is_some() {
                return Decision::Allow;
            }
            Decision::Ask {
                reason: format!("run `{}`", request.tool),
            }
        }
    }
}

/// Result of matching a deny or ask rule against a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Match {
    No,
    /// A computed word or unknown cwd could make it match.
    Maybe,
    Yes,
}

/// Context of one command decision.
struct Ctx<'a> {
    policy: &'a PermissionPolicy,
    root: &'a Path,
    cwd: &'a Path,
}

impl Ctx<'_> {
    fn command_rules<'r>(
        &self,
        list: &'r [PermissionRule],
    ) -> impl Iterator<Item = &'r PermissionRule> {
        list.iter().filter(|r| is_command_tool(&r.tool))
    }

    /// Absolute candidates for the working directory of `cmd`.
    fn cwds(&self, cmd: &SimpleCommand) -> Option<Vec<PathBuf>> {
        match &cmd.cwd {
            Cwd::Unknown => None,
            Cwd::Possible(list) => Some(
                list.iter()
                    .map(|p| normalize_path(&self.cwd.join(p)))
                    .collect(),
            ),
        }
    }
}

/// Short option cluster (`-rf`): its letters.
fn short_cluster(t: &str) -> Option<&str> {
    let rest = t.strip_prefix('-')?;
    (!rest.is_empty() && !rest.starts_with('-') && rest.chars().all(|c| c.is_ascii_alphabetic()))
        .then_some(rest)
}

fn looks_like_path(t: &str) -> bool {
    t.contains('/') || t == "." || t == ".." || t.starts_with('~')
}

/// Does the rule word `r` appear among the command words `words`? (`Maybe` when computed words
/// or an unknown cwd could hide it.)
fn word_appears(ctx: &Ctx<'_>, cmd: &SimpleCommand, r: &str, words: &[Word]) -> Match {
    if let Some(letters) = short_cluster(r) {
        let present = |c: char| {
            words.iter().any(|w| {
                w.as_literal()
                    .and_then(short_cluster)
                    .is_some_and(|l| l.contains(c))
            })
        };
        return if letters.chars().all(present) {
            Match::Yes
        } else {
            Match::No
        };
    }
    if r.starts_with("--") {
        let hit = words.iter().any(|w| {
            w.as_literal().is_some_and(|t| {
                t == r || (!r.contains('=') && t.split_once('=').is_some_and(|(n, _)| n == r))
            })
        });
        return if hit { Match::Yes } else { Match::No };
    }
    if words.iter().any(|w| !w.dynamic && !w.glob && w.text == r) {
        return Match::Yes;
    }
    // Path-aware comparison: `rm -rf .` after `cd /` is `rm -rf /`.
    let rule_is_path = looks_like_path(r);
    let mut maybe = false;
    let cwds = ctx.cwds(cmd);
    let rule_path = if rule_is_path {
        place(r, r.starts_with('~'), ctx.root, ctx.root).map(|p| p.abs)
    } else {
        None
    };
    for w in words {
        if w.dynamic {
            continue;
        }
        if !(rule_is_path || looks_like_path(&w.text)) || w.text.starts_with('-') {
            continue;
        }
        let Some(rule_path) = rule_path.as_ref() else {
            continue;
        };
        // A glob matches when its fixed prefix is the rule's path (`/*` for `/`).
        let text = if w.glob {
            let cut = w.text.find(['*', '?', '[']).unwrap_or(w.text.len());
            &w.text[..cut]
        } else {
            w.text.as_str()
        };
        let text = if text.is_empty() { "." } else { text };
        if text.starts_with('/') || w.tilde {
            if place(text, w.tilde, ctx.root, ctx.root).is_some_and(|p| &p.abs == rule_path) {
                return Match::Yes;
            }
            continue;
        }
        match &cwds {
            None => maybe = true,
            Some(list) => {
                for base in list {
                    if place(text, false, base, ctx.root).is_some_and(|p| &p.abs == rule_path) {
                        return Match::Yes;
                    }
                }
            }
        }
    }
    if maybe { Match::Maybe } else { Match::No }
}

/// Order-insensitive match of a deny/ask rule against one word list (starting at the program).
fn restrictive_match_words(
    ctx: &Ctx<'_>,
    cmd: &SimpleCommand,
    rule: &[String],
    words: &[Word],
) -> Match {
    let Some(first) = words.first() else {
        return Match::No;
    };
    let Some(name) = first.as_literal() else {
        return Match::No;
    };
    if basename(name) != basename(&rule[0]) {
        return Match::No;
    }
    if rule.len() == 1 {
        return Match::Yes;
    }
    let args = &words[1..];
    let has_dynamic = args.iter().any(|w| w.dynamic) || cmd.dynamic_tail;
    let mut rest: &[String] = &rule[1..];
    if SUBCOMMAND_TOOLS.contains(&basename(name)) && !rule[1].starts_with('-') {
        let sub = args.iter().find(|w| !w.text.starts_with('-') || w.dynamic);
        match sub {
            Some(w) if w.dynamic => return Match::Maybe,
            Some(w) if w.text == rule[1] => rest = &rule[2..],
            _ => {
                return if has_dynamic { Match::Maybe } else { Match::No };
            }
        }
    }
    let mut result = Match::Yes;
    for r in rest {
        match word_appears(ctx, cmd, r, args) {
            Match::Yes => {}
            Match::Maybe => result = Match::Maybe,
            Match::No if has_dynamic => result = Match::Maybe,
            Match::No => return Match::No,
        }
    }
    result
}

/// Matches a deny or ask rule against a command: the command as it runs, as written (with its
/// wrappers), and — for programs that may run their arguments — every later word that could be
/// the start of a command.
fn restrictive_match(
    ctx: &Ctx<'_>,
    rule: &PermissionRule,
    cmd: &SimpleCommand,
    facts: &Facts,
) -> Match {
    let words = match &rule.pattern {
        RulePattern::Any => return Match::Yes,
        RulePattern::Path { .. } => return Match::No,
        RulePattern::Command { words, .. } => words,
    };
    let mut best = Match::No;
    for candidate in [&cmd.argv, &cmd.raw_argv] {
        match restrictive_match_words(ctx, cmd, words, candidate) {
            Match::Yes => return Match::Yes,
            Match::Maybe => best = Match::Maybe,
            Match::No => {}
        }
    }
    if cmd.kind == CommandKind::Program && (!facts.known || cmd.runner_unresolved) {
        // The program may run a command given in its arguments (`rtk git reset --hard`,
        // `watch rm x`): a rule's command appearing later counts, fully for runners whose
        // options we could not read, as a possibility otherwise.
        let target = basename(&words[0]);
        for start in 1..cmd.argv.len() {
            let w = &cmd.argv[start];
            if w.as_literal().is_some_and(|t| basename(t) == target) {
                match restrictive_match_words(ctx, cmd, words, &cmd.argv[start..]) {
                    Match::Yes if cmd.runner_unresolved => return Match::Yes,
                    Match::Yes | Match::Maybe => best = Match::Maybe,
                    Match::No => {}
                }
            }
        }
    }
    best
}

/// Length of the prefix of `argv` an allow rule matches (`None`: no match). An allow rule must
/// match the command as it runs, word for word.
fn allow_match(rule: &PermissionRule, cmd: &SimpleCommand) -> Option<usize> {
    let RulePattern::Command { words, prefix } = &rule.pattern else {
        return None;
    };
    let argv = &cmd.argv;
    if argv.len() < words.len() || (!prefix && argv.len() != words.len()) {
        return None;
    }
    let first = argv[0].as_literal()?;
    let name_ok = first == words[0]
        || (!words[0].contains('/')
            && super::command::classify::is_system_program(first)
            && basename(first) == words[0]);
    if !name_ok {
        return None;
    }
    for (w, r) in argv.iter().zip(words).skip(1) {
        if w.as_literal()? != r {
            return None;
        }
    }
    if !prefix && cmd.dynamic_tail {
        return None;
    }
    Some(words.len())
}

/// Per-command outcome.
#[derive(Debug)]
enum Outcome {
    Allow,
    Ask(String),
    Deny(String),
}

/// Where a redirection or `tee` writes.
enum WritePlace {
    Harmless,
    Edit(Placed),
    Deny(String),
    Unknown(String),
}

fn is_harmless_device(path: &Path) -> bool {
    let s = path.to_string_lossy();
    matches!(
        s.as_ref(),
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty" | "/dev/zero"
    ) || s
        .strip_prefix("/dev/fd/")
        .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
}

fn in_temp_dir(path: &Path) -> bool {
    let temp = normalize_path(&std::env::temp_dir());
    path.starts_with(&temp) || path.starts_with("/tmp") || path.starts_with("/var/tmp")
}

fn place_write(ctx: &Ctx<'_>, cmd: &SimpleCommand, target: &Word) -> WritePlace {
    if target.dynamic || target.glob {
        return WritePlace::Unknown(format!(
            "writes to `{}`, a path computed at run time",
            target.text
        ));
    }
    let candidates: Vec<PathBuf> = if target.tilde || target.text.starts_with('/') {
        vec![ctx.root.to_path_buf()]
    } else {
        match ctx.cwds(cmd) {
            Some(list) => list,
            None => {
                return WritePlace::Unknown(format!(
                    "writes to `{}` after a `cd` to a directory computed at run time",
                    target.text
                ));
            }
        }
    };
    let mut result = WritePlace::Harmless;
    for base in candidates {
        let Some(p) = place(&target.text, target.tilde, &base, ctx.root) else {
            return WritePlace::Unknown(format!(
                "writes to `{}` (home directory unknown)",
                target.text
            ));
        };
        if is_harmless_device(&p.abs) {
            continue;
        }
        if let Some(why) = protected_reason(p.rel.as_deref().unwrap_or(&p.abs)) {
            return WritePlace::Deny(format!("writes to {}: {why}", p.abs.display()));
        }
        if p.rel.is_none() && !in_temp_dir(&p.abs) {
            return WritePlace::Deny(format!(
                "writes to {}, which is outside the workspace",
                p.abs.display()
            ));
        }
        result = WritePlace::Edit(p);
    }
    result
}

/// The edit decision for a file written by a command (a redirection or `tee`).
fn decide_write(ctx: &Ctx<'_>, placed: &Placed) -> Outcome {
    let policy = ctx.policy;
    let shown = placed.rel.as_ref().map_or_else(
        || placed.abs.display().to_string(),
        |r| r.display().to_string(),
    );
    let edit_rules = |list: &[PermissionRule], restrictive: bool| {
        list.iter()
            .filter(|r| r.applies_to("edit_file", ToolKind::Edit))
            .find(|r| path_rule_matches(r, placed, restrictive))
            .map(ToString::to_string)
    };
    if let Some(rule) = edit_rules(&policy.rules.deny, true) {
        return Outcome::Deny(format!("writing {shown} is denied by the rule `{rule}`"));
    }
    if policy.mode == PermissionMode::Plan {
        return Outcome::Deny(format!(
            "plan mode is read-only: the command writes {shown}"
        ));
    }
    if let Some(rule) = edit_rules(&policy.rules.ask, true) {
        return Outcome::Ask(format!("the rule `{rule}` asks before writing {shown}"));
    }
    if policy.mode == PermissionMode::Bypass
        || (policy.mode == PermissionMode::AcceptEdits && placed.rel.is_some())
        || edit_rules(&policy.rules.allow, false).is_some()
    {
        return Outcome::Allow;
    }
    Outcome::Ask(format!("the command writes {shown}"))
}

fn describe(cmd: &SimpleCommand) -> String {
    let words: Vec<&str> = cmd.argv.iter().map(|w| w.text.as_str()).collect();
    if words.is_empty() {
        cmd.text.clone()
    } else {
        words.join(" ")
    }
}

/// Decides one simple command.
fn decide_simple(ctx: &Ctx<'_>, cmd: &SimpleCommand) -> Outcome {
    let policy = ctx.policy;
    let rules = &policy.rules;
    let mut facts = classify(cmd);
    let shown = describe(cmd);

    // 1. Deny rules, in every mode.
    let mut asks: Vec<String> = Vec::new();
    for rule in ctx.command_rules(&rules.deny) {
        match restrictive_match(ctx, rule, cmd, &facts) {
            Match::Yes => {
                return Outcome::Deny(format!("`{shown}` is denied by the rule `{rule}`"));
            }
            Match::Maybe => asks.push(format!(
                "`{shown}` has parts computed at run time that could match the deny rule `{rule}`"
            )),
            Match::No => {}
        }
    }

    // 2. Files it reads: read_file deny rules, and reads outside the workspace.
    let cwds = ctx.cwds(cmd);
    for (index, word) in facts.reads.clone() {
        if word.dynamic {
            continue;
        }
        let bases: Vec<PathBuf> = if word.tilde || word.text.starts_with('/') {
            vec![ctx.root.to_path_buf()]
        } else {
            match &cwds {
                Some(list) => list.clone(),
                None => {
                    facts.concerns.push(super::command::classify::Concern {
                        word: index,
                        kind: ConcernKind::OutsideRead,
                        reason: format!("reads `{}` after a `cd` computed at run time", word.text),
                    });
                    continue;
                }
            }
        };
        for base in bases {
            let Some(p) = place(&word.text, word.tilde, &base, ctx.root) else {
                continue;
            };
            let denied = rules
                .deny
                .iter()
                .filter(|r| r.applies_to("read_file", ToolKind::Read))
                .find(|r| !matches!(r.pattern, RulePattern::Any) && path_rule_matches(r, &p, true));
            if let Some(rule) = denied {
                return Outcome::Deny(format!(
                    "`{shown}` reads {}, denied by the rule `{rule}`",
                    word.text
                ));
            }
            if p.rel.is_none() && !is_harmless_device(&p.abs) {
                facts.concerns.push(super::command::classify::Concern {
                    word: index,
                    kind: ConcernKind::OutsideRead,
                    reason: format!("reads {}, which is outside the workspace", p.abs.display()),
                });
            }
        }
    }

    // A program from the workspace is opaque: the agent can rewrite it.
    if let Some(program) = cmd.argv.first().and_then(Word::as_literal)
        && program.contains('/')
        && !super::command::classify::is_system_program(program)
    {
        let inside = cwds.as_ref().is_none_or(|list| {
            list.iter()
                .any(|base| place(program, false, base, ctx.root).is_some_and(|p| p.rel.is_some()))
        });
        if inside {
            facts.concerns.push(super::command::classify::Concern {
                word: None,
                kind: ConcernKind::WorkspaceProgram,
                reason: format!(
                    "`{program}` is a program in the workspace: its contents are not analysed \
                     and can be changed by the agent"
                ),
            });
        }
    }

    // 3. Writes: redirections and `tee` files.
    let mut targets: Vec<&Word> = cmd
        .redirections
        .iter()
        .filter(|r| r.kind.writes())
        .filter_map(|r| r.target.as_ref())
        .collect();
    targets.extend(facts.writes.iter());
    for target in targets {
        match place_write(ctx, cmd, target) {
            WritePlace::Harmless => {}
            WritePlace::Deny(reason) => return Outcome::Deny(reason),
            WritePlace::Unknown(reason) => {
                if policy.mode == PermissionMode::Plan {
                    return Outcome::Deny(format!("plan mode is read-only: the command {reason}"));
                }
                if policy.mode != PermissionMode::Bypass {
                    asks.push(reason)
                }
            }
            WritePlace::Edit(placed) => match decide_write(ctx, &placed) {
                Outcome::Allow => {}
                Outcome::Ask(reason) => asks.push(reason),
                Outcome::Deny(reason) => return Outcome::Deny(reason),
            },
        }
    }

    // Files the command modifies as its main effect (`cp` destinations, `sed -i`, `git config`,
    // …): protected paths, paths outside the workspace and edit deny rules refuse it; whether the
    // command may run at all stays with the command rules.
    for target in &facts.modified {
        match place_write(ctx, cmd, target) {
            WritePlace::Deny(reason) => return Outcome::Deny(reason),
            WritePlace::Edit(placed) => {
                if let Outcome::Deny(reason) = decide_write(ctx, &placed)
                    && !reason.starts_with("plan mode")
                {
                    return Outcome::Deny(reason);
                }
            }
            WritePlace::Harmless | WritePlace::Unknown(_) => {}
        }
    }

    // 4. Ask rules.
    for rule in ctx.command_rules(&rules.ask) {
        if restrictive_match(ctx, rule, cmd, &facts) != Match::No {
            asks.push(format!("the rule `{rule}` asks before `{shown}`"));
        }
    }

    if policy.mode == PermissionMode::Bypass {
        return if asks.is_empty() {
            Outcome::Allow
        } else {
            Outcome::Ask(asks.join("; "))
        };
    }

    // 5. Allowed by the built-in read-only list or an allow rule, with every concern covered.
    let builtin = rules.builtin_read_only && facts.read_only && facts.concerns.is_empty();
    if policy.mode == PermissionMode::Plan {
        if builtin && asks.is_empty() {
            return Outcome::Allow;
        }
        return Outcome::Deny(format!(
            "plan mode is read-only: `{shown}` is not a read-only command"
        ));
    }
    if !asks.is_empty() {
        return Outcome::Ask(asks.join("; "));
    }
    if builtin {
        return Outcome::Allow;
    }
    let mut best_reason: Option<String> = None;
    for rule in ctx.command_rules(&rules.allow) {
        let uncovered: Vec<&super::command::classify::Concern> = match &rule.pattern {
            RulePattern::Any => facts
                .concerns
                .iter()
                .filter(|c| {
                    matches!(
                        c.kind,
                        ConcernKind::OutsideRead | ConcernKind::Elevated | ConcernKind::HardLink
                    )
                })
                .collect(),
            _ => match allow_match(rule, cmd) {
                None => continue,
                Some(len) => facts
                    .concerns
                    .iter()
                    .filter(|c| c.word.is_none_or(|w| w >= len))
                    .collect(),
            },
        };
        if uncovered.is_empty() {
            return Outcome::Allow;
        }
        best_reason.get_or_insert_with(|| {
            format!(
                "the rule `{rule}` does not cover `{shown}`: {}",
                uncovered
                    .iter()
                    .map(|c| c.reason.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        });
    }
    if let Some(reason) = best_reason {
        return Outcome::Ask(reason);
    }
    let why = facts
        .concerns
        .iter()
        .map(|c| c.reason.as_str())
        .collect::<Vec<_>>();
    if why.is_empty() {
        Outcome::Ask(format!("no rule allows `{shown}`"))
    } else {
        Outcome::Ask(format!("`{shown}`: {}", why.join("; ")))
    }
}

/// Splits text the way the shell would before running it — quotes removed, `$'…'` decoded,
/// backslash-newline joined, operators (`;&|()<>` and backticks) separating words — for the
/// fail-closed scan of text the parser could not read. Words that themselves look like
/// command strings (`bash -c '…'` arguments) are split again, up to 4 levels.
fn scan_words(text: &str, depth: usize, out: &mut Vec<String>) {
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    let flush = |cur: &mut String, words: &mut Vec<String>| {
        if !cur.is_empty() {
            words.push(std::mem::take(cur));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(x) => cur.push(x),
            },
            '\'' => {
                for x in chars.by_ref() {
                    if x == '\'' {
                        break;
                    }
                    cur.push(x);
                }
            }
            '"' => {
                while let Some(x) = chars.next() {
                    match x {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some('\n') | None => {}
                            Some(y @ ('"' | '\\' | '$' | '`')) => cur.push(y),
                            Some(y) => {
                                cur.push('\\');
                                cur.push(y);
                            }
                        },
                        other => cur.push(other),
                    }
                }
            }
            '$' if chars.peek() == Some(&'\'') => {
                chars.next();
                let mut body = String::new();
                while let Some(x) = chars.next() {
                    match x {
                        '\'' => break,
                        '\\' => {
                            body.push('\\');
                            if let Some(y) = chars.next() {
                                body.push(y);
                            }
                        }
                        other => body.push(other),
                    }
                }
                cur.push_str(&super::command::decode_ansi_c(&body));
            }
            '$' if chars.peek() == Some(&'"') => {}
            c if c.is_whitespace() || ";&|()<>`{}".contains(c) => flush(&mut cur, &mut words),
            other => cur.push(other),
        }
    }
    flush(&mut cur, &mut words);
    for w in words {
        if depth < 4
            && w.chars()
                .any(|c| c.is_whitespace() || ";&|()<>`'\"\\$".contains(c))
        {
            scan_words(&w, depth + 1, out);
        }
        out.push(w);
    }
}

/// Command-like tokens of `text` for the fail-closed scan: plain splitting plus
/// [`scan_words`], whose words are split again at punctuation (so `alias.x=!rm` and
/// `system("rm` yield `rm`).
fn tokens(text: &str) -> Vec<String> {
    let plain = |t: &str| -> Vec<String> {
        t.split(|c: char| c.is_whitespace() || ";&|()<>{}$`'\"\\=!,[]".contains(c))
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect()
    };
    let mut all = plain(text);
    let mut words = Vec::new();
    scan_words(text, 0, &mut words);
    for w in words {
        all.extend(plain(&w));
        all.push(w);
    }
    // Escapes that some layer may decode later (`$'\x72\x6d'` nested in quotes that the scan
    // above cannot unwind, `printf '\162\155'`): decode every `\x..`/`\NNN` sequence of the
    // whole text and split again. More tokens only make the scan stricter.
    if text.contains('\\') {
        let decoded = super::command::decode_ansi_c(&text.replace("\\\\", "\\"));
        all.extend(plain(&decoded));
    }
    all
}

/// The first deny rule for commands whose program name appears anywhere in `text` (any bare
/// `run_command` deny rule matches everything).
fn deny_could_appear(policy: &PermissionPolicy, text: &str) -> Option<String> {
    let toks = tokens(text);
    for rule in policy
        .rules
        .deny
        .iter()
        .filter(|r| is_command_tool(&r.tool))
    {
        match &rule.pattern {
            RulePattern::Any => return Some(rule.to_string()),
            RulePattern::Command { words, .. } => {
                let target = basename(&words[0]);
                if toks.iter().any(|t| basename(t) == target) {
                    return Some(rule.to_string());
                }
            }
            RulePattern::Path { .. } => {}
        }
    }
    None
}

fn decide_command(policy: &PermissionPolicy, request: &PermissionRequest<'_>) -> Decision {
    let command = request.subject.unwrap_or("");
    let analysis = analyze_command(command);
    decide_analysis(policy, request, command, &analysis)
}

/// The decision for an analysed command line.
fn decide_analysis(
    policy: &PermissionPolicy,
    request: &PermissionRequest<'_>,
    command: &str,
    analysis: &CommandAnalysis,
) -> Decision {
    let ctx = Ctx {
        policy,
        root: request.workspace_root,
        cwd: request.cwd,
    };
    let mut asks: Vec<String> = Vec::new();
    let mut plan_denial: Option<String> = None;

    for cmd in &analysis.commands {
        match decide_simple(&ctx, cmd) {
            Outcome::Allow => {}
            Outcome::Ask(reason) => asks.push(reason),
            Outcome::Deny(reason) => {
                if policy.mode == PermissionMode::Plan && reason.starts_with("plan mode") {
                    plan_denial.get_or_insert(reason);
                } else {
                    return Decision::Deny { reason };
                }
            }
        }
    }

    if analysis.over_cap {
        if let Some(rule) = deny_could_appear(policy, command) {
            return Decision::Deny {
                reason: format!(
                    "the command is too large to analyse (over {} simple commands or {} bytes) \
                     and may run something the rule `{rule}` denies",
                    super::command::MAX_SIMPLE_COMMANDS,
                    super::command::MAX_COMMAND_BYTES
                ),
            };
        }
        if policy.mode == PermissionMode::Plan {
            return plan_denied("a command too large to analyse");
        }
        return Decision::Ask {
            reason: format!(
                "the command is too large to analyse (over {} simple commands); review it whole",
                super::command::MAX_SIMPLE_COMMANDS
            ),
        };
    }

    for part in &analysis.opaque {
        if let Some(rule) = deny_could_appear(policy, &part.text) {
            return Decision::Deny {
                reason: format!(
                    "`{}` cannot be analysed ({}) and may run something the rule `{rule}` denies",
                    part.text, part.reason
                ),
            };
        }
    }
    if policy.mode == PermissionMode::Plan {
        if let Some(reason) = plan_denial {
            return Decision::Deny { reason };
        }
        if let Some(part) = analysis.opaque.first() {
            return plan_denied(&format!("`{}` ({})", part.text, part.reason));
        }
    }
    // Opaque parts ask, unless the user approved every command (a bare `run_command` allow
    // rule, or bypass mode) and no deny rule for commands exists that they could hide.
    let bare_allow = policy
        .rules
        .allow
        .iter()
        .any(|r| is_command_tool(&r.tool) && matches!(r.pattern, RulePattern::Any));
    let command_denies = policy.rules.deny.iter().any(|r| is_command_tool(&r.tool));
    if command_denies || !(policy.mode == PermissionMode::Bypass || bare_allow) {
        // A code runner's own command is decided like any other; its hidden code matters only
        // when a deny rule could be hiding in it.
        for part in analysis
            .opaque
            .iter()
            .filter(|p| command_denies || !p.code_runner)
        {
            let hint = if command_denies {
                " (it could hide a command a deny rule refuses)"
            } else {
                ""
            };
            asks.push(format!(
                "`{}` cannot be analysed: {}{hint}",
                part.text, part.reason
            ));
        }
    }
    if policy.mode != PermissionMode::Bypass {
        for warning in &analysis.warnings {
            asks.push(format!("warning: {warning}"));
        }
    }
    if analysis.commands.is_empty()
        && analysis.opaque.is_empty()
        && policy.mode != PermissionMode::Bypass
    {
        // Nothing runs (empty or comment-only command): harmless.
        return if asks.is_empty() {
            Decision::Allow
        } else {
            Decision::Ask {
                reason: asks.join("; "),
            }
        };
    }
    if asks.is_empty() {
        Decision::Allow
    } else {
        asks.dedup();
        Decision::Ask {
            reason: asks.join("; "),
        }
    }
}
