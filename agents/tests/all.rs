//! The integration tests of `ahelper-agents`, in one test binary. One module per area under
//! `suite/`, shared helpers in `suite/support/`, case inputs in `data/` (see `data/README.md`).
//! Run one area with e.g. `cargo test -p ahelper-agents --test all sandbox_paths`.

mod suite;
