mod candidate_merge;
mod commit_merge;
mod index_lock;
mod repo;
mod support;
mod worktrees;
