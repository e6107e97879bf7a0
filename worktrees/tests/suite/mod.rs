mod candidate_merge;
mod commit_merge;
mod include;
mod index_lock;
mod repo;
mod spare;
mod support;
mod worktrees;
