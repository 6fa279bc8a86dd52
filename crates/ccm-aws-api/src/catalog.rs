//! The instance catalog: what the controllers know of EC2 instances, in one place.
//!
//! Every controller that acts for a Node reads its instance: the load balancers (its state and security groups),
//! the cluster membership guard (its cluster tags), node initialization and the address refresh (its type, zone
//! and addresses), the routes (its private DNS name). Each used to
//! keep its own copy with its own age, and a joining Node's instance was read once per reader within seconds.
//! One [`InstanceCatalog`], shared by every reader, answers each with the freshness that reader asks for
//! ([`Freshness`], [`CatalogLookup::lookup`]). Each reader reads EC2 through its own [`Catalog`] port (its EC2
//! port with the catalog in front: [`InstanceCatalog::over`]), so the catalog learns every instance any reader's
//! answers show, whatever the call. It keeps only the fields its readers use ([`CatalogInstance`]), drops
//! entries on a timer ([`InstanceCatalog::start_expiry`]) rather than at the next lookup, and reports its size
//! ([`InstanceCatalog::stats`]).
//!
//! A lookup reads only the instances it does not hold fresh enough, in one `instances_by_id` call. An instance
//! EC2 does not show is remembered as absent for readers that accept it (a forged Node's made-up ID then costs
//! one lookup, not one per pass); readers that must see a brand-new instance (EC2 reads are eventually
//! consistent) ask again each time.

use std::{
    any::Any,
    collections::{BTreeSet, HashMap},
    future::Future,
    mem::size_of,
    sync::{Arc, Mutex, PoisonError, Weak},
    time::Duration,
};

use tokio::time::Instant;

use crate::{CallHook, Ec2, InstanceId, Intercept, PortCall, Result, ec2::Instance};

mod instance;

pub use instance::{CatalogInstance, InterfaceAddresses};

/// The tag key prefix naming a cluster (`kubernetes.io/cluster/<id>`).
pub const CLUSTER_TAG_PREFIX: &str = "kubernetes.io/cluster/";

/// The legacy tag naming a cluster (`KubernetesCluster=<id>`).
pub const LEGACY_CLUSTER_TAG: &str = "KubernetesCluster";

/// How long an [`InstanceCatalog`] keeps an instance it found, by default: the longest any reader accepts (membership
/// trusts a member for an hour).
pub const DEFAULT_RETAIN: Duration = Duration::from_secs(3600);

/// How long an [`InstanceCatalog`] remembers that EC2 did not show an instance, by default.
pub const DEFAULT_RETAIN_ABSENT: Duration = Duration::from_secs(600);

/// How old an answer a reader accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freshness {
    found: Duration,
    absent: Option<Duration>,
}

impl Freshness {
    /// Instances read within `found`; an instance EC2 did not show is asked again.
    pub const fn within(found: Duration) -> Self {
        Self { found, absent: None }
    }

    /// Also accepts that EC2 did not show an instance within `absent`.
    #[must_use]
    pub const fn with_absent(self, absent: Duration) -> Self {
        Self {
            absent: Some(absent),
            ..self
        }
    }
}

/// The answer of [`CatalogLookup::lookup`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lookup {
    /// The instances found, each once, in no particular order.
    pub found: Vec<Arc<CatalogInstance>>,
    /// The IDs EC2 does not show (made up, another Region's, or long terminated).
    pub absent: BTreeSet<InstanceId>,
    /// The IDs among [`Lookup::found`] read from EC2 by this lookup (the others the catalog held).
    pub read: BTreeSet<InstanceId>,
}

/// The size of an [`InstanceCatalog`], for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CatalogStats {
    /// Instances held.
    pub instances: usize,
    /// IDs remembered as absent.
    pub absent: usize,
    /// Bytes held by the entries (an estimate, see [`CatalogInstance::bytes`]).
    pub bytes: usize,
}

/// One entry: an instance, or the fact that EC2 did not show it, and when that was learnt.
#[derive(Debug)]
struct Entry {
    found: Option<Arc<CatalogInstance>>,
    at: Instant,
}

/// The instance catalog (see the module docs): what is known of instances, shared behind an [`Arc`] by every
/// reader, each of which reads through its own [`Catalog`] port ([`InstanceCatalog::over`]).
#[derive(Debug)]
pub struct InstanceCatalog {
    retain: Duration,
    retain_absent: Duration,
    entries: Mutex<HashMap<InstanceId, Entry>>,
}

/// An EC2 port whose every answer teaches the catalog, and whose instance lookups it answers
/// ([`CatalogLookup::lookup`]). Cloning it shares the catalog.
pub type Catalog<E> = Intercept<E, Arc<InstanceCatalog>>;

/// Instance lookups answered by the catalog (see [`Catalog`]).
pub trait CatalogLookup: Ec2 {
    /// The instances among `ids`: those the catalog holds fresh enough for `fresh`, and one `instances_by_id`
    /// for the rest, whose answer the catalog keeps (found or, when it remembers them, absent) for every reader.
    /// A failed read teaches nothing and is the port's error.
    fn lookup(&self, ids: &[InstanceId], fresh: Freshness) -> impl Future<Output = Result<Lookup>> + Send;

    /// The catalog.
    fn catalog(&self) -> &InstanceCatalog;
}

impl Default for InstanceCatalog {
    fn default() -> Self {
        Self::new()
    }
}

impl InstanceCatalog {
    /// A catalog keeping found instances for [`DEFAULT_RETAIN`] and absent ones for [`DEFAULT_RETAIN_ABSENT`].
    pub fn new() -> Self {
        Self {
            retain: DEFAULT_RETAIN,
            retain_absent: DEFAULT_RETAIN_ABSENT,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Keeps found instances for `found` and absent ones for `absent` (zero: absent ones are not remembered).
    /// Keep them at least as long as any reader asks for.
    #[must_use]
    pub fn with_retention(self, found: Duration, absent: Duration) -> Self {
        Self {
            retain: found,
            retain_absent: absent,
            ..self
        }
    }

    /// `ec2`, reading through this catalog.
    pub fn over<E>(self: &Arc<Self>, ec2: E) -> Catalog<E> {
        Intercept::new(ec2, self.clone())
    }

    /// Learns what a read made elsewhere showed, and returns the entries (shared with the catalog: a reader that
    /// keeps them holds no copy of its own).
    pub fn remember(&self, instances: &[Instance]) -> Vec<Arc<CatalogInstance>> {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut kept = Vec::with_capacity(instances.len());
        for instance in instances {
            kept.push(keep(&mut entries, instance, now));
        }
        kept
    }

    /// The entries of `instances`, from a read through a [`Catalog`] port asked at `since`: that port's hook
    /// has remembered them already, so the entries it made (or newer ones) are returned, shared, and nothing is
    /// projected twice. An instance without an entry that recent (read through another port) is remembered now.
    pub fn held_since(&self, instances: &[Instance], since: Instant) -> Vec<Arc<CatalogInstance>> {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut kept = Vec::with_capacity(instances.len());
        for instance in instances {
            match entries.get(&instance.id) {
                Some(Entry {
                    found: Some(held),
                    at,
                }) if *at >= since => kept.push(held.clone()),
                _ => kept.push(keep(&mut entries, instance, now)),
            }
        }
        kept
    }

    /// Drops what is older than the retention.
    pub fn expire(&self) {
        let now = Instant::now();
        let (retain, retain_absent) = (self.retain, self.retain_absent);
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|_, e| {
                let keep = if e.found.is_some() { retain } else { retain_absent };
                now.duration_since(e.at) < keep
            });
    }

    /// How much it holds.
    pub fn stats(&self) -> CatalogStats {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let per_entry = size_of::<InstanceId>() + size_of::<Entry>();
        let mut stats = CatalogStats::default();
        for (id, entry) in entries.iter() {
            stats.bytes += per_entry + id.as_str().len();
            match &entry.found {
                Some(instance) => {
                    stats.instances += 1;
                    stats.bytes += instance.bytes();
                }
                None => stats.absent += 1,
            }
        }
        stats
    }

    /// Drops what is older than the retention on a timer, as long as the catalog lives (the task holds it
    /// weakly): every half of the shorter retention, at least once a minute. Needs a Tokio runtime: without
    /// one, nothing is started (`false`) and [`InstanceCatalog::expire`] is the caller's to call.
    pub fn start_expiry(self: &Arc<Self>) -> bool {
        let shortest = [self.retain, self.retain_absent]
            .into_iter()
            .filter(|d| !d.is_zero())
            .min()
            .unwrap_or(Duration::from_secs(60));
        let every = (shortest / 2).clamp(Duration::from_secs(1), Duration::from_secs(60));
        sweep_every(self, every, Self::expire)
    }

    /// The entries fresh enough for `fresh`, and the IDs to read (each once).
    fn split(&self, ids: &[InstanceId], fresh: Freshness) -> (Lookup, Vec<InstanceId>) {
        let now = Instant::now();
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut lookup = Lookup::default();
        let mut asked = Vec::new();
        for id in ids.iter().collect::<BTreeSet<_>>() {
            let age = |e: &Entry| now.duration_since(e.at);
            match entries.get(id) {
                Some(e @ Entry { found: Some(i), .. }) if age(e) < fresh.found => {
                    lookup.found.push(i.clone())
                }
                Some(e @ Entry { found: None, .. }) if fresh.absent.is_some_and(|a| age(e) < a) => {
                    lookup.absent.insert(id.clone());
                }
                _ => asked.push(id.clone()),
            }
        }
        (lookup, asked)
    }

    /// Completes `lookup` with what a read of `asked` showed, and keeps it.
    fn learn(&self, lookup: &mut Lookup, asked: Vec<InstanceId>, read: &[Instance]) {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut missing: BTreeSet<InstanceId> = asked.into_iter().collect();
        for instance in read.iter().filter(|i| missing.remove(&i.id)) {
            let found = keep(&mut entries, instance, now);
            lookup.read.insert(instance.id.clone());
            lookup.found.push(found);
        }
        for id in missing {
            if !self.retain_absent.is_zero() {
                entries.insert(id.clone(), Entry { found: None, at: now });
            }
            lookup.absent.insert(id);
        }
    }
}

/// Projects `instance` into `entries` as read at `now`, and returns the entry.
fn keep(entries: &mut HashMap<InstanceId, Entry>, instance: &Instance, now: Instant) -> Arc<CatalogInstance> {
    let found = Arc::new(CatalogInstance::of(instance));
    let entry = Entry {
        found: Some(found.clone()),
        at: now,
    };
    entries.insert(instance.id.clone(), entry);
    found
}

/// Calls `sweep` on `target` every `every` (first after one period) for as long as `target` lives elsewhere:
/// the task holds it weakly and ends once it is dropped. A cache that drops what is old on a timer, not at the
/// next lookup, frees its memory in a quiet cluster too. Needs a Tokio runtime: without one nothing is started
/// (`false`), and sweeping is the caller's.
pub fn sweep_every<T: Send + Sync + 'static>(
    target: &Arc<T>,
    every: Duration,
    sweep: impl Fn(&T) + Send + 'static,
) -> bool {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return false;
    };
    let target: Weak<T> = Arc::downgrade(target);
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(target) = target.upgrade() else {
                return;
            };
            sweep(&target);
        }
    });
    true
}

impl<E: Ec2 + Sync> CatalogLookup for Catalog<E> {
    async fn lookup(&self, ids: &[InstanceId], fresh: Freshness) -> Result<Lookup> {
        let catalog = self.hook();
        let (mut lookup, asked) = catalog.split(ids, fresh);
        if asked.is_empty() {
            return Ok(lookup);
        }
        // Through the inner port: the intercept would teach the catalog what `learn` records anyway.
        let read = self.inner().instances_by_id(&asked).await?;
        catalog.learn(&mut lookup, asked, &read);
        Ok(lookup)
    }

    fn catalog(&self) -> &InstanceCatalog {
        self.hook()
    }
}

/// In front of an EC2 port ([`Catalog`]), the catalog learns every instance that port's answers show.
impl CallHook for InstanceCatalog {
    fn before(&self, _: PortCall) -> Result<()> {
        Ok(())
    }

    fn after(&self, call: PortCall, answer: &dyn Any) {
        if call.port != "Ec2" {
            return;
        }
        if let Some(Ok(instances)) = answer.downcast_ref::<Result<Vec<Instance>>>() {
            let _ = self.remember(instances);
        } else if let Some(Ok((instances, _))) =
            answer.downcast_ref::<Result<(Vec<Instance>, Option<String>)>>()
        {
            let _ = self.remember(instances);
        }
    }
}

#[cfg(test)]
mod tests;
