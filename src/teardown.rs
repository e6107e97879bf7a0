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
//! the default signal actions it was made with (made before any handler is installed, so
//! Ctrl-C ends it with ahelper), and makes only system calls on its own stack.

use std::ffi::c_void;

/// Stack of the holder: it only makes a few system calls.
const HOLDER_STACK_BYTES: usize = 64 * 1024;

/// Starts the memory holder of a one-shot run (see the module docs). Call it while no signal
/// handler is installed yet (before the async runtime starts). Best effort: when the holder
/// cannot be made (no pidfd, no memory for its stack, `clone` refused) or cannot let go of the
/// descriptors, ahelper's exit frees its memory itself, as without it.
pub(crate) fn start_memory_holder() {
    // SAFETY: `pidfd_open` of this process (close-on-exec); `mmap` of a fresh anonymous region
    // (checked); `clone` runs `holder` on the top of that region, which nothing else uses and
    // which is never unmapped while ahelper lives. `holder` touches no memory of ahelper's (no
    // allocation, no locks): system calls only, on its own stack. The pidfd is the holder's
    // alone once ahelper closes its copy.
    unsafe {
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

/// The holder's life: let go of every descriptor but `ahelper` (ahelper's pidfd), wait until
/// it reports ahelper's exit, then exit, freeing the address space. Exits at once (the memory
/// then freed by ahelper's own exit) when it cannot close the descriptors.
extern "C" fn holder(ahelper: *mut c_void) -> libc::c_int {
    let fd = ahelper as usize as u32;
    // SAFETY: system calls with integer arguments, a valid `sched_param` and `pollfd` on this
    // stack and a static name.
    unsafe {
        let below = fd == 0 || libc::syscall(libc::SYS_close_range, 0u32, fd - 1, 0u32) == 0;
        if !below || libc::syscall(libc::SYS_close_range, fd + 1, u32::MAX, 0u32) != 0 {
            // Returning ends this process (`clone` calls `exit`, not the C library's `exit`).
            return 0;
        }
        libc::prctl(libc::PR_SET_NAME, c"ahelper-memory".as_ptr(), 0, 0, 0);
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
        let mut exited = libc::pollfd {
            fd: fd as libc::c_int,
            events: libc::POLLIN,
            revents: 0,
        };
        // Readable once ahelper has exited; an error (none expected) ends the wait too.
        while libc::poll(&mut exited, 1, -1) == 0 {}
        0
    }
}
