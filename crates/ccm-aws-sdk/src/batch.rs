//! Coalescing of concurrent requests into few AWS calls.
//!
//! Requests with the same key (for example the same tag set) wait together for a short window; the first
//! request of a bucket starts its timer, and a bucket that reaches its size limit goes at once. The executor
//! runs on its own task, so a caller that gives up (its future dropped) never strands the others.
//!
//! That task must not outlive its callers either: a leader whose lease lapsed has its controllers stopped (their
//! futures dropped) but the process goes on as a candidate, and a request sent for them then, retries included,
//! would write to AWS while another replica leads. So a bucket sends only the requests of callers still waiting,
//! nothing at all when none is, and its execution is dropped (no further attempt) as soon as the last caller
//! has gone.

use std::{
    collections::BTreeMap,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    time::Duration,
};

use ccm_aws_api::{AwsError, ErrorKind};
use tokio::sync::oneshot;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type Executor<K, Req, Res> = dyn Fn(K, Vec<Req>) -> BoxFuture<Vec<Result<Res, AwsError>>> + Send + Sync;

/// Batches requests of type `Req` under keys `K`; the executor answers every request of a batch, in order.
pub(crate) struct Batcher<K, Req, Res> {
    shared: Arc<Shared<K, Req, Res>>,
}

struct Shared<K, Req, Res> {
    window: Duration,
    max_weight: usize,
    state: Mutex<State<K, Req, Res>>,
    execute: Box<Executor<K, Req, Res>>,
}

struct State<K, Req, Res> {
    buckets: BTreeMap<K, Bucket<Req, Res>>,
    next_generation: u64,
}

struct Bucket<Req, Res> {
    generation: u64,
    weight: usize,
    waiters: Vec<(Req, oneshot::Sender<Result<Res, AwsError>>)>,
}

// === impl Batcher ===

impl<K, Req, Res> Batcher<K, Req, Res>
where
    K: Ord + Clone + Send + 'static,
    Req: Send + 'static,
    Res: Send + 'static,
{
    /// A batcher waiting at most `window` after a bucket's first request, and sending a bucket as soon as its
    /// requests weigh `max_weight`.
    pub(crate) fn new<F, Fut>(window: Duration, max_weight: usize, execute: F) -> Self
    where
        F: Fn(K, Vec<Req>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<Result<Res, AwsError>>> + Send + 'static,
    {
        let execute: Box<Executor<K, Req, Res>> = Box::new(move |key, reqs| Box::pin(execute(key, reqs)));
        Self {
            shared: Arc::new(Shared {
                window,
                max_weight: max_weight.max(1),
                state: Mutex::new(State {
                    buckets: BTreeMap::new(),
                    next_generation: 0,
                }),
                execute,
            }),
        }
    }

    /// Submits a request weighing `weight` and waits for its answer.
    pub(crate) async fn submit(
        &self,
        key: K,
        request: Req,
        weight: usize,
        op: (&'static str, &'static str),
    ) -> Result<Res, AwsError> {
        let (tx, rx) = oneshot::channel();
        let full = {
            let mut state = self.shared.lock();
            let generation = state.next_generation;
            let bucket = state.buckets.entry(key.clone()).or_insert_with(|| Bucket {
                generation,
                weight: 0,
                waiters: Vec::new(),
            });
            let fresh = bucket.waiters.is_empty();
            bucket.weight += weight;
            bucket.waiters.push((request, tx));
            if bucket.weight >= self.shared.max_weight {
                state.buckets.remove(&key)
            } else {
                if fresh {
                    state.next_generation += 1;
                    let shared = self.shared.clone();
                    let key = key.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(shared.window).await;
                        let due = {
                            let mut state = shared.lock();
                            match state.buckets.get(&key) {
                                Some(b) if b.generation == generation => state.buckets.remove(&key),
                                _ => None,
                            }
                        };
                        if let Some(bucket) = due {
                            shared.run(key, bucket).await;
                        }
                    });
                }
                None
            }
        };
        if let Some(bucket) = full {
            let shared = self.shared.clone();
            tokio::spawn(async move { shared.run(key, bucket).await });
        }
        rx.await.unwrap_or_else(|_| {
            Err(AwsError::new(ErrorKind::Transient, op.0, op.1).with_message("batched call was abandoned"))
        })
    }
}

// === impl Shared ===

impl<K, Req, Res> Shared<K, Req, Res> {
    fn lock(&self) -> std::sync::MutexGuard<'_, State<K, Req, Res>> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sends the requests of the callers still waiting, and answers them; see the module's documentation for
    /// why nothing is sent for callers that have gone.
    async fn run(&self, key: K, bucket: Bucket<Req, Res>) {
        let (requests, mut senders): (Vec<_>, Vec<_>) = bucket
            .waiters
            .into_iter()
            .filter(|(_, tx)| !tx.is_closed())
            .unzip();
        if senders.is_empty() {
            return;
        }
        let results = {
            let execution = (self.execute)(key, requests);
            // Resolves once every caller has dropped its receiver (awaiting each in turn waits for the last).
            let all_gone = async {
                for tx in &mut senders {
                    tx.closed().await;
                }
            };
            tokio::select! {
                results = execution => results,
                // Dropping the execution cancels its current attempt and every retry it would have made.
                () = all_gone => return,
            }
        };
        for (tx, result) in senders.into_iter().zip(results) {
            // The caller may have gone away meanwhile: nothing to do.
            let _ = tx.send(result);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn concurrent_requests_share_one_execution_per_key() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let batcher = Arc::new(Batcher::new(
            Duration::from_millis(10),
            100,
            move |key: u8, reqs: Vec<u32>| {
                counter.fetch_add(1, Ordering::SeqCst);
                async move { reqs.into_iter().map(|r| Ok((key, r * 2))).collect() }
            },
        ));
        let mut tasks = Vec::new();
        for i in 0..30u32 {
            let batcher = batcher.clone();
            tasks.push(tokio::spawn(async move {
                batcher
                    .submit(u8::try_from(i % 2).unwrap(), i, 1, ("ec2", "Test"))
                    .await
            }));
        }
        for (i, task) in tasks.into_iter().enumerate() {
            let (key, doubled) = task.await.unwrap().unwrap();
            assert_eq!(u32::from(key), u32::try_from(i).unwrap() % 2);
            assert_eq!(doubled, 2 * u32::try_from(i).unwrap());
        }
        assert_eq!(calls.load(Ordering::SeqCst), 2, "one call per key");
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_bucket_goes_at_once_and_later_requests_start_a_new_one() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let batcher = Arc::new(Batcher::new(
            Duration::from_secs(3600),
            10,
            move |_: (), reqs: Vec<u32>| {
                counter.fetch_add(1, Ordering::SeqCst);
                async move { reqs.into_iter().map(Ok).collect() }
            },
        ));
        let mut tasks = Vec::new();
        for i in 0..10u32 {
            let batcher = batcher.clone();
            tasks.push(tokio::spawn(async move {
                batcher.submit((), i, 1, ("ec2", "Test")).await
            }));
        }
        let start = tokio::time::Instant::now();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "did not wait for the window"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    /// A batcher with a 10 ms window whose executor counts its calls and records the requests it was given.
    fn recording(calls: &Arc<Mutex<Vec<Vec<u32>>>>) -> Batcher<(), u32, u32> {
        let calls = calls.clone();
        Batcher::new(Duration::from_millis(10), 100, move |(), reqs: Vec<u32>| {
            calls.lock().unwrap().push(reqs.clone());
            async move { reqs.into_iter().map(Ok).collect() }
        })
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_sent_for_callers_gone_before_the_window_ends() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let batcher = recording(&calls);
        let give_up = Duration::from_millis(5);
        let (a, b) = tokio::join!(
            tokio::time::timeout(give_up, batcher.submit((), 1, 1, ("ec2", "Test"))),
            tokio::time::timeout(give_up, batcher.submit((), 2, 1, ("ec2", "Test"))),
        );
        assert!(a.is_err() && b.is_err(), "the callers gave up");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(calls.lock().unwrap().is_empty(), "{:?}", calls.lock().unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn only_the_requests_of_callers_still_waiting_are_sent() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let batcher = recording(&calls);
        let (gone, waiting) = tokio::join!(
            tokio::time::timeout(
                Duration::from_millis(5),
                batcher.submit((), 1, 1, ("ec2", "Test"))
            ),
            batcher.submit((), 2, 1, ("ec2", "Test")),
        );
        assert!(gone.is_err());
        assert_eq!(waiting.unwrap(), 2);
        assert_eq!(*calls.lock().unwrap(), vec![vec![2]]);
    }

    /// A batcher with a 10 ms window whose executor makes an attempt every second, 100 times, then answers.
    fn retrying(attempts: &Arc<AtomicUsize>) -> Batcher<(), u32, u32> {
        let attempts = attempts.clone();
        Batcher::new(Duration::from_millis(10), 100, move |(), reqs: Vec<u32>| {
            let attempts = attempts.clone();
            async move {
                for _ in 0..100 {
                    attempts.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                reqs.into_iter().map(Ok).collect()
            }
        })
    }

    #[tokio::test(start_paused = true)]
    async fn no_attempt_is_made_once_every_caller_has_gone() {
        let attempts = Arc::new(AtomicUsize::new(0));
        let batcher = retrying(&attempts);
        // Attempts at 10 ms, 1.01 s, 2.01 s and 3.01 s; both callers give up at 3.5 s.
        let give_up = Duration::from_millis(3500);
        let (a, b) = tokio::join!(
            tokio::time::timeout(give_up, batcher.submit((), 1, 1, ("ec2", "Test"))),
            tokio::time::timeout(give_up, batcher.submit((), 2, 1, ("ec2", "Test"))),
        );
        assert!(a.is_err() && b.is_err(), "the callers gave up");
        assert_eq!(attempts.load(Ordering::SeqCst), 4);
        tokio::time::sleep(Duration::from_secs(300)).await;
        assert_eq!(
            attempts.load(Ordering::SeqCst),
            4,
            "attempts after the callers had gone"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_execution_goes_on_while_one_caller_still_waits() {
        let attempts = Arc::new(AtomicUsize::new(0));
        let batcher = retrying(&attempts);
        let (gone, waiting) = tokio::join!(
            tokio::time::timeout(
                Duration::from_millis(3500),
                batcher.submit((), 1, 1, ("ec2", "Test"))
            ),
            batcher.submit((), 2, 1, ("ec2", "Test")),
        );
        assert!(gone.is_err());
        assert_eq!(waiting.unwrap(), 2);
        assert_eq!(attempts.load(Ordering::SeqCst), 100);
    }
}
