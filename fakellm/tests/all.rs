//! The integration tests of `ahelper-fake-llm`, in one test binary: the library server through
//! real HTTP on 127.0.0.1 (`suite/server.rs`, conditions on the agent's files in
//! `suite/conditions.rs`) and the `ahelper-fake-llm` binary as a child process
//! (`suite/binary.rs`).

mod suite;
