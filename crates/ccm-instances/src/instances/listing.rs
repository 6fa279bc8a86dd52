//! The cluster-wide listing by private DNS name, asked page by page, read ahead to its end once started.
//!
//! A listing of 5,000 instances is five pages; AWS answers each in a second or two, moto in ten to twenty. A
//! burst's lookup that waited for all five initialized nothing meanwhile, and the controller's Kubernetes writes,
//! the burst's real floor, waited with it. So a lookup fetches pages only until each of its names is answered and
//! leaves the listing open (its next page's token kept): the next batch answers from the pages already in. And
//! once a lookup has asked a page, a task of its own reads the rest of the listing, a page at a time, while the
//! Nodes of the pages in are written: the next batch finds its page in, instead of asking it only once the writes
//! of the last page's Nodes are done (a burst then waited a page's time for each page). The read-ahead costs no
//! call the listing would not make: a lookup lists the cluster only when asking its names one by one would cost
//! more calls than the whole listing. Instances launched in order are listed in order, as a burst's Nodes
//! register. The listing is the same one either way: its pages are asked once, whoever needs them, a lookup or
//! the read-ahead (they take turns at each page).
//!
//! A name is answered from the first page that shows it, before the later pages are seen. Two live instances of
//! the cluster under one private DNS name (possible only across VPCs with overlapping addresses) are found when
//! the second appears: the name is then never answered from the listing again (a warning says so), and a Node
//! already answered keeps the first instance, as it would with the Go controller's first match.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, SystemTime},
};

use ccm_aws_api::{Catalog, CatalogInstance, CatalogLookup, Ec2, Filter, InstanceId, ec2::InstanceState};
use tokio::time::Instant;

use super::{AwsInstances, Found, LIVE_STATES, Lookup};
use crate::{InstancesError, VALUES_PER_FILTER};

/// How long a cluster-wide listing answers the initialization lookups of later batches. Only instances it saw
/// running, with a name no other live instance had, are answered from it. Five minutes, the default
/// `--node-status-update-frequency`: a Node's addresses are as old as that between refreshes anyway, and what
/// else initialization takes (ID, type, zone) does not change while an instance runs. It must outlast a burst:
/// 5,000 Nodes take the controller's Kubernetes writes about two and a half minutes at `--kube-api-qps=100`,
/// and a one-minute window made the burst list the cluster twice.
pub const LISTING_REUSE: Duration = Duration::from_secs(300);

/// Instances per page of a `DescribeInstances` listing (its `MaxResults` ceiling).
pub const INSTANCES_PER_PAGE: usize = 1000;

/// The wall clock, compared with the apiserver's creation stamps (tests date their Nodes relative to it).
#[allow(clippy::disallowed_methods)]
pub(super) fn wall_clock() -> SystemTime {
    SystemTime::now()
}

/// How long after a Node's creation (as the apiserver stamped it, to the second) a listing must be taken to
/// answer it without confirmation: the stamp's truncation. A recycled address needs the old instance gone and a
/// new one booted before its Node can exist, tens of seconds at least, far more than any clock skew this hides.
pub(super) const CREATED_MARGIN: Duration = Duration::from_secs(1);

/// What the listing holds for one private DNS name.
#[derive(Debug)]
enum Entry {
    /// One running instance (the instance catalog's entry, shared), and when the page that showed it was
    /// answered.
    Running(Arc<CatalogInstance>, SystemTime),
    /// One live instance that is not running: no answer.
    NotRunning(InstanceId),
    /// Two or more live instances: an error to report afresh, never an answer.
    Shared,
}

/// Where a listing stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Next {
    First,
    After(String),
    /// Every page is in (when the last was answered).
    Done(SystemTime),
}

/// One listing of the cluster's live instances, as far as it was asked.
#[derive(Debug)]
struct Listing {
    /// When its first page was asked: it answers for [`LISTING_REUSE`] from then.
    started: Instant,
    by_name: HashMap<String, Entry>,
    /// Live instances with the cluster tag in the pages so far.
    tagged: usize,
    next: Next,
}

/// The last cluster-wide listing by private DNS name, and the cluster's size the last complete one showed.
#[derive(Debug, Default)]
pub(super) struct ClusterListing {
    /// `None` once older than the reuse time (its memory freed).
    recent: Option<Listing>,
    /// Live instances with the cluster tag at the last complete listing: what a new listing would cost.
    size: Option<usize>,
    /// Whether a batch was asked by name while the size was unknown.
    asked_blind: bool,
    /// Whether a task is reading the recent listing ahead (see the module docs).
    reading_ahead: bool,
}

impl ClusterListing {
    /// Drops the recent listing of `listing` once too old, on a timer while `listing` lives (a quiet cluster
    /// keeps no listing), when called within a Tokio runtime; otherwise at the next lookup.
    pub(super) fn start_expiry(listing: &Arc<Mutex<Self>>) {
        ccm_aws_api::sweep_every(listing, LISTING_REUSE / 5, |listing| {
            let _ = listing
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .recent(Instant::now());
        });
    }

    /// Whether a listing is held (tests: the timer drops it).
    #[cfg(test)]
    pub(super) fn holds_listing(&self) -> bool {
        self.recent.is_some()
    }

    /// The recent listing, dropped once it is too old to answer.
    fn recent(&mut self, now: Instant) -> Option<&mut Listing> {
        if self
            .recent
            .as_ref()
            .is_some_and(|l| now.duration_since(l.started) >= LISTING_REUSE)
        {
            self.recent = None;
        }
        self.recent.as_mut()
    }

    /// Whether to ask for `names` by name rather than list the cluster. With the size known: when that costs no
    /// more calls (200 names per call against 1,000 instances per page; at equal cost the answers by name are
    /// the smaller). Unknown: for the first batch of at most 200 names only (a lone Node joining costs one
    /// call); a second batch means a burst, whose listing also learns the size.
    pub(super) fn asks_by_name(&mut self, names: usize) -> bool {
        match self.size {
            Some(size) => names.div_ceil(VALUES_PER_FILTER) <= size.max(1).div_ceil(INSTANCES_PER_PAGE),
            None if self.asked_blind || names > VALUES_PER_FILTER => false,
            None => {
                self.asked_blind = true;
                true
            }
        }
    }

    /// Answers what it can of `names` into `out`. Only pages answered at or after `fresh_from` answer when it is
    /// given (they are newer than every Node asking); otherwise a page answers a Node only if it is newer than the
    /// Node (`created`, a Node without a stamp counting as old), and the older answers are returned to be
    /// confirmed. `names` keeps the rest.
    fn answer(
        &mut self,
        names: &mut Vec<String>,
        created: &HashMap<String, SystemTime>,
        fresh_from: Option<SystemTime>,
        out: &mut HashMap<String, Lookup>,
    ) -> Vec<(String, Arc<CatalogInstance>)> {
        let mut unconfirmed = Vec::new();
        let Some(listing) = self.recent(Instant::now()) else {
            return unconfirmed;
        };
        names.retain(|name| match listing.by_name.get(name) {
            Some(Entry::Running(i, taken)) => match fresh_from {
                Some(from) if *taken >= from => {
                    out.insert(name.clone(), Ok(Found::Instance(i.clone())));
                    false
                }
                Some(_) => true,
                None if created.get(name).is_none_or(|c| *taken >= *c + CREATED_MARGIN) => {
                    out.insert(name.clone(), Ok(Found::Instance(i.clone())));
                    false
                }
                None => {
                    unconfirmed.push((name.clone(), i.clone()));
                    false
                }
            },
            _ => true,
        });
        unconfirmed
    }

    /// The token of the page to ask next: of the recent listing while it is open, else of a new one when
    /// `start`; `None` when there is none to ask.
    fn next_page(&mut self, start: bool) -> Option<Option<String>> {
        let now = Instant::now();
        match self.recent(now).map(|l| l.next.clone()) {
            Some(Next::First) => Some(None),
            Some(Next::After(token)) => Some(Some(token)),
            Some(Next::Done(_)) | None if start => {
                self.recent = Some(Listing {
                    started: now,
                    by_name: HashMap::new(),
                    tagged: 0,
                    next: Next::First,
                });
                Some(None)
            }
            Some(Next::Done(_)) | None => None,
        }
    }

    /// Adds a page asked from `token`, answered at `taken`, to the recent listing (unless another lookup added it
    /// meanwhile or the listing expired).
    fn add_page(
        &mut self,
        token: Option<&str>,
        tagged: &[Arc<CatalogInstance>],
        next: Option<String>,
        taken: SystemTime,
    ) {
        let Some(listing) = self.recent(Instant::now()) else {
            return;
        };
        let expected = match &listing.next {
            Next::First => None,
            Next::After(t) => Some(t.as_str()),
            Next::Done(_) => return,
        };
        if expected != token {
            return;
        }
        for i in tagged {
            let Some(name) = i.private_dns_name.clone() else {
                continue;
            };
            let entry = if i.state == InstanceState::Running {
                Entry::Running(i.clone(), taken)
            } else {
                Entry::NotRunning(i.id.clone())
            };
            match listing.by_name.get(&name) {
                None => {
                    listing.by_name.insert(name, entry);
                }
                Some(Entry::Running(other, _)) if other.id == i.id => {}
                Some(Entry::NotRunning(other)) if *other == i.id => {}
                Some(_) => {
                    tracing::warn!(
                        name,
                        instance = %i.id,
                        "two live instances of the cluster share a private DNS name; their Nodes are not \
                         initialized from the listing"
                    );
                    listing.by_name.insert(name, Entry::Shared);
                }
            }
        }
        listing.tagged += tagged.len();
        let done = next.is_none();
        listing.next = next.map_or(Next::Done(taken), Next::After);
        tracing::debug!(
            instances = tagged.len(),
            listed = listing.tagged,
            done,
            "listed a page of the cluster's instances"
        );
        if done {
            self.size = Some(listing.tagged);
        }
    }

    /// Whether the recent listing was completed at or after `from`: a name it does not hold is then missing.
    fn done_since(&mut self, from: SystemTime) -> bool {
        self.recent(Instant::now())
            .is_some_and(|l| matches!(l.next, Next::Done(at) if at >= from))
    }

    /// Marks the read-ahead as started, if the recent listing is open and no read-ahead runs yet.
    fn claim_read_ahead(&mut self) -> bool {
        let open = self
            .recent(Instant::now())
            .is_some_and(|l| !matches!(l.next, Next::Done(_)));
        let claimed = open && !self.reading_ahead;
        self.reading_ahead |= claimed;
        claimed
    }

    /// Whether a read-ahead runs (tests wait for it to end).
    #[cfg(test)]
    pub(super) fn reading_ahead(&self) -> bool {
        self.reading_ahead
    }

    /// Replaces the recent listing with a complete one taken by other means.
    pub(super) fn replace(&mut self, tagged: &[Arc<CatalogInstance>], taken: SystemTime) {
        self.recent = Some(Listing {
            started: Instant::now(),
            by_name: HashMap::new(),
            tagged: 0,
            next: Next::First,
        });
        self.add_page(None, tagged, None, taken);
    }
}

impl<E: Ec2 + Send + Sync + 'static> AwsInstances<E> {
    /// Answers `names` (asked at `asked`) from the recent listing, confirming by ID what is older than its Node
    /// and asking further pages while the listing is open (or starting one when `start`) until every name is
    /// answered or every page is in. Names a complete listing does not hold are missing; instances of the pages
    /// asked here go to `listed` (they answer lookups by ID). `names` keeps what is left.
    pub(super) async fn answer_from_listing(
        &self,
        names: &mut Vec<String>,
        created: &HashMap<String, SystemTime>,
        asked: SystemTime,
        start: bool,
        out: &mut HashMap<String, Lookup>,
        listed: &mut Vec<Arc<CatalogInstance>>,
    ) {
        let unconfirmed = self.lock_listing().answer(names, created, None, out);
        if !unconfirmed.is_empty() {
            // An answer that fails confirmation is only taken from a page newer than the lookup.
            names.extend(self.confirm(unconfirmed, out).await);
        }
        if names.is_empty() {
            return;
        }
        // One lookup asks pages at a time: another waiting for a page finds it in the listing afterwards (the
        // pages added while this one waited answer first).
        let _pages = self.listing_pages.lock().await;
        self.lock_listing().answer(names, created, Some(asked), out);
        let mut start = start;
        while !names.is_empty() {
            let Some(token) = self.lock_listing().next_page(start) else {
                break;
            };
            start = false;
            if let Err(e) = self.list_page(token, listed).await {
                for name in names.drain(..) {
                    let what = format!("failed to get instance by private DNS name {name}");
                    out.insert(name, Err(InstancesError::aws(what, e.clone())));
                }
                return;
            }
            self.lock_listing().answer(names, created, Some(asked), out);
        }
        if self.lock_listing().done_since(asked) {
            for name in names.drain(..) {
                out.insert(name, Ok(Found::Missing));
            }
        }
        self.read_ahead();
    }

    /// Starts reading the rest of the recent listing in a task of its own, if it is open and no read-ahead runs
    /// (and a Tokio runtime is there to run it). The task waits for the page lock this lookup holds.
    fn read_ahead(&self) {
        let Some(reader) = self.pages() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if !self.lock_listing().claim_read_ahead() {
            return;
        }
        let turn = self.listing_pages.clone();
        runtime.spawn(async move {
            let reader = ReadingAhead(reader);
            loop {
                let _turn = turn.lock().await;
                let Some(token) = reader.0.lock().next_page(false) else {
                    break;
                };
                if let Err(error) = reader.0.list_page(token, &mut Vec::new()).await {
                    // The lookups ask the page themselves, and say why it failed.
                    tracing::debug!(%error, "reading the cluster listing ahead stopped");
                    break;
                }
            }
        });
    }

    /// Asks the page of the cluster listing after `token` and adds it to the recent listing.
    async fn list_page(
        &self,
        token: Option<String>,
        listed: &mut Vec<Arc<CatalogInstance>>,
    ) -> Result<(), Arc<ccm_aws_api::AwsError>> {
        let Some(pages) = self.pages() else {
            return Ok(());
        };
        pages.list_page(token, listed).await
    }

    /// Lists the cluster's live instances, every page at once (a fresh answer for existence checks), and keeps
    /// the listing for later batches.
    pub(super) async fn list_cluster(&self) -> ccm_aws_api::Result<Vec<Arc<CatalogInstance>>> {
        let Some(cluster) = &self.config.cluster else {
            return Ok(Vec::new());
        };
        let asked = Instant::now();
        let instances = self.ec2.instances(&cluster_filters(cluster)).await?;
        let tagged = held_tagged(&self.ec2, cluster, &instances, asked);
        tracing::debug!(instances = tagged.len(), "listed the cluster's instances");
        self.lock_listing().replace(&tagged, wall_clock());
        Ok(tagged)
    }

    /// What asks the cluster listing's pages for these instances; `None` without the cluster's tag.
    fn pages(&self) -> Option<Pages<E>> {
        Some(Pages {
            ec2: self.ec2.clone(),
            listing: self.listing.clone(),
            cluster: self.config.cluster.clone()?,
        })
    }

    pub(super) fn lock_listing(&self) -> std::sync::MutexGuard<'_, ClusterListing> {
        lock(&self.listing)
    }
}

/// The read-ahead's task's reader: ending, however the task ends (a panic unwinding it too), it clears the
/// listing's read-ahead mark, which left set would keep every later lookup from reading ahead.
struct ReadingAhead<E: Ec2 + Send + Sync>(Pages<E>);

impl<E: Ec2 + Send + Sync> Drop for ReadingAhead<E> {
    fn drop(&mut self) {
        self.0.lock().reading_ahead = false;
    }
}

/// What asks a page of the cluster listing: a lookup, or the read-ahead's task (which owns one).
struct Pages<E> {
    ec2: Catalog<Arc<E>>,
    listing: Arc<Mutex<ClusterListing>>,
    cluster: ccm_tagging::ClusterTags,
}

impl<E: Ec2 + Send + Sync> Pages<E> {
    fn lock(&self) -> std::sync::MutexGuard<'_, ClusterListing> {
        lock(&self.listing)
    }

    /// Asks the page after `token` and adds it to the recent listing; its instances also go to `listed`.
    async fn list_page(
        &self,
        token: Option<String>,
        listed: &mut Vec<Arc<CatalogInstance>>,
    ) -> Result<(), Arc<ccm_aws_api::AwsError>> {
        // The adapter ends a listing whose next token repeats the one asked (it would list forever).
        let asked = Instant::now();
        let (instances, next) = Box::pin(
            self.ec2
                .instances_page(&cluster_filters(&self.cluster), token.clone()),
        )
        .await
        .map_err(Arc::new)?;
        let tagged = held_tagged(&self.ec2, &self.cluster, &instances, asked);
        self.lock()
            .add_page(token.as_deref(), &tagged, next, wall_clock());
        listed.extend(tagged);
        Ok(())
    }
}

/// The recent listing, for a lookup or the read-ahead. A panic while it was held leaves at most part of a page
/// added, before its next token moved on: the page is asked again and completes it. So a poisoned lock is taken
/// as it is.
fn lock(listing: &Mutex<ClusterListing>) -> std::sync::MutexGuard<'_, ClusterListing> {
    listing.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The catalog's entries of the instances carrying the cluster tag (`owned` or `shared`), from a read asked at
/// `asked`: the listing holds them, not copies.
fn held_tagged<E: Ec2 + Send + Sync>(
    ec2: &Catalog<Arc<E>>,
    cluster: &ccm_tagging::ClusterTags,
    instances: &[ccm_aws_api::ec2::Instance],
    asked: Instant,
) -> Vec<Arc<CatalogInstance>> {
    let mut tagged = ec2.catalog().held_since(instances, asked);
    tagged.retain(|i| cluster.is_tagged(&i.cluster_tags()));
    tagged
}

/// The cluster listing's filters: the cluster's tag key (its value is checked on the answers: `owned` or
/// `shared`) and the live states.
pub(super) fn cluster_filters(cluster: &ccm_tagging::ClusterTags) -> [Filter; 2] {
    [
        Filter::tag_key(cluster.key()),
        Filter::new("instance-state-name", LIVE_STATES),
    ]
}
