//! Stopping everything a run started, on the user's second Ctrl-C.

/// Kills every descendant process of this process: walks `/proc` for processes whose parent
/// chain leads to us and sends `SIGKILL` to each one's process group (unless it is ours) and to
/// the process itself; then every process carrying this ahelper's
/// [`crate::process_sweep::OWNER_VAR`] marker (commands' processes that left the tree, e.g.
/// `setsid … &` whose shell exited). Linux only (`/proc`); elsewhere it finds nothing.
pub fn kill_descendants() {
    kill_tree();
    crate::process_sweep::kill_marked(
        crate::process_sweep::OWNER_VAR,
        &crate::process_sweep::owner_token(),
    );
}

fn kill_tree() {
    for pid in descendants(std::process::id() as i32, &parent_table()) {
        // SAFETY: plain signal sends to processes we started.
        unsafe {
            let pgid = libc::getpgid(pid);
            if pgid > 0 && pgid != libc::getpgid(0) {
                libc::kill(-pgid, libc::SIGKILL);
            }
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// `(pid, parent pid)` of every process in `/proc`.
fn parent_table() -> Vec<(i32, i32)> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<i32>().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // The command name may contain spaces: the fields follow the last ')'.
            let (_, rest) = stat.rsplit_once(')')?;
            let ppid = rest.split_whitespace().nth(1)?.parse::<i32>().ok()?;
            Some((pid, ppid))
        })
        .collect()
}

/// Every process below `root` in `parents`, parents before children (`root` excluded).
fn descendants(root: i32, parents: &[(i32, i32)]) -> Vec<i32> {
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        for (pid, ppid) in parents {
            if *ppid == parent && !found.contains(pid) {
                found.push(*pid);
            }
        }
        i += 1;
    }
    found.split_off(1)
}

/// Kills every process still running from a command of the given runs (their
/// `AHELPER_RUN_ID` marker, [`crate::process_sweep`]: left behind by an ahelper that was
/// killed with `SIGKILL`). Call it only for runs that are not active — before touching their
/// worktrees. Returns how many processes were killed.
pub fn kill_run_leftovers<'a>(run_ids: impl IntoIterator<Item = &'a str>) -> usize {
    let ids: Vec<&str> = run_ids.into_iter().collect();
    crate::process_sweep::kill_marked_any(crate::process_sweep::RUN_VAR, &ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_follow_the_parent_chain() {
        let table = [(10, 1), (11, 10), (12, 11), (13, 1), (14, 10)];
        assert_eq!(descendants(10, &table), vec![11, 14, 12]);
        assert!(descendants(13, &table).is_empty());
    }
}
