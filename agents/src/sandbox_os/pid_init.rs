//! A PID namespace per command (issue 15.7): nothing a command starts can outlive it, whatever
//! it does to its environment, session or parentage.
//!
//! Between `fork` and `exec`, after `unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID …)`,
//! the child ahelper spawned (the **waiter**, outside the new PID namespace) forks the
//! namespace's **init** (PID 1), which mounts a fresh `/proc` for the namespace and forks the
//! **command** (PID 2), the process that goes on to `exec` the shell:
//!
//! ```text
//! ahelper ─ waiter (ahelper's child, pgid leader) ─ init (PID 1 inside) ─ bash -c … (PID 2)
//! ```
//!
//! - When the command's shell ends, init kills every other process in the namespace
//!   (`kill(-1, SIGKILL)` from PID 1 reaches every process in it and in namespaces nested in
//!   it), reaps them, counting, and hands the shell's wait status and that count to the waiter
//!   through a pipe. The waiter writes the count to ahelper ([`PidInit::report`]) and ends
//!   exactly as the shell did (same exit code, or the same signal).
//! - When init dies for any reason (the process group's `SIGKILL` after a timeout or cancel,
//!   the waiter's death through `PR_SET_PDEATHSIG`, ahelper's `kill -9` through the waiter's own
//!   `PR_SET_PDEATHSIG`), the kernel kills every process of the namespace: a process cannot leave
//!   its PID namespace (`setsid`, `env -i`, double forks, `unshare` do not help).
//! - The waiter ignores `SIGTERM`, `SIGINT` and `SIGHUP` (a timeout's `SIGTERM` to the group
//!   still reaches the shell and its children, which may clean up; init, as PID 1, only gets
//!   signals it handles, and it handles none).
//!
//! Everything here runs in a forked child of a multi-threaded process: system calls only, no
//! allocation, no locks.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// `landlock_path_beneath_attr` (linux/landlock.h): the access rights and an `O_PATH` fd.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `LANDLOCK_RULE_PATH_BENEATH`.
const RULE_PATH_BENEATH: libc::c_int = 1;

/// The parts of a command's PID namespace prepared in the parent.
#[derive(Debug)]
pub(super) struct PidInit {
    /// Write end of the report pipe: the waiter writes the number of processes init killed
    /// after the shell ended (a `u32`, little-endian). The read end is ahelper's
    /// ([`super::PreparedSandbox::take_report`]).
    report: OwnedFd,
    /// The landlock ruleset (a second fd of the one the command applies) and the read rights
    /// to grant on the namespace's new `/proc`: a rule on the old `/proc` does not cover the
    /// new mount (landlock rules belong to inodes).
    proc_rule: Option<(OwnedFd, u64)>,
    /// What init writes to the namespace's `/proc/sys/kernel/pid_max` before it forks the
    /// command (the process limit, [`super::limits`]); nothing when `None`.
    pid_max: Option<Vec<u8>>,
}

impl PidInit {
    /// Prepares a namespace init that reports on `report` and, when given, grants
    /// `proc_rule.1` on the new `/proc` in ruleset `proc_rule.0`.
    pub(super) fn new(report: OwnedFd, proc_rule: Option<(OwnedFd, u64)>) -> Self {
        PidInit {
            report,
            proc_rule,
            pid_max: None,
        }
    }

    /// The same init, limiting the namespace to PIDs below `pid_max` (decimal ASCII).
    pub(super) fn with_pid_max(mut self, pid_max: Vec<u8>) -> Self {
        self.pid_max = Some(pid_max);
        self
    }

    /// Called in the child after `unshare(CLONE_NEWPID)`: forks init, which forks the command.
    /// Returns only in the command (PID 2), which goes on to landlock and `exec`; the waiter
    /// and init end with `_exit`.
    ///
    /// # Errors
    /// The errno of a failed `pipe2` or `fork` (the command is then not started).
    pub(super) fn start(&self) -> std::io::Result<()> {
        let mut status = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into the array.
        if unsafe { libc::pipe2(status.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fork in a single-threaded child; both sides make only system calls.
        let init = unsafe { libc::fork() };
        if init < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if init > 0 {
            self.wait_for_init(init, status[0]);
        }
        // SAFETY: prctl with integer arguments.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
        self.mount_proc();
        if let Some(pid_max) = &self.pid_max {
            super::limits::write_pid_max(pid_max);
        }
        // SAFETY: as above.
        let command = unsafe { libc::fork() };
        if command == 0 {
            return Ok(());
        }
        if command < 0 {
            // Nothing written to the status pipe: the waiter ends with this exit code.
            let message = b"ahelper: cannot start the command: fork failed in its PID namespace\n";
            // SAFETY: write(2) of a static buffer to stderr, then _exit.
            unsafe {
                libc::write(2, message.as_ptr().cast(), message.len());
                libc::_exit(127)
            }
        }
        run_init(command, status[1]);
    }

    /// The waiter: releases every descriptor but stdio and the two pipes (so that ahelper's
    /// `spawn` sees the command's `exec`), waits for init, forwards the count and ends as the
    /// command's shell ended.
    fn wait_for_init(&self, init: libc::pid_t, status_read: RawFd) -> ! {
        close_all_except(&[0, 1, 2, status_read, self.report.as_raw_fd()]);
        // SAFETY: signal(2) with constant dispositions; waitpid/read/write on our own values.
        unsafe {
            for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGPIPE] {
                libc::signal(sig, libc::SIG_IGN);
            }
            let mut init_status = 0;
            while libc::waitpid(init, &mut init_status, 0) < 0
                && *libc::__errno_location() == libc::EINTR
            {}
            let mut buf = [0u8; 8];
            let n = libc::read(status_read, buf.as_mut_ptr().cast(), buf.len());
            let shell_status = if n == 8 {
                libc::write(self.report.as_raw_fd(), buf[4..].as_ptr().cast(), 4);
                i32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]])
            } else {
                init_status
            };
            end_like(shell_status)
        }
    }

    /// Mounts a `/proc` of the new namespace (so `ps`, `$$` and `/proc/<pid>` agree) and lets
    /// the command read it. Best effort: when the mount or the rule fails the command sees the
    /// old `/proc`.
    fn mount_proc(&self) {
        let none = std::ptr::null();
        let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        // SAFETY: NUL-terminated constant strings, NULL data; the attribute lives on the stack.
        unsafe {
            if libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                flags,
                none,
            ) != 0
            {
                return;
            }
            let Some((ruleset, access)) = &self.proc_rule else {
                return;
            };
            let fd = libc::open(c"/proc".as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
            let attr = PathBeneathAttr {
                allowed_access: *access,
                parent_fd: fd,
            };
            let added = fd >= 0
                && libc::syscall(
                    libc::SYS_landlock_add_rule,
                    ruleset.as_raw_fd(),
                    RULE_PATH_BENEATH,
                    &attr as *const PathBeneathAttr,
                    0u32,
                ) == 0;
            if fd >= 0 {
                libc::close(fd);
            }
            if !added {
                libc::umount2(c"/proc".as_ptr(), libc::MNT_DETACH);
            }
        }
    }
}

/// Init (PID 1 of the namespace): reaps until the command ends, then kills and reaps every
/// other process of the namespace, writes the command's wait status and the count to
/// `status_write` and exits.
fn run_init(command: libc::pid_t, status_write: RawFd) -> ! {
    close_all_except(&[status_write]);
    // SAFETY: waitpid/kill/write/_exit with plain values.
    unsafe {
        let mut shell_status = 0;
        loop {
            let mut st = 0;
            let pid = libc::waitpid(-1, &mut st, libc::__WALL);
            if pid == command {
                shell_status = st;
                break;
            }
            if pid < 0 && *libc::__errno_location() != libc::EINTR {
                break;
            }
        }
        libc::kill(-1, libc::SIGKILL);
        let mut killed: u32 = 0;
        loop {
            let pid = libc::waitpid(-1, std::ptr::null_mut(), libc::__WALL);
            if pid > 0 {
                killed += 1;
            } else if *libc::__errno_location() != libc::EINTR {
                break;
            }
        }
        let mut buf = [0u8; 8];
        buf[..4].copy_from_slice(&shell_status.to_le_bytes());
        buf[4..].copy_from_slice(&killed.to_le_bytes());
        libc::write(status_write, buf.as_ptr().cast(), buf.len());
        libc::_exit(0)
    }
}

/// Ends the calling process the way wait status `status` says a process ended: the same exit
/// code, or the same signal (default action restored first).
fn end_like(status: libc::c_int) -> ! {
    // SAFETY: signal/kill/_exit with plain values.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig)
        }
        libc::_exit(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            1
        })
    }
}

/// Closes every descriptor not in `keep` (`close_range(2)` over the gaps; a `close` loop up to
/// 4096 where it is missing).
fn close_all_except(keep: &[RawFd]) {
    let mut sorted = [0 as RawFd; 8];
    let n = keep.len().min(sorted.len());
    sorted[..n].copy_from_slice(&keep[..n]);
    sorted[..n].sort_unstable();
    let mut from: u32 = 0;
    for &fd in &sorted[..n] {
        let Ok(fd) = u32::try_from(fd) else { continue };
        if fd > from {
            close_range(from, fd - 1);
        }
        from = from.max(fd + 1);
    }
    close_range(from, u32::MAX);
}

fn close_range(first: u32, last: u32) {
    // SAFETY: close_range(2) / close(2) on descriptor numbers; closing an unused number is
    // harmless.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first, last, 0u32) != 0 {
            for fd in first..=last.min(4095) {
                libc::close(fd as libc::c_int);
            }
        }
    }
}
