//! The end of a one-shot run without its waiter waiting for the kernel to free ahelper's
//! memory (issue 11: exit within 2 ms of the final event).
//!
//! When the last thread of a process exits, the kernel frees its address space (page tables,
//! ~20 MiB of resident pages, the mappings of a 46 MB binary) and closes its descriptors
//! before it tells the parent: in a traced release run of `ahelper -p` the last thread's exit
//! took 0.4 ms before the parent's wake-up, most of the exit tail. A process sharing the
//! address space (`clone(CLONE_VM)`, the "memory holder") keeps it alive past ahelper's exit:
//! ahelper's exit then only drops its reference, the parent is told at once, and the holder
//! frees the memory right after. It learns of the exit from a pidfd of ahelper (`pidfd_open`),
//! which the kernel signals when it tells ahelper's parent, not earlier: end of file on a
//! pipe (at the descriptors' close) or `PR_SET_PDEATHSIG` (at the main thread's exit) came
//! soon enough for the holder to free the memory before the parent was told, as in a plain
//! exit. It runs in the idle scheduling class, so that the work takes no CPU from whoever
//! waits for ahelper.
//!
//! The holder holds nothing else: it closes its copy of ahelper's other descriptors first
//! thing (a pipe reader sees end of file when ahelper exits, not when the holder does), keeps
//! the signal actions it was made with (made before any handler of ahelper's is installed: the
//! defaults, but for Rust's own `SIGSEGV`/`SIGBUS` handlers and an ignored `SIGPIPE`, so Ctrl-C
//! ends it with ahelper), leaves ahelper's working directory for `/`, and makes only
//! raw system calls (no C library, so no `errno` written into ahelper's thread) on its own
//! stack.

use std::ffi::c_void;

/// Stack of the holder: it only makes a few system calls.
const HOLDER_STACK_BYTES: usize = 64 * 1024;

/// Starts the memory holder of a one-shot run (see the module docs). Call it while no signal
/// handler is installed yet (before the async runtime starts). No holder for the init of a PID
/// namespace (see the docs' "How `ahelper -p` ends"). Best effort: when the holder cannot be
/// made (no pidfd, no memory for its stack, `clone` refused) or cannot let go of the
/// descriptors, ahelper's exit frees its memory itself, as without it.
pub(crate) fn start_memory_holder() {
    // The holder makes its system calls itself (see `holder`), on these architectures.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    spawn_holder();
}

/// Makes the holder (see [`start_memory_holder`]).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn spawn_holder() {
    // SAFETY: `pidfd_open` of this process (close-on-exec); `mmap` of a fresh anonymous region
    // (checked); `clone` runs `holder` on the top of that region, which nothing else uses and
    // which is never unmapped while ahelper lives. `holder` touches no memory of ahelper's (no
    // allocation, no locks): system calls only, on its own stack. The pidfd is the holder's
    // alone once ahelper closes its copy.
    unsafe {
        // The init of a PID namespace (`docker run` without `--init`): the kernel tells the
        // parent of its exit only once every process of the namespace is gone, the holder's
        // freeing of the memory (in the idle class) included.
        if libc::getpid() == 1 {
            return;
        }
        let pidfd = libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) as libc::c_int;
        if pidfd < 0 {
            return;
        }
        let stack = libc::mmap(
            std::ptr::null_mut(),
            HOLDER_STACK_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        );
        if stack != libc::MAP_FAILED {
            let top = stack.cast::<u8>().add(HOLDER_STACK_BYTES).cast::<c_void>();
            let ahelper = pidfd as usize as *mut c_void;
            if libc::clone(holder, top, libc::CLONE_VM | libc::SIGCHLD, ahelper) == -1 {
                libc::munmap(stack, HOLDER_STACK_BYTES);
            }
        }
        libc::close(pidfd);
    }
}

/// The holder's life: let go of every descriptor but `ahelper` (ahelper's pidfd) and of
/// ahelper's working directory, wait until the pidfd reports ahelper's exit, then exit,
/// freeing the address space. Exits at once (the memory then freed by ahelper's own exit)
/// when it cannot close the descriptors.
///
/// Only raw system calls ([`raw::syscall4`]), no C library function: the holder runs with
/// ahelper's thread pointer (no `CLONE_SETTLS`), so a wrapper's failure would write `errno`
/// into ahelper's main thread, between one of ahelper's own calls and its read of `errno`
/// (a `close_range` or `sched_setscheduler` refused by a seccomp filter, say), and `poll`, a
/// cancellation point, would mark ahelper's main thread as cancelling asynchronously for as
/// long as the holder waits.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
extern "C" fn holder(ahelper: *mut c_void) -> libc::c_int {
    let fd = ahelper as usize;
    // SAFETY: raw system calls with integer arguments, a valid `sched_param` and `pollfd` on
    // this stack and static strings; none writes memory of ahelper's.
    unsafe {
        let below = fd == 0 || raw::syscall4(libc::SYS_close_range, 0, fd - 1, 0, 0) == 0;
        if !below || raw::syscall4(libc::SYS_close_range, fd + 1, u32::MAX as usize, 0, 0) != 0 {
            // Returning ends this process (`clone` calls `exit`, not the C library's `exit`).
            return 0;
        }
        // A directory ahelper ran in is not kept busy (an unmount) while the holder lingers.
        raw::syscall4(libc::SYS_chdir, c"/".as_ptr() as usize, 0, 0, 0);
        let name = c"ahelper-memory".as_ptr() as usize;
        raw::syscall4(libc::SYS_prctl, libc::PR_SET_NAME as usize, name, 0, 0);
        let param = libc::sched_param { sched_priority: 0 };
        let param_at = &raw const param as usize;
        raw::syscall4(
            libc::SYS_sched_setscheduler,
            0,
            libc::SCHED_IDLE as usize,
            param_at,
            0,
        );
        let mut exited = libc::pollfd {
            fd: fd as libc::c_int,
            events: libc::POLLIN,
            revents: 0,
        };
        let exited_at = &raw mut exited as usize;
        // Readable once ahelper has exited; another error (none expected: with no handler a
        // signal restarts the wait) ends the wait too.
        loop {
            let ready = raw::syscall4(libc::SYS_ppoll, exited_at, 1, 0, 0);
            if ready != 0 && ready != -(libc::EINTR as isize) {
                break;
            }
        }
        0
    }
}

/// System calls without the C library: no `errno`, no thread-local state, no cancellation.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod raw {
    /// System call `number` with four arguments; returns the kernel's result (a negative
    /// error number on failure).
    ///
    /// # Safety
    /// The call and its arguments must be sound for the calling process (pointers valid for
    /// what the call does with them).
    pub(super) unsafe fn syscall4(
        number: libc::c_long,
        a: usize,
        b: usize,
        c: usize,
        d: usize,
    ) -> isize {
        let ret: isize;
        // SAFETY: the caller's contract; x86_64's `syscall` clobbers only rcx and r11,
        // aarch64's `svc 0` only x0 (the result).
        #[cfg(target_arch = "x86_64")]
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") number as isize => ret,
                in("rdi") a,
                in("rsi") b,
                in("rdx") c,
                in("r10") d,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        #[cfg(target_arch = "aarch64")]
        unsafe {
            std::arch::asm!(
                "svc 0",
                in("x8") number,
                inlateout("x0") a as isize => ret,
                in("x1") b,
                in("x2") c,
                in("x3") d,
                options(nostack),
            );
        }
        ret
    }
}
