//! Whether the parts of the OS sandbox a test needs work on this machine: a test that needs one
//! asks here first and, where it is missing, says on stderr that it is skipped and returns.

use ahelper_agents::sandbox_os;

/// True when commands are confined by landlock on this machine.
pub fn landlock_available() -> bool {
    sandbox_os::landlock_status().abi().is_some()
}

/// True when landlock confines commands; otherwise prints that the test is skipped and why.
pub fn landlock_or_skip() -> bool {
    let available = landlock_available();
    if !available {
        eprintln!("skipped: landlock is not enabled on this kernel");
    }
    available
}

/// True when landlock confines commands and user namespaces can hide paths from them (the
/// whole OS sandbox); otherwise prints that the test is skipped and why.
pub fn full_sandbox_or_skip() -> bool {
    let available = landlock_available() && sandbox_os::namespaces_available();
    if !available {
        eprintln!("skipped: no landlock or no user namespaces on this machine");
    }
    available
}
