//! The run's spare worktrees and who holds which worktree directory: worker start-up without
//! `git worktree add` on its critical path.
//!
//! * While the coordinator plans, [`warm_up`] creates spares (HEAD detached at the base commit,
//!   [`git::create_spare_worktree`]) for the first worker slots, two at a time. A fresh spare
//!   recycled at the base commit rewrites no file ([`git::SpareFiles::AsCreated`]).
//! * While workers run, [`WorktreePool::replenish`] makes spares for the subtasks that wait for
//!   a slot, when the run's first spare was cheap to make ([`REPLENISH_MAX_CREATE`]); the
//!   coordinator asks for them only while no worker is starting or committing (they would
//!   compete with a slot's hand-over for the CPU and the git lock).
//! * A local worker starts with a [`WorktreeLease`]: the exclusive right to its worktree
//!   directory, and a spare to turn into it when one is ready ([`git::recycle_worktree`]: a
//!   rename and a branch under the lock, `git reset --hard` outside it).
//! * A merged worker's clean worktree is parked as a spare ([`ParkTicket`],
//!   [`git::park_worktree`]) while more subtasks wait to start than spares are ready, instead
//!   of being removed.
//! * When no subtask waits any more, [`WorktreePool::close`] hands back the spares left for
//!   removal.
//!
//! Ownership is checked here, not by path strings scattered over the run: a directory held by a
//! lease or being parked is never leased, parked or handed out again until its holder lets go,
//! and a spare is handed to one lease only ([`WorktreePool`] tests).

use super::GitTaskError;
use crate::config::{Config, EnvSnapshot};
use ahelper_worktrees::{self as git, RepoLock};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// Who holds a worktree directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// The running worker of this plan index.
    Worker(usize),
    /// The coordinator, turning a merged worker's worktree into a spare.
    Parking,
}

/// Why a directory cannot be leased or parked.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LeaseError {
    /// Someone holds it.
    #[error(
        "worktree {} is held by {holder:?}; it is never handed to a second owner while in use",
        path.display()
    )]
    Held {
        /// The directory.
        path: PathBuf,
        /// Its holder.
        holder: Holder,
    },
    /// No subtask waits to start any more: no new spares.
    #[error("the run needs no more spare worktrees")]
    Closed,
    /// Enough spares are ready or being made for the subtasks that wait.
    #[error("enough spare worktrees are ready for the subtasks that wait")]
    Enough,
}

/// The spares of one run and the directories held in it. Shared by the run's local worker
/// slots and its coordinator as `Arc<WorktreePool>`; its state is behind one mutex, held only
/// for bookkeeping (never across git work).
#[derive(Debug)]
pub struct WorktreePool {
    /// The run's worktree directory (`<root>/<repo-id>/<run>`): spares are `.spare-<n>` in it.
    base: PathBuf,
    state: Mutex<PoolState>,
}

/// Where and how the pool makes new spares (set by [`warm_up`]).
#[derive(Debug, Clone)]
struct Maker {
    lock: Arc<RepoLock>,
    repo: PathBuf,
    /// The run's base commit: every new spare is detached there.
    commit: git::Oid,
}

/// Spares are made in the background while workers run ([`WorktreePool::replenish`]) only when
/// the run's first spare took at most this long to make (a small repository: the workers wait
/// on the model meanwhile, the CPU is idle). Beyond it (a large repository, whose checkout
/// would compete with the workers' own commands) the next workers get parked worktrees
/// ([`ParkTicket`]), reset to their start commit.
pub const REPLENISH_MAX_CREATE: std::time::Duration = std::time::Duration::from_millis(500);

#[derive(Debug, Default)]
struct PoolState {
    /// Ready spares, HEAD detached, held by nobody.
    spares: Vec<Spare>,
    /// Directories held, and by whom.
    held: BTreeMap<PathBuf, Holder>,
    /// Spares not to hand out any more (the pool closed while they were held): removed with
    /// the others.
    retired: Vec<PathBuf>,
    /// Spare paths handed out so far (for unique names).
    named: u64,
    closed: bool,
    /// The tasks making spares (warm-up, replenishment), awaited before the run reports its
    /// end.
    makers: Vec<tokio::task::JoinHandle<()>>,
    /// How to make spares; `None`: this pool only takes parked ones.
    maker: Option<Maker>,
    /// Spares being made now.
    making: usize,
    /// How long the run's first spare took to make (`None` until one was made).
    first_cost: Option<std::time::Duration>,
    /// A creation failed: no more are tried.
    failed: bool,
}

impl WorktreePool {
    /// An empty, open pool for the run whose worktrees live in `base`.
    pub fn new(base: PathBuf) -> Arc<WorktreePool> {
        Arc::new(WorktreePool {
            base,
            state: Mutex::new(PoolState::default()),
        })
    }

    fn state(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new spare path, `<base>/.spare-<n>`, unique in this pool.
    pub fn next_spare_path(&self) -> PathBuf {
        let mut state = self.state();
        state.named += 1;
        self.base.join(format!(".spare-{}", state.named))
    }

    /// Worker `worker` takes its worktree directory `worktree`, with a ready spare when there
    /// is one.
    ///
    /// # Errors
    /// [`LeaseError::Held`] when someone else holds `worktree`.
    pub fn lease(
        self: &Arc<Self>,
        worker: usize,
        worktree: PathBuf,
    ) -> Result<WorktreeLease, LeaseError> {
        let mut state = self.state();
        if let Some(&holder) = state.held.get(&worktree) {
            return Err(LeaseError::Held {
                path: worktree,
                holder,
            });
        }
        state.held.insert(worktree.clone(), Holder::Worker(worker));
        let spare = state.spares.pop();
        if let Some(spare) = &spare {
            state
                .held
                .insert(spare.path.clone(), Holder::Worker(worker));
        }
        Ok(WorktreeLease {
            pool: self.clone(),
            worktree,
            spare,
        })
    }

    /// The coordinator starts parking the merged worktree `worktree` as a spare.
    ///
    /// # Errors
    /// [`LeaseError::Closed`] when no subtask waits any more (remove it instead);
    /// [`LeaseError::Enough`] when `queued` subtasks wait and at least as many spares are
    /// ready or being made (remove it instead); [`LeaseError::Held`] when someone holds it
    /// (leave it alone).
    pub fn begin_park(
        self: &Arc<Self>,
        worktree: &Path,
        queued: usize,
    ) -> Result<ParkTicket, LeaseError> {
        let spare = self.next_spare_path();
        let mut state = self.state();
        if let Some(&holder) = state.held.get(worktree) {
            return Err(LeaseError::Held {
                path: worktree.to_path_buf(),
                holder,
            });
        }
        if state.closed {
            return Err(LeaseError::Closed);
        }
        if state.spares.len() + state.making >= queued {
            return Err(LeaseError::Enough);
        }
        state.held.insert(worktree.to_path_buf(), Holder::Parking);
        state.held.insert(spare.clone(), Holder::Parking);
        Ok(ParkTicket {
            pool: self.clone(),
            worktree: worktree.to_path_buf(),
            spare,
        })
    }

    /// A new spare made by [`git::create_spare_worktree`] (by [`warm_up`]) is ready, unused
    /// ([`git::SpareFiles::AsCreated`]). `false` when the pool is closed: the caller removes it.
    pub fn add_spare(&self, spare: PathBuf) -> bool {
        let mut state = self.state();
        if state.closed {
            return false;
        }
        state.spares.push(Spare {
            path: spare,
            files: git::SpareFiles::AsCreated,
        });
        true
    }

    /// How many spares are ready (held by nobody).
    pub fn ready(&self) -> usize {
        self.state().spares.len()
    }

    /// Whether spares are still wanted.
    pub fn is_open(&self) -> bool {
        !self.state().closed
    }

    /// No subtask waits any more: no new spares; the ready and retired ones are returned for
    /// removal (held ones stay with their holders).
    pub fn close(&self) -> Vec<PathBuf> {
        let mut state = self.state();
        state.closed = true;
        let mut out: Vec<PathBuf> = std::mem::take(&mut state.spares)
            .into_iter()
            .map(|s| s.path)
            .collect();
        out.append(&mut state.retired);
        out
    }

    /// The tasks making spares, once each (to await, after [`Self::close`], before the run
    /// ends): a task that finishes after the close removes what it made.
    pub fn take_makers(&self) -> Vec<tokio::task::JoinHandle<()>> {
        std::mem::take(&mut self.state().makers)
    }

    /// `wanted` subtasks (at most the run's `max_workers`) will start after the running ones:
    /// makes, in the background, the spares missing for them (ready and being made count), when
    /// the pool makes spares and its first one was cheap ([`REPLENISH_MAX_CREATE`]). Never
    /// waits. Call from the runtime.
    pub fn replenish(self: &Arc<Self>, wanted: usize) {
        let mut state = self.state();
        let cheap = state.first_cost.is_some_and(|c| c <= REPLENISH_MAX_CREATE);
        let Some(maker) = state.maker.clone().filter(|_| cheap) else {
            return;
        };
        let missing = wanted.saturating_sub(state.spares.len() + state.making);
        if state.closed || state.failed || missing == 0 {
            return;
        }
        state.making += missing;
        let pool = self.clone();
        let task = tokio::task::spawn_blocking(move || {
            for _ in 0..missing {
                pool.make_one(&maker);
            }
        });
        state.makers.push(task);
    }

    /// Makes one spare that was counted in `making` (nothing when the pool closed or a
    /// creation failed meanwhile).
    fn make_one(&self, maker: &Maker) {
        if !self.is_open() || self.state().failed {
            self.state().making -= 1;
            return;
        }
        let path = self.next_spare_path();
        let started = std::time::Instant::now();
        let made = git::create_spare_worktree(&maker.lock, &maker.repo, &path, maker.commit);
        let mut state = self.state();
        state.making -= 1;
        match made {
            Ok(info) => {
                state.first_cost.get_or_insert(started.elapsed());
                if state.closed {
                    drop(state);
                    remove_spare(&maker.lock, &maker.repo, &info.path);
                } else {
                    state.spares.push(Spare {
                        path: info.path,
                        files: git::SpareFiles::AsCreated,
                    });
                }
            }
            Err(e) => {
                state.failed = true;
                tracing::warn!(error = %e, "could not create a spare worktree; workers create theirs");
            }
        }
    }

    /// A worker machine's pool for one cached clone (`ahelper worker`), open for every run of
    /// that clone: spares are made in `repo` under `lock` (the lock every worktree of the
    /// clone is made under), in `base`, at the commit of the last [`Self::fill_at`].
    pub fn for_clone(base: PathBuf, lock: Arc<RepoLock>, repo: PathBuf) -> Arc<WorktreePool> {
        let pool = WorktreePool::new(base);
        pool.state().maker = Some(Maker {
            lock,
            repo,
            commit: git::Oid::ZERO_SHA1,
        });
        pool
    }

    /// A run of the clone starts at `commit` (its base): spares are made there from now on,
    /// and, in the background ([`WARM_UP_THREADS`] at a time), as many as are missing for
    /// `count` ready or being made. Spares made earlier at another commit stay and count: a
    /// worker recycling one gets its files reset to its start commit
    /// ([`git::recycle_worktree`]), which rewrites only the files that differ. A pool made by
    /// [`Self::new`] (no maker) or closed makes none. Never waits; call from the runtime.
    pub fn fill_at(self: &Arc<Self>, commit: git::Oid, count: usize) {
        let mut state = self.state();
        let Some(maker) = state.maker.as_mut() else {
            return;
        };
        maker.commit = commit;
        let maker = maker.clone();
        // A new run gets a new try after a creation failed.
        state.failed = false;
        state.makers.retain(|task| !task.is_finished());
        let missing = count.saturating_sub(state.spares.len() + state.making);
        if state.closed || missing == 0 {
            return;
        }
        state.making += missing;
        drop(state);
        self.spawn_makers(&maker, missing);
    }

    /// Makes `count` spares counted in `making` in the background, [`WARM_UP_THREADS`] at a
    /// time.
    fn spawn_makers(self: &Arc<Self>, maker: &Maker, count: usize) {
        for share in split(count, WARM_UP_THREADS) {
            let (pool, maker) = (self.clone(), maker.clone());
            let task = tokio::task::spawn_blocking(move || {
                for _ in 0..share {
                    pool.make_one(&maker);
                }
            });
            self.state().makers.push(task);
        }
    }

    /// The repository lock and repository the pool makes its spares in (`None`: it makes none).
    pub fn maker_repo(&self) -> Option<(Arc<RepoLock>, PathBuf)> {
        let state = self.state();
        let maker = state.maker.as_ref()?;
        Some((maker.lock.clone(), maker.repo.clone()))
    }

    /// The holder of `path`, if any.
    pub fn holder(&self, path: &Path) -> Option<Holder> {
        self.state().held.get(path).copied()
    }
}

/// One worker's exclusive right to its worktree directory, and the spare it may turn into
/// it. Not `Clone`: one holder. Dropping it lets go of both (a spare not taken goes back to
/// the pool).
#[derive(Debug)]
pub struct WorktreeLease {
    pool: Arc<WorktreePool>,
    worktree: PathBuf,
    spare: Option<Spare>,
}

/// A ready spare and what is known of its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spare {
    /// Its directory.
    pub path: PathBuf,
    /// Made and never used, or parked after use.
    pub files: git::SpareFiles,
}

impl WorktreeLease {
    /// The worker's worktree directory.
    pub fn worktree(&self) -> &Path {
        &self.worktree
    }

    /// Whether a spare was handed to this lease (and not used or given back yet).
    pub fn has_spare(&self) -> bool {
        self.spare.is_some()
    }

    /// The spare handed to this lease, taken (to recycle it into [`Self::worktree`]); it stays
    /// held until [`Self::spare_used`] or [`Self::spare_failed`].
    pub fn take_spare(&mut self) -> Option<Spare> {
        self.spare.clone()
    }

    /// The spare became the worktree (it no longer exists as a spare).
    pub fn spare_used(&mut self) {
        if let Some(spare) = self.spare.take() {
            self.pool.state().held.remove(&spare.path);
        }
    }

    /// Recycling the spare failed: when it is still there (the failure came before it was
    /// moved) it is a spare again, else nothing is left of it.
    pub fn spare_failed(&mut self) {
        if let Some(spare) = self.spare.take() {
            let mut state = self.pool.state();
            state.held.remove(&spare.path);
            if spare.path.exists() {
                if state.closed {
                    state.retired.push(spare.path);
                } else {
                    // What a failed attempt left in it is not known: reset when used.
                    state.spares.push(Spare {
                        files: git::SpareFiles::Used,
                        ..spare
                    });
                }
            }
        }
    }
}

impl Drop for WorktreeLease {
    fn drop(&mut self) {
        let mut state = self.pool.state();
        state.held.remove(&self.worktree);
        if let Some(spare) = self.spare.take() {
            state.held.remove(&spare.path);
            if state.closed {
                state.retired.push(spare.path);
            } else {
                state.spares.push(spare);
            }
        }
    }
}

/// The coordinator's hold on a merged worktree while it becomes a spare.
#[derive(Debug)]
pub struct ParkTicket {
    pool: Arc<WorktreePool>,
    worktree: PathBuf,
    spare: PathBuf,
}

impl ParkTicket {
    /// The worktree being parked.
    pub fn worktree(&self) -> &Path {
        &self.worktree
    }

    /// Where the spare goes.
    pub fn spare(&self) -> &Path {
        &self.spare
    }

    /// Parked: the spare is ready (or, when the pool closed meanwhile, returned for removal).
    pub fn parked(self) -> Option<PathBuf> {
        let spare = self.spare.clone();
        let mut state = self.pool.state();
        state.held.remove(&spare);
        if state.closed {
            return Some(spare);
        }
        state.spares.push(Spare {
            path: spare,
            files: git::SpareFiles::Used,
        });
        None
    }
}

impl Drop for ParkTicket {
    fn drop(&mut self) {
        let mut state = self.pool.state();
        state.held.remove(&self.worktree);
        state.held.remove(&self.spare);
    }
}

/// Spares being made while the coordinator plans: the pool they go into and the repository
/// lock they were made under (the run's lock from then on: one lock per repository).
#[derive(Debug, Clone)]
pub struct WarmStart {
    /// The run's pool.
    pub pool: Arc<WorktreePool>,
    /// The repository's lock.
    pub lock: Arc<RepoLock>,
    repo: PathBuf,
}

impl WarmStart {
    /// Discards a warm-up that no run will use (the plan failed or was declined): waits for
    /// it and removes its spares.
    pub async fn discard(self) {
        let removal = close_and_remove(&self.pool, self.lock.clone(), self.repo.clone());
        let _ = removal.await;
        for task in self.pool.take_makers() {
            let _ = task.await;
        }
        // A spare that was finished after the close was removed by the warm-up itself.
        let _ = close_and_remove(&self.pool, self.lock, self.repo).await;
    }
}

/// Starts creating up to `count` spares at the run's base commit in the background while the
/// coordinator plans, [`WARM_UP_THREADS`] at a time; each goes into the pool as soon as it is
/// ready. `lock` must be the one every other worktree of the repository is made under
/// meanwhile (the baseline's): git itself reads half-made admin dirs. `None` when the base
/// commit is unreadable (workers then create their worktrees as usual).
pub fn warm_up(
    record: &super::state::RunRecord,
    config: &Config,
    lock: Arc<RepoLock>,
    count: usize,
) -> Option<WarmStart> {
    let base = git::Oid::from_str(&record.base_commit).ok()?;
    let dir = super::run::worktree_base(
        config,
        &EnvSnapshot::capture(),
        &record.repo_root,
        &record.run_id,
    );
    let pool = WorktreePool::new(dir);
    let repo = record.repo_root.clone();
    let maker = Maker {
        lock: lock.clone(),
        repo: repo.clone(),
        commit: base,
    };
    {
        let mut state = pool.state();
        state.maker = Some(maker.clone());
        state.making = count;
    }
    pool.spawn_makers(&maker, count);
    Some(WarmStart { pool, lock, repo })
}

/// How many spares [`warm_up`] makes at once: one registers (`git worktree add --no-checkout`,
/// under the repository lock) while the other checks out its files (outside it), so the lock
/// never idles; more would only queue on the lock and the two cores.
pub const WARM_UP_THREADS: usize = 2;

/// `count` split into at most `parts` non-empty shares.
fn split(count: usize, parts: usize) -> Vec<usize> {
    let parts = parts.min(count).max(1);
    (0..parts)
        .map(|i| count / parts + usize::from(i < count % parts))
        .filter(|&n| n > 0)
        .collect()
}

/// Removes a spare (`git worktree remove`, files deleted outside the lock); a failure is
/// logged: a spare holds no work.
pub fn remove_spare(lock: &RepoLock, repo: &Path, spare: &Path) {
    let base = super::cleanup::worktree_base_of(spare);
    if let Err(e) = git::remove_worktree(lock, repo, &base, spare, true) {
        tracing::warn!(spare = %spare.display(), error = %e, "could not remove a spare worktree");
    }
}

/// Closes `pool` and removes its spares in the background; the task to await.
pub fn close_and_remove(
    pool: &WorktreePool,
    lock: Arc<RepoLock>,
    repo: PathBuf,
) -> tokio::task::JoinHandle<()> {
    let spares = pool.close();
    tokio::task::spawn_blocking(move || {
        for spare in spares {
            remove_spare(&lock, &repo, &spare);
        }
    })
}

/// Step 1 of a local worker, with a lease: its spare turned into its worktree, with its marker
/// still to flush when that was left to the worker ([`git::recycle_worktree_deferring_sync`]:
/// the `fsync` runs beside the worker's first model request instead of before it); `None`
/// when it has no spare or recycling failed (then it creates its worktree as usual).
pub(crate) async fn recycle_into(
    lease: &mut WorktreeLease,
    run: &super::run::RunContext,
    branch: &str,
    start: git::Oid,
) -> Option<(PathBuf, Option<git::MarkerSync>)> {
    let spare = lease.take_spare()?;
    let (lock, repo) = (run.git_lock.clone(), run.repo_root.clone());
    let (path, branch) = (lease.worktree().to_path_buf(), branch.to_string());
    let recycled = super::git_task(move || {
        Ok::<_, GitTaskError>(git::recycle_worktree_deferring_sync(
            &lock,
            &repo,
            (&spare.path, &path),
            &branch,
            start,
            spare.files,
        )?)
    })
    .await;
    match recycled {
        Ok((info, marker)) => {
            lease.spare_used();
            Some((info.path, marker))
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not recycle a spare worktree; creating one");
            lease.spare_failed();
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn pool_with_spares(n: usize) -> Arc<WorktreePool> {
        let pool = WorktreePool::new(PathBuf::from("/runs/r1"));
        for _ in 0..n {
            let spare = pool.next_spare_path();
            assert!(pool.add_spare(spare));
        }
        pool
    }

    #[test]
    fn a_worktree_in_use_is_never_leased_or_parked_by_another() {
        let pool = pool_with_spares(0);
        let w1 = PathBuf::from("/runs/r1/w1");
        let lease = pool.lease(0, w1.clone()).unwrap();
        assert_eq!(
            pool.lease(1, w1.clone()).unwrap_err(),
            LeaseError::Held {
                path: w1.clone(),
                holder: Holder::Worker(0)
            }
        );
        assert_eq!(
            pool.begin_park(&w1, 1).unwrap_err(),
            LeaseError::Held {
                path: w1.clone(),
                holder: Holder::Worker(0)
            }
        );
        drop(lease);
        // Its worker is gone: now it may be parked, and while it is, nobody leases it.
        let ticket = pool.begin_park(&w1, 1).unwrap();
        assert_eq!(pool.holder(&w1), Some(Holder::Parking));
        assert!(matches!(
            pool.lease(2, w1.clone()),
            Err(LeaseError::Held {
                holder: Holder::Parking,
                ..
            })
        ));
        let spare = ticket.spare().to_path_buf();
        assert_eq!(ticket.parked(), None);
        assert_eq!(pool.holder(&w1), None);
        // The spare goes to exactly one next worker.
        let mut next = pool.lease(3, PathBuf::from("/runs/r1/w4")).unwrap();
        assert_eq!(
            next.take_spare(),
            Some(Spare {
                path: spare.clone(),
                files: git::SpareFiles::Used
            })
        );
        assert_eq!(pool.holder(&spare), Some(Holder::Worker(3)));
        let other = pool.lease(4, PathBuf::from("/runs/r1/w5")).unwrap();
        assert_eq!(other.spare, None);
        next.spare_used();
        assert_eq!(pool.holder(&spare), None);
    }

    #[test]
    fn concurrent_workers_never_share_a_spare() {
        let pool = pool_with_spares(64);
        let all_taken = std::sync::Barrier::new(8);
        let handed: Vec<Option<Spare>> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..8)
                .map(|t| {
                    let pool = pool.clone();
                    let all_taken = &all_taken;
                    s.spawn(move || {
                        // Each thread holds its leases until the end: all in use at once.
                        let leases: Vec<WorktreeLease> = (0..10)
                            .map(|i| {
                                let path = PathBuf::from(format!("/runs/r1/w{t}-{i}"));
                                pool.lease(t * 10 + i, path).unwrap()
                            })
                            .collect();
                        let spares = leases.iter().map(|l| l.spare.clone()).collect::<Vec<_>>();
                        // Nobody lets go before everyone has taken theirs.
                        all_taken.wait();
                        spares
                    })
                })
                .collect();
            threads
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .collect()
        });
        let given: Vec<PathBuf> = handed.into_iter().flatten().map(|s| s.path).collect();
        let unique: BTreeSet<&PathBuf> = given.iter().collect();
        assert_eq!(given.len(), 64, "every spare was handed out");
        assert_eq!(unique.len(), 64, "no spare went to two workers");
        // Their leases were dropped without using them: they are spares again.
        assert_eq!(pool.close().len(), 64);
    }

    #[test]
    fn a_closed_pool_takes_no_new_spares_and_returns_the_ready_ones() {
        let pool = pool_with_spares(2);
        let lease = pool.lease(0, PathBuf::from("/runs/r1/w1")).unwrap();
        assert_eq!(pool.close().len(), 1, "the one not leased");
        assert!(!pool.add_spare(PathBuf::from("/runs/r1/.spare-9")));
        assert_eq!(
            pool.begin_park(Path::new("/runs/r1/w2"), 1).unwrap_err(),
            LeaseError::Closed
        );
        drop(lease);
        assert_eq!(
            pool.close().len(),
            1,
            "the leased one, unused, goes to removal"
        );
    }

    #[test]
    fn a_merged_worktree_is_not_parked_when_enough_spares_wait() {
        let pool = pool_with_spares(2);
        let w1 = PathBuf::from("/runs/r1/w1");
        assert_eq!(pool.begin_park(&w1, 2).unwrap_err(), LeaseError::Enough);
        assert_eq!(pool.holder(&w1), None, "left to its removal");
        let ticket = pool.begin_park(&w1, 3).unwrap();
        assert_eq!(pool.holder(&w1), Some(Holder::Parking));
        drop(ticket);
    }

    /// A repository with one commit in a temp dir, its lock, and a pool whose spares are made
    /// there (what [`warm_up`] sets up).
    fn repo_pool() -> (tempfile::TempDir, Arc<WorktreePool>, Maker) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let repo = root.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .current_dir(&repo)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        git(&["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("a.txt"), "a\n").unwrap();
        git(&["add", "."]);
        git(&["commit", "-qm", "one"]);
        let commit = git::Oid::from_str(git(&["rev-parse", "HEAD"]).trim()).unwrap();
        let maker = Maker {
            lock: Arc::new(RepoLock::new(&repo).unwrap()),
            repo,
            commit,
        };
        let pool = WorktreePool::new(root.join("wt/run"));
        pool.state().maker = Some(maker.clone());
        (tmp, pool, maker)
    }

    fn registered(repo: &Path) -> usize {
        git::list_worktrees(repo).unwrap().len()
    }

    async fn await_makers(pool: &WorktreePool) {
        for task in pool.take_makers() {
            task.await.unwrap();
        }
    }

    #[tokio::test]
    async fn replenishment_makes_what_waits_hands_each_spare_once_and_stops_at_close() {
        let (_tmp, pool, maker) = repo_pool();
        // Nothing is made before the first spare's cost is known (the warm-up's).
        pool.replenish(3);
        assert!(pool.take_makers().is_empty());
        pool.state().making = 1;
        pool.make_one(&maker);
        assert!(pool.state().first_cost.is_some());
        pool.replenish(3);
        pool.replenish(3);
        await_makers(&pool).await;
        assert_eq!(
            pool.ready(),
            3,
            "two more, not four: ready and made ones count"
        );
        // Concurrent workers each get their own spare.
        let leases: Vec<WorktreeLease> = (0..4)
            .map(|i| pool.lease(i, PathBuf::from(format!("/x/w{i}"))).unwrap())
            .collect();
        let spares: BTreeSet<PathBuf> = leases
            .iter()
            .filter_map(|l| l.spare.as_ref().map(|s| s.path.clone()))
            .collect();
        assert_eq!(spares.len(), 3);
        assert!(
            leases
                .iter()
                .filter(|l| l.spare.is_some())
                .all(|l| { l.spare.as_ref().unwrap().files == git::SpareFiles::AsCreated })
        );
        // Nothing waits any more: the pool closes; no spare is made after that.
        let left = pool.close();
        assert!(left.is_empty());
        pool.replenish(3);
        assert!(pool.take_makers().is_empty());
        drop(leases);
        // The leased, unused ones go to removal: nothing is left registered.
        for spare in pool.close() {
            remove_spare(&maker.lock, &maker.repo, &spare);
        }
        assert_eq!(registered(&maker.repo), 1, "only the main checkout");
    }

    #[tokio::test]
    async fn spares_finished_after_the_close_are_removed_by_their_maker() {
        let (_tmp, pool, maker) = repo_pool();
        pool.state().first_cost = Some(std::time::Duration::from_millis(1));
        pool.replenish(4);
        // The run ends while they are being made.
        let ready = pool.close();
        await_makers(&pool).await;
        for spare in ready.into_iter().chain(pool.close()) {
            remove_spare(&maker.lock, &maker.repo, &spare);
        }
        assert_eq!(pool.ready(), 0);
        assert_eq!(pool.state().making, 0);
        assert_eq!(registered(&maker.repo), 1, "no spare is left behind");
    }

    /// A worker machine's clone pool: filled when a run is announced, never beyond the count
    /// asked (ready and being made count), each spare handed to one subtask; a spare made for
    /// an earlier run at another commit is still used, and the worktree made from it has the
    /// new start commit's files, not the spare's.
    #[tokio::test]
    async fn a_clone_pool_fills_once_per_count_and_a_stale_spare_gets_the_new_start() {
        let (tmp, _unused, maker) = repo_pool();
        let pool = WorktreePool::for_clone(
            tmp.path().canonicalize().unwrap().join("wt/.spares"),
            maker.lock.clone(),
            maker.repo.clone(),
        );
        pool.fill_at(maker.commit, 2);
        pool.fill_at(maker.commit, 2);
        await_makers(&pool).await;
        assert_eq!(pool.ready(), 2, "two asked twice: two made");
        // The next run starts at a newer commit: the two spares at the old one count.
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .current_dir(&maker.repo)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        std::fs::write(maker.repo.join("a.txt"), "two\n").unwrap();
        git(&["commit", "-qam", "two"]);
        let newer = git::Oid::from_str(git(&["rev-parse", "HEAD"]).trim()).unwrap();
        pool.fill_at(newer, 2);
        assert!(
            pool.take_makers().is_empty(),
            "nothing missing, nothing made"
        );
        let root = tmp.path().canonicalize().unwrap();
        let (w1, w2) = (root.join("wt/run/w1"), root.join("wt/run/w2"));
        let mut first = pool.lease(0, w1.clone()).unwrap();
        let mut second = pool.lease(0, w2.clone()).unwrap();
        let (a, b) = (first.take_spare().unwrap(), second.take_spare().unwrap());
        assert_ne!(a.path, b.path, "one spare per subtask");
        assert!(
            pool.lease(0, w1.clone()).is_err(),
            "a held directory is not leased again"
        );
        for (lease, spare, path, branch) in
            [(&mut first, a, &w1, "b1"), (&mut second, b, &w2, "b2")]
        {
            let info = git::recycle_worktree(
                &maker.lock,
                &maker.repo,
                &spare.path,
                path,
                branch,
                newer,
                spare.files,
            )
            .unwrap();
            lease.spare_used();
            assert_eq!(info.head, Some(newer));
            assert_eq!(
                std::fs::read_to_string(path.join("a.txt")).unwrap(),
                "two\n"
            );
        }
        // Spares made from now on are at the newer commit.
        pool.fill_at(newer, 1);
        await_makers(&pool).await;
        let made = pool.close();
        assert_eq!(made.len(), 1);
        let listed = git::list_worktrees(&maker.repo).unwrap();
        let spare = listed.iter().find(|w| w.path == made[0]).unwrap();
        assert_eq!(spare.head, Some(newer));
        remove_spare(&maker.lock, &maker.repo, &made[0]);
    }

    #[tokio::test]
    async fn a_large_repository_gets_no_background_spares() {
        let (_tmp, pool, _maker) = repo_pool();
        pool.state().first_cost = Some(REPLENISH_MAX_CREATE + std::time::Duration::from_millis(1));
        pool.replenish(4);
        assert!(pool.take_makers().is_empty());
        assert_eq!(pool.state().making, 0);
    }
}
