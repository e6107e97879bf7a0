//! What of the OS sandbox this machine offers, for the tests that need it: on a machine without
//! it they say on stderr that they were skipped, and pass.

use ahelper_agents::sandbox_os::{landlock_status, namespaces_available};

/// What a test needs of the OS sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// Landlock confines the commands.
    Landlock,
    /// Landlock, and unprivileged user namespaces (a command gets its own PID, mount and
    /// network namespaces).
    LandlockAndNamespaces,
}

/// Whether this machine offers what `needs` names.
pub fn available(needs: Needs) -> bool {
    let landlock = landlock_status().abi().is_some();
    match needs {
        Needs::Landlock => landlock,
        Needs::LandlockAndNamespaces => landlock && namespaces_available(),
    }
}

/// Whether a test that needs `needs` can run here; when it cannot, says on stderr that it is
/// skipped and why.
pub fn runnable(needs: Needs) -> bool {
    let available = available(needs);
    if !available {
        match needs {
            Needs::Landlock => eprintln!("skipped: no landlock on this machine"),
            Needs::LandlockAndNamespaces => {
                eprintln!("skipped: no landlock or no user namespaces on this machine")
            }
        }
    }
    available
}

/// Returns from the calling test — which passes, saying on stderr that it was skipped — when
/// this machine does not offer what `$needs` (a [`Needs`]) names.
macro_rules! require_sandbox {
    ($needs:expr) => {
        if !$crate::suite::support::sandbox::runnable($needs) {
            return;
        }
    };
}
pub(crate) use require_sandbox;
