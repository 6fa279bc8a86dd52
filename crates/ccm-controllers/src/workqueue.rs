//! A de-duplicating work queue with delayed adds, in the manner of client-go's: a key added while it is being
//! processed is processed again afterwards, never twice at once. Keys are strings (`namespace/name`) for most
//! generic controllers, or any small value type with a text for the metrics (the service controller queues its
//! typed Service keys, the tagging controller `(action, node, instance)`).
//!
//! Delays come from [`Backoff`] (per key, after failures) and, for a queue-wide rate limit, a
//! [`TokenBucket`](crate::TokenBucket): the queue only waits.

use std::{
    borrow::Borrow,
    collections::{HashMap, HashSet, VecDeque},
    fmt::Display,
    hash::Hash,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use tokio::sync::Notify;

use crate::ControllerMetrics;

/// What a queue key must be: cheap to clone, comparable, and printable (its text keys the queue's metrics).
pub trait QueueKey: Clone + Eq + Hash + Display + Send + Sync + 'static {}

impl<T: Clone + Eq + Hash + Display + Send + Sync + 'static> QueueKey for T {}

/// The queue (cheap to clone: clones share it). With [`WorkQueue::with_metrics`], it keeps component-base's
/// `workqueue_*` numbers in a [`ControllerMetrics`], which the controller-manager serves under the controller's
/// upstream queue name.
pub struct WorkQueue<K = String>(Arc<Shared<K>>);

struct Shared<K> {
    state: Mutex<State<K>>,
    notify: Notify,
    /// Where the queue's numbers are published, if anywhere.
    metrics: Option<ControllerMetrics>,
}

struct State<K> {
    queue: VecDeque<K>,
    queued: HashSet<K>,
    processing: HashSet<K>,
    dirty: HashSet<K>,
    shut_down: bool,
}

/// Per-key exponential backoff: `base * 2^failures`, at most `max` (client-go's
/// `ItemExponentialFailureRateLimiter`).
#[derive(Debug)]
pub struct Backoff<K = String> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<K, u32>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

// === impl WorkQueue ===

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<K: QueueKey> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::new(None)
    }
}

impl<K> std::fmt::Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue").finish_non_exhaustive()
    }
}

impl<K: QueueKey> WorkQueue<K> {
    fn new(metrics: Option<ControllerMetrics>) -> Self {
        Self(Arc::new(Shared {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                queued: HashSet::new(),
                processing: HashSet::new(),
                dirty: HashSet::new(),
                shut_down: false,
            }),
            notify: Notify::new(),
            metrics,
        }))
    }

    /// A queue whose numbers are kept in `metrics` ([`ControllerMetrics::snapshot`]'s `queue_depth`,
    /// [`ControllerMetrics::queue_snapshot`]).
    pub fn with_metrics(metrics: ControllerMetrics) -> Self {
        Self::new(Some(metrics))
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

    fn state(&self) -> MutexGuard<'_, State<K>> {
        lock(&self.0.state)
    }

    /// Queues `key` unless it is already waiting; a key being processed is queued again once it is done.
    pub fn add<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        let mut s = self.state();
        if s.shut_down {
            return;
        }
        if s.processing.contains(key) {
            // Counted as an add when `done` queues it again.
            s.dirty.insert(key.to_owned());
            return;
        }
        if s.queued.contains(key) {
            return;
        }
        let key = key.to_owned();
        s.queued.insert(key.clone());
        s.queue.push_back(key.clone());
        let depth = s.queue.len();
        drop(s);
        self.record(|q| q.added(&key.to_string()));
        self.publish(depth);
        self.0.notify.notify_one();
    }

    /// Queues `key` after `delay` (at once when it is zero). A delayed add counts as a retry, as client-go
    /// counts its rate-limited re-adds.
    pub fn add_after<Q>(&self, key: &Q, delay: Duration)
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        if delay.is_zero() {
            return self.add(key);
        }
        self.record(|q| q.retried());
        let this = self.clone();
        let key = key.to_owned();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            this.add::<K>(&key);
        });
    }

    /// Keys waiting now.
    pub fn len(&self) -> usize {
        self.state().queue.len()
    }

    /// Whether no key is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits for at least one key, then collects keys for up to `window` (or until `max` are taken) and marks
    /// them as processing. `None` once the queue is shut down.
    pub async fn next_batch(&self, max: usize, window: Duration) -> Option<Vec<K>> {
        loop {
            let notified = self.0.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so neither an add nor the shutdown between check and wait is missed.
            notified.as_mut().enable();
            {
                let s = self.state();
                if s.shut_down {
                    return None;
                }
                if !s.queue.is_empty() {
                    break;
                }
            }
            notified.await;
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
        let batch: Vec<K> = s.queue.drain(..n).collect();
        for key in &batch {
            s.queued.remove(key);
            s.processing.insert(key.clone());
        }
        let depth = s.queue.len();
        drop(s);
        self.record(|q| batch.iter().for_each(|k| q.taken(&k.to_string())));
        self.publish(depth);
        if depth > 0 {
            self.0.notify.notify_one();
        }
        Some(batch)
    }

    /// Marks a key as processed; if it was added meanwhile it is queued again.
    pub fn done<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq + Display + ?Sized,
    {
        let requeue = {
            let mut s = self.state();
            s.processing.remove(key);
            s.dirty.remove(key)
        };
        self.record(|q| q.finished(&key.to_string()));
        if requeue {
            self.add(key);
        }
    }

    /// Stops the queue: waiting and later [`next_batch`](Self::next_batch) calls return `None`, adds are
    /// ignored.
    pub fn shut_down(&self) {
        self.state().shut_down = true;
        self.0.notify.notify_waiters();
        self.0.notify.notify_one();
    }
}

// === impl Backoff ===

impl<K: Eq + Hash> Backoff<K> {
    /// Delays from `base` doubling per failure, at most `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::default(),
        }
    }

    /// The delay before the next attempt of `key`, counting this failure.
    pub fn next<Q>(&self, key: &Q) -> Duration
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        let mut f = lock(&self.failures);
        let n = match f.get_mut(key) {
            Some(n) => n,
            None => f.entry(key.to_owned()).or_insert(0),
        };
        let exp = (*n).min(30);
        *n = n.saturating_add(1);
        self.base.saturating_mul(1u32 << exp).min(self.max)
    }

    /// How many failures `key` has had in a row (client-go's `NumRequeues`).
    pub fn failures<Q>(&self, key: &Q) -> u32
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        lock(&self.failures).get(key).copied().unwrap_or(0)
    }

    /// Forgets `key`'s failures (it succeeded, or was given up).
    pub fn forget<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        lock(&self.failures).remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn queue_numbers_are_kept_as_client_go_keeps_them() {
        let metrics = ControllerMetrics::default();
        let q = WorkQueue::<String>::with_metrics(metrics.clone());
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
        let q = WorkQueue::<String>::with_metrics(metrics.clone());
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
        let q = WorkQueue::<String>::default();
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
        let q = WorkQueue::<String>::default();
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
        let b = Backoff::<String>::new(Duration::from_secs(5), Duration::from_secs(300));
        let delays: Vec<u64> = (0..8).map(|_| b.next("k").as_secs()).collect();
        assert_eq!(delays, vec![5, 10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(b.failures("k"), 8);
        b.forget("k");
        assert_eq!(b.next("k"), Duration::from_secs(5));
    }
}
