//! Scheduling of subtasks: at most `max_workers` at once, never two with overlapping scopes at
//! the same time, never before the subtasks they depend on are merged. A queued subtask starts as
//! soon as a slot frees. Pure logic; the coordinator drives it.

use super::plan::{Subtask, subtasks_overlap};
use serde::{Deserialize, Serialize};

/// Scheduling state of one subtask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotState {
    /// Waiting for a slot, a scope or a dependency.
    Queued,
    /// A worker is on it.
    Running,
    /// The worker finished; its branch waits for the merge queue. Holds its scope until merged.
    Finished,
    /// Finished and merged into the integration branch.
    Merged,
    /// Finished but not merged (failed, conflict, cancelled, nothing to do): dependents are
    /// skipped.
    Ended,
    /// Not run because a dependency did not merge.
    Skipped,
}

/// The scheduler.
#[derive(Debug, Clone)]
pub struct Scheduler {
    subtasks: Vec<Subtask>,
    states: Vec<SlotState>,
    max_workers: usize,
    /// Precomputed overlap matrix (`overlap[i][j]`).
    overlap: Vec<Vec<bool>>,
}

impl Scheduler {
    /// A scheduler with every subtask queued.
    pub fn new(subtasks: Vec<Subtask>, max_workers: usize) -> Self {
        let n = subtasks.len();
        let overlap = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| i != j && subtasks_overlap(&subtasks[i], &subtasks[j]))
                    .collect()
            })
            .collect();
        Scheduler {
            states: vec![SlotState::Queued; n],
            subtasks,
            max_workers: max_workers.max(1),
            overlap,
        }
    }

    /// Sets a state directly (used when resuming a run).
    pub fn set_state(&mut self, index: usize, state: SlotState) {
        self.states[index] = state;
    }

    /// The state of subtask `index`.
    pub fn state(&self, index: usize) -> SlotState {
        self.states[index]
    }

    /// Number of running subtasks.
    pub fn running(&self) -> usize {
        self.states
            .iter()
            .filter(|s| **s == SlotState::Running)
            .count()
    }

    /// Picks the subtasks to start now (in plan order), marks them running and returns their
    /// indices. Also marks as skipped every queued subtask whose dependency ended unmerged.
    pub fn start_ready(&mut self) -> Vec<usize> {
        self.skip_blocked();
        let mut started = Vec::new();
        for i in 0..self.subtasks.len() {
            if self.running() >= self.max_workers {
                break;
            }
            if self.states[i] != SlotState::Queued {
                continue;
            }
            let deps_merged = self.subtasks[i].depends_on.iter().all(|d| {
                self.index_of(d)
                    .is_some_and(|j| self.states[j] == SlotState::Merged)
            });
            if !deps_merged {
                continue;
            }
            let clashes = (0..self.subtasks.len()).any(|j| {
                matches!(self.states[j], SlotState::Running | SlotState::Finished)
                    && self.overlap[i][j]
            });
            if clashes {
                continue;
            }
            self.states[i] = SlotState::Running;
            started.push(i);
        }
        started
    }

    /// Records that a subtask's worker stopped; its slot frees, its scope stays held until
    /// [`Scheduler::finish`].
    pub fn worker_stopped(&mut self, index: usize) {
        if self.states[index] == SlotState::Running {
            self.states[index] = SlotState::Finished;
        }
    }

    /// Records the end of a subtask: merged into the integration branch or not.
    pub fn finish(&mut self, index: usize, merged: bool) {
        self.states[index] = if merged {
            SlotState::Merged
        } else {
            SlotState::Ended
        };
        self.skip_blocked();
    }

    /// How many subtasks wait to start.
    pub fn queued(&self) -> usize {
        self.states
            .iter()
            .filter(|s| **s == SlotState::Queued)
            .count()
    }

    /// Whether a subtask still waits to start.
    pub fn has_queued(&self) -> bool {
        self.states.contains(&SlotState::Queued)
    }

    /// Whether nothing is queued or running any more.
    pub fn is_finished(&self) -> bool {
        self.states.iter().all(|s| {
            !matches!(
                s,
                SlotState::Queued | SlotState::Running | SlotState::Finished
            )
        })
    }

    fn index_of(&self, id: &str) -> Option<usize> {
        self.subtasks.iter().position(|s| s.id == id)
    }

    fn skip_blocked(&mut self) {
        loop {
            let mut changed = false;
            for i in 0..self.subtasks.len() {
                if self.states[i] != SlotState::Queued {
                    continue;
                }
                let blocked = self.subtasks[i].depends_on.iter().any(|d| {
                    self.index_of(d).is_none_or(|j| {
                        matches!(self.states[j], SlotState::Ended | SlotState::Skipped)
                    })
                });
                if blocked {
                    self.states[i] = SlotState::Skipped;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, scope: &[&str], deps: &[&str]) -> Subtask {
        Subtask {
            id: id.into(),
            title: id.into(),
            instructions: "i".into(),
            scope: scope.iter().map(|s| s.to_string()).collect(),
            depends_on: deps.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn never_more_than_max_workers_and_slots_refill() {
        let tasks: Vec<_> = (0..16)
            .map(|i| task(&format!("t{i}"), &[&format!("f{i}.rs")], &[]))
            .collect();
        let mut s = Scheduler::new(tasks, 4);
        let mut done = 0;
        let mut running: Vec<usize> = s.start_ready();
        assert_eq!(running.len(), 4);
        while !s.is_finished() {
            assert!(s.running() <= 4);
            let i = running.remove(0);
            s.finish(i, true);
            done += 1;
            let new = s.start_ready();
            assert!(new.len() <= 1);
            running.extend(new);
        }
        assert_eq!(done, 16);
    }

    #[test]
    fn overlapping_scopes_wait() {
        let mut s = Scheduler::new(
            vec![
                task("a", &["src/**"], &[]),
                task("b", &["src/x.rs"], &[]),
                task("c", &["docs/a.md"], &[]),
            ],
            4,
        );
        assert_eq!(s.start_ready(), vec![0, 2]);
        s.finish(0, true);
        assert_eq!(s.start_ready(), vec![1]);
    }

    #[test]
    fn dependencies_wait_for_merge_and_failures_skip_dependents() {
        let mut s = Scheduler::new(
            vec![
                task("a", &["a"], &[]),
                task("b", &["b"], &["a"]),
                task("c", &["c"], &["b"]),
            ],
            4,
        );
        assert_eq!(s.start_ready(), vec![0]);
        s.finish(0, false);
        assert_eq!(s.start_ready(), Vec::<usize>::new());
        assert_eq!(s.state(1), SlotState::Skipped);
        assert_eq!(s.state(2), SlotState::Skipped);
        assert!(s.is_finished());
    }
}
