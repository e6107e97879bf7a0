//! Whether a worker machine is alive, from its heartbeats in the KV bucket — told apart from
//! the NATS server being unreachable.
//!
//! A machine writes its heartbeat every [`super::connect::HEARTBEAT_EVERY`]; each write is a
//! new revision of its key. The coordinator reads the key every tick. A machine is **lost**
//! only when no new revision has been seen for the liveness timeout
//! ([`super::connect::HEARTBEAT_TTL`]) counted from when NATS was last reachable: a read that
//! fails (the server restarting, a network cut) says nothing about the machine, so while reads
//! fail every machine is shown as **NATS unreachable**, and once they succeed again the machine
//! has a whole timeout to write a heartbeat (a restarted server keeps no heartbeats: the bucket
//! is in memory).

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What the coordinator knows of a worker's machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MachineState {
    /// Its heartbeat is fresh, or it is still within the timeout.
    #[default]
    Alive,
    /// The NATS server cannot be read: the machine's state is unknown while this lasts.
    NatsUnreachable,
    /// No heartbeat for the liveness timeout while NATS was reachable.
    Lost,
}

/// One reading of a machine's heartbeat key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// The key holds this revision.
    Beat(u64),
    /// The key is absent (expired, or never written since the server started).
    Absent,
    /// The bucket or the key could not be read.
    Unreachable,
}

/// Heartbeat bookkeeping of one coordinator: per machine, the last revision seen and when it
/// was first seen; when NATS became reachable again.
#[derive(Debug)]
pub struct Liveness {
    timeout: Duration,
    /// When reads started succeeding again (`None` while they fail).
    reachable_since: Option<Instant>,
    /// Per machine: (last revision seen, when it was first seen).
    seen: HashMap<String, (Option<u64>, Instant)>,
}

impl Liveness {
    /// Bookkeeping with the liveness timeout `timeout`, starting with NATS reachable at `now`.
    pub fn new(timeout: Duration, now: Instant) -> Self {
        Liveness {
            timeout,
            reachable_since: Some(now),
            seen: HashMap::new(),
        }
    }

    /// The bucket could not be opened: every machine is [`MachineState::NatsUnreachable`]
    /// until reads succeed again.
    pub fn unreachable(&mut self) {
        self.reachable_since = None;
        // A restarted server numbers revisions from 1 again: whatever is read next is new.
        for (revision, _) in self.seen.values_mut() {
            *revision = None;
        }
    }

    /// Records `reading` of `machine`'s key at `now` and says what it means.
    pub fn observe(&mut self, machine: &str, reading: Reading, now: Instant) -> MachineState {
        if reading == Reading::Unreachable {
            self.unreachable();
            return MachineState::NatsUnreachable;
        }
        let reachable_since = *self.reachable_since.get_or_insert(now);
        let entry = self.seen.entry(machine.to_string()).or_insert((None, now));
        if let Reading::Beat(revision) = reading
            && entry.0 != Some(revision)
        {
            *entry = (Some(revision), now);
            return MachineState::Alive;
        }
        if reading == Reading::Absent {
            // An expired key comes back from revision 1 when a restarted server starts over.
            entry.0 = None;
        }
        let silent_since = entry.1.max(reachable_since);
        if now.saturating_duration_since(silent_since) >= self.timeout {
            MachineState::Lost
        } else {
            MachineState::Alive
        }
    }

    /// Forgets machines no running worker uses any more.
    pub fn retain(&mut self, machines: &[&str]) {
        self.seen.retain(|m, _| machines.contains(&m.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(15);

    fn at(start: Instant, secs: u64) -> Instant {
        start + Duration::from_secs(secs)
    }

    /// A machine whose revisions stop is lost one timeout after its last new revision.
    #[test]
    fn a_silent_machine_is_lost_after_the_timeout() {
        let t0 = Instant::now();
        let mut l = Liveness::new(T, t0);
        assert_eq!(l.observe("m1", Reading::Beat(1), t0), MachineState::Alive);
        assert_eq!(
            l.observe("m1", Reading::Beat(2), at(t0, 3)),
            MachineState::Alive
        );
        assert_eq!(
            l.observe("m1", Reading::Beat(2), at(t0, 12)),
            MachineState::Alive
        );
        assert_eq!(
            l.observe("m1", Reading::Absent, at(t0, 17)),
            MachineState::Alive
        );
        assert_eq!(
            l.observe("m1", Reading::Absent, at(t0, 18)),
            MachineState::Lost
        );
        assert_eq!(
            l.observe("m1", Reading::Beat(3), at(t0, 21)),
            MachineState::Alive
        );
    }

    /// A NATS restart: reads fail (unreachable), then the key is absent (the in-memory bucket
    /// was lost) until the machine writes again: never lost, unless it stays silent a whole
    /// timeout after NATS came back.
    #[test]
    fn an_outage_is_not_a_lost_machine() {
        let t0 = Instant::now();
        let mut l = Liveness::new(T, t0);
        assert_eq!(l.observe("m1", Reading::Beat(1), t0), MachineState::Alive);
        let down = l.observe("m1", Reading::Unreachable, at(t0, 14));
        assert_eq!(down, MachineState::NatsUnreachable);
        l.unreachable();
        assert_eq!(
            l.observe("m1", Reading::Absent, at(t0, 20)),
            MachineState::Alive
        );
        assert_eq!(
            l.observe("m1", Reading::Absent, at(t0, 34)),
            MachineState::Alive
        );
        assert_eq!(
            l.observe("m1", Reading::Beat(1), at(t0, 35)),
            MachineState::Alive
        );
        let mut l = Liveness::new(T, t0);
        l.observe("m1", Reading::Beat(1), t0);
        l.observe("m1", Reading::Unreachable, at(t0, 5));
        assert_eq!(
            l.observe("m1", Reading::Absent, at(t0, 8)),
            MachineState::Alive
        );
        assert_eq!(
            l.observe("m1", Reading::Absent, at(t0, 23)),
            MachineState::Lost
        );
    }
}
