//! The work-queue numbers client-go's queues export (component-base's `workqueue_*` metrics): adds, retries,
//! how long keys wait and are worked on, and what is being worked on now.

use std::{collections::HashMap, time::Duration};

use tokio::time::Instant;

/// The upper bounds of the queue and work duration histograms: client-go's `ExponentialBuckets(10e-9, 10, 10)`,
/// 10 ns to 10 s.
pub const QUEUE_DURATION_BUCKETS: [f64; 10] = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0];

/// A histogram's numbers: per-bucket (not cumulative) counts for [`QUEUE_DURATION_BUCKETS`], then the count
/// above the last bound.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HistogramSnapshot {
    /// Observations in each bucket (`buckets[i]` counts values in `(bound[i-1], bound[i]]`).
    pub buckets: [u64; 10],
    /// Observations above the last bound.
    pub overflow: u64,
    /// Sum of the observed values, in seconds.
    pub sum: f64,
    /// Number of observations.
    pub count: u64,
}

/// A point-in-time copy of a controller's work-queue numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QueueSnapshot {
    /// Keys added (a key already waiting is not counted again).
    pub adds: u64,
    /// Keys added back after a failure or a wait.
    pub retries: u64,
    /// How long keys waited in the queue.
    pub queue_duration: HistogramSnapshot,
    /// How long processing a key took.
    pub work_duration: HistogramSnapshot,
    /// Seconds of work in progress and not yet observed by `work_duration` (summed over the keys).
    pub unfinished_work_seconds: f64,
    /// Seconds the longest-running key has been worked on.
    pub longest_running_processor_seconds: f64,
}

#[derive(Debug, Default)]
pub(crate) struct QueueStats {
    adds: u64,
    retries: u64,
    queue_duration: HistogramSnapshot,
    work_duration: HistogramSnapshot,
    waiting_since: HashMap<String, Instant>,
    working_since: HashMap<String, Instant>,
}

impl HistogramSnapshot {
    fn observe(&mut self, d: Duration) {
        let v = d.as_secs_f64();
        match QUEUE_DURATION_BUCKETS.iter().position(|b| v <= *b) {
            Some(i) => self.buckets[i] += 1,
            None => self.overflow += 1,
        }
        self.sum += v;
        self.count += 1;
    }
}

impl QueueStats {
    pub(crate) fn added(&mut self, key: &str) {
        self.adds += 1;
        self.waiting_since
            .entry(key.to_owned())
            .or_insert_with(Instant::now);
    }

    pub(crate) fn retried(&mut self) {
        self.retries += 1;
    }

    pub(crate) fn taken(&mut self, key: &str) {
        let now = Instant::now();
        if let Some(since) = self.waiting_since.remove(key) {
            self.queue_duration.observe(now.saturating_duration_since(since));
        }
        self.working_since.insert(key.to_owned(), now);
    }

    pub(crate) fn finished(&mut self, key: &str) {
        if let Some(since) = self.working_since.remove(key) {
            self.work_duration.observe(since.elapsed());
        }
    }

    pub(crate) fn snapshot(&self) -> QueueSnapshot {
        let now = Instant::now();
        let running = self
            .working_since
            .values()
            .map(|since| now.saturating_duration_since(*since).as_secs_f64());
        QueueSnapshot {
            adds: self.adds,
            retries: self.retries,
            queue_duration: self.queue_duration,
            work_duration: self.work_duration,
            unfinished_work_seconds: running.clone().fold(0.0, |a, b| a + b),
            longest_running_processor_seconds: running.fold(0.0, f64::max),
        }
    }
}
