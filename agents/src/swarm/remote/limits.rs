//! What a worker machine's owner allows the coordinators it serves ([`WorkerLimits`]): the
//! coordinator keys it trusts, the repositories it fetches from and pushes to, the tools a
//! subtask's role may have, and whether a subtask may send it permission questions. A subtask
//! cannot widen any of them: a repository outside the list refuses the subtask; tools outside
//! the list are dropped from its role; `ask_coordinator` is ignored unless allowed. The
//! permission mode and rules are the machine's own (`--permission-mode`, its config) and no
//! message carries them.

use super::auth::TrustedKeys;
use super::wire::SubtaskMessage;
use std::sync::Arc;

/// The tools of the built-in worker role, the default of `--worker-tools`.
pub const DEFAULT_TOOLS: [&str; 7] = [
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "glob",
    "grep",
    "run_command",
];

/// A worker machine's limits (`ahelper worker` flags).
pub struct WorkerLimits {
    /// The coordinator keys whose subtasks, announcements, cancels and answers count.
    pub trusted: Arc<TrustedKeys>,
    /// The repositories it fetches from and pushes to.
    pub repos: RepoAllowList,
    /// The tools a subtask's role may have (names as in a role's `tools`).
    pub tools: Vec<String>,
    /// Whether subtasks may ask the coordinator's user (`--allow-ask`); otherwise a call its
    /// rules would ask about is refused at once, as in a run without a terminal.
    pub allow_ask: bool,
}

/// Repository URLs a worker machine accepts: each entry is a whole URL, or a prefix when it
/// ends with `/` or `:` (`https://forge.example/team/`, `git@forge.example:`), which a URL with
/// a `..` path segment never matches.
#[derive(Debug, Clone, Default)]
pub struct RepoAllowList(Vec<String>);

/// A subtask the machine's limits refuse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LimitRefusal {
    /// Its repository is not on the allow-list.
    #[error(
        "repository `{url}` is not on this worker's allow-list (--allow-repo); it is neither fetched nor pushed to"
    )]
    RepoNotAllowed {
        /// The URL (cut to 120 characters).
        url: String,
    },
}

/// How a subtask was narrowed to the machine's limits.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Narrowed {
    /// Tools of its role that were dropped.
    pub tools_dropped: Vec<String>,
    /// It asked to send permission questions and the machine does not allow that.
    pub ask_refused: bool,
}

impl RepoAllowList {
    /// The list of `entries` (empty entries ignored).
    pub fn new<S: AsRef<str>>(entries: &[S]) -> RepoAllowList {
        RepoAllowList(
            entries
                .iter()
                .map(|e| e.as_ref().trim().to_string())
                .filter(|e| !e.is_empty())
                .collect(),
        )
    }

    /// Whether no repository is allowed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `url` is allowed.
    pub fn allows(&self, url: &str) -> bool {
        let climbs = url
            .split(['/', ':'])
            .any(|segment| segment == ".." || segment == "%2e%2e");
        self.0.iter().any(|entry| {
            url == entry
                || ((entry.ends_with('/') || entry.ends_with(':'))
                    && url.starts_with(entry.as_str())
                    && !climbs)
        })
    }

    /// Checks `url`.
    ///
    /// # Errors
    /// [`LimitRefusal::RepoNotAllowed`].
    pub fn check(&self, url: &str) -> Result<(), LimitRefusal> {
        if self.allows(url) {
            return Ok(());
        }
        Err(LimitRefusal::RepoNotAllowed {
            url: crate::text::clip(url, 120).0.to_string(),
        })
    }
}

impl WorkerLimits {
    /// Narrows `msg` to these limits: refused when its repository is not allowed; its role's
    /// tools outside [`WorkerLimits::tools`] dropped; `ask_coordinator` off unless allowed.
    ///
    /// # Errors
    /// [`LimitRefusal`].
    pub fn apply(&self, msg: &mut SubtaskMessage) -> Result<Narrowed, LimitRefusal> {
        self.repos.check(&msg.repo_url)?;
        let (kept, dropped): (Vec<String>, Vec<String>) = std::mem::take(&mut msg.role.tools)
            .into_iter()
            .partition(|tool| self.tools.iter().any(|allowed| allowed == tool));
        msg.role.tools = kept;
        let ask_refused = msg.ask_coordinator && !self.allow_ask;
        msg.ask_coordinator &= self.allow_ask;
        Ok(Narrowed {
            tools_dropped: dropped,
            ask_refused,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_urls_and_prefixes_are_allowed_and_nothing_else() {
        let list = RepoAllowList::new(&[
            "/srv/git/project.git",
            "https://forge.example/team/",
            "git@forge.example:",
        ]);
        for url in [
            "/srv/git/project.git",
            "https://forge.example/team/a.git",
            "git@forge.example:team/a.git",
        ] {
            assert!(list.allows(url), "{url}");
        }
        for url in [
            "/srv/git/project.git2",
            "/srv/git/other.git",
            "/home/user/other-project",
            "https://forge.example/team/../other/a.git",
            "https://forge.example/teamx/a.git",
            "https://evil.example/team/a.git",
        ] {
            assert!(!list.allows(url), "{url}");
        }
        assert!(!RepoAllowList::default().allows("/srv/git/project.git"));
    }

    #[test]
    fn a_subtask_cannot_widen_the_tools_or_ask_unless_allowed() {
        use crate::swarm::plan::Subtask;
        use crate::swarm::roles::RoleDefinition;
        let limits = |allow_ask| WorkerLimits {
            trusted: Arc::default(),
            repos: RepoAllowList::new(&["/srv/git/"]),
            tools: vec!["read_file".into(), "write_file".into()],
            allow_ask,
        };
        let msg = || SubtaskMessage {
            version: super::super::wire::WIRE_VERSION,
            run_id: "r".into(),
            worker_id: "w1".into(),
            repo_url: "/srv/git/p.git".into(),
            start_commit: "a".repeat(40),
            subtask: Subtask {
                id: "s1".into(),
                title: "t".into(),
                instructions: "i".into(),
                scope: vec![],
                depends_on: vec![],
            },
            task: "t".into(),
            role: RoleDefinition {
                name: "worker".into(),
                description: String::new(),
                tools: vec!["read_file".into(), "run_command".into(), "mcp__*".into()],
                max_turns: None,
                mcp_servers: Vec::new(),
                instructions: String::new(),
            },
            ask_coordinator: true,
            first_attempt: true,
            fresh: super::super::auth::Freshness::new(super::super::auth::SHORT_LIFETIME),
        };
        let mut narrowed = msg();
        let outcome = limits(false).apply(&mut narrowed).unwrap();
        assert_eq!(narrowed.role.tools, vec!["read_file"]);
        assert_eq!(outcome.tools_dropped, vec!["run_command", "mcp__*"]);
        assert!(outcome.ask_refused && !narrowed.ask_coordinator);
        let mut asking = msg();
        limits(true).apply(&mut asking).unwrap();
        assert!(asking.ask_coordinator);
        let mut elsewhere = msg();
        elsewhere.repo_url = "/home/u/secret".into();
        assert!(matches!(
            limits(true).apply(&mut elsewhere),
            Err(LimitRefusal::RepoNotAllowed { .. })
        ));
    }
}
