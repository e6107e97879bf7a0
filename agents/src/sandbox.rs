//! Workspace path sandbox: the one function, [`resolve`], that turns a path a tool was given
//! into a path the tool may touch, plus the openers ([`open_read`], [`open_write`],
//! [`create_parent_dirs`]) that make sure the file actually opened is the one that was checked.
//!
//! Rules (`docs/sandbox.md` explains them for users; the escapes they answer are the rows of
//! `agents/tests/data/paths.md`, ids P01…):
//! - relative paths are resolved against the call's cwd, never the process cwd; `~` is a literal
//!   file name, never the home directory;
//! - NUL bytes, control characters and invisible/format characters (zero-width, bidi controls,
//!   Unicode category `Cf`) are refused;
//! - the decision is taken on the **physical** path: every symlink is followed the way the
//!   kernel follows it (a `..` after a symlink climbs from the link's target), and for a path
//!   that does not exist yet the nearest existing ancestor is resolved and the missing
//!   components are appended (a `..` among them can only cancel a missing component);
//! - the workspace root is canonicalised too, and containment is compared by path components,
//!   never by string prefix;
//! - writes to protected paths ([`protected`], the list the permission decision uses too) are
//!   refused whatever their spelling.
//! - directories added with `--add-dir` are further roots ([`resolve_in_roots`]): a path in one
//!   is accepted the same way, with its protected paths refused, and opened beneath that
//!   directory.
//!
//! Opening uses Linux `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` relative to an
//! fd of the workspace root, so a directory swapped for a symlink between the check and the
//! open makes the open fail instead of escaping (case P35). Where `openat2` is unavailable
//! (kernels before 5.6, seccomp filters) the file is opened with `O_NOFOLLOW` and the opened
//! fd's real path (`/proc/self/fd/N`) is verified to be the checked path before any byte is
//! read or written.

use std::collections::VecDeque;
use std::ffi::{CString, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

pub mod protected;

/// Why a path was refused. Every message says what happened and what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// The path resolves outside the workspace.
    #[error(
        "path `{requested}` is outside the workspace {root}{}; file tools only work on paths \
         inside the workspace (use a path relative to the workspace, without `..` leading out of \
         it){}",
        added_dirs_phrase(added),
        if added.is_empty() { "" } else { " or inside an added directory" }
    )]
    Outside {
        /// As given.
        requested: String,
        /// Workspace root.
        root: PathBuf,
        /// The directories added with `--add-dir` (canonical), also writable roots.
        added: Vec<PathBuf>,
    },
    /// The path is spelled inside the workspace but a symlink on the way leads outside it.
    #[error(
        "path `{requested}` goes through a symbolic link that leads outside the workspace {root} \
         (it resolves to {physical}); links out of the workspace are not followed"
    )]
    SymlinkOutside {
        /// As given.
        requested: String,
        /// Workspace root.
        root: PathBuf,
        /// Where the kernel would really go.
        physical: PathBuf,
    },
    /// The path contains a NUL byte, a control character or an invisible/format character.
    #[error(
        "path `{requested}` is not allowed: {reason}; spell the path with visible characters only"
    )]
    InvalidPath {
        /// As given (with invisible characters escaped).
        requested: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A write to a protected path (see [`is_protected`]).
    #[error(
        "writing `{requested}` is not allowed: `{relative}` is protected ({reason}); file tools never \
         change it — ask the user to do it if it is really needed",
        relative = relative.display()
    )]
    Protected {
        /// As given.
        requested: String,
        /// Path relative to the workspace root (physical).
        relative: PathBuf,
        /// Why this path is protected.
        reason: &'static str,
    },
    /// The workspace root, the path or one of its ancestors could not be inspected or opened.
    #[error("cannot access `{requested}`: {message}")]
    Io {
        /// As given (or the path relative to the workspace when opening).
        requested: String,
        /// The operating-system error.
        message: String,
        /// The kind of the underlying [`io::Error`] (e.g. `NotFound`), for callers that
        /// word their own message.
        kind: io::ErrorKind,
    },
    /// The path changed between the check and the open (e.g. a directory was replaced by a
    /// symlink); nothing was read or written.
    #[error(
        "path `{requested}` changed while it was being opened (a symbolic link appeared on the \
         way); nothing was read or written — try again"
    )]
    Changed {
        /// Path relative to the workspace root.
        requested: String,
    },
    /// What was opened is not a regular file or directory (a FIFO, a socket, a device): the
    /// file tools refuse it, since reading or writing one may block for ever or never end.
    #[error(
        "`{requested}` is {kind}, not a regular file; the file tools read and write only \
         regular files (reading one could block or never end). Use run_command if you must \
         use it"
    )]
    NotRegular {
        /// Path relative to the workspace root.
        requested: String,
        /// `a FIFO (named pipe)`, `a socket`, `a character device`, `a block device`.
        kind: &'static str,
    },
}

impl SandboxError {
    /// True when the error means the file or one of its directories does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, SandboxError::Io { kind, .. } if *kind == io::ErrorKind::NotFound)
    }
}

/// Read or write access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reading.
    Read,
    /// Creating or changing.
    Write,
}

/// A path checked to be inside the workspace or inside a directory added with `--add-dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPath {
    /// Physical path: every symlink resolved (realpath of the deepest existing ancestor joined
    /// with the components that do not exist yet). Tools open this path, never the path as
    /// given.
    pub physical: PathBuf,
    /// The same path relative to the root it lies in: the canonical workspace root, or
    /// `added_root` (empty for the root itself).
    pub relative: PathBuf,
    /// The added directory (canonical) the path lies in, when it is not in the workspace; the
    /// openers then open beneath it instead of the workspace root.
    pub added_root: Option<PathBuf>,
}

impl ResolvedPath {
    /// The path for messages and tool results: relative to the workspace, or absolute when it
    /// lies in an added directory (a relative path would name a workspace file); `.` for the
    /// workspace root itself.
    pub fn display(&self) -> String {
        if self.added_root.is_some() {
            self.physical.display().to_string()
        } else if self.relative.as_os_str().is_empty() {
            ".".to_string()
        } else {
            self.relative.display().to_string()
        }
    }

    /// The root this path is opened beneath: `added_root`, else `workspace_root`.
    fn root<'a>(&'a self, workspace_root: &'a Path) -> &'a Path {
        self.added_root.as_deref().unwrap_or(workspace_root)
    }
}

/// ` (nor in the added directories A, B)` for an error message; empty without added
/// directories.
fn added_dirs_phrase(added: &[PathBuf]) -> String {
    if added.is_empty() {
        return String::new();
    }
    let list: Vec<String> = added.iter().map(|d| d.display().to_string()).collect();
    format!(" and outside the added directories {}", list.join(", "))
}

/// Most symlinks followed while resolving one path (Linux's own limit is 40).
const MAX_SYMLINKS: usize = 40;

/// Resolves `requested` (as the model wrote it) against `cwd` inside `workspace_root`.
///
/// `cwd` is used for relative paths (it is joined to the root when itself relative); absolute
/// paths are taken as they are and must resolve inside the root. The root is canonicalised on
/// every call, and every call re-resolves the path on disk (no verdict is cached).
///
/// # Errors
/// - [`SandboxError::InvalidPath`]: empty path, NUL byte, control or invisible character;
/// - [`SandboxError::Outside`] / [`SandboxError::SymlinkOutside`]: the physical path is not
///   inside the physical workspace root;
/// - [`SandboxError::Protected`]: `access` is [`Access::Write`] and the path is protected
///   ([`protection_reason`]), judged on the physical path and on the path as spelled;
/// - [`SandboxError::Io`]: the root does not exist, an ancestor cannot be read, or there are
///   more than 40 symlinks on the way.
pub fn resolve(
    workspace_root: &Path,
    cwd: &Path,
    requested: &str,
    access: Access,
) -> Result<ResolvedPath, SandboxError> {
    resolve_in_roots(workspace_root, &[], cwd, requested, access)
}

/// [`resolve`] with more writable roots: the path may also lie in one of `added_dirs` (the
/// directories of `--add-dir`, canonical or not). The workspace is tried first; a path in an
/// added directory gets [`ResolvedPath::added_root`], and protected paths inside an added
/// directory (its `.git/`, `.ahelper/`…) are refused for writing as in the workspace.
///
/// # Errors
/// As [`resolve`]; [`SandboxError::Outside`] names the added directories too.
pub fn resolve_in_roots(
    workspace_root: &Path,
    added_dirs: &[PathBuf],
    cwd: &Path,
    requested: &str,
    access: Access,
) -> Result<ResolvedPath, SandboxError> {
    check_characters(requested)?;
    let root = canonical_root(workspace_root)?;
    let requested_path = Path::new(requested);
    let absolute = if requested_path.is_absolute() {
        requested_path.to_path_buf()
    } else if cwd.is_absolute() {
        cwd.join(requested_path)
    } else {
        root.join(cwd).join(requested_path)
    };
    let mut links = Vec::new();
    let physical = physical_path(&absolute, &mut links).map_err(|e| SandboxError::Io {
        requested: requested.to_string(),
        message: e.to_string(),
        kind: e.kind(),
    })?;
    if let Ok(relative) = physical.strip_prefix(&root).map(Path::to_path_buf) {
        if access == Access::Write {
            check_unprotected(workspace_root, &root, requested, &absolute, &relative)?;
            check_links_unprotected(&root, requested, &links)?;
        }
        return Ok(ResolvedPath {
            physical,
            relative,
            added_root: None,
        });
    }
    let added: Vec<PathBuf> = added_dirs
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect();
    for dir in &added {
        if let Ok(relative) = physical.strip_prefix(dir).map(Path::to_path_buf) {
            if access == Access::Write {
                check_unprotected(dir, dir, requested, &absolute, &relative)?;
                check_links_unprotected(dir, requested, &links)?;
            }
            return Ok(ResolvedPath {
                physical,
                relative,
                added_root: Some(dir.clone()),
            });
        }
    }
    Err(outside(
        workspace_root,
        root,
        added,
        requested,
        &absolute,
        physical,
    ))
}

/// The canonical workspace root.
fn canonical_root(workspace_root: &Path) -> Result<PathBuf, SandboxError> {
    std::fs::canonicalize(workspace_root).map_err(|e| SandboxError::Io {
        requested: workspace_root.display().to_string(),
        message: format!("the workspace root cannot be resolved: {e}"),
        kind: e.kind(),
    })
}

/// The error for a physical path outside the root: a symlink led out when the path is spelled
/// inside.
fn outside(
    workspace_root: &Path,
    root: PathBuf,
    added: Vec<PathBuf>,
    requested: &str,
    absolute: &Path,
    physical: PathBuf,
) -> SandboxError {
    let lexical = lexical_normalize(absolute);
    let spelled_inside =
        lexical.starts_with(&root) || lexical.starts_with(lexical_normalize(workspace_root));
    let requested = requested.to_string();
    if spelled_inside {
        SandboxError::SymlinkOutside {
            requested,
            root,
            physical,
        }
    } else {
        SandboxError::Outside {
            requested,
            root,
            added,
        }
    }
}

/// Both the physical path (`relative`) and the path as spelled (e.g. `.git/config` where `.git`
/// is a symlink to another directory of the workspace) must be unprotected.
fn check_unprotected(
    workspace_root: &Path,
    root: &Path,
    requested: &str,
    absolute: &Path,
    relative: &Path,
) -> Result<(), SandboxError> {
    let lexical = lexical_normalize(absolute);
    let spelled = lexical
        .strip_prefix(root)
        .or_else(|_| lexical.strip_prefix(lexical_normalize(workspace_root)))
        .ok();
    let protected = protection_reason(relative)
        .map(|r| (r, relative))
        .or_else(|| spelled.and_then(|s| protection_reason(s).map(|r| (r, s))));
    match protected {
        Some((reason, relative)) => Err(SandboxError::Protected {
            requested: requested.to_string(),
            relative: relative.to_path_buf(),
            reason,
        }),
        None => Ok(()),
    }
}

/// A write through a symlink that lies at a protected path (`.git` or `.git/config` made a
/// link to an ordinary workspace file) is refused however the path is spelled: through an
/// alias of the root the spelled path is not under the root, so [`check_unprotected`] sees
/// only the physical target.
fn check_links_unprotected(
    root: &Path,
    requested: &str,
    links: &[PathBuf],
) -> Result<(), SandboxError> {
    for link in links {
        let Ok(relative) = link.strip_prefix(root) else {
            continue;
        };
        if let Some(reason) = protection_reason(relative) {
            return Err(SandboxError::Protected {
                requested: requested.to_string(),
                relative: relative.to_path_buf(),
                reason,
            });
        }
    }
    Ok(())
}

/// True when file tools must never write `relative` (a path relative to the workspace root):
/// see [`protection_reason`].
pub fn is_protected(relative: &Path) -> bool {
    protected::protection(relative).is_some()
}

/// Why file tools must never write `relative` (a path relative to the workspace root), or
/// `None` when it may be written. The list and how paths are compared: [`protected`].
pub fn protection_reason(relative: &Path) -> Option<&'static str> {
    protected::protection(relative).map(protected::Protection::reason)
}

/// Refuses empty paths, NUL bytes, control characters and invisible characters.
fn check_characters(requested: &str) -> Result<(), SandboxError> {
    let invalid = |reason: String| SandboxError::InvalidPath {
        requested: requested.escape_default().to_string(),
        reason,
    };
    if requested.is_empty() {
        return Err(invalid("the path is empty".into()));
    }
    for c in requested.chars() {
        if c == '\0' {
            return Err(invalid("it contains a NUL byte".into()));
        }
        if c.is_control() {
            return Err(invalid(format!(
                "it contains the control character U+{:04X}",
                c as u32
            )));
        }
        if is_invisible(c) {
            return Err(invalid(format!(
                "it contains the invisible character U+{:04X}",
                c as u32
            )));
        }
    }
    Ok(())
}

/// Format characters (Unicode general category `Cf`, from `DerivedGeneralCategory.txt` of
/// Unicode 15.1: zero-width space/joiners, bidi controls, BOM, tags…; the unassigned U+2065
/// and tag-block code points included), line/paragraph separators, and characters that
/// render as nothing (variation selectors, fillers, combining grapheme joiner). Used for
/// paths (refused), protected-path folding (dropped) and command lines (a warning).
pub(crate) fn is_invisible(c: char) -> bool {
    const RANGES: &[(u32, u32)] = &[
        // Cf
        (0x00AD, 0x00AD),
        (0x0600, 0x0605),
        (0x061C, 0x061C),
        (0x06DD, 0x06DD),
        (0x070F, 0x070F),
        (0x0890, 0x0891),
        (0x08E2, 0x08E2),
        (0x180E, 0x180E),
        (0x200B, 0x200F),
        (0x202A, 0x202E),
        (0x2060, 0x206F),
        (0xFEFF, 0xFEFF),
        (0xFFF9, 0xFFFB),
        (0x110BD, 0x110BD),
        (0x110CD, 0x110CD),
        (0x13430, 0x1343F),
        (0x1BCA0, 0x1BCA3),
        (0x1D173, 0x1D17A),
        (0xE0000, 0xE007F),
        // Zl, Zp
        (0x2028, 0x2029),
        // invisible letters and marks
        (0x034F, 0x034F),
        (0x115F, 0x1160),
        (0x17B4, 0x17B5),
        (0x180B, 0x180D),
        (0x180F, 0x180F),
        (0x3164, 0x3164),
        (0xFE00, 0xFE0F),
        (0xFFA0, 0xFFA0),
        (0xE0100, 0xE01EF),
    ];
    let v = c as u32;
    RANGES.iter().any(|&(lo, hi)| (lo..=hi).contains(&v))
}

/// `..` and `.` removed lexically (only to word error messages; never for decisions).
fn lexical_normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

enum Step {
    Root,
    Parent,
    Name(OsString),
}

fn push_steps_front(queue: &mut VecDeque<Step>, path: &Path) {
    let steps: Vec<Step> = path
        .components()
        .filter_map(|c| match c {
            Component::RootDir | Component::Prefix(_) => Some(Step::Root),
            Component::ParentDir => Some(Step::Parent),
            Component::CurDir => None,
            Component::Normal(n) => Some(Step::Name(n.to_os_string())),
        })
        .collect();
    for s in steps.into_iter().rev() {
        queue.push_front(s);
    }
}

/// The path the kernel would reach for the absolute `path`: symlinks followed one component at
/// a time (a `..` applies to the physical directory reached so far), with the components that
/// do not exist appended literally (a `..` among them cancels the previous missing one).
fn physical_path(path: &Path, followed: &mut Vec<PathBuf>) -> io::Result<PathBuf> {
    let mut queue = VecDeque::new();
    push_steps_front(&mut queue, path);
    let mut current = PathBuf::from("/");
    let mut missing: Vec<OsString> = Vec::new();
    let mut links = 0usize;
    while let Some(step) = queue.pop_front() {
        match step {
            Step::Root => {
                current = PathBuf::from("/");
                missing.clear();
            }
            Step::Parent => {
                if missing.pop().is_none() {
                    current.pop();
                }
            }
            Step::Name(name) => {
                if !missing.is_empty() {
                    missing.push(name);
                    continue;
                }
                let candidate = current.join(&name);
                match std::fs::symlink_metadata(&candidate) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        links += 1;
                        if links > MAX_SYMLINKS {
                            return Err(io::Error::other(format!(
                                "more than {MAX_SYMLINKS} symbolic links on the way (a loop?)"
                            )));
                        }
                        let target = std::fs::read_link(&candidate)?;
                        push_steps_front(&mut queue, &target);
                        followed.push(candidate);
                    }
                    Ok(_) => current = candidate,
                    Err(e)
                        if e.kind() == io::ErrorKind::NotFound
                            || e.raw_os_error() == Some(libc::ENOTDIR) =>
                    {
                        missing.push(name);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
    for m in missing {
        current.push(m);
    }
    Ok(current)
}

/// `struct open_how` of `linux/openat2.h`.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_BENEATH: u64 = 0x08;

/// Outcome of an `openat2` attempt.
enum Openat2 {
    Opened(File),
    Unsupported,
    Failed(io::Error),
}

fn openat2_beneath(root: &Path, relative: &Path, flags: libc::c_int, mode: u32) -> Openat2 {
    let root_dir = match File::open(root) {
        Ok(f) => f,
        Err(e) => return Openat2::Failed(e),
    };
    let rel = if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative
    };
    let Ok(c_path) = CString::new(rel.as_os_str().as_bytes()) else {
        return Openat2::Failed(io::Error::from(io::ErrorKind::InvalidInput));
    };
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: if flags & libc::O_CREAT != 0 {
            u64::from(mode)
        } else {
            0
        },
        resolve: RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: openat2 reads `how` (a properly laid out `struct open_how` of the given size)
    // and the NUL-terminated path; both outlive the call. The returned fd is owned below.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root_dir.as_raw_fd(),
            c_path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOSYS) | Some(libc::EPERM) | Some(libc::E2BIG) => Openat2::Unsupported,
            _ => Openat2::Failed(e),
        };
    }
    // SAFETY: `fd` is a fresh descriptor returned by the kernel and owned by nobody else.
    Openat2::Opened(unsafe { File::from_raw_fd(fd as libc::c_int) })
}

/// Opens `root/relative` with `O_NOFOLLOW` and verifies through `/proc/self/fd/N` that the
/// opened file is exactly the checked physical path (fallback when `openat2` is unavailable).
fn open_verified_fallback(
    root: &Path,
    relative: &Path,
    flags: libc::c_int,
    mode: u32,
) -> Result<File, OpenFailure> {
    let physical = root.join(relative);
    let mut options = std::fs::OpenOptions::new();
    let access = flags & libc::O_ACCMODE;
    options
        .read(access == libc::O_RDONLY || access == libc::O_RDWR)
        .write(access == libc::O_WRONLY || access == libc::O_RDWR)
        .create(flags & libc::O_CREAT != 0)
        .mode(mode)
        .custom_flags((flags & !(libc::O_ACCMODE | libc::O_CREAT)) | libc::O_NOFOLLOW);
    let file = options.open(&physical).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            OpenFailure::Changed
        } else {
            OpenFailure::Io(e)
        }
    })?;
    match std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
        Ok(real) if real == physical => Ok(file),
        Ok(_) => Err(OpenFailure::Changed),
        Err(_) => {
            // No /proc: compare the opened inode with the checked path's inode.
            let opened = file.metadata().map_err(OpenFailure::Io)?;
            let checked = std::fs::symlink_metadata(&physical).map_err(OpenFailure::Io)?;
            if opened.dev() == checked.dev() && opened.ino() == checked.ino() {
                Ok(file)
            } else {
                Err(OpenFailure::Changed)
            }
        }
    }
}

enum OpenFailure {
    Changed,
    Io(io::Error),
}

/// Opens `relative` beneath `workspace_root` with the raw `open(2)` `flags` (`O_CREAT` uses
/// `mode`), refusing any symlink on the way.
fn open_beneath(
    workspace_root: &Path,
    relative: &Path,
    flags: libc::c_int,
    mode: u32,
) -> Result<File, SandboxError> {
    let shown = relative.display().to_string();
    let root = canonical_root(workspace_root)?;
    let io_err = |e: io::Error| SandboxError::Io {
        requested: shown.clone(),
        message: e.to_string(),
        kind: e.kind(),
    };
    match openat2_beneath(&root, relative, flags, mode) {
        Openat2::Opened(f) => Ok(f),
        Openat2::Failed(e) if matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::EXDEV)) => {
            Err(SandboxError::Changed { requested: shown })
        }
        Openat2::Failed(e) => Err(io_err(e)),
        Openat2::Unsupported => match open_verified_fallback(&root, relative, flags, mode) {
            Ok(f) => Ok(f),
            Err(OpenFailure::Changed) => Err(SandboxError::Changed { requested: shown }),
            Err(OpenFailure::Io(e)) => Err(io_err(e)),
        },
    }
}

/// Opens a resolved path for reading. The file opened is guaranteed to be
/// `resolved.relative` beneath the workspace root (or its [`ResolvedPath::added_root`]) with
/// no symlink on the way (else [`SandboxError::Changed`]).
///
/// # Errors
/// [`SandboxError::Changed`] when the path changed since [`resolve`]; [`SandboxError::Io`]
/// when it cannot be opened (not found, permission denied…).
pub fn open_read(workspace_root: &Path, resolved: &ResolvedPath) -> Result<File, SandboxError> {
    let file = open_beneath(
        resolved.root(workspace_root),
        &resolved.relative,
        libc::O_RDONLY | NEVER_BLOCK,
        0,
    )
    .map_err(|e| enxio_as_not_regular(e, &resolved.relative))?;
    regular_or_dir(file, &resolved.relative)
}

/// Flags of every file-tool open: `O_NONBLOCK` makes opening a FIFO return at once (a FIFO
/// without a writer would block `open` for ever), `O_NOCTTY` keeps a terminal from becoming
/// ahelper's. What was opened is then checked by [`regular_or_dir`].
const NEVER_BLOCK: libc::c_int = libc::O_NONBLOCK | libc::O_NOCTTY;

/// `file` when what was opened (`fstat` of the descriptor, so no later swap of the path
/// matters) is a regular file or a directory — with `O_NONBLOCK` cleared again, which regular
/// files ignore anyway.
///
/// # Errors
/// [`SandboxError::NotRegular`] for a FIFO, a socket or a device; [`SandboxError::Io`] when
/// the descriptor cannot be inspected.
fn regular_or_dir(file: File, relative: &Path) -> Result<File, SandboxError> {
    use std::os::unix::fs::FileTypeExt;
    let requested = relative.display().to_string();
    let file_type = file.metadata().map_err(|e| SandboxError::Io {
        requested: requested.clone(),
        message: e.to_string(),
        kind: e.kind(),
    })?;
    let file_type = file_type.file_type();
    let kind = if file_type.is_fifo() {
        "a FIFO (named pipe)"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else {
        // SAFETY: fcntl(2) on a descriptor `file` owns; F_GETFL/F_SETFL take integers.
        unsafe {
            let flags = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
            }
        }
        return Ok(file);
    };
    Err(SandboxError::NotRegular { requested, kind })
}

/// Opens a resolved path for writing, creating it (mode `0o666` minus umask) when `create` is
/// true. The file is **not** truncated: callers truncate with `File::set_len(0)` once they hold
/// the verified handle, so a refused open never destroys data.
///
/// # Errors
/// As [`open_read`].
pub fn open_write(
    workspace_root: &Path,
    resolved: &ResolvedPath,
    create: bool,
) -> Result<File, SandboxError> {
    let flags = libc::O_WRONLY | NEVER_BLOCK | if create { libc::O_CREAT } else { 0 };
    let file = open_beneath(
        resolved.root(workspace_root),
        &resolved.relative,
        flags,
        0o666,
    )
    .map_err(|e| enxio_as_not_regular(e, &resolved.relative))?;
    regular_or_dir(file, &resolved.relative)
}

/// The `ENXIO` ("No such device or address") of an open as [`SandboxError::NotRegular`]: the
/// kernel's answer for a socket, for `O_WRONLY|O_NONBLOCK` on a FIFO nobody reads, and for a
/// device without a driver.
fn enxio_as_not_regular(e: SandboxError, relative: &Path) -> SandboxError {
    let enxio = io::Error::from_raw_os_error(libc::ENXIO).to_string();
    if matches!(&e, SandboxError::Io { message, .. } if *message == enxio) {
        SandboxError::NotRegular {
            requested: relative.display().to_string(),
            kind: "a socket, a FIFO (named pipe) or a device",
        }
    } else {
        e
    }
}

/// Opens the directory that holds a resolved path (read-only, for `openat`/`renameat` calls
/// such as [`crate::atomic_write::replace_in_dir`]), beneath the workspace root (or the
/// path's added directory) with no symlink on the way.
///
/// # Errors
/// As [`open_read`]; also when the parent is not a directory.
pub fn open_parent_dir(
    workspace_root: &Path,
    resolved: &ResolvedPath,
) -> Result<File, SandboxError> {
    let parent = resolved.relative.parent().unwrap_or(Path::new(""));
    open_beneath(
        resolved.root(workspace_root),
        parent,
        libc::O_RDONLY | libc::O_DIRECTORY,
        0,
    )
}

/// Creates the missing parent directories of a resolved path, one at a time beneath the
/// workspace root (or the path's added directory), each created inside a directory opened
/// without following symlinks.
///
/// # Errors
/// [`SandboxError::Changed`] when a symlink appeared on the way; [`SandboxError::Io`] when a
/// directory cannot be created (e.g. a file is in the way).
pub fn create_parent_dirs(
    workspace_root: &Path,
    resolved: &ResolvedPath,
) -> Result<(), SandboxError> {
    let Some(parent) = resolved.relative.parent() else {
        return Ok(());
    };
    let workspace_root = resolved.root(workspace_root);
    let mut done = PathBuf::new();
    for component in parent.components() {
        let Component::Normal(name) = component else {
            continue;
        };
        let dir = open_beneath(workspace_root, &done, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        let c_name = CString::new(name.as_bytes()).map_err(|_| SandboxError::InvalidPath {
            requested: resolved.relative.display().to_string(),
            reason: "it contains a NUL byte".into(),
        })?;
        // SAFETY: `dir` is an open directory fd and `c_name` a NUL-terminated single name.
        let rc = unsafe { libc::mkdirat(dir.as_raw_fd(), c_name.as_ptr(), 0o777) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(SandboxError::Io {
                    requested: done.join(name).display().to_string(),
                    message: format!("cannot create directory: {e}"),
                    kind: e.kind(),
                });
            }
        }
        done.push(name);
    }
    // The last directory must be a real directory beneath the root (not a symlink or file).
    open_beneath(workspace_root, &done, libc::O_PATH | libc::O_DIRECTORY, 0)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protection_is_normalised() {
        for p in [
            ".git",
            ".git/config",
            "./.git/hooks/pre-commit",
            ".GIT/HOOKS/x",
            "sub/.git/config",
            ".git./config",
            "\u{FF0E}git/config",
            ".ahelper/config.toml",
            ".AHELPER/Config.toml",
            ".ahelper/settings.local.toml",
            ".ahelper/permissions.toml",
            ".bashrc",
            "home/.ZSHRC",
            ".config/fish/config.fish",
            ".envrc",
        ] {
            assert!(is_protected(Path::new(p)), "{p} should be protected");
        }
        for p in [
            "src/main.rs",
            ".gitignore",
            ".github/workflows/ci.yml",
            ".ahelper/runs/x/run.json",
            "bashrc",
            "config.toml",
        ] {
            assert!(!is_protected(Path::new(p)), "{p} should not be protected");
        }
    }

    #[test]
    fn invisible_and_control_characters_are_refused() {
        for bad in [
            "a\u{200B}b",
            "a\u{202E}b",
            "a\u{FEFF}",
            "a\rb",
            "a\u{2066}b",
            "a\u{E0041}",
        ] {
            assert!(
                matches!(check_characters(bad), Err(SandboxError::InvalidPath { .. })),
                "{bad:?}"
            );
        }
        assert!(check_characters("ok/ünïcödé.txt").is_ok());
    }

    #[test]
    fn fallback_opener_verifies_the_opened_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("a.txt"), "x").unwrap();
        std::os::unix::fs::symlink(root.join("a.txt"), root.join("l")).unwrap();
        assert!(open_verified_fallback(&root, Path::new("a.txt"), libc::O_RDONLY, 0).is_ok());
        assert!(matches!(
            open_verified_fallback(&root, Path::new("l"), libc::O_RDONLY, 0),
            Err(OpenFailure::Changed)
        ));
    }
}
