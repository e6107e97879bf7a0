//! Swarm workers on other machines: a coordinator publishes subtasks to a NATS JetStream work
//! queue and moves code only through a git remote both sides reach; `ahelper worker` processes
//! on any number of machines pull them. `docs/distributed.md` describes the set-up.
//!
//! - [`wire`]: the versioned messages and their validation;
//! - [`ask`]: remote workers' permission questions, answered on the coordinator;
//! - [`auth`]: the coordinator's signatures, the keys a worker machine trusts;
//! - [`connect`]: the connection and the JetStream objects (streams, consumer, heartbeat KV);
//! - [`slots`]: [`NatsSlots`], the coordinator's [`super::slots::WorkerSlots`] for remote workers;
//! - [`host`]: [`host::serve`], the `ahelper worker` loop;
//! - [`pusher`]: a worker machine's pushes of finished branches, batched;
//! - [`batches`]: batches of queued git work with several in flight (pushes, fetches);
//! - [`limits`]: what a worker machine accepts (keys, repositories, tools, questions);
//! - [`liveness`]: a machine lost, told apart from NATS unreachable;
//! - [`lifecycle`]: re-attaching on resume, releasing a finished run, `swarm clean`.

pub mod ask;
pub mod auth;
pub mod batches;
pub mod connect;
pub mod host;
pub mod lifecycle;
pub mod limits;
pub mod liveness;
pub mod pusher;
pub mod slots;
#[cfg(test)]
mod testing;
pub mod wire;

pub use connect::{Nats, NatsError, NatsOptions, connect};
pub use slots::{NatsSlots, RemoteError};
