//! Finding and ending the processes ahelper's commands started, wherever they went.
//!
//! A command's descendants can leave its process group (`setsid`), be re-parented to PID 1
//! (`nohup … &`, a double fork) or outlive ahelper itself. What they cannot shed without
//! `exec`-ing with a new environment is the environment they inherited, so every command
//! carries markers ([`COMMAND_VAR`], [`OWNER_VAR`], and for a swarm worker
//! `AHELPER_RUN_ID`), and [`kill_marked`] walks `/proc` for processes whose
//! `/proc/<pid>/environ` holds `NAME=value` and sends them `SIGKILL`.
//!
//! Pid reuse: a process is signalled through a `pidfd` opened *before* its environment is
//! re-checked, so the signal reaches exactly the process that was verified to carry the
//! marker (kernels without `pidfd_open`, older than 5.3, fall back to `kill(2)` right after
//! the re-check).
//!
//! A command confined by the OS sandbox also runs in a user namespace of its own
//! ([`crate::sandbox_os`]): a process cannot leave a user namespace, only create nested ones,
//! so [`kill_in_user_namespace`] finds the processes that shed the environment marker (`env -i
//! setsid sh -c …`) by the namespace they (or their namespace's ancestors, `unshare -U`) live
//! in.
//!
//! Limits: a process of a command without a user namespace of its own (sandbox off, user
//! namespaces unavailable) that `exec`s with a cleared environment (`env -i …`) or overwrites
//! its environment block loses the marker; processes of other users are not readable.

use std::collections::HashSet;
use std::time::{Duration, Instant};

/// Environment variable naming one `run_command` call (a UUID); every process the command
/// starts inherits it.
pub const COMMAND_VAR: &str = "AHELPER_CMD_ID";
/// Environment variable naming the ahelper process that ran the command: [`owner_token`].
pub const OWNER_VAR: &str = "AHELPER_OWNER";
/// Environment variable naming the swarm run a worker's command belongs to.
pub const RUN_VAR: &str = "AHELPER_RUN_ID";

/// How long [`kill_marked`] keeps looking for marked processes (new forks, processes still
/// dying) before it gives up.
const SWEEP_LIMIT: Duration = Duration::from_secs(2);

/// `<pid>.<start time>` of this process: its pid and its start time in clock ticks since boot
/// (field 22 of `/proc/<pid>/stat`), unique on this machine until reboot. `<pid>.0` when the
/// start time cannot be read.
pub fn owner_token() -> String {
    let pid = std::process::id();
    format!("{pid}.{}", start_time(pid).unwrap_or(0))
}

/// Start time of `pid` in clock ticks since boot (field 22 of `/proc/<pid>/stat`).
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state …`; comm may contain spaces and parentheses: fields follow the last ')'.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Kills (`SIGKILL`) every live process except this one whose environment holds
/// `var=value`, repeating the sweep until none is left (a process may fork while it is swept)
/// or [`SWEEP_LIMIT`] passed. Returns how many distinct processes were signalled.
pub fn kill_marked(var: &str, value: &str) -> usize {
    kill_marked_any(var, &[value])
}

/// [`kill_marked`] for several values of `var` in one walk of `/proc` per round.
pub fn kill_marked_any(var: &str, values: &[&str]) -> usize {
    let needles: Vec<Vec<u8>> = values
        .iter()
        .map(|v| format!("{var}={v}").into_bytes())
        .collect();
    if needles.is_empty() {
        return 0;
    }
    sweep(&Mark::Environment(&needles))
}

/// Kills (`SIGKILL`) every live process other than this one that lives in the user namespace
/// with inode `namespace` ([`user_namespace_of`]) or in a namespace nested in it, repeating like
/// [`kill_marked`]. Returns how many distinct processes were signalled.
pub fn kill_in_user_namespace(namespace: u64) -> usize {
    sweep(&Mark::UserNamespace(namespace))
}

/// The inode of the user namespace `pid` lives in (`/proc/<pid>/ns/user`; still readable while
/// the process is a zombie), or `None` when it cannot be read.
pub fn user_namespace_of(pid: u32) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/ns/user"))
        .ok()
        .map(|m| m.ino())
}

/// What identifies the processes of one command or run.
enum Mark<'a> {
    /// Whole `NAME=value` entries of the environment.
    Environment(&'a [Vec<u8>]),
    /// The inode of a user namespace the process lives in or below.
    UserNamespace(u64),
}

impl Mark<'_> {
    fn carried_by(&self, pid: u32) -> bool {
        match self {
            Mark::Environment(needles) => has_marker(pid, needles),
            Mark::UserNamespace(ino) => in_user_namespace(pid, *ino),
        }
    }
}

/// Rounds of "find the marked processes, kill them" until none is left or [`SWEEP_LIMIT`].
fn sweep(mark: &Mark<'_>) -> usize {
    let me = std::process::id();
    let mut signalled = HashSet::new();
    let start = Instant::now();
    loop {
        let found = pids_carrying(mark, me);
        if found.is_empty() || start.elapsed() > SWEEP_LIMIT {
            return signalled.len();
        }
        for pid in found {
            if kill_verified(pid, mark) {
                signalled.insert(pid);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Pids (other than `me`) of live processes whose environment holds one of the entries
/// `needles` (`NAME=value`). Zombies have no readable environment and are not listed.
pub fn marked_pids(needles: &[Vec<u8>], me: u32) -> Vec<u32> {
    pids_carrying(&Mark::Environment(needles), me)
}

/// Pids (other than `me`) of processes carrying `mark`.
fn pids_carrying(mark: &Mark<'_>, me: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me && mark.carried_by(*pid))
        .collect()
}

/// `ioctl(2)` request `NS_GET_PARENT` (`_IO(0xb7, 0x2)`, linux/nsfs.h): a descriptor of the
/// parent of a user namespace.
const NS_GET_PARENT: libc::c_ulong = 0xb702;
/// How deep user namespaces nest at most (user_namespaces(7)).
const MAX_USER_NAMESPACE_DEPTH: usize = 32;

/// True when `pid` lives in the user namespace with inode `ino` or in one nested in it
/// (walking up with `NS_GET_PARENT`). Zombies are skipped: they have nothing left to kill.
fn in_user_namespace(pid: u32, ino: u64) -> bool {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let Ok(file) = std::fs::File::open(format!("/proc/{pid}/ns/user")) else {
        return false;
    };
    if is_zombie(pid) {
        return false;
    }
    let mut fd = OwnedFd::from(file);
    for _ in 0..=MAX_USER_NAMESPACE_DEPTH {
        // SAFETY: fstat(2) on a descriptor we own into a zeroed out-parameter.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
            return false;
        }
        if stat.st_ino == ino {
            return true;
        }
        // SAFETY: ioctl on a descriptor we own; NS_GET_PARENT returns a new descriptor or -1.
        let parent = unsafe { libc::ioctl(fd.as_raw_fd(), NS_GET_PARENT) };
        if parent < 0 {
            return false;
        }
        // SAFETY: `parent` is a new descriptor that nothing else owns.
        fd = unsafe { OwnedFd::from_raw_fd(parent) };
    }
    false
}

/// True when `/proc/<pid>/stat` says the process is a zombie (`Z`) or dead (`X`).
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let (_, rest) = stat.rsplit_once(')')?;
            rest.split_whitespace().next().map(|s| s == "Z" || s == "X")
        })
        .unwrap_or(true)
}

/// True when `/proc/<pid>/environ` holds one of the entries `needles` (whole entries).
fn has_marker(pid: u32, needles: &[Vec<u8>]) -> bool {
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    environ
        .split(|b| *b == 0)
        .any(|entry| needles.iter().any(|n| n == entry))
}

/// Sends `SIGKILL` to `pid` if it still carries `mark`, through a pidfd so that a reused pid
/// is never hit. True when the signal was sent.
fn kill_verified(pid: u32, mark: &Mark<'_>) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: pidfd_open(2) takes a pid and flags; it returns a new descriptor or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, raw, 0) };
    if pidfd < 0 {
        let unsupported = std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS);
        // SAFETY: kill(2) has no memory-safety preconditions.
        return unsupported
            && mark.carried_by(pid)
            && unsafe { libc::kill(raw, libc::SIGKILL) } == 0;
    }
    let pidfd = pidfd as i32;
    let sent = mark.carried_by(pid)
        // SAFETY: pidfd is the descriptor opened above; a null siginfo means "as kill(2)".
        && unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd,
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        } == 0;
    // SAFETY: closing the descriptor opened above, once.
    unsafe {
        libc::close(pidfd);
    }
    sent
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn owner_token_has_pid_and_start_time() {
        let token = owner_token();
        let (pid, start) = token.split_once('.').unwrap();
        assert_eq!(pid, std::process::id().to_string());
        assert!(start.parse::<u64>().unwrap() > 0);
    }

    #[test]
    fn kill_marked_ends_detached_marked_processes_only() {
        let marker = format!("sweep-test-{}", uuid::Uuid::now_v7());
        let spawn = |env: &str| {
            Command::new("setsid")
                .args(["sleep", "300"])
                .env(RUN_VAR, env)
                .spawn()
                .unwrap()
        };
        let mut ours = spawn(&marker);
        let mut other = spawn(&format!("{marker}-other"));
        // Wait until the environment is readable (the child has exec'd).
        let needle = format!("{RUN_VAR}={marker}").into_bytes();
        let deadline = Instant::now() + Duration::from_secs(10);
        while marked_pids(std::slice::from_ref(&needle), std::process::id()).is_empty() {
            assert!(Instant::now() < deadline, "marked child never appeared");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(kill_marked(RUN_VAR, &marker), 1);
        let status = ours.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        assert!(
            other.try_wait().unwrap().is_none(),
            "an unmarked process was killed"
        );
        other.kill().unwrap();
        other.wait().unwrap();
    }
}
