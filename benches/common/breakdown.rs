//! Where a swarm run's time beyond the ideal went, from the fake LLM server's request log. Used
//! by the swarm and nats benchmarks.

use super::stats::{median, ms};
use ahelper_fake_llm::RecordedRequest;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Where a swarm run's time beyond the ideal went, from the fake server's request log (when
/// each request arrived and when its reply's last frame was sent) and the process's exit.
#[derive(Debug, Clone, Copy, Default)]
pub struct Breakdown {
    /// Spawn → the coordinator's planning request received.
    pub to_plan: Duration,
    /// Planning reply sent → first worker request received.
    pub fan_out: Duration,
    /// First worker request → last worker's first request: how staggered the workers start.
    pub stagger: Duration,
    /// Median, over the workers, of the sum of their turn gaps (a reply sent → that worker's
    /// next request received).
    pub gaps_median: Duration,
    /// The largest single turn gap of any worker.
    pub gap_max: Duration,
    /// Last worker reply sent → the coordinator's closing request received (commits, merges).
    pub merging: Duration,
    /// The closing reply sent → process exit.
    pub exit: Duration,
}

impl Breakdown {
    /// The breakdown of a run (its model requests in arrival order) that started at `spawned` and ended at `ended`.
    pub fn of(requests: &[RecordedRequest], spawned: Instant, ended: Instant) -> Breakdown {
        let sent = |r: &RecordedRequest| r.replied.unwrap_or(r.received);
        let coordinator: Vec<&RecordedRequest> = requests
            .iter()
            .filter(|r| r.conversation == Some(0))
            .collect();
        let workers: Vec<&RecordedRequest> = requests
            .iter()
            .filter(|r| r.conversation.is_some_and(|c| c > 0))
            .collect();
        let (Some(plan), Some(close)) = (coordinator.first(), coordinator.last()) else {
            return Breakdown::default();
        };
        let mut per_worker: BTreeMap<usize, Vec<&RecordedRequest>> = BTreeMap::new();
        for r in &workers {
            per_worker
                .entry(r.conversation.unwrap())
                .or_default()
                .push(r);
        }
        let firsts: Vec<Instant> = per_worker.values().map(|rs| rs[0].received).collect();
        let mut gap_max = Duration::ZERO;
        let sums: Vec<Duration> = per_worker
            .values()
            .map(|rs| {
                rs.windows(2)
                    .map(|w| w[1].received.saturating_duration_since(sent(w[0])))
                    .inspect(|g| gap_max = gap_max.max(*g))
                    .sum()
            })
            .collect();
        let first = *firsts.iter().min().unwrap();
        let last_reply = workers.iter().map(|r| sent(r)).max().unwrap();
        Breakdown {
            to_plan: plan.received.saturating_duration_since(spawned),
            fan_out: first.saturating_duration_since(sent(plan)),
            stagger: firsts.iter().max().unwrap().duration_since(first),
            gaps_median: median(sums),
            gap_max,
            merging: close.received.saturating_duration_since(last_reply),
            exit: ended.saturating_duration_since(sent(close)),
        }
    }

    /// Prints the median of each figure over `runs`, indented.
    pub fn print_median(runs: impl Iterator<Item = Breakdown>) {
        let runs: Vec<Breakdown> = runs.collect();
        let b = |f: fn(&Breakdown) -> Duration| ms(median(runs.iter().map(f).collect()));
        println!(
            "  where the time went (medians): spawn -> plan request {:.1} ms, plan reply -> first worker {:.1} ms, \
             worker start stagger {:.1} ms, turn gaps per worker {:.1} ms (largest gap {:.1} ms), \
             last worker reply -> closing request {:.1} ms, closing reply -> exit {:.1} ms",
            b(|b| b.to_plan),
            b(|b| b.fan_out),
            b(|b| b.stagger),
            b(|b| b.gaps_median),
            b(|b| b.gap_max),
            b(|b| b.merging),
            b(|b| b.exit),
        );
    }
}
