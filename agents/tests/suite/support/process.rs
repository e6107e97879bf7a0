//! Processes the tests start and then look for in `/proc`: whether one is alive, waiting for it
//! to be gone, the pid a command wrote.

use std::path::PathBuf;
use std::time::{Duration, Instant};

/// True while `pid` exists and is not a zombie (the state in `/proc/<pid>/stat`).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(") ").next().and_then(|s| s.chars().next());
            state != Some('Z')
        }
        Err(_) => false,
    }
}

/// Waits up to `within` for `pid` to be gone (or a zombie); true when it is.
pub fn wait_dead(pid: i32, within: Duration) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The pid a command wrote to `path`, waiting up to 3 s for it to be there.
pub fn read_pid(path: PathBuf) -> i32 {
    let end = Instant::now() + Duration::from_secs(3);
    loop {
        if let Ok(s) = std::fs::read_to_string(&path)
            && let Ok(pid) = s.trim().parse()
        {
            return pid;
        }
        assert!(Instant::now() < end, "no pid written to {path:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
