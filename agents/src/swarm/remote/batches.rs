//! Batches of queued git work with several in flight ([`run_batches`]): a worker machine's
//! pushes of finished branches and the coordinator's fetches of them. What is queued when a
//! batch starts goes into it, so branches that finish together cost one `git push` or
//! `git fetch`; but a batch does not wait for a slow earlier one while fewer than the limit run,
//! so the last branch of a machine is not pushed (or fetched) one whole push after it finished.
//! Items can be announced before they are queued ([`Announcements`]): a batch then waits for
//! them, so that a worker machine's subtasks that commit together are pushed together.

use std::future::Future;
use std::sync::Arc;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;

/// How many batches of fetches of finished branches the coordinator runs at once. Two: a
/// worker that finishes just after a fetch started is fetched at once, not after it; the ones
/// after that are batched until one of the two ends.
pub const FETCHES_IN_FLIGHT: usize = 2;

/// How many batches of pushes a worker machine runs at once. One: a machine's subtasks that
/// finish together finish on one CPU-busy machine, where a second `git push` beside a running
/// one makes both slower (measured with the nats bench) and the branches queued behind the
/// running push cost one push more instead of one each.
pub const PUSHES_IN_FLIGHT: usize = 1;

/// Items that will be queued soon (a worker machine's subtasks that are committing): a batch
/// of [`run_batches`] that is about to start waits until each announced item is queued or its
/// announcement withdrawn, and then takes them along. Cheap to clone; clones share the count.
#[derive(Clone)]
pub struct Announcements {
    count: Arc<watch::Sender<usize>>,
}

impl Default for Announcements {
    fn default() -> Self {
        Announcements {
            count: Arc::new(watch::Sender::new(0)),
        }
    }
}

impl Announcements {
    /// Says an item will be queued; the batches wait for it until the returned [`Announced`]
    /// is dropped, which is to happen right after the item is queued (or when it will not be).
    pub fn announce(&self) -> Announced {
        self.count.send_modify(|n| *n += 1);
        Announced {
            count: self.count.clone(),
        }
    }

    /// Returns once no announced item is outstanding.
    async fn settled(&self) {
        let mut count = self.count.subscribe();
        // The sender lives in `self`: `wait_for` cannot fail.
        let _ = count.wait_for(|n| *n == 0).await;
    }
}

/// An item announced to [`Announcements`], until dropped.
pub struct Announced {
    count: Arc<watch::Sender<usize>>,
}

impl Drop for Announced {
    fn drop(&mut self) {
        self.count.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Takes what `queue` holds in batches and runs `work` on each, at most `in_flight` (at least
/// one) at a time, each in a task of its own. A batch is formed once a place is free: the first
/// item waiting and everything queued behind it, in order. Returns when the queue is closed
/// and every batch has ended.
pub async fn run_batches<T, F, Fut>(queue: mpsc::UnboundedReceiver<T>, in_flight: usize, work: F)
where
    T: Send + 'static,
    F: FnMut(Vec<T>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    run_announced_batches(queue, in_flight, None, work).await;
}

/// [`run_batches`], where a batch, once its place is free, first waits until no item announced
/// to `announced` is outstanding (each is then queued, and in the batch, or withdrawn).
pub async fn run_announced_batches<T, F, Fut>(
    mut queue: mpsc::UnboundedReceiver<T>,
    in_flight: usize,
    announced: Option<Announcements>,
    mut work: F,
) where
    T: Send + 'static,
    F: FnMut(Vec<T>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let places = Arc::new(Semaphore::new(in_flight.max(1)));
    let mut running = JoinSet::new();
    while let Some(first) = queue.recv().await {
        let Ok(place) = places.clone().acquire_owned().await else {
            break;
        };
        if let Some(announced) = &announced {
            announced.settled().await;
        }
        let mut batch = vec![first];
        while let Ok(more) = queue.try_recv() {
            batch.push(more);
        }
        let job = work(batch);
        running.spawn(async move {
            job.await;
            drop(place);
        });
        // Ended batches are reaped as we go (their outcomes went to their waiters).
        while running.try_join_next().is_some() {}
    }
    while running.join_next().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    /// An item: its number and, for a held batch, the gate that lets its batch end.
    struct Item {
        n: usize,
        hold: Option<oneshot::Receiver<()>>,
    }

    fn item(n: usize) -> Item {
        Item { n, hold: None }
    }

    /// Starts `run_batches` with `in_flight`; each batch reports its numbers on the returned
    /// receiver when it starts, then waits for the gates of its items.
    fn start(
        in_flight: usize,
    ) -> (
        mpsc::UnboundedSender<Item>,
        mpsc::UnboundedReceiver<Vec<usize>>,
        tokio::task::JoinHandle<()>,
    ) {
        let (queue, pending) = mpsc::unbounded_channel::<Item>();
        let (started, batches) = mpsc::unbounded_channel();
        let runner = tokio::spawn(run_batches(pending, in_flight, move |batch: Vec<Item>| {
            let started = started.clone();
            async move {
                let _ = started.send(batch.iter().map(|i| i.n).collect::<Vec<_>>());
                for item in batch {
                    if let Some(hold) = item.hold {
                        let _ = hold.await;
                    }
                }
            }
        }));
        (queue, batches, runner)
    }

    #[tokio::test]
    async fn a_second_batch_does_not_wait_for_a_running_one_and_the_rest_wait_together() {
        let (queue, mut batches, runner) = start(2);
        let (release_first, hold_first) = oneshot::channel();
        let (release_second, hold_second) = oneshot::channel();
        queue
            .send(Item {
                n: 1,
                hold: Some(hold_first),
            })
            .unwrap();
        assert_eq!(batches.recv().await.unwrap(), vec![1]);
        queue
            .send(Item {
                n: 2,
                hold: Some(hold_second),
            })
            .unwrap();
        // Starts while the first is still held.
        assert_eq!(batches.recv().await.unwrap(), vec![2]);
        // Both places taken: these wait and then go together.
        for n in 3..=5 {
            queue.send(item(n)).unwrap();
        }
        tokio::task::yield_now().await;
        assert!(batches.try_recv().is_err(), "no third batch while two run");
        release_second.send(()).unwrap();
        assert_eq!(batches.recv().await.unwrap(), vec![3, 4, 5]);
        release_first.send(()).unwrap();
        drop(queue);
        runner.await.unwrap();
        assert!(batches.recv().await.is_none());
    }

    #[tokio::test]
    async fn a_batch_waits_for_announced_items_and_takes_them_along() {
        let announcements = Announcements::default();
        let (queue, pending) = mpsc::unbounded_channel::<usize>();
        let (started, mut batches) = mpsc::unbounded_channel();
        let runner = tokio::spawn(run_announced_batches(
            pending,
            PUSHES_IN_FLIGHT,
            Some(announcements.clone()),
            move |batch: Vec<usize>| {
                let started = started.clone();
                async move {
                    let _ = started.send(batch);
                }
            },
        ));
        let (second, withdrawn) = (announcements.announce(), announcements.announce());
        queue.send(1).unwrap();
        tokio::task::yield_now().await;
        assert!(batches.try_recv().is_err(), "waits for the announced items");
        queue.send(2).unwrap();
        drop(second);
        tokio::task::yield_now().await;
        assert!(
            batches.try_recv().is_err(),
            "one announced item is still outstanding"
        );
        drop(withdrawn);
        assert_eq!(batches.recv().await.unwrap(), vec![1, 2]);
        // Nothing announced: the next item goes at once.
        queue.send(3).unwrap();
        assert_eq!(batches.recv().await.unwrap(), vec![3]);
        drop(queue);
        runner.await.unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn what_is_queued_before_the_runner_looks_is_one_batch() {
        let (queue, mut batches, runner) = start(FETCHES_IN_FLIGHT);
        for n in 1..=3 {
            queue.send(item(n)).unwrap();
        }
        drop(queue);
        runner.await.unwrap();
        assert_eq!(batches.recv().await.unwrap(), vec![1, 2, 3]);
        assert!(batches.recv().await.is_none());
    }
}
