//! Search tools: [`glob`] (find files by name pattern) and [`grep`] (search file contents),
//! both built on ripgrep's crates (`ignore`, `globset`, `grep-regex`, `grep-searcher`).
//!
//! Walks respect `.gitignore`, `.ignore` and `.git/info/exclude`, skip `.git`, and never follow
//! symbolic links, so nothing outside the workspace is searched or reported. The search root
//! itself goes through [`crate::sandbox::resolve`].

use super::catalog::{GlobArgs, GrepArgs};
use super::*;
use crate::permissions::read_denied;
use crate::sandbox::{self, Access};
use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use ignore::WalkBuilder;
use ignore::overrides::OverrideBuilder;
use std::time::SystemTime;

/// Most files `glob` lists.
pub const GLOB_CAP: usize = 500;
/// Default and largest number of matching lines `grep` returns.
pub const GREP_DEFAULT_RESULTS: usize = 200;
/// Largest accepted `max_results` of `grep`.
pub const GREP_MAX_RESULTS: usize = 2000;
/// Longest matching line `grep` shows, in characters.
pub const GREP_LINE_CHARS: usize = 500;
/// Most bytes `grep` holds of one file at a time (the longest line it can search, in bytes):
/// past it the file is searched no further and the result says so.
pub const GREP_HEAP_LIMIT: usize = 16 * 1024 * 1024;

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
    let resolved = ctx.resolve(requested, Access::Read)?;
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

/// Carries out a `glob` call: files whose path matches a glob pattern, newest first.
pub fn glob(args: &GlobArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
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
        if !matcher.is_match(candidate) || read_denied(&ctx.read_deny, path, &root) {
            continue;
        }
        let shown = relative_display(path, &root);
        if ft.is_symlink() {
            // Report a link only when it leads to a file inside the workspace.
            match sandbox::resolve_in_roots(&root, &ctx.added_dirs, &root, &shown, Access::Read) {
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

/// Carries out a `grep` call: lines matching a regular expression, as `path:line:content`.
///
/// Compiles the pattern → walks the files (narrowed by `glob`) → collects `path:line:content`
/// lines within the result and size caps → says how many matches were left out.
pub fn grep(args: &GrepArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let matcher = grep_matcher(args)?;
    let max_results = args
        .max_results
        .unwrap_or(GREP_DEFAULT_RESULTS)
        .clamp(1, GREP_MAX_RESULTS);
    let (resolved, root) = search_root(ctx, args.path.as_deref())?;
    let walk = grep_walker(args, &resolved.physical, &root)?;
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .heap_limit(Some(GREP_HEAP_LIMIT))
        .build();
    let mut found = GrepMatches::new(max_results, ctx.max_output_chars.max(1000));
    for entry in walk.build() {
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::new("grep was cancelled"));
        }
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|ft| ft.is_file()) {
            continue;
        }
        let path = entry.path();
        if read_denied(&ctx.read_deny, path, &root) {
            continue;
        }
        let shown_path = relative_display(path, &root);
        // Unreadable files (permissions, races) and what is no longer a regular file (a FIFO
        // put there since the walk) are skipped like ripgrep does.
        let Some(file) = open_regular(path) else {
            continue;
        };
        let sink = Lossy(|line_number: u64, line: &str| {
            found.add(&shown_path, line_number, line);
            Ok(true)
        });
        if let Err(e) = searcher.search_file(&matcher, &file, sink) {
            found.unfinished.push(format!("{shown_path} ({e})"));
        }
    }
    if found.total == 0 {
        let mut none = format!(
            "No matches for `{}` in `{}`.",
            args.pattern,
            args.path.as_deref().unwrap_or(".")
        );
        if !found.unfinished.is_empty() {
            none.push('\n');
            none.push_str(&unfinished_note(&found.unfinished));
        }
        return Ok(ToolOutput::ok(none));
    }
    Ok(ToolOutput::ok(found.finish()))
}

/// `path` opened for reading without following a symbolic link and without blocking (a FIFO
/// opens at once), when what was opened is a regular file.
fn open_regular(path: &Path) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// The pattern, straight to the regex engine: there is no command line, so a pattern such as
/// `--pre=x.sh` is only ever text to search for.
fn grep_matcher(args: &GrepArgs) -> Result<grep_regex::RegexMatcher, ToolError> {
    if args.pattern.is_empty() {
        return Err(ToolError::new(
            "pattern is empty; give a regular expression",
        ));
    }
    RegexMatcherBuilder::new()
        .case_insensitive(args.case_insensitive)
        .line_terminator(Some(b'\n'))
        .build(&args.pattern)
        .map_err(|e| {
            ToolError::new(format!(
                "invalid regular expression `{}`: {e}. Escape special characters such as \
                 `(`, `[`, `{{`, `.` and `*` with `\\` to search for them literally",
                args.pattern
            ))
        })
}

/// The walker over `search_root`, narrowed to the files `args.glob` matches (relative to the
/// searched directory, or to a searched file's directory).
fn grep_walker(args: &GrepArgs, search_root: &Path, root: &Path) -> Result<WalkBuilder, ToolError> {
    let mut builder = walker(search_root);
    let Some(g) = &args.glob else {
        return Ok(builder);
    };
    let base = if search_root.is_dir() {
        search_root.to_path_buf()
    } else {
        search_root
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| root.to_path_buf())
    };
    let g = strip_search_path_prefix(g, args.path.as_deref());
    let invalid = |e: ignore::Error| ToolError::new(format!("invalid glob `{g}`: {e}"));
    let mut ob = OverrideBuilder::new(base);
    ob.add(g).map_err(invalid)?;
    builder.overrides(ob.build().map_err(invalid)?);
    Ok(builder)
}

/// Matching lines collected by `grep`: at most `max_results` lines and about `budget`
/// characters; every match is counted.
struct GrepMatches {
    out: String,
    shown: usize,
    total: usize,
    max_results: usize,
    budget: usize,
    /// Files whose search stopped early (`path (reason)`): a line longer than
    /// [`GREP_HEAP_LIMIT`], a read error.
    unfinished: Vec<String>,
}

impl GrepMatches {
    fn new(max_results: usize, budget: usize) -> Self {
        GrepMatches {
            out: String::new(),
            shown: 0,
            total: 0,
            max_results,
            budget,
            unfinished: Vec::new(),
        }
    }

    /// Counts one match and keeps it as `path:line:content` while within the caps; lines longer
    /// than [`GREP_LINE_CHARS`] are cut with a note.
    fn add(&mut self, path: &str, line_number: u64, line: &str) {
        self.total += 1;
        if self.shown >= self.max_results {
            return;
        }
        let line = line.trim_end_matches(['\n', '\r']);
        let content = match crate::text::clip(line, GREP_LINE_CHARS) {
            (kept, 0) => kept.to_string(),
            (kept, cut) => format!("{kept} […line cut: {} characters]", GREP_LINE_CHARS + cut),
        };
        let entry = format!("{path}:{line_number}:{content}\n");
        if self.out.is_empty() || self.out.len() + entry.len() <= self.budget {
            self.out.push_str(&entry);
            self.shown += 1;
        } else {
            self.shown = self.max_results;
        }
    }

    /// The lines, with a note on how many matches were left out.
    fn finish(mut self) -> String {
        let listed = self.out.lines().count();
        if self.total > listed {
            self.out.push_str(&format!(
                "[… {} more matches omitted; narrow the pattern, path or glob]\n",
                self.total - listed
            ));
        }
        if !self.unfinished.is_empty() {
            self.out.push_str(&unfinished_note(&self.unfinished));
        }
        self.out
    }
}

/// The note on files `grep` did not search to their end (at most five named).
fn unfinished_note(unfinished: &[String]) -> String {
    let named: Vec<&str> = unfinished.iter().take(5).map(String::as_str).collect();
    let others = unfinished.len().saturating_sub(named.len());
    format!(
        "[note: {} file(s) were not searched to their end — a line longer than {} MiB, or a read \
         error: {}{}]\n",
        unfinished.len(),
        GREP_HEAP_LIMIT / (1024 * 1024),
        named.join(", "),
        if others > 0 {
            format!(" and {others} more")
        } else {
            String::new()
        }
    )
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
