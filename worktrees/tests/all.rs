//! The integration tests of `ahelper-worktrees`, in one test binary: real repositories in temp
//! directories, built with the git CLI. One module per area under `suite/`; case ids (S01…) are
//! the rows of `tests/data/swarm.md`.

mod suite;
