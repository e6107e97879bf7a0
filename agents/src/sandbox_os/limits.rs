//! Resource limits of a sandboxed command (issue 29.5): how many processes and threads it may
//! run at once, and how much memory each of its processes may allocate.
//!
//! - **Processes** (`sandbox.max_processes`, default [`DEFAULT_MAX_PROCESSES`]): the command's
//!   shell gets `RLIMIT_NPROC = max + 2` in its own user namespace, where the kernel counts only
//!   that namespace's processes and threads (per-namespace counts since Linux 5.14) — exact for
//!   an unprivileged user, but root's processes are exempt from `RLIMIT_NPROC`. So the init of
//!   the command's own PID namespace ([`super::pid_init`]) also writes `max + 302` to the
//!   namespace's `/proc/sys/kernel/pid_max` (per PID namespace since Linux 6.14; see
//!   [`PreparedLimits::pid_max`] for the 300): no process or thread can get a PID past it,
//!   whoever runs ahelper — between `max` and `max + 300` at once. A `fork`/`clone` past the
//!   limit fails with `EAGAIN`.
//! - **Memory** (`sandbox.max_memory_mb`, default [`DEFAULT_MAX_MEMORY_MB`], `0` = none):
//!   `RLIMIT_DATA` of the command's processes (private writable mappings: heap, anonymous
//!   `mmap`), so an allocation past it fails with `ENOMEM`. Per process, not the sum: with the
//!   process limit it bounds the command at `max_processes × max_memory_mb`.
//!
//! The kernel reports neither limit to ahelper. [`limit_hit`] reads the command's output for
//! the failures they cause (`fork: Resource temporarily unavailable`, `MemoryError`, `memory
//! allocation of … failed`, …) so the model is told which limit ended a command.

/// Default `sandbox.max_processes`: processes and threads a command may run at once.
pub const DEFAULT_MAX_PROCESSES: u32 = 4096;
/// Default `sandbox.max_memory_mb`: MiB of data memory each process of a command may allocate.
pub const DEFAULT_MAX_MEMORY_MB: u64 = 8192;
/// Smallest `sandbox.max_processes` (a shell, a pipeline and a few helpers).
pub const MIN_MAX_PROCESSES: u32 = 16;
/// `RESERVED_PIDS` of the kernel (`include/linux/pid.h`): where PID numbers start again after
/// they wrapped.
const RESERVED_PIDS: u64 = 300;

/// The limits of one agent's commands (the `[sandbox]` settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandLimits {
    /// Processes and threads a command may run at once (≥ [`MIN_MAX_PROCESSES`]).
    pub max_processes: u32,
    /// MiB of data memory (`RLIMIT_DATA`) each process may allocate; `0` = no limit.
    pub max_memory_mb: u64,
}

impl Default for CommandLimits {
    fn default() -> Self {
        CommandLimits {
            max_processes: DEFAULT_MAX_PROCESSES,
            max_memory_mb: DEFAULT_MAX_MEMORY_MB,
        }
    }
}

/// The limits prepared in the parent for one command, applied in its child between `fork` and
/// `exec` ([`Self::apply`]): plain numbers, no allocation.
#[derive(Debug, Clone, Copy)]
pub(super) struct PreparedLimits {
    limits: CommandLimits,
    /// The inode of ahelper's user namespace: the child compares its own to know whether it
    /// entered one of its own (only there is `RLIMIT_NPROC` safe: outside, it counts every
    /// process of the user).
    parent_user_ns: u64,
}

impl PreparedLimits {
    /// The limits for a command of this process.
    pub(super) fn new(limits: CommandLimits) -> Self {
        PreparedLimits {
            limits,
            parent_user_ns: user_ns_inode().unwrap_or(0),
        }
    }

    /// The `pid_max` the command's PID namespace gets: the limit, plus init and one spare,
    /// plus [`RESERVED_PIDS`]: once the kernel's PID cursor of a namespace passed 300, it hands
    /// out PIDs from 300 up only (`alloc_pid`), so `pid_max = limit + 2` would leave a long
    /// build that started more than 300 processes one after the other `limit - 298` PIDs.
    /// With the reserve, at least `limit` and at most `limit + 300` run at once.
    pub(super) fn pid_max(&self) -> Vec<u8> {
        (u64::from(self.limits.max_processes) + 2 + RESERVED_PIDS)
            .to_string()
            .into_bytes()
    }

    /// Sets `RLIMIT_DATA` (when a memory limit is set) and, in a user namespace of the
    /// command's own, `RLIMIT_NPROC` of the calling process — soft and hard, never above the
    /// hard limit it already has. System calls only: meant for the child before `exec`, after
    /// the namespaces were entered.
    ///
    /// # Errors
    /// The errno of a failed `setrlimit` (the command then does not start).
    pub(super) fn apply(&self) -> std::io::Result<()> {
        if self.limits.max_memory_mb > 0 {
            let bytes = self.limits.max_memory_mb.saturating_mul(1 << 20);
            lower_rlimit(libc::RLIMIT_DATA, bytes)?;
        }
        if user_ns_inode().is_some_and(|own| own != self.parent_user_ns) {
            lower_rlimit(libc::RLIMIT_NPROC, u64::from(self.limits.max_processes) + 2)?;
        }
        Ok(())
    }
}

/// Sets soft and hard `resource` to `value`, or to the current hard limit when that is lower.
fn lower_rlimit(resource: libc::__rlimit_resource_t, value: u64) -> std::io::Result<()> {
    // SAFETY: getrlimit/setrlimit with a stack struct.
    unsafe {
        let mut current: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(resource, &mut current) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let value = value.min(current.rlim_max);
        let wanted = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        if libc::setrlimit(resource, &wanted) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The inode of the calling process's user namespace (`stat` of `/proc/self/ns/user`).
fn user_ns_inode() -> Option<u64> {
    // SAFETY: stat(2) of a NUL-terminated constant path into a stack struct.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::stat(c"/proc/self/ns/user".as_ptr(), &mut st) == 0).then_some(st.st_ino)
    }
}

/// Writes `pid_max` to the calling process's PID namespace (`/proc/sys/kernel/pid_max`;
/// the kernel takes the namespace of the writer). Called by the namespace's init before it
/// forks the command. Best effort: on a kernel without per-namespace `pid_max` (before 6.14)
/// the write fails and `RLIMIT_NPROC` is the only process limit.
pub(super) fn write_pid_max(pid_max: &[u8]) {
    let _ = super::write_proc_file(c"/proc/sys/kernel/pid_max", pid_max);
}

/// Why commands of a sandbox with (`namespaces`) or without user namespaces of their own get
/// no process limit here, or `None` when they get one: without namespaces `RLIMIT_NPROC` would
/// count every process of the user, and as root (exempt from it) the limit needs a `pid_max`
/// per PID namespace (Linux 6.14).
pub(super) fn missing_process_limit(namespaces: bool) -> Option<&'static str> {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !namespaces {
        Some("commands have no process limit (sandbox.max_processes): it needs a user namespace")
    } else if root && !per_namespace_pid_max() {
        Some(
            "commands have no process limit (sandbox.max_processes): as root it needs Linux \
             6.14 or newer (pid_max per PID namespace)",
        )
    } else {
        None
    }
}

/// Whether the running kernel has a `pid_max` per PID namespace (Linux 6.14 and newer).
fn per_namespace_pid_max() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
    let mut number = || {
        parts
            .next()
            .and_then(|p| p.parse::<u32>().ok())
            .unwrap_or(0)
    };
    (number(), number()) >= (6, 14)
}

/// Which limit a command's output shows it hit ([`limit_hit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitHit {
    /// A process or thread could not be started (`EAGAIN`).
    Processes {
        /// `sandbox.max_processes`.
        limit: u32,
    },
    /// An allocation failed (`ENOMEM`, `MemoryError`, …).
    Memory {
        /// `sandbox.max_memory_mb`.
        limit_mb: u64,
    },
}

impl LimitHit {
    /// The note for the model, e.g. `[the command hit the process limit: …]`.
    pub fn describe(&self) -> String {
        match self {
            LimitHit::Processes { limit } => format!(
                "[the command hit the process limit: a process or thread could not be started \
                 (EAGAIN); commands may run at most {limit} processes and threads at once \
                 (sandbox.max_processes). Start fewer at once (e.g. `-j`, a smaller worker \
                 pool)]"
            ),
            LimitHit::Memory { limit_mb } => format!(
                "[the command hit the memory limit: an allocation failed (ENOMEM); each process \
                 of a command may allocate at most {limit_mb} MiB (sandbox.max_memory_mb). Use \
                 less memory, or ask the user to raise the limit]"
            ),
        }
    }
}

/// Lines of output that show a failed `fork`/`clone`/thread start: they name a process or thread
/// and `EAGAIN` in one of its spellings.
const PROCESS_WORDS: &[&str] = &["fork", "spawn", "thread", "clone", "process"];
const EAGAIN_WORDS: &[&str] = &[
    "resource temporarily unavailable",
    "eagain",
    "os error 11",
    "errno 11",
];
/// Lines that show a failed allocation.
const MEMORY_WORDS: &[&str] = &[
    "cannot allocate memory",
    "memoryerror",
    "out of memory",
    "bad_alloc",
    "enomem",
    "failed to allocate",
    "allocation failed",
];

/// The limit `output` (a command's output, as the model reads it) shows the command hit, when
/// `limits` were in force: a line with `EAGAIN` that names a process or thread, or follows
/// within three lines one that does (bash's `fork:
/// Resource temporarily unavailable`, Python's `BlockingIOError: [Errno 11]`, Rust's `os error
/// 11`, `can't start new thread`), or a failed allocation (`Cannot allocate memory`,
/// `MemoryError`, `memory allocation of N bytes failed`, `std::bad_alloc`, `out of memory`).
/// A heuristic: the kernel does not report a limit hit, only the failing call does.
pub fn limit_hit(limits: &CommandLimits, output: &str) -> Option<LimitHit> {
    let lines: Vec<String> = output.lines().map(str::to_ascii_lowercase).collect();
    let mut memory = false;
    for (i, line) in lines.iter().enumerate() {
        let eagain = EAGAIN_WORDS.iter().any(|w| line.contains(w));
        // The call that failed may be on a line of its own above (a traceback).
        let names_process = lines[i.saturating_sub(3)..=i]
            .iter()
            .any(|l| PROCESS_WORDS.iter().any(|w| l.contains(w)));
        let python_fork = line.contains("blockingioerror: [errno 11]");
        if (eagain && names_process) || python_fork || line.contains("can't start new thread") {
            return Some(LimitHit::Processes {
                limit: limits.max_processes,
            });
        }
        let failed_allocation = line.contains("memory allocation of") && line.contains("failed");
        memory |= failed_allocation || MEMORY_WORDS.iter().any(|w| line.contains(w));
    }
    (memory && limits.max_memory_mb > 0).then_some(LimitHit::Memory {
        limit_mb: limits.max_memory_mb,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_of_failed_forks_and_allocations_names_the_limit() {
        let limits = CommandLimits::default();
        for out in [
            "bash: fork: retry: Resource temporarily unavailable\n",
            "OSError: [Errno 11] Resource temporarily unavailable (in os.fork)\n",
            "  File \"<string>\", line 6, in <module>\n    pid = os.fork()\n\
             BlockingIOError: [Errno 11] Resource temporarily unavailable\n",
            "RuntimeError: can't start new thread\n",
            "failed to spawn thread: Os { code: 11, kind: WouldBlock }: os error 11\n",
        ] {
            assert_eq!(
                limit_hit(&limits, out),
                Some(LimitHit::Processes { limit: 4096 }),
                "{out}"
            );
        }
        for out in [
            "Traceback…\nMemoryError\n",
            "memory allocation of 1073741824 bytes failed\n",
            "bash: xmalloc: cannot allocate 42 bytes\nCannot allocate memory\n",
            "terminate called after throwing an instance of 'std::bad_alloc'\n",
        ] {
            assert_eq!(
                limit_hit(&limits, out),
                Some(LimitHit::Memory { limit_mb: 8192 }),
                "{out}"
            );
        }
        assert_eq!(limit_hit(&limits, "ok\nall 12 tests passed\n"), None);
        let no_memory_limit = CommandLimits {
            max_memory_mb: 0,
            ..limits
        };
        assert_eq!(limit_hit(&no_memory_limit, "MemoryError\n"), None);
    }
}
