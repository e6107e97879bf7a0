//! Search tools: [`Glob`] (find files by name pattern) and [`Grep`] (search file contents),
//! both built on ripgrep's crates (`ignore`, `globset`, `grep-regex`, `grep-searcher`).
//!
//! Walks respect `.gitignore`, `.ignore` and `.git/info/exclude`, skip `.git`, and never follow
//! symbolic links, so nothing outside the workspace is searched or reported. The search root
//! itself goes through [`crate::sandbox::resolve`].

use super::files::{parse_args, path_subject, schema_of};
use super::*;
use crate::sandbox::{self, Access};
use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use ignore::WalkBuilder;
use ignore::overrides::OverrideBuilder;
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::SystemTime;

/// Most files `glob` lists.
pub const GLOB_CAP: usize = 500;
/// Default and largest number of matching lines `grep` returns.
pub const GREP_DEFAULT_RESULTS: usize = 200;
/// Largest accepted `max_results` of `grep`.
pub const GREP_MAX_RESULTS: usize = 2000;
/// Longest matching line `grep` shows, in characters.
pub const GREP_LINE_CHARS: usize = 500;

/// A gitignore-aware walker rooted at `root` that shows hidden files, skips `.git` and does
/// not follow symbolic links. Entries come sorted by file name.
///
/// Ignore rules are ripgrep's: `.ignore` files always; `.gitignore`, `.git/info/exclude` and
/// the user's global git excludes inside a git repository (or worktree), from the repository
/// root down — never from directories above it.
pub(crate) fn walker(root: &Path) -> WalkBuilder {
    let mut b = WalkBuilder::new(root);
    b.hidden(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| e.file_name() != ".git");
    b
}

/// Resolves the search root of a call (default `.`): it must exist.
fn search_root(
    ctx: &ToolContext,
    requested: Option<&str>,
) -> Result<(sandbox::ResolvedPath, PathBuf), ToolError> {
    let requested = requested.unwrap_or(".");
    let resolved = sandbox::resolve(&ctx.workspace_root, &ctx.cwd, requested, Access::Read)?;
    if !resolved.physical.exists() {
        return Err(ToolError::new(format!(
            "path not found: `{requested}`. Use list_dir to see what exists"
        )));
    }
    let root = std::fs::canonicalize(&ctx.workspace_root)
        .map_err(|e| ToolError::fatal(format!("workspace root cannot be resolved: {e}")))?;
    Ok((resolved, root))
}

fn relative_display(path: &Path, root: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

// ---------------------------------------------------------------------------------------------

/// Arguments of `glob`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// Glob pattern, e.g. `**/*.rs`, `src/**/mod.rs`, `*.{toml,md}`. `*` does not cross `/`;
    /// `**` does. A pattern without `/` matches file names at any depth.
    pub pattern: String,
    /// Directory to search (default: the current directory).
    #[serde(default)]
    pub path: Option<String>,
}

/// `glob`: files whose path matches a glob pattern, newest first.
pub struct Glob;

#[async_trait::async_trait]
impl Tool for Glob {
    fn name(&self) -> &'static str {
        "glob"
    }
    fn description(&self) -> &'static str {
        "Find files by name pattern (e.g. `**/*.rs`, `src/**/test_*.py`, `*.md`) under a \
         directory of the workspace; files ignored by .gitignore are skipped. A pattern with \
         `/` is matched against the path relative to the searched directory, one without `/` \
         against file names at any depth. Returns matching file paths relative to the \
         workspace, most recently modified first, at most 500 (says how many were omitted)."
    }
    fn input_schema(&self) -> Value {
        schema_of::<GlobArgs>()
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }
    fn permission_subject(&self, input: &Value) -> Option<String> {
        path_subject(input)
    }
    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: GlobArgs = parse_args("glob", input, r#"{"pattern": "**/*.rs", "path": "src"}"#)?;
        let ctx = ctx.clone();
        tokio::task::spawn_blocking(move || glob(&args, &ctx))
            .await
            .map_err(|e| ToolError::new(format!("glob failed: {e}")))?
    }
}

fn glob(args: &GlobArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let matcher = globset::GlobBuilder::new(&args.pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| ToolError::new(format!("invalid glob pattern `{}`: {e}", args.pattern)))?
        .compile_matcher();
    let by_name = !args.pattern.contains('/');
    let (resolved, root) = search_root(ctx, args.path.as_deref())?;
    let mut found: Vec<(SystemTime, String)> = Vec::new();
    for entry in walker(&resolved.physical).build() {
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::new("glob was cancelled"));
        }
        let Ok(entry) = entry else { continue };
        let Some(ft) = entry.file_type() else {
            continue;
        };
        if ft.is_dir() {
            continue;
        }
        let path = entry.path();
        let candidate = if by_name {
            Path::new(entry.file_name())
        } else {
            path.strip_prefix(&resolved.physical).unwrap_or(path)
        };
        if !matcher.is_match(candidate) {
            continue;
        }
        let shown = relative_display(path, &root);
        if ft.is_symlink() {
            // Report a link only when it leads to a file inside the workspace.
            match sandbox::resolve(&root, &root, &shown, Access::Read) {
                Ok(r) if r.physical.is_file() => {}
                _ => continue,
            }
        }
        let mtime = entry
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        found.push((mtime, shown));
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    if found.is_empty() {
        return Ok(ToolOutput::ok(format!(
            "No files match `{}` in `{}`.",
            args.pattern,
            args.path.as_deref().unwrap_or(".")
        )));
    }
    let total = found.len();
    let mut out: String = found
        .iter()
        .take(GLOB_CAP)
        .map(|(_, p)| format!("{p}\n"))
        .collect();
    if total > GLOB_CAP {
        out.push_str(&format!(
            "[… {} more files omitted; use a narrower pattern or path]\n",
            total - GLOB_CAP
        ));
    }
    Ok(ToolOutput::ok(out))
}

// ---------------------------------------------------------------------------------------------

/// Arguments of `grep`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Regular expression (Rust `regex` syntax, as ripgrep). Always a pattern, never an
    /// option, even when it starts with `-`.
    pub pattern: String,
    /// File or directory to search (default: the current directory).
    #[serde(default)]
    pub path: Option<String>,
    /// Only search files whose path matches this glob, e.g. `*.rs` or `src/**/*.ts`.
    #[serde(default)]
    pub glob: Option<String>,
    /// Match without regard to case (default false).
    #[serde(default)]
    pub case_insensitive: bool,
    /// Most matching lines to return (default 200, at most 2000).
    #[serde(default)]
    pub max_results: Option<usize>,
}

/// `grep`: lines matching a regular expression, as `path:line:content`.
pub struct Grep;

#[async_trait::async_trait]
impl Tool for Grep {
    fn name(&self) -> &'static str {
        "grep"
    }
    fn description(&self) -> &'static str {
        "Search file contents in the workspace for a regular expression (ripgrep syntax), \
         skipping files ignored by .gitignore and binary files. Use it to find definitions, \
         usages and strings; narrow it with `path` and `glob` (e.g. `*.rs`). Returns one line \
         per match as `path:line:content` (paths relative to the workspace), at most \
         max_results (default 200), and says how many more matches were omitted."
    }
    fn input_schema(&self) -> Value {
        schema_of::<GrepArgs>()
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }
    fn permission_subject(&self, input: &Value) -> Option<String> {
        path_subject(input)
    }
    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: GrepArgs = parse_args(
            "grep",
            input,
            r#"{"pattern": "fn main", "path": "src", "glob": "*.rs", "case_insensitive": false, "max_results": 200}"#,
        )?;
        let ctx = ctx.clone();
        tokio::task::spawn_blocking(move || grep(&args, &ctx))
            .await
            .map_err(|e| ToolError::new(format!("grep failed: {e}")))?
    }
}

fn grep(args: &GrepArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    if args.pattern.is_empty() {
        return Err(ToolError::new(
            "pattern is empty; give a regular expression",
        ));
    }
    let max_results = args
        .max_results
        .unwrap_or(GREP_DEFAULT_RESULTS)
        .clamp(1, GREP_MAX_RESULTS);
    // The pattern goes straight to the regex engine: there is no command line, so a pattern
    // such as `--pre=x.sh` is only ever text to search for.
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(args.case_insensitive)
        .line_terminator(Some(b'\n'))
        .build(&args.pattern)
        .map_err(|e| {
            ToolError::new(format!(
                "invalid regular expression `{}`: {e}. Escape special characters such as \
                 `(`, `[`, `{{`, `.` and `*` with `\\` to search for them literally",
                args.pattern
            ))
        })?;
    let (resolved, root) = search_root(ctx, args.path.as_deref())?;
    let mut builder = walker(&resolved.physical);
    if let Some(g) = &args.glob {
        let base = if resolved.physical.is_dir() {
            resolved.physical.clone()
        } else {
            resolved
                .physical
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| root.clone())
        };
        let g = strip_search_path_prefix(g, args.path.as_deref());
        let mut ob = OverrideBuilder::new(base);
        ob.add(g)
            .map_err(|e| ToolError::new(format!("invalid glob `{g}`: {e}")))?;
        let overrides = ob
            .build()
            .map_err(|e| ToolError::new(format!("invalid glob `{g}`: {e}")))?;
        builder.overrides(overrides);
    }
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .build();
    let budget = ctx.max_output_chars.max(1000);
    let mut out = String::new();
    let mut shown = 0usize;
    let mut total = 0usize;
    for entry in builder.build() {
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::new("grep was cancelled"));
        }
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|ft| ft.is_file()) {
            continue;
        }
        let path = entry.path();
        let shown_path = relative_display(path, &root);
        let sink = Lossy(|line_number: u64, line: &str| {
            total += 1;
            if shown < max_results {
                let line = line.trim_end_matches(['\n', '\r']);
                let chars = line.chars().count();
                let content = if chars > GREP_LINE_CHARS {
                    let cut: String = line.chars().take(GREP_LINE_CHARS).collect();
                    format!("{cut} […line cut: {chars} characters]")
                } else {
                    line.to_string()
                };
                let entry = format!("{shown_path}:{line_number}:{content}\n");
                if out.is_empty() || out.len() + entry.len() <= budget {
                    out.push_str(&entry);
                    shown += 1;
                } else {
                    shown = max_results;
                }
            }
            Ok(true)
        });
        // Unreadable files (permissions, races) are skipped like ripgrep does.
        let _ = searcher.search_path(&matcher, path, sink);
    }
    if total == 0 {
        return Ok(ToolOutput::ok(format!(
            "No matches for `{}` in `{}`.",
            args.pattern,
            args.path.as_deref().unwrap_or(".")
        )));
    }
    let listed = out.lines().count();
    if total > listed {
        out.push_str(&format!(
            "[… {} more matches omitted; narrow the pattern, path or glob]\n",
            total - listed
        ));
    }
    Ok(ToolOutput::ok(out))
}

/// The glob of `grep` is matched relative to the searched directory. Models often write it
/// relative to the working directory and repeat the path (`path: "src"`, `glob: "src/**/*.rs"`),
/// which would match nothing and report a false "No matches"; the repeated leading path is
/// dropped (`**/*.rs`).
fn strip_search_path_prefix<'a>(glob: &'a str, path: Option<&str>) -> &'a str {
    let Some(path) = path else { return glob };
    let path = path.trim_start_matches("./").trim_end_matches('/');
    if path.is_empty() || path == "." {
        return glob;
    }
    glob.trim_start_matches("./")
        .strip_prefix(path)
        .and_then(|rest| rest.strip_prefix('/'))
        .filter(|rest| !rest.is_empty())
        .unwrap_or(glob)
}
