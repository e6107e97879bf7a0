//! Embedded git directories: a directory laid out the way git recognises a (bare) git
//! directory — a `HEAD` file plus an `objects/` or `refs/` directory (`setup.c`,
//! `is_git_directory`) — and git configuration that makes git run a program. A user's `git
//! status` inside such a directory (or a shell prompt's git integration) reads its `config`
//! and runs e.g. `core.fsmonitor`, so nothing the model writes may create one: the file tools
//! refuse it (`ahelper_agents::tools`) and [`crate::scan_hazards`] flags it.

/// The directories (repository- or workspace-relative, `/`-separated, `""` for the root) that
/// writing the file `path` could turn into a git directory: the parent of a `HEAD` or
/// `config`, and the parent of every `objects` or `refs` component on the way.
pub fn git_dir_candidates(path: &str) -> Vec<String> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let mut dirs = Vec::new();
    let Some((name, _)) = parts.split_last() else {
        return dirs;
    };
    if *name == "HEAD" || name.eq_ignore_ascii_case("config") {
        dirs.push(parts[..parts.len() - 1].join("/"));
    }
    for (i, part) in parts[..parts.len() - 1].iter().enumerate() {
        if matches!(*part, "objects" | "refs") {
            dirs.push(parts[..i].join("/"));
        }
    }
    dirs.dedup();
    dirs
}

/// True when a directory with these entries looks like a git directory to git: `has_head`
/// (a `HEAD` file) and `has_objects` or `has_refs` (directories).
pub fn is_git_dir_layout(has_head: bool, has_objects: bool, has_refs: bool) -> bool {
    has_head && (has_objects || has_refs)
}

/// Keys of git's `core` section that name a program git runs, or move the work tree / hooks.
const CORE_KEYS: &[&str] = &[
    "worktree",
    "fsmonitor",
    "hookspath",
    "sshcommand",
    "pager",
    "editor",
    "askpass",
    "gitproxy",
];

/// Sections whose settings run programs or pull in other configuration (`hook.<name>.command`
/// of git 2.46, filters, credential helpers, includes).
const SECTIONS: &[&str] = &["hook", "filter", "credential", "include", "includeif"];

/// The first setting of git configuration `text` (git-config(1) syntax) that makes git run a
/// program or changes where the work tree and hooks are (`core.fsmonitor`, `core.worktree`,
/// `core.hooksPath`, `hook.*`, `filter.*`, …), as `section.key`; `None` when there is none.
pub fn config_running_code(text: &str) -> Option<String> {
    let mut section = String::new();
    for line in text.lines() {
        let mut line = line.trim();
        if let Some(rest) = line.strip_prefix('[') {
            let Some((header, after)) = rest.split_once(']') else {
                continue;
            };
            section = header
                .split(|c: char| c.is_whitespace() || c == '"' || c == '.')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            line = after.trim();
        }
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        let key = line
            .split(|c: char| c == '=' || c.is_whitespace())
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        let runs = (section == "core" && CORE_KEYS.contains(&key.as_str()))
            || SECTIONS.contains(&section.as_str())
            || (section == "diff" && key == "external");
        if runs && !key.is_empty() {
            return Some(format!("{section}.{key}"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_are_the_directories_a_write_could_complete() {
        assert_eq!(git_dir_candidates("evil/HEAD"), ["evil"]);
        assert_eq!(git_dir_candidates("HEAD"), [""]);
        assert_eq!(git_dir_candidates("evil/objects/.keep"), ["evil"]);
        assert_eq!(git_dir_candidates("a/refs/heads/main"), ["a"]);
        assert_eq!(git_dir_candidates("x/config"), ["x"]);
        assert!(git_dir_candidates("src/objects.rs").is_empty());
        assert!(git_dir_candidates("src/main.rs").is_empty());
    }

    #[test]
    fn config_that_runs_code_is_recognised() {
        let fsmonitor = "[core]\n\tbare = false\n\tfsmonitor = sh p.sh\n";
        assert_eq!(
            config_running_code(fsmonitor).as_deref(),
            Some("core.fsmonitor")
        );
        assert_eq!(
            config_running_code("[core] worktree = .\n").as_deref(),
            Some("core.worktree")
        );
        assert_eq!(
            config_running_code("[hook \"x\"]\n command = y\n").as_deref(),
            Some("hook.command")
        );
        assert_eq!(
            config_running_code("[CORE]\n HooksPath=h\n").as_deref(),
            Some("core.hookspath")
        );
        assert_eq!(config_running_code("[core]\n bare = true\n"), None);
        assert_eq!(config_running_code("key = value\nfsmonitor = 1\n"), None);
        assert_eq!(config_running_code("# [core] fsmonitor = x\n"), None);
    }
}
