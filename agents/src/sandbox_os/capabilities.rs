//! Drops every capability of a command that runs in namespaces of its own, in the child before
//! `exec`.
//!
//! A process that makes a user namespace holds all capabilities in it; a command run as root
//! (mapped `0 0 1`) keeps them across `exec`. `CAP_SYS_ADMIN` over its own mount namespace
//! lets it take a non-recursive copy of a mount with `open_tree(OPEN_TREE_CLONE)` — which
//! landlock does not see, as it is no mount into the tree — and open files through that copy,
//! beneath the read-only binds that protect `.git`, `.ahelper` and the user's directories, and
//! beneath the binds that hide denied files. Without capabilities `open_tree` is refused
//! (`EPERM`), as `mount`, `umount` and `setns` are.
//!
//! What is cleared (Linux `capabilities(7)`): the bounding and ambient sets, so `exec` gives
//! nothing back; the securebits `NOROOT` and `NO_SETUID_FIXUP` (locked), so uid 0 gains nothing
//! at `exec`; then the effective, permitted and inheritable sets (`capset(2)`, version 3).

/// `_LINUX_CAPABILITY_VERSION_3` (`linux/capability.h`).
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// `SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
/// SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED` (`linux/securebits.h`).
const SECUREBITS: libc::c_ulong = 0b10_1111;

/// Capability numbers to drop from the bounding set: every one the kernel may know (it answers
/// `EINVAL` past its last).
const LAST_CAPABILITY: libc::c_ulong = 63;

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Drops every capability of the calling process for good (see the module docs). System calls
/// only: safe between `fork` and `exec`.
///
/// # Errors
/// The errno of `capset(2)` when the sets cannot be cleared (the command then does not start).
/// Setting the securebits or the bounding set needs `CAP_SETPCAP`; without it (a process that
/// has no capability to lose) their `EPERM` is ignored.
pub(super) fn drop_all() -> std::io::Result<()> {
    // SAFETY: prctl(2) with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0);
        for capability in 0..=LAST_CAPABILITY {
            libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0);
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        );
    }
    let header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset(2) reads a version-3 header and two data structs, which live on the stack
    // for the call.
    let result = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
    if result != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
