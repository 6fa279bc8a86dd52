//! Coalescing of concurrent requests into few AWS calls.
//!
//! Requests with the same key (for example the same tag set) wait together for a short window; the first
//! request of a bucket starts its timer, and a bucket that reaches its size limit goes at once. The executor
//! runs on its own task, so a caller that gives up (its future dropped) never strands the others.

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

    async fn run(&self, key: K, bucket: Bucket<Req, Res>) {
        let (requests, senders): (Vec<_>, Vec<_>) = bucket.waiters.into_iter().unzip();
        let results = (self.execute)(key, requests).await;
        for (tx, result) in senders.into_iter().zip(results) {
            // The caller may have gone away: nothing to do.
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
}
