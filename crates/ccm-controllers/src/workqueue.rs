//! A de-duplicating work queue of string keys with delayed adds, in the manner of client-go's: a key added
//! while it is being processed is processed again afterwards, never twice at once.

use std::{
    collections::{BTreeSet, HashMap, VecDeque},
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use tokio::sync::Notify;

use crate::ControllerMetrics;

#[derive(Clone, Default)]
pub(crate) struct WorkQueue(Arc<Shared>);

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    notify: Notify,
    /// Where the queue's depth is published, if anywhere.
    metrics: Option<ControllerMetrics>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<String>,
    queued: BTreeSet<String>,
    processing: BTreeSet<String>,
    dirty: BTreeSet<String>,
    shut_down: bool,
}

/// Per-key exponential backoff: `base * 2^failures`, at most `max`.
#[derive(Debug)]
pub(crate) struct Backoff {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

// === impl WorkQueue ===

impl WorkQueue {
    /// A queue whose depth is kept in `metrics` ([`ControllerMetrics::snapshot`]'s `queue_depth`).
    pub(crate) fn with_metrics(metrics: ControllerMetrics) -> Self {
        Self(Arc::new(Shared {
            metrics: Some(metrics),
            ..Shared::default()
        }))
    }

    fn publish(&self, depth: usize) {
        if let Some(m) = &self.0.metrics {
            m.set_queue_depth(depth);
        }
    }

    /// Records into the controller's queue numbers, if it keeps them.
    fn record(&self, f: impl FnOnce(&mut crate::metrics::queue::QueueStats)) {
        if let Some(m) = &self.0.metrics {
            f(&mut m.queue());
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn add(&self, key: &str) {
        let mut s = self.state();
        if s.shut_down {
            return;
        }
        if s.processing.contains(key) {
            // Counted as an add when `done` queues it again.
            s.dirty.insert(key.to_owned());
            return;
        }
        if s.queued.insert(key.to_owned()) {
            s.queue.push_back(key.to_owned());
            let depth = s.queue.len();
            drop(s);
            self.record(|q| q.added(key));
            self.publish(depth);
            self.0.notify.notify_one();
        }
    }

    pub(crate) fn add_after(&self, key: &str, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        // client-go counts a rate-limited re-add as a retry; delayed adds here are the retries and waits.
        self.record(|q| q.retried());
        let this = self.clone();
        let key = key.to_owned();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            this.add(&key);
        });
    }

    pub(crate) fn len(&self) -> usize {
        self.state().queue.len()
    }

    /// Waits for at least one key, then collects keys for up to `window` (or until `max` are taken) and marks
    /// them as processing. `None` once the queue is shut down.
    pub(crate) async fn next_batch(&self, max: usize, window: Duration) -> Option<Vec<String>> {
        loop {
            {
                let s = self.state();
                if s.shut_down {
                    return None;
                }
                if !s.queue.is_empty() {
                    break;
                }
            }
            self.0.notify.notified().await;
        }
        if !window.is_zero() && self.len() < max {
            let deadline = tokio::time::sleep(window);
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    () = &mut deadline => break,
                    () = self.0.notify.notified() => if self.len() >= max { break },
                }
            }
        }
        let mut s = self.state();
        if s.shut_down {
            return None;
        }
        let n = s.queue.len().min(max.max(1));
        let batch: Vec<String> = s.queue.drain(..n).collect();
        for key in &batch {
            s.queued.remove(key);
            s.processing.insert(key.clone());
        }
        let depth = s.queue.len();
        drop(s);
        self.record(|q| batch.iter().for_each(|k| q.taken(k)));
        self.publish(depth);
        if depth > 0 {
            self.0.notify.notify_one();
        }
        Some(batch)
    }

    /// Marks a key as processed; if it was added meanwhile it is queued again.
    pub(crate) fn done(&self, key: &str) {
        let requeue = {
            let mut s = self.state();
            s.processing.remove(key);
            s.dirty.remove(key)
        };
        self.record(|q| q.finished(key));
        if requeue {
            self.add(key);
        }
    }

    pub(crate) fn shut_down(&self) {
        self.state().shut_down = true;
        self.0.notify.notify_waiters();
        self.0.notify.notify_one();
    }
}

// === impl Backoff ===

impl Backoff {
    pub(crate) fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::default(),
        }
    }

    /// The delay before the next attempt of `key`, counting this failure.
    pub(crate) fn next(&self, key: &str) -> Duration {
        let mut f = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = f.entry(key.to_owned()).or_insert(0);
        let exp = (*n).min(30);
        *n = n.saturating_add(1);
        self.base.saturating_mul(1u32 << exp).min(self.max)
    }

    /// How many failures `key` has had in a row.
    #[cfg(test)]
    pub(crate) fn failures(&self, key: &str) -> u32 {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(key)
            .copied()
            .unwrap_or(0)
    }

    pub(crate) fn forget(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn queue_numbers_are_kept_as_client_go_keeps_them() {
        let metrics = ControllerMetrics::default();
        let q = WorkQueue::with_metrics(metrics.clone());
        q.add("a");
        q.add("a");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(q.next_batch(1, Duration::ZERO).await.unwrap(), ["a"]);
        q.add("a"); // while processing: queued again once done
        tokio::time::advance(Duration::from_secs(3)).await;
        let s = metrics.queue_snapshot();
        assert_eq!(s.adds, 1);
        assert_eq!(s.queue_duration.count, 1);
        assert_eq!(s.queue_duration.buckets[9], 1, "2 s is in the (1, 10] bucket");
        assert!((s.queue_duration.sum - 2.0).abs() < 1e-6, "{s:?}");
        assert!((s.longest_running_processor_seconds - 3.0).abs() < 1e-6, "{s:?}");
        assert!((s.unfinished_work_seconds - 3.0).abs() < 1e-6, "{s:?}");
        q.done("a");
        let s = metrics.queue_snapshot();
        assert_eq!(s.adds, 2, "the re-add while processing counts once");
        assert_eq!(s.work_duration.count, 1);
        assert!((s.work_duration.sum - 3.0).abs() < 1e-6, "{s:?}");
        assert!(s.longest_running_processor_seconds.abs() < 1e-9);
        q.add_after("b", Duration::from_secs(1));
        assert_eq!(metrics.queue_snapshot().retries, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn depth_is_published() {
        let metrics = ControllerMetrics::default();
        let q = WorkQueue::with_metrics(metrics.clone());
        q.add("a");
        q.add("b");
        q.add("a");
        assert_eq!(metrics.snapshot().queue_depth, 2);
        let batch = q.next_batch(1, Duration::ZERO).await.unwrap();
        assert_eq!(batch, ["a"]);
        assert_eq!(metrics.snapshot().queue_depth, 1);
        q.next_batch(10, Duration::ZERO).await.unwrap();
        assert_eq!(metrics.snapshot().queue_depth, 0);
    }

    #[tokio::test]
    async fn dedups_and_requeues_keys_added_while_processing() {
        let q = WorkQueue::default();
        q.add("a");
        q.add("b");
        q.add("a");
        let batch = q.next_batch(10, Duration::from_millis(10)).await.unwrap();
        assert_eq!(batch, vec!["a", "b"]);
        q.add("a");
        assert_eq!(q.len(), 0, "a is being processed: only marked dirty");
        q.done("a");
        q.done("b");
        assert_eq!(q.next_batch(10, Duration::ZERO).await.unwrap(), vec!["a"]);
    }

    #[tokio::test(start_paused = true)]
    async fn batches_are_bounded_and_shutdown_ends_waiting() {
        let q = WorkQueue::default();
        for i in 0..5 {
            q.add(&i.to_string());
        }
        assert_eq!(q.next_batch(2, Duration::from_secs(1)).await.unwrap().len(), 2);
        assert_eq!(q.next_batch(10, Duration::ZERO).await.unwrap().len(), 3);
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.next_batch(1, Duration::ZERO).await }
        });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(waiter.await.unwrap(), None);
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_and_forgets() {
        let b = Backoff::new(Duration::from_secs(5), Duration::from_secs(300));
        let delays: Vec<u64> = (0..8).map(|_| b.next("k").as_secs()).collect();
        assert_eq!(delays, vec![5, 10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(b.failures("k"), 8);
        b.forget("k");
        assert_eq!(b.next("k"), Duration::from_secs(5));
    }
}
