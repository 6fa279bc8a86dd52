//! The host memory of [`AwsLoadBalancers`](crate::AwsLoadBalancers): what each load balancer looked like after
//! this process last ensured or updated it, so that a node change is planned without reading AWS again and costs
//! only its writes (one register or deregister call per Classic ELB, per NLB target group).
//!
//! - **Per load balancer** (by name): the registered instances (Classic) or each wanted target group with its
//!   targets (NLB), and the set of node security groups that carry the load balancer's rules, as they are after
//!   the last successful apply; a fingerprint of the desired load balancer without its instances (a host update
//!   of a Service whose spec changed meanwhile observes again); and when its state was last read from AWS.
//! - **Per instance**, shared by every load balancer: whether it runs and which of its groups receives the
//!   load balancer rules. Learnt from observations; an instance not known yet (a Node joining) is described
//!   once, for all the load balancers of a node-sync pass (lookups are serialised, so the second load balancer
//!   finds it known), and its groups are read only when none is known.
//!
//! A host update plans from memory only when the target instances' node groups are the remembered ones: any
//! change to the nodes' rules (a node in a new group, the last node of a group leaving) is planned from fresh
//! reads, as are instances that are not running (never remembered). A load balancer's memory is taken out when
//! an ensure or update starts and put back only when it succeeds with no other operation on the same load
//! balancer in between, so a failed, abandoned or concurrent apply leaves none; it is forgotten on deletion,
//! when drift detection reports the load balancer, and when a drift pass leaves it out with nothing done to it
//! since the pass before (its Service gone unseen; one in flight during a pass is not judged, and keeps it). State read more than [`MAX_AGE`] ago is not used: the next
//! host update reads again.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    hash::{BuildHasher, Hash, Hasher},
    sync::{Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use ccm_aws_api::{
    CatalogLookup, Filter, InstanceId, SecurityGroupId,
    ec2::{InstanceState, SecurityGroup},
};

use tokio::time::Instant;

use crate::{
    Error, LoadBalancerConfig, instance_reads,
    ownership::{Claim, Claimant},
    shared,
};

mod classic;
mod ids;
mod network;

pub(crate) use classic::ClassicMemory;
pub(crate) use ids::Ids;
pub(crate) use network::NetworkMemory;
pub(crate) use {classic::fingerprint as classic_fingerprint, classic::learnt as classic_learnt};
pub(crate) use {network::fingerprint as network_fingerprint, network::learnt as network_learnt};

/// How long state read from AWS is used for host updates: beyond it, the next host update of the load balancer
/// reads again (and so repairs what drift detection cannot see: NLB targets, the nodes' rules).
pub const MAX_AGE: Duration = Duration::from_secs(3600);

/// What a host update needs to know about a target instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fact {
    /// Pending or running; the group that receives the load balancer rules, if any.
    Running(Option<SecurityGroupId>),
    /// Stopping, stopped or shutting down (never remembered); its group.
    Stopped(Option<SecurityGroupId>),
    /// Terminated or unknown to EC2 (never remembered).
    Gone,
}

/// Facts by instance ID.
pub(crate) type Facts = BTreeMap<String, Fact>;

/// What an observation learnt: running instances with their groups, and groups as read.
pub(crate) type Learnt = (Vec<(String, Option<SecurityGroupId>)>, Vec<SecurityGroup>);

/// A load balancer's remembered state, by flavour.
#[derive(Debug, Clone)]
pub(crate) enum Remembered {
    Classic(ClassicMemory),
    Network(Box<NetworkMemory>),
}

/// One load balancer's memory.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The desired load balancer's fingerprint, instances left out.
    pub(crate) fingerprint: u64,
    /// When the state it started from was read from AWS.
    pub(crate) read_at: Instant,
    pub(crate) state: Remembered,
}

#[derive(Debug, Default)]
struct Slot {
    /// Bumped when an operation on the load balancer starts or ends.
    generation: u64,
    /// The drift pass epoch ([`HostMemory::retain`]) in which an operation on it last started or ended.
    touched: u64,
    entry: Option<Entry>,
}

/// An operation on one load balancer in progress: what it may plan from, and the generation it started at.
#[derive(Debug)]
pub(crate) struct Ticket {
    name: String,
    generation: u64,
    /// The memory, when fresh enough to plan from.
    pub(crate) entry: Option<Entry>,
}

/// The host memory (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct HostMemory {
    load_balancers: Mutex<HashMap<String, Slot>>,
    instances: Mutex<HashMap<String, (Option<SecurityGroupId>, Instant)>>,
    groups: Mutex<HashMap<SecurityGroupId, (SecurityGroup, Instant)>>,
    /// Held while instances are described: concurrent host updates of one pass describe a new instance once.
    lookup: tokio::sync::Mutex<()>,
    /// When stale memories were last dropped (see [`HostMemory::learn`]).
    pruned: Mutex<Option<Instant>>,
    /// The claim of each load balancer this process made or found to be its Service's (by a full ensure), so that
    /// host updates of that Service incarnation need not read tags again before registering instances. Keyed by
    /// the load balancer's name, held by one claimant: another Service (or incarnation) naming it gets none.
    claims: Mutex<HashMap<String, Claim>>,
    /// Counts drift passes ([`HostMemory::retain`]): a load balancer touched since the last one is kept.
    epoch: Mutex<u64>,
    /// Per Service (UID), the target instances its load balancer's last successful ensure or host update left:
    /// a host update that would leave them as they are makes no AWS call. With pools of Nodes (the
    /// `target-node-labels` annotation), a Node joining one pool costs the other pools' load balancers nothing.
    /// Held as a keyed hash of the list ([`HostMemory::target_keys`]), not a copy of it: 8 bytes a Service, not
    /// about 45 a target.
    targets: Mutex<HashMap<String, u64>>,
    /// The random keys of those hashes (SipHash): nobody outside the process can make two target lists collide.
    target_keys: std::hash::RandomState,
    /// The instance IDs the load balancers' memories hold, each once.
    ids: Ids,
    /// The load balancers whose last full ensure planned the nodes' rules from stand-ins that a later one narrows
    /// (an NLB's subnet CIDRs while its network interfaces were not seen): drift detection reports them.
    provisional: Mutex<BTreeSet<String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn fresh(at: Instant) -> bool {
    at.elapsed() < MAX_AGE
}

/// The fingerprint of a desired load balancer (serialized; the caller leaves the instances out).
pub(crate) fn fingerprint<T: serde::Serialize>(desired: &T) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(desired)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

// === impl HostMemory ===

impl HostMemory {
    /// Starts an operation on `name`: takes its memory out (an operation that fails or is abandoned leaves
    /// none) and returns it if fresh.
    pub(crate) fn begin(&self, name: &str) -> Ticket {
        let mut lbs = lock(&self.load_balancers);
        let slot = lbs.entry(name.to_owned()).or_default();
        slot.generation += 1;
        slot.touched = *lock(&self.epoch);
        Ticket {
            name: name.to_owned(),
            generation: slot.generation,
            entry: slot.entry.take().filter(|e| fresh(e.read_at)),
        }
    }

    /// Ends the operation of `ticket`: remembers `entry` unless another operation on the load balancer started
    /// or ended meanwhile, or it was forgotten (deleted, drifted).
    pub(crate) fn finish(&self, ticket: Ticket, entry: Option<Entry>) {
        let mut lbs = lock(&self.load_balancers);
        if let Some(slot) = lbs.get_mut(&ticket.name) {
            let alone = slot.generation == ticket.generation;
            if !alone && entry.is_some() {
                tracing::debug!(
                    load_balancer = ticket.name,
                    "not remembered: another operation on it started or ended meanwhile"
                );
            }
            slot.generation += 1;
            slot.touched = *lock(&self.epoch);
            slot.entry = entry.filter(|_| alone);
        }
    }

    /// Forgets load balancer `name`.
    pub(crate) fn forget(&self, name: &str) {
        lock(&self.load_balancers).remove(name);
    }

    /// Drops what is too old to be used, at most once per [`MAX_AGE`]: without drift detection (which also calls
    /// [`HostMemory::retain`]) the instances and groups ever seen and the slots of load balancers long gone
    /// would otherwise stay for the life of the process.
    fn prune(&self, now: Instant) {
        {
            let mut pruned = lock(&self.pruned);
            if pruned.is_some_and(|at| now.duration_since(at) < MAX_AGE) {
                return;
            }
            *pruned = Some(now);
        }
        // A slot without an entry may be an operation in progress (its entry taken out): kept.
        lock(&self.load_balancers).retain(|_, slot| slot.entry.as_ref().is_none_or(|e| fresh(e.read_at)));
        lock(&self.instances).retain(|_, (_, at)| fresh(*at));
        lock(&self.groups).retain(|_, (_, at)| fresh(*at));
        self.ids.prune();
    }

    /// After a drift pass: keeps the load balancers named in `names` (their memory and ownership) and those an
    /// operation started or ended on since the previous pass, the instances in `instances`, and nothing too old.
    ///
    /// A load balancer the pass did not judge may be one whose ensure is in flight, or ended while the account
    /// was listed (the controller judges only settled Services): forgetting it would cost its next host update
    /// the reads its memory saves. One left out of two passes in a row with nothing done to it in between
    /// belongs to a Service gone without a deletion seen here: it goes.
    pub(crate) fn retain(&self, names: &BTreeSet<String>, instances: &BTreeSet<String>) {
        let epoch = {
            let mut epoch = lock(&self.epoch);
            *epoch += 1;
            *epoch - 1
        };
        let kept: BTreeSet<String> = {
            let mut lbs = lock(&self.load_balancers);
            lbs.retain(|name, slot| names.contains(name) || slot.touched >= epoch);
            lbs.keys().cloned().collect()
        };
        lock(&self.provisional).retain(|name| kept.contains(name) || names.contains(name));
        lock(&self.claims).retain(|name, _| kept.contains(name) || names.contains(name));
        lock(&self.instances).retain(|id, (_, at)| instances.contains(id) && fresh(*at));
        lock(&self.groups).retain(|_, (_, at)| fresh(*at));
        self.ids.prune();
    }

    /// Records whether the last full ensure of `name` left its nodes' rules provisional (see the field).
    pub(crate) fn set_provisional(&self, name: &str, provisional: bool) {
        let mut all = lock(&self.provisional);
        if provisional {
            all.insert(name.to_owned());
        } else {
            all.remove(name);
        }
    }

    /// Whether the last full ensure of `name` left its nodes' rules provisional.
    pub(crate) fn is_provisional(&self, name: &str) -> bool {
        lock(&self.provisional).contains(name)
    }

    /// The instance IDs the load balancers' memories share.
    pub(crate) fn ids(&self) -> &Ids {
        &self.ids
    }

    /// Records `claim`, from an apply that succeeded under it: the load balancer is its claimant's.
    pub(crate) fn hold(&self, claim: Claim) {
        lock(&self.claims).insert(claim.name().to_owned(), claim);
    }

    /// Forgets the claim of the load balancer `name` (deleted).
    pub(crate) fn release(&self, name: &str) {
        lock(&self.claims).remove(name);
    }

    /// The claim this process holds for `claimant` (the same load balancer, Service and UID), if any.
    pub(crate) fn claim_of(&self, claimant: &Claimant) -> Option<Claim> {
        lock(&self.claims)
            .get(&claimant.load_balancer)
            .filter(|c| c.claimant() == claimant)
            .cloned()
    }

    /// Records the targets an ensure or host update of the Service `uid` left (`Some`: it succeeded), or
    /// forgets them (`None`: it failed, or the load balancer is being deleted or drifted).
    pub(crate) fn settle_targets<T: std::hash::Hash>(&self, uid: Option<&str>, targets: Option<T>) {
        let Some(uid) = uid else { return };
        let mut all = lock(&self.targets);
        match targets {
            Some(targets) => {
                all.insert(uid.to_owned(), self.target_keys.hash_one(&targets));
            }
            None => {
                all.remove(uid);
            }
        }
    }

    /// Whether the last successful ensure or host update of the Service `uid` left exactly `targets`.
    pub(crate) fn same_targets<T: std::hash::Hash + ?Sized>(&self, uid: Option<&str>, targets: &T) -> bool {
        let hash = self.target_keys.hash_one(targets);
        uid.is_some_and(|uid| lock(&self.targets).get(uid) == Some(&hash))
    }

    /// Whether a memory of `name` is held (for tests).
    #[cfg(test)]
    pub(crate) fn holds(&self, name: &str) -> bool {
        lock(&self.load_balancers)
            .get(name)
            .is_some_and(|s| s.entry.is_some())
    }

    /// Records what an observation learnt: running instances' groups and groups read.
    pub(crate) fn learn(
        &self,
        running: impl IntoIterator<Item = (String, Option<SecurityGroupId>)>,
        groups: impl IntoIterator<Item = SecurityGroup>,
    ) {
        let now = Instant::now();
        self.prune(now);
        lock(&self.instances).extend(running.into_iter().map(|(id, g)| (id, (g, now))));
        lock(&self.groups).extend(groups.into_iter().map(|g| (g.id.clone(), (g, now))));
    }

    /// The facts of `ids`: remembered ones, and the others described (one `DescribeInstances`, and one
    /// `DescribeSecurityGroups` for groups not known yet).
    pub(crate) async fn facts<E: CatalogLookup>(
        &self,
        ec2: &E,
        config: &LoadBalancerConfig,
        ids: &[String],
    ) -> Result<Facts, Error> {
        let _one_at_a_time = self.lookup.lock().await;
        let mut facts = Facts::new();
        let mut unknown = Vec::new();
        {
            let known = lock(&self.instances);
            for id in ids.iter().collect::<BTreeSet<_>>() {
                match known.get(id).filter(|(_, at)| fresh(*at)) {
                    Some((group, _)) => {
                        facts.insert(id.clone(), Fact::Running(group.clone()));
                    }
                    None => unknown.push(InstanceId::new(id.clone())),
                }
            }
        }
        if !unknown.is_empty() {
            facts.extend(self.describe(ec2, config, &unknown).await?);
        }
        Ok(facts)
    }

    /// Describes `ids` and their groups not known yet; remembers the running ones.
    async fn describe<E: CatalogLookup>(
        &self,
        ec2: &E,
        config: &LoadBalancerConfig,
        ids: &[InstanceId],
    ) -> Result<Facts, Error> {
        let context = "reading the nodes' instances";
        let found = ec2
            .lookup(ids, instance_reads::FRESHNESS)
            .await
            .map_err(Error::aws(context))?
            .found;
        let missing: BTreeSet<&str> = {
            let groups = lock(&self.groups);
            found
                .iter()
                .filter(|i| i.state != InstanceState::Terminated)
                .flat_map(|i| &i.security_groups)
                .filter(|g| groups.get(*g).is_none_or(|(_, at)| !fresh(*at)))
                .map(SecurityGroupId::as_str)
                .collect()
        };
        if !missing.is_empty() {
            let read = ec2
                .security_groups(&[Filter::new("group-id", missing.iter().copied())])
                .await
                .map_err(Error::aws(context))?;
            self.learn([], read);
        }
        let mut facts: Facts = ids.iter().map(|i| (i.to_string(), Fact::Gone)).collect();
        let mut running = Vec::new();
        let groups = lock(&self.groups).clone();
        for instance in found {
            let fact = if instance.state == InstanceState::Terminated {
                Fact::Gone
            } else {
                let mine: Vec<&SecurityGroup> = instance
                    .security_groups
                    .iter()
                    .filter_map(|id| groups.get(id).map(|(g, _)| g))
                    .collect();
                let group = match shared::instance_group(&instance.id, &mine, &config.cluster) {
                    Ok(group) => group,
                    // Skipped like a gone one (the next full ensure says why, on its Node).
                    Err(Error::AmbiguousInstanceGroups { .. }) => {
                        facts.insert(instance.id.to_string(), Fact::Gone);
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                match instance.state {
                    InstanceState::Pending | InstanceState::Running => {
                        running.push((instance.id.to_string(), group.clone()));
                        Fact::Running(group)
                    }
                    InstanceState::Unknown(_) => Fact::Running(group),
                    _ => Fact::Stopped(group),
                }
            };
            facts.insert(instance.id.to_string(), fact);
        }
        self.learn(running, []);
        Ok(facts)
    }
}

/// The groups of the existing (not gone) instances among `ids`.
pub(crate) fn node_groups(ids: &[String], facts: &Facts) -> BTreeSet<SecurityGroupId> {
    ids.iter()
        .filter_map(|i| match facts.get(i) {
            Some(Fact::Running(g) | Fact::Stopped(g)) => g.clone(),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests;
