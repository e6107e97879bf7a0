//! Pushing finished workers' branches from a worker machine ([`Pusher`]): a branch is pushed
//! at once while fewer than [`PUSHES_IN_FLIGHT`] pushes run; the branches that finish while that many
//! run go together into the next `git push` of their clone, so the subtasks of one machine that
//! end at about the same time cost few pushes and none waits behind a queue of them. A
//! subtask announces its push when it starts committing ([`Pusher::announce`]): a push about
//! to start waits for the branches being committed, so that a machine's subtasks that end
//! together go in one push instead of one alone and the rest after it.

use super::batches::{Announced, Announcements, PUSHES_IN_FLIGHT, run_announced_batches};
use crate::swarm::git_task;
use ahelper_worktrees as git;
use std::path::PathBuf;
use tokio::sync::{mpsc, oneshot};

/// One branch to push: `commit` of the clone at `clone` to `refname` (a full ref) on `url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchPush {
    /// The cached clone holding the commit.
    pub clone: PathBuf,
    /// The repository URL pushed to.
    pub url: String,
    /// The branch's tip.
    pub commit: git::Oid,
    /// Where it goes on the remote (`refs/heads/ahelper/<run>/<worker>`).
    pub refname: String,
}

/// A queued push and who waits for its outcome.
struct Queued {
    push: BranchPush,
    reply: oneshot::Sender<Result<(), String>>,
}

/// The worker machine's push queue (cheap to clone; the queue runs while a clone is alive).
#[derive(Clone)]
pub struct Pusher {
    queue: mpsc::UnboundedSender<Queued>,
    announcements: Announcements,
}

impl Pusher {
    /// Starts the queue's task (on the current tokio runtime).
    pub fn start() -> Pusher {
        let (queue, pending) = mpsc::unbounded_channel();
        let announcements = Announcements::default();
        tokio::spawn(run(pending, announcements.clone()));
        Pusher {
            queue,
            announcements,
        }
    }

    /// Says a branch is being committed and will be pushed: until the returned [`Announced`]
    /// is passed to [`Pusher::push`] or dropped, no push starts without it.
    pub fn announce(&self) -> Announced {
        self.announcements.announce()
    }

    /// Pushes `push`: at once while fewer than [`PUSHES_IN_FLIGHT`] pushes run and no other
    /// announced branch is still being committed, else together with the pushes queued
    /// meanwhile. `announced`: this branch's announcement, withdrawn once it is queued.
    ///
    /// # Errors
    /// git's message when the push was refused or the remote unreachable.
    pub async fn push(&self, push: BranchPush, announced: Option<Announced>) -> Result<(), String> {
        let (reply, outcome) = oneshot::channel();
        let queued = self.queue.send(Queued { push, reply });
        drop(announced);
        queued.map_err(|_| "the machine's push queue stopped".to_string())?;
        outcome
            .await
            .map_err(|_| "the machine's push queue stopped".to_string())?
    }
}

/// Takes what is queued in batches ([`run_announced_batches`], up to [`PUSHES_IN_FLIGHT`] at
/// once, each after the branches announced meanwhile) and pushes each batch per clone and URL,
/// until every [`Pusher`] is gone.
async fn run(pending: mpsc::UnboundedReceiver<Queued>, announcements: Announcements) {
    run_announced_batches(
        pending,
        PUSHES_IN_FLIGHT,
        Some(announcements),
        |batch| async move {
            for group in by_target(batch) {
                let pushes: Vec<BranchPush> = group.iter().map(|q| q.push.clone()).collect();
                let outcomes = push_together(pushes).await;
                for (queued, outcome) in group.into_iter().zip(outcomes) {
                    let _ = queued.reply.send(outcome);
                }
            }
        },
    )
    .await;
}

/// `batch` split into groups of one clone and URL, in the order of their first push.
fn by_target(batch: Vec<Queued>) -> Vec<Vec<Queued>> {
    let mut groups: Vec<Vec<Queued>> = Vec::new();
    for queued in batch {
        let same = |g: &Vec<Queued>| {
            g[0].push.clone == queued.push.clone && g[0].push.url == queued.push.url
        };
        match groups.iter_mut().find(|g| same(g)) {
            Some(group) => group.push(queued),
            None => groups.push(vec![queued]),
        }
    }
    groups
}

/// Pushes every branch of one clone to one URL in one `git push`; when that fails and there
/// were several, each again alone, so a refused branch fails only its own subtask.
async fn push_together(pushes: Vec<BranchPush>) -> Vec<Result<(), String>> {
    let count = pushes.len();
    let outcome = git_task(move || {
        let (clone, url) = (pushes[0].clone.clone(), pushes[0].url.clone());
        let updates: Vec<(git::Oid, String)> = pushes
            .iter()
            .map(|p| (p.commit, p.refname.clone()))
            .collect();
        let together = git::push_commits(&clone, &url, &updates).map_err(|e| e.to_string());
        if together.is_ok() || count == 1 {
            return Ok(vec![together; count]);
        }
        tracing::info!(
            branches = count,
            "pushing finished branches together failed; pushing them one by one"
        );
        Ok(pushes
            .iter()
            .map(|p| {
                git::push_commit(&p.clone, &p.url, p.commit, &p.refname).map_err(|e| e.to_string())
            })
            .collect())
    })
    .await;
    outcome.unwrap_or_else(|e| vec![Err(e.to_string()); count])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swarm::remote::testing::git;
    use std::path::Path;

    /// A clone with `count` commits on top of each other, and a bare remote whose
    /// `post-receive` hook writes one line per push (the refs it updated) to `pushes.log`.
    fn clone_and_remote(dir: &Path, count: usize) -> (PathBuf, PathBuf, Vec<git::Oid>) {
        let (clone, remote) = (dir.join("clone"), dir.join("remote.git"));
        std::fs::create_dir_all(&clone).unwrap();
        git(&clone, &["init", "-q"]);
        let commits = (0..count)
            .map(|i| {
                std::fs::write(clone.join("f.txt"), format!("{i}\n")).unwrap();
                git(&clone, &["add", "f.txt"]);
                git(&clone, &["commit", "-q", "-m", &format!("c{i}")]);
                git::Oid::from_str(&git(&clone, &["rev-parse", "HEAD"])).unwrap()
            })
            .collect();
        git(dir, &["init", "-q", "--bare", remote.to_str().unwrap()]);
        let hook = remote.join("hooks/post-receive");
        let log = dir.join("pushes.log");
        let script = format!(
            "#!/bin/sh\nrefs=$(cut -d' ' -f3 | tr '\\n' ' ')\necho \"$refs\" >> '{}'\n",
            log.display()
        );
        std::fs::write(&hook, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        (clone, remote, commits)
    }

    fn push_of(clone: &Path, remote: &Path, commit: git::Oid, worker: usize) -> BranchPush {
        BranchPush {
            clone: clone.to_path_buf(),
            url: remote.to_string_lossy().into_owned(),
            commit,
            refname: format!("refs/heads/ahelper/run/w{worker}"),
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn branches_queued_together_go_in_one_push_and_all_arrive() {
        let dir = tempfile::tempdir().unwrap();
        let (clone, remote, commits) = clone_and_remote(dir.path(), 3);
        let pusher = Pusher::start();
        // All three are queued before the queue's task runs (one thread): one batch.
        let outcomes = futures::future::join_all(
            commits
                .iter()
                .enumerate()
                .map(|(i, c)| pusher.push(push_of(&clone, &remote, *c, i + 1), None)),
        )
        .await;
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        for (i, commit) in commits.iter().enumerate() {
            let tip = git(&remote, &["rev-parse", &format!("ahelper/run/w{}", i + 1)]);
            assert_eq!(tip, commit.to_string());
        }
        let log = std::fs::read_to_string(dir.path().join("pushes.log")).unwrap();
        assert_eq!(log.lines().count(), 1, "one push: {log}");
        for i in 1..=3 {
            assert!(
                log.contains(&format!("refs/heads/ahelper/run/w{i}")),
                "{log}"
            );
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_push_waits_for_a_branch_being_committed_and_takes_it_along() {
        let dir = tempfile::tempdir().unwrap();
        let (clone, remote, commits) = clone_and_remote(dir.path(), 2);
        let pusher = Pusher::start();
        let committing = pusher.announce();
        let first = tokio::spawn({
            let (pusher, push) = (pusher.clone(), push_of(&clone, &remote, commits[0], 1));
            async move { pusher.push(push, None).await }
        });
        // Without the announcement the first branch would be pushed alone by now.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!first.is_finished(), "the first push waits");
        let second = pusher.push(push_of(&clone, &remote, commits[1], 2), Some(committing));
        assert!(second.await.is_ok());
        assert!(first.await.unwrap().is_ok());
        let log = std::fs::read_to_string(dir.path().join("pushes.log")).unwrap();
        assert_eq!(log.lines().count(), 1, "one push: {log}");
        assert!(
            log.contains("ahelper/run/w1") && log.contains("ahelper/run/w2"),
            "{log}"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_refused_branch_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (clone, remote, commits) = clone_and_remote(dir.path(), 2);
        let pusher = Pusher::start();
        let missing = git::Oid::from_str(&"1".repeat(40)).unwrap();
        let pushes = [
            push_of(&clone, &remote, commits[0], 1),
            push_of(&clone, &remote, missing, 2),
            push_of(&clone, &remote, commits[1], 3),
        ];
        let outcomes =
            futures::future::join_all(pushes.into_iter().map(|p| pusher.push(p, None))).await;
        assert!(outcomes[0].is_ok() && outcomes[2].is_ok(), "{outcomes:?}");
        assert!(outcomes[1].is_err(), "{outcomes:?}");
        assert_eq!(
            git(&remote, &["rev-parse", "ahelper/run/w3"]),
            commits[1].to_string()
        );
    }
}
