//! Instance lookups that fall back to smaller batches.
//!
//! A `DescribeInstances` of 1,000 IDs is one call on AWS, but an endpoint that is slow for large requests (a
//! loaded emulator, a congested VPC endpoint) may not answer it within the attempt timeout; retried whole, it
//! never succeeds and no node of the batch is ever initialized. So a lookup larger than [`MIN_SPLIT_IDS`] that
//! fails transiently (timeout, 5xx, connection failure) is not retried whole but asked again in halves, down to
//! that floor, where the usual retries apply. Throttling is never answered by splitting: more calls would only
//! make it worse. The size that worked is remembered for [`RESTORE_AFTER`] after the last failure, so that the
//! next lookups (the rest of a node burst) do not pay the timeout again; then the full size is tried again.

use std::{
    future::Future,
    sync::{Mutex, PoisonError},
    time::Duration,
};

use ccm_aws_api::{AwsError, ErrorKind, InstanceId, Result};
use tokio::time::Instant;

/// Lookups of at most this many IDs are not split further; their failures are retried as any call's.
pub(crate) const MIN_SPLIT_IDS: usize = 100;

/// How long a reduced lookup size is kept after the last failure.
pub(crate) const RESTORE_AFTER: Duration = Duration::from_secs(600);

/// The lookup size currently believed to work, shared by every lookup of the process.
#[derive(Debug)]
pub(crate) struct LookupSize {
    max: usize,
    /// The reduced size and when it was last reduced.
    reduced: Mutex<Option<(usize, Instant)>>,
}

impl LookupSize {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            reduced: Mutex::new(None),
        }
    }

    pub(crate) fn current(&self) -> usize {
        match *self.reduced.lock().unwrap_or_else(PoisonError::into_inner) {
            Some((size, at)) if at.elapsed() < RESTORE_AFTER => size,
            _ => self.max,
        }
    }

    fn failed(&self, len: usize) {
        let size = self.current().min((len / 2).max(1));
        *self.reduced.lock().unwrap_or_else(PoisonError::into_inner) = Some((size, Instant::now()));
    }
}

/// Looks `ids` up with `call`, one call per chunk of the current size; a chunk larger than [`MIN_SPLIT_IDS`]
/// that fails transiently is split in halves and asked again. `call` gets the chunk and whether it may be
/// split (then it should not retry transient failures itself: the halves are the retry).
pub(crate) async fn split_lookup<T, F, Fut>(
    size: &LookupSize,
    ids: &[InstanceId],
    mut call: F,
) -> Result<Vec<T>>
where
    F: FnMut(Vec<InstanceId>, bool) -> Fut,
    Fut: Future<Output = Result<Vec<T>>>,
{
    // A stack, first chunk on top, so that chunks are asked in order.
    let mut pending: Vec<&[InstanceId]> = ids.chunks(size.current()).rev().collect();
    let mut out = Vec::new();
    while let Some(chunk) = pending.pop() {
        let limit = size.current();
        if chunk.len() > limit {
            // Another chunk failed since this one was cut: do not pay its timeout again.
            pending.extend(chunk.chunks(limit).rev());
            continue;
        }
        let splittable = chunk.len() > MIN_SPLIT_IDS;
        match call(chunk.to_vec(), splittable).await {
            Ok(found) => out.extend(found),
            Err(err) if splittable && err.kind() == ErrorKind::Transient => {
                tracing::warn!(ids = chunk.len(), error = %err, "instance lookup failed; asking again in halves");
                size.failed(chunk.len());
                let (first, second) = chunk.split_at(chunk.len() / 2);
                pending.push(second);
                pending.push(first);
            }
            Err(err) => return Err(err),
        }
    }
    Ok(out)
}

/// A listing (`DescribeInstances` by filter) page by page, each page of at most the current size; a page larger
/// than [`MIN_SPLIT_IDS`] that fails transiently is asked again, from the same token, at half the size. `page`
/// gets the token, the page size and whether it may be made smaller, and returns the items and the next token.
pub(crate) async fn shrinking_pages<T, F, Fut>(size: &LookupSize, mut page: F) -> Result<Vec<T>>
where
    F: FnMut(Option<String>, usize, bool) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<String>)>>,
{
    let mut out = Vec::new();
    let mut token = None;
    let mut pages = crate::runtime::Pages::default();
    loop {
        let (items, next) = shrinking_page(size, token, &mut page).await?;
        out.extend(items);
        match pages.next_of("ec2", "DescribeInstances", next)? {
            Some(next) => token = Some(next),
            None => return Ok(out),
        }
    }
}

/// One page of [`shrinking_pages`], from `token`: asked again at half the size while it fails transiently and
/// is larger than [`MIN_SPLIT_IDS`]. A page whose next token is the one it was asked with is an error (a caller
/// asking page by page would otherwise list forever); an empty next token ends the listing, as AWS's SDKs treat it.
pub(crate) async fn shrinking_page<T, F, Fut>(
    size: &LookupSize,
    token: Option<String>,
    mut page: F,
) -> Result<(Vec<T>, Option<String>)>
where
    F: FnMut(Option<String>, usize, bool) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<String>)>>,
{
    loop {
        let limit = size.current();
        let splittable = limit > MIN_SPLIT_IDS;
        match page(token.clone(), limit, splittable).await {
            Err(err) if splittable && err.kind() == ErrorKind::Transient => {
                tracing::warn!(page = limit, error = %err, "instance listing failed; asking for smaller pages");
                size.failed(limit);
            }
            answer => {
                let (items, next) = answer?;
                let next = next.filter(|t| !t.is_empty());
                if next.is_some() && next == token {
                    let message =
                        format!("the continuation token {token:?} came back a second time: listing stopped");
                    return Err(
                        AwsError::new(ErrorKind::Transient, "ec2", "DescribeInstances").with_message(message)
                    );
                }
                return Ok((items, next));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Mutex;

    use super::*;

    fn ids(n: usize) -> Vec<InstanceId> {
        (0..n).map(|i| InstanceId::new(format!("i-{i:017x}"))).collect()
    }

    /// An endpoint that times out on lookups of more than `limit` IDs (or fails them with `kind`) and answers
    /// smaller ones with every ID; records the size of each call.
    async fn lookup(
        size: &LookupSize,
        wanted: &[InstanceId],
        limit: usize,
        kind: ErrorKind,
        calls: &Mutex<Vec<usize>>,
    ) -> Result<Vec<InstanceId>> {
        split_lookup(size, wanted, |chunk, _splittable| async move {
            calls.lock().unwrap().push(chunk.len());
            if chunk.len() > limit {
                Err(AwsError::new(kind, "ec2", "DescribeInstances").with_message("timed out"))
            } else {
                Ok(chunk)
            }
        })
        .await
    }

    #[tokio::test]
    async fn a_lookup_that_times_out_is_asked_again_in_halves() {
        let size = LookupSize::new(1000);
        let wanted = ids(5000);
        let calls = Mutex::new(Vec::new());
        let found = lookup(&size, &wanted, 300, ErrorKind::Transient, &calls)
            .await
            .unwrap();
        assert_eq!(found, wanted, "every instance found, in order");
        let calls = calls.into_inner().unwrap();
        // 1,000 and 500 time out once each; every later chunk is cut at the size that worked.
        assert_eq!(&calls[..2], [1000, 500]);
        assert!(calls[2..].iter().all(|&n| n == 250), "{calls:?}");
        assert_eq!(calls.len(), 2 + 20);
        assert_eq!(size.current(), 250);
    }

    #[tokio::test(start_paused = true)]
    async fn the_full_size_is_tried_again_later() {
        let size = LookupSize::new(1000);
        let calls = Mutex::new(Vec::new());
        lookup(&size, &ids(1000), 600, ErrorKind::Transient, &calls)
            .await
            .unwrap();
        assert_eq!(size.current(), 500);
        tokio::time::advance(RESTORE_AFTER).await;
        assert_eq!(size.current(), 1000);
    }

    #[tokio::test]
    async fn the_size_that_worked_is_kept_for_the_next_lookup() {
        let size = LookupSize::new(1000);
        let calls = Mutex::new(Vec::new());
        lookup(&size, &ids(1000), 300, ErrorKind::Transient, &calls)
            .await
            .unwrap();
        assert_eq!(size.current(), 250);
        let calls = Mutex::new(Vec::new());
        lookup(&size, &ids(1000), 300, ErrorKind::Transient, &calls)
            .await
            .unwrap();
        assert_eq!(calls.into_inner().unwrap(), [250, 250, 250, 250]);
    }

    #[tokio::test]
    async fn splitting_stops_at_the_floor_and_reports_the_error() {
        let size = LookupSize::new(1000);
        let calls = Mutex::new(Vec::new());
        let err = lookup(&size, &ids(1000), 0, ErrorKind::Transient, &calls)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Transient);
        let calls = calls.into_inner().unwrap();
        assert_eq!(
            calls,
            [1000, 500, 250, 125, 62],
            "split down to the floor, no further"
        );
    }

    #[tokio::test]
    async fn throttling_is_not_answered_by_more_calls() {
        let size = LookupSize::new(1000);
        let calls = Mutex::new(Vec::new());
        let err = lookup(&size, &ids(1000), 300, ErrorKind::Throttled, &calls)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Throttled);
        assert_eq!(calls.into_inner().unwrap(), [1000]);
        assert_eq!(size.current(), 1000);
    }

    /// A listing of `total` items that times out for pages of more than `limit`; records the page sizes.
    async fn listing(
        size: &LookupSize,
        total: usize,
        limit: usize,
        calls: &Mutex<Vec<usize>>,
    ) -> Result<Vec<usize>> {
        shrinking_pages(size, |token: Option<String>, page, _| async move {
            calls.lock().unwrap().push(page);
            if page > limit {
                return Err(
                    AwsError::new(ErrorKind::Transient, "ec2", "DescribeInstances").with_message("timed out")
                );
            }
            let from: usize = token.map_or(0, |t| t.parse().unwrap());
            let to = (from + page).min(total);
            Ok(((from..to).collect(), (to < total).then(|| to.to_string())))
        })
        .await
    }

    #[tokio::test]
    async fn a_listing_page_that_times_out_is_asked_again_smaller() {
        let size = LookupSize::new(1000);
        let calls = Mutex::new(Vec::new());
        let items = listing(&size, 5000, 300, &calls).await.unwrap();
        assert_eq!(items, (0..5000).collect::<Vec<_>>(), "every item once, in order");
        let calls = calls.into_inner().unwrap();
        assert_eq!(&calls[..3], [1000, 500, 250]);
        assert_eq!(calls.len(), 2 + 20, "{calls:?}");
        let calls = Mutex::new(Vec::new());
        let err = listing(&LookupSize::new(1000), 5000, 0, &calls)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Transient);
        assert_eq!(calls.into_inner().unwrap(), [1000, 500, 250, 125, 62]);
    }

    #[tokio::test]
    async fn only_chunks_above_the_floor_are_splittable() {
        let size = LookupSize::new(1000);
        let seen = Mutex::new(Vec::new());
        split_lookup(&size, &ids(1100), |chunk, splittable| {
            seen.lock().unwrap().push((chunk.len(), splittable));
            async move { Ok::<_, AwsError>(chunk) }
        })
        .await
        .unwrap();
        assert_eq!(seen.into_inner().unwrap(), [(1000, true), (100, false)]);
    }

    #[tokio::test]
    async fn a_token_that_comes_back_ends_the_listing_with_an_error() {
        let size = LookupSize::new(1000);
        let calls = Mutex::new(0);
        let result: Result<Vec<usize>> = shrinking_pages(&size, |_token, _page, _| {
            *calls.lock().unwrap() += 1;
            async move { Ok((vec![1], Some("same".to_owned()))) }
        })
        .await;
        let err = result.unwrap_err();
        assert!(err.to_string().contains("came back a second time"), "{err}");
        assert_eq!(*calls.lock().unwrap(), 2, "the first repeat stops it");
    }

    #[tokio::test]
    async fn a_page_answering_with_its_own_token_is_an_error_and_an_empty_token_ends() {
        let size = LookupSize::new(1000);
        let asked = |next: &'static str| {
            shrinking_page(
                &size,
                Some("same".to_owned()),
                move |_token, _page, _| async move { Ok::<_, AwsError>((vec![1], Some(next.to_owned()))) },
            )
        };
        let err = asked("same").await.unwrap_err();
        assert!(err.to_string().contains("came back a second time"), "{err}");
        assert_eq!(asked("").await.unwrap(), (vec![1], None));
        assert_eq!(asked("other").await.unwrap(), (vec![1], Some("other".to_owned())));
    }
}
