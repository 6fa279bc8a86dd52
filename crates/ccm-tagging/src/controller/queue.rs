//! A de-duplicating work queue in the manner of client-go's (an item added while it is processed is processed
//! again afterwards, never twice at once), with per-item failure counts and upstream's rate limiter: exponential
//! 5 ms .. 1000 s per item, and optionally a token bucket over the whole queue.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    hash::Hash,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use tokio::{sync::Notify, time::Instant};

const BASE_DELAY: Duration = Duration::from_millis(5);
const MAX_DELAY: Duration = Duration::from_secs(1000);

pub(crate) struct Queue<T> {
    state: Mutex<State<T>>,
    notify: Notify,
    bucket: Option<Mutex<Bucket>>,
}

struct State<T> {
    queue: VecDeque<T>,
    queued: HashSet<T>,
    processing: HashSet<T>,
    dirty: HashSet<T>,
    failures: HashMap<T, u32>,
    shut_down: bool,
}

struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

// === impl Queue ===

impl<T: Clone + Eq + Hash + Send + Sync + 'static> Queue<T> {
    /// A queue; `rate` items per second with `burst` when both are positive (upstream's `--tagging-controller-*`).
    pub(crate) fn new(rate: f64, burst: i64) -> Arc<Self> {
        let bucket = (rate > 0.0 && burst > 0).then(|| {
            #[allow(clippy::cast_precision_loss)]
            let burst = burst as f64;
            Mutex::new(Bucket {
                rate,
                burst,
                tokens: burst,
                last: Instant::now(),
            })
        });
        Arc::new(Self {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                queued: HashSet::new(),
                processing: HashSet::new(),
                dirty: HashSet::new(),
                failures: HashMap::new(),
                shut_down: false,
            }),
            notify: Notify::new(),
            bucket,
        })
    }

    fn state(&self) -> MutexGuard<'_, State<T>> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn add(&self, item: T) {
        let mut s = self.state();
        if s.shut_down {
            return;
        }
        if s.processing.contains(&item) {
            s.dirty.insert(item);
            return;
        }
        if s.queued.insert(item.clone()) {
            s.queue.push_back(item);
            drop(s);
            self.notify.notify_one();
        }
    }

    /// Adds `item` after `delay`.
    pub(crate) fn add_after(self: &Arc<Self>, item: T, delay: Duration) {
        if delay.is_zero() {
            return self.add(item);
        }
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            this.add(item);
        });
    }

    /// A new event's item: at once, or when the queue-wide bucket allows.
    pub(crate) fn add_event(self: &Arc<Self>, item: T) {
        let delay = self.bucket_delay();
        self.add_after(item, delay);
    }

    /// A failed item: after its exponential delay (or the bucket's, if longer). Returns the failures so far.
    pub(crate) fn add_rate_limited(self: &Arc<Self>, item: T) -> u32 {
        let failures = {
            let mut s = self.state();
            let n = s.failures.entry(item.clone()).or_default();
            *n += 1;
            *n
        };
        let exp = BASE_DELAY
            .checked_mul(1u32.checked_shl(failures - 1).unwrap_or(u32::MAX))
            .unwrap_or(MAX_DELAY)
            .min(MAX_DELAY);
        let delay = exp.max(self.bucket_delay());
        self.add_after(item, delay);
        failures
    }

    /// How many times `item` failed since it was last forgotten.
    pub(crate) fn failures(&self, item: &T) -> u32 {
        self.state().failures.get(item).copied().unwrap_or(0)
    }

    pub(crate) fn forget(&self, item: &T) {
        self.state().failures.remove(item);
    }

    /// Waits for at least one item and takes up to `max`; empty once shut down.
    pub(crate) async fn take(&self, max: usize) -> Vec<T> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so neither an add nor the shutdown between check and wait is missed.
            notified.as_mut().enable();
            {
                let mut s = self.state();
                if s.shut_down {
                    return Vec::new();
                }
                if !s.queue.is_empty() {
                    let n = max.max(1).min(s.queue.len());
                    let items: Vec<T> = s.queue.drain(..n).collect();
                    for item in &items {
                        s.queued.remove(item);
                        s.processing.insert(item.clone());
                    }
                    let more = !s.queue.is_empty();
                    drop(s);
                    if more {
                        self.notify.notify_one();
                    }
                    return items;
                }
            }
            notified.await;
        }
    }

    /// Marks `item` processed; if it was added meanwhile, it is queued again.
    pub(crate) fn done(&self, item: &T) {
        let mut s = self.state();
        s.processing.remove(item);
        if s.dirty.remove(item) && s.queued.insert(item.clone()) {
            s.queue.push_back(item.clone());
            drop(s);
            self.notify.notify_one();
        }
    }

    pub(crate) fn shut_down(&self) {
        self.state().shut_down = true;
        self.notify.notify_waiters();
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.state().queue.len()
    }

    fn bucket_delay(&self) -> Duration {
        let Some(bucket) = &self.bucket else {
            return Duration::ZERO;
        };
        let mut b = bucket.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        let elapsed = now.duration_since(b.last).as_secs_f64();
        b.last = now;
        b.tokens = (b.tokens + elapsed * b.rate).min(b.burst) - 1.0;
        if b.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-b.tokens / b.rate)
        }
    }
}
