//! File tools: [`read_file`], [`write_file`], [`edit_file`], [`list_dir`] (their arguments and
//! descriptions are in [`super::catalog`]).
//!
//! Every path goes through [`crate::sandbox::resolve`] and every file is opened through the
//! sandbox openers, so the bytes read or written are those of the checked physical path.

use super::catalog::{EditFileArgs, ListDirArgs, ReadFileArgs, WriteFileArgs};
use super::*;
use crate::atomic_write;
use crate::sandbox::{self, Access, ResolvedPath, SandboxError};
use std::io::{BufRead, BufReader, Read};

/// Default number of lines `read_file` returns.
pub const DEFAULT_READ_LIMIT: usize = 2000;
/// Longest line `read_file` shows, in characters; longer lines are cut with a marker.
pub const MAX_LINE_CHARS: usize = 2000;
/// Bytes inspected for NUL bytes to decide that a file is binary.
pub const BINARY_SNIFF_BYTES: usize = 8192;
/// Largest file `edit_file` changes, in bytes (64 MiB): it holds the file, the changed copy and
/// a diff in memory at once.
pub const MAX_EDIT_BYTES: u64 = 64 << 20;
/// Most entries `list_dir` returns.
pub const LIST_DIR_CAP: usize = 1000;

/// A sandbox error reworded for a file the tool expected to exist.
pub(crate) fn open_error(requested: &str, e: SandboxError) -> ToolError {
    if e.is_not_found() {
        ToolError::new(format!(
            "file not found: `{requested}`. Use list_dir or glob to find the right path"
        ))
    } else {
        ToolError::from(e)
    }
}

/// Claims `resolved` for this worker when the call runs inside a swarm (by its path relative
/// to the worktree, or its absolute path in an added directory, which every worker shares).
fn claim(ctx: &ToolContext, resolved: &ResolvedPath) -> Result<(), ToolError> {
    let key = match resolved.added_root {
        Some(_) => &resolved.physical,
        None => &resolved.relative,
    };
    if let Some(claims) = &ctx.claims
        && let Err(other) = claims.claim(key)
    {
        return Err(ToolError::new(format!(
            "`{}` is claimed by worker `{other}`, which is editing it; leave this file to that \
             worker and change other files, or report that you need it changed",
            resolved.display()
        )));
    }
    Ok(())
}

/// Reads the whole file at a resolved path through the sandbox opener (at most
/// [`MAX_EDIT_BYTES`]; a larger file is refused before anything is read).
fn read_bytes(
    ctx: &ToolContext,
    requested: &str,
    resolved: &ResolvedPath,
) -> Result<Vec<u8>, ToolError> {
    let mut file =
        sandbox::open_read(&ctx.workspace_root, resolved).map_err(|e| open_error(requested, e))?;
    let meta = file
        .metadata()
        .map_err(|e| ToolError::new(format!("cannot read `{requested}`: {e}")))?;
    if meta.is_dir() {
        return Err(ToolError::new(format!(
            "`{requested}` is a directory, not a file; use list_dir to see its entries"
        )));
    }
    if meta.len() > MAX_EDIT_BYTES {
        return Err(ToolError::new(format!(
            "`{requested}` is {} MiB; edit_file changes files of at most {} MiB. Use \
             run_command with a streaming tool (`sed -i`) for a file this large",
            meta.len() >> 20,
            MAX_EDIT_BYTES >> 20
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes)
        .map_err(|e| ToolError::new(format!("cannot read `{requested}`: {e}")))?;
    Ok(bytes)
}

/// Replaces the content of a resolved path (creating it when `create`) atomically: a
/// temporary file in the same verified directory is written, synced and renamed over it
/// ([`atomic_write::replace_in_dir`]), so a failure (a full disk) leaves the old bytes, or no
/// file, never a partial one. An existing file keeps its mode; it is first opened for writing
/// through the sandbox, so a symlink or a read-only file is refused as before.
fn write_bytes(
    ctx: &ToolContext,
    requested: &str,
    resolved: &ResolvedPath,
    bytes: &[u8],
    create: bool,
) -> Result<(), ToolError> {
    let io = |e: std::io::Error| ToolError::new(atomic_write::describe_write_error(requested, &e));
    let keep = match sandbox::open_write(&ctx.workspace_root, resolved, false) {
        Ok(existing) => {
            let meta = existing.metadata().map_err(io)?;
            if meta.is_dir() {
                return Err(ToolError::new(format!(
                    "`{requested}` is a directory, not a file"
                )));
            }
            Some(atomic_write::Keep::of(&meta))
        }
        Err(SandboxError::Io { kind, .. }) if create && kind == std::io::ErrorKind::NotFound => {
            None
        }
        Err(e) => return Err(open_error(requested, e)),
    };
    let dir = sandbox::open_parent_dir(&ctx.workspace_root, resolved)
        .map_err(|e| open_error(requested, e))?;
    let name = resolved
        .relative
        .file_name()
        .ok_or_else(|| ToolError::new(format!("`{requested}` is not a file path")))?;
    atomic_write::replace_in_dir(&dir, name, bytes, keep).map_err(io)
}

// ---------------------------------------------------------------------------------------------

/// Carries out a `read_file` call: numbered lines of a text file (`cat -n` style).
///
/// The file is streamed: at most [`MAX_LINE_CHARS`] characters of a line are kept (the rest is
/// only counted, see [`next_line`]), so a huge one-line file costs a buffer, not its size. The
/// call stops when its context is cancelled (the turn, or the file tools' time limit).
pub fn read_file(args: &ReadFileArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let (offset, limit) = read_window(args)?;
    let resolved = ctx.resolve(&args.path, Access::Read)?;
    let file = sandbox::open_read(&ctx.workspace_root, &resolved)
        .map_err(|e| open_error(&args.path, e))?;
    let meta = file
        .metadata()
        .map_err(|e| ToolError::new(format!("cannot read `{}`: {e}", args.path)))?;
    if meta.is_dir() {
        return Err(ToolError::new(format!(
            "`{}` is a directory, not a file; use list_dir to see its entries",
            args.path
        )));
    }
    let cannot = |e: std::io::Error| ToolError::new(format!("cannot read `{}`: {e}", args.path));
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let head = reader.fill_buf().map_err(cannot)?;
    if head[..head.len().min(BINARY_SNIFF_BYTES)].contains(&0) {
        return Err(ToolError::new(format!(
            "`{}` is a binary file ({} bytes; NUL bytes in its first 8 KiB); read_file only \
             shows text. Use run_command with a tool such as `xxd` or `file` if you must inspect it",
            args.path,
            meta.len()
        )));
    }
    if head.is_empty() {
        return Ok(ToolOutput::ok(format!(
            "`{}` is empty (0 bytes).",
            resolved.display()
        )));
    }
    let mut window = Window::new(offset, limit, ctx.max_output_chars.max(1000));
    let mut line = Vec::new();
    while let Some(more) = next_line(&mut reader, KEPT_LINE_BYTES, &mut line).map_err(cannot)? {
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::new(format!(
                "read_file of `{}` was stopped (cancelled, or over the file tools' time limit)",
                args.path
            )));
        }
        window.add(&line, more);
    }
    window.finish(&args.path)
}

/// The 1-based first line and the number of lines a `read_file` call asks for.
fn read_window(args: &ReadFileArgs) -> Result<(usize, usize), ToolError> {
    let offset = args.offset.unwrap_or(1);
    if offset == 0 {
        return Err(ToolError::new(
            "offset is 1-based: use offset 1 for the first line",
        ));
    }
    let limit = args.limit.unwrap_or(DEFAULT_READ_LIMIT);
    if limit == 0 {
        return Err(ToolError::new("limit must be at least 1 line"));
    }
    Ok((offset, limit))
}

/// Bytes of a line `read_file` keeps: enough for [`MAX_LINE_CHARS`] characters of 4 bytes.
const KEPT_LINE_BYTES: usize = MAX_LINE_CHARS * 4 + 4;

/// Reads the next line of `reader` into `line` (cleared first): its first `keep` bytes, with the
/// `\n` when it is among them. The rest of a longer line is consumed and only counted.
///
/// Returns `None` at the end of the input, else the number of characters (UTF-8 leading bytes)
/// of the line after the kept bytes, its `\n` not counted. Memory: `keep` bytes plus the
/// reader's buffer, whatever the line's length.
///
/// # Errors
/// A read error of `reader`.
fn next_line(
    reader: &mut impl BufRead,
    keep: usize,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<usize>> {
    line.clear();
    let mut more = 0usize;
    let mut any = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(any.then_some(more));
        }
        any = true;
        let (chunk, ended) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        let room = keep.saturating_sub(line.len()).min(chunk.len());
        line.extend_from_slice(&chunk[..room]);
        let rest = &chunk[room..];
        let rest = match rest.split_last() {
            Some((b'\n', before)) if ended => before,
            _ => rest,
        };
        more += rest.iter().filter(|b| (**b as i8) >= -0x40).count();
        let used = chunk.len();
        reader.consume(used);
        if ended {
            return Ok(Some(more));
        }
    }
}

/// The lines a `read_file` call shows: from `offset`, at most `limit` lines and about `budget`
/// characters; every line is counted.
struct Window {
    offset: usize,
    limit: usize,
    budget: usize,
    out: String,
    number: usize,
    shown: usize,
    last_shown: usize,
    full: bool,
}

impl Window {
    fn new(offset: usize, limit: usize, budget: usize) -> Self {
        Window {
            offset,
            limit,
            budget,
            out: String::new(),
            number: 0,
            shown: 0,
            last_shown: 0,
            full: false,
        }
    }

    /// Counts one line (`kept` bytes of it, `more` characters after them) and shows it when it
    /// is in the window, cut at [`MAX_LINE_CHARS`] characters with a note.
    fn add(&mut self, kept: &[u8], more: usize) {
        self.number += 1;
        if self.number < self.offset || self.shown >= self.limit || self.full {
            return;
        }
        let mut text = String::from_utf8_lossy(kept).into_owned();
        if text.ends_with('\n') {
            text.pop();
            if text.ends_with('\r') {
                text.pop();
            }
        }
        let (kept, cut) = crate::text::clip(&text, MAX_LINE_CHARS);
        if cut + more > 0 {
            let chars = MAX_LINE_CHARS + cut + more;
            text = format!("{kept} […line cut at {MAX_LINE_CHARS} characters: {chars} in total]");
        }
        let entry = format!("{:>6}\t{text}\n", self.number);
        if !self.out.is_empty() && self.out.len() + entry.len() > self.budget {
            self.full = true;
            return;
        }
        self.out.push_str(&entry);
        self.shown += 1;
        self.last_shown = self.number;
    }

    /// The shown lines with a note on what follows, or an error when `offset` is past the end.
    fn finish(mut self, path: &str) -> Result<ToolOutput, ToolError> {
        let (number, offset) = (self.number, self.offset);
        if number < offset {
            return Err(ToolError::new(format!(
                "offset {offset} is past the end of `{path}`, which has {number} lines"
            )));
        }
        if self.last_shown < number {
            let remaining = number - self.last_shown;
            self.out.push_str(&format!(
                "[… {remaining} more lines (file has {number}); call read_file with offset={} to continue]\n",
                self.last_shown + 1
            ));
        }
        Ok(ToolOutput::ok(self.out))
    }
}

// ---------------------------------------------------------------------------------------------

/// Carries out a `write_file` call: creates or overwrites a file with the given content.
pub fn write_file(args: &WriteFileArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let resolved = ctx.resolve(&args.path, Access::Write)?;
    if resolved.relative.as_os_str().is_empty() || resolved.physical.is_dir() {
        return Err(ToolError::new(format!(
            "`{}` is a directory; give the path of a file inside it",
            args.path
        )));
    }
    refuse_git_dir_shape(&resolved, &args.content)?;
    claim(ctx, &resolved)?;
    let existed = resolved.physical.exists();
    if !existed {
        sandbox::create_parent_dirs(&ctx.workspace_root, &resolved)?;
    }
    write_bytes(ctx, &args.path, &resolved, args.content.as_bytes(), true)?;
    Ok(ToolOutput::ok(format!(
        "{} `{}` ({} bytes written).",
        if existed { "Overwrote" } else { "Created" },
        resolved.display(),
        args.content.len()
    )))
}

/// Refuses a write that would make a directory look like a git directory (a `HEAD` file plus
/// `objects/` or `refs/`, judged on disk with the written file counted) or a file named
/// `config` whose content is git configuration that runs a program
/// ([`ahelper_worktrees::git_shape`]): git run there (a user's `git status`, a shell prompt)
/// would obey it.
fn refuse_git_dir_shape(resolved: &ResolvedPath, content: &str) -> Result<(), ToolError> {
    let relative = resolved.relative.to_string_lossy().replace('\\', "/");
    let name = relative.rsplit('/').next().unwrap_or(&relative);
    if name.eq_ignore_ascii_case("config")
        && let Some(setting) = ahelper_worktrees::git_shape::config_running_code(content)
    {
        return Err(ToolError::new(format!(
            "writing `{}` is not allowed: it is git configuration that runs a program \
             ({setting}), which git obeys when it runs in that directory; file tools never \
             write such a file — ask the user to do it if it is really needed",
            resolved.display()
        )));
    }
    let root_len = resolved.physical.components().count() - resolved.relative.components().count();
    let root: PathBuf = resolved.physical.components().take(root_len).collect();
    for dir in ahelper_worktrees::git_shape::git_dir_candidates(&relative) {
        let rel = |entry: &str| {
            if dir.is_empty() {
                entry.to_string()
            } else {
                format!("{dir}/{entry}")
            }
        };
        let written_below = |entry: &str| relative.starts_with(&format!("{}/", rel(entry)));
        let head = relative == rel("HEAD") || root.join(rel("HEAD")).is_file();
        let objects = written_below("objects") || root.join(rel("objects")).is_dir();
        let refs = written_below("refs") || root.join(rel("refs")).is_dir();
        if ahelper_worktrees::git_shape::is_git_dir_layout(head, objects, refs) {
            let shown = if dir.is_empty() { ".".to_string() } else { dir };
            return Err(ToolError::new(format!(
                "writing `{}` is not allowed: it would make `{shown}` look like a git directory \
                 (a HEAD file with objects/ or refs/), whose config git obeys when it runs \
                 there; file tools never create one — ask the user to do it if it is really \
                 needed",
                resolved.display()
            )));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------

/// Carries out an `edit_file` call: exact string replacement in an existing file.
pub fn edit_file(args: &EditFileArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    if args.old_string.is_empty() {
        return Err(ToolError::new(
            "old_string is empty; give the exact text to replace (use write_file to create a file)",
        ));
    }
    if args.old_string == args.new_string {
        return Err(ToolError::new(
            "old_string and new_string are identical, so the edit would change nothing",
        ));
    }
    let resolved = ctx.resolve(&args.path, Access::Write)?;
    let bytes = read_bytes(ctx, &args.path, &resolved)?;
    let original = String::from_utf8(bytes).map_err(|e| {
        ToolError::new(format!(
            "`{}` is not valid UTF-8 (invalid byte at offset {}); edit_file only edits UTF-8 \
             text so that no byte is changed by accident. Use write_file to replace it whole, \
             or run_command with a byte-safe tool",
            args.path,
            e.utf8_error().valid_up_to()
        ))
    })?;

    let (old, new) = {
        let exact = original.matches(args.old_string.as_str()).count();
        if exact == 0 && original.contains("\r\n") && args.old_string.contains('\n') {
            // The file uses CRLF and the model wrote LF: match with the file's line endings.
            let crlf = |s: &str| s.replace("\r\n", "\n").replace('\n', "\r\n");
            (crlf(&args.old_string), crlf(&args.new_string))
        } else {
            (args.old_string.clone(), args.new_string.clone())
        }
    };
    let count = original.matches(old.as_str()).count();
    if count == 0 {
        return Err(ToolError::new(format!(
            "old_string was not found in `{}`. It must match the file exactly (whitespace, \
             indentation and line breaks included); call read_file and copy the text again",
            args.path
        )));
    }
    if count > 1 && !args.replace_all {
        return Err(ToolError::new(format!(
            "old_string appears {count} times in `{}`; include more surrounding lines to make \
             it unique, or set replace_all to true to replace all {count}",
            args.path
        )));
    }
    let updated = if args.replace_all {
        original.replace(old.as_str(), new.as_str())
    } else {
        original.replacen(old.as_str(), new.as_str(), 1)
    };
    refuse_git_dir_shape(&resolved, &updated)?;
    claim(ctx, &resolved)?;
    write_bytes(ctx, &args.path, &resolved, updated.as_bytes(), false)?;

    let rel = resolved.display();
    let diff = similar::TextDiff::from_lines(&original, &updated)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{rel}"), &format!("b/{rel}"))
        .to_string();
    let diff = truncate_middle(&diff, (ctx.max_output_chars / 2).max(1000));
    Ok(ToolOutput::ok(format!(
        "Edited `{rel}`: replaced {count} occurrence{}.\n{diff}",
        if count == 1 { "" } else { "s" }
    )))
}

// ---------------------------------------------------------------------------------------------

/// Carries out a `list_dir` call: the entries of one directory.
pub fn list_dir(args: &ListDirArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let requested = args.path.as_deref().unwrap_or(".");
    let resolved = ctx.resolve(requested, Access::Read)?;
    let meta = std::fs::metadata(&resolved.physical).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            ToolError::new(format!(
                "directory not found: `{requested}`. Use list_dir on its parent or glob to find it"
            ))
        } else {
            ToolError::new(format!("cannot list `{requested}`: {e}"))
        }
    })?;
    if !meta.is_dir() {
        return Err(ToolError::new(format!(
            "`{requested}` is a file, not a directory; use read_file to read it"
        )));
    }
    let walker = super::search::walker(&resolved.physical)
        .max_depth(Some(1))
        .build();
    let mut entries: Vec<String> = Vec::new();
    for entry in walker {
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(ft) = entry.file_type() else {
            continue;
        };
        if ft.is_symlink() {
            let target = std::fs::read_link(entry.path())
                .map(|t| t.display().to_string())
                .unwrap_or_else(|_| "?".into());
            entries.push(format!("{name} -> {target}"));
        } else if ft.is_dir() {
            entries.push(format!("{name}/"));
        } else {
            entries.push(name);
        }
    }
    entries.sort();
    let total = entries.len();
    let mut out = format!("{}/\n", resolved.display());
    if total == 0 {
        out.push_str("(empty directory)\n");
    }
    for e in entries.iter().take(LIST_DIR_CAP) {
        out.push_str("  ");
        out.push_str(e);
        out.push('\n');
    }
    if total > LIST_DIR_CAP {
        out.push_str(&format!(
            "[… {} more entries omitted; use glob with a pattern to narrow the list]\n",
            total - LIST_DIR_CAP
        ));
    }
    Ok(ToolOutput::ok(out))
}
