//! End-to-end tests of the `ahelper` binary, in one test binary: the built program (assert_cmd)
//! against the fake LLM server (`ahelper-fake-llm`) on 127.0.0.1, in temporary git repositories.
//! `suite/print_mode.rs` covers `ahelper -p`, `suite/swarm.rs` covers `ahelper swarm`,
//! `suite/key_protection.rs` covers provider-key protection (issue 14) with hostile probes.
//! `suite/swarm_verify.rs` covers verified swarm runs (issue 7) and `suite/verify_fixtures.rs`
//! proves their scenario scripts (`suite/support/pyproject.rs`) without the swarm.
//! Run one area with `cargo test --test all swarm`.

mod suite;
