//! Which Node an instance is: the eldest Node (by `creationTimestamp`, then name) whose provider ID names it. A
//! kubelet credential may create a Node naming any instance, its cluster's own included, for example a control
//! plane instance that its own Node keeps out of load balancers with
//! `node.kubernetes.io/exclude-from-external-load-balancers`: without this, such a Node would get that instance
//! registered and opened. The instance stays its eldest Node's, whose labels decide; a later Node naming it is
//! refused. Claims are learnt from every Node the capabilities are given (the cloud-node controller's reads of
//! every Node, the load balancers' and the route controller's Nodes), and forgotten [`CLAIM_TTL`] after their
//! Node was last seen, so that a deleted Node stops holding its instance.

use std::{collections::HashMap, time::Duration};

use ccm_aws_api::InstanceId;
use ccm_cloud_provider::NodeView;
use ccm_load_balancers::shared::node_instance_id;
use tokio::time::Instant;

/// How long a Node's claim on its instance holds after the Node was last seen. The cloud-node controller reads
/// every Node each `--node-status-update-frequency` (5 minutes by default), so a live Node is seen well within it;
/// a deleted Node's claim lingers this long at most (a Node re-registered for the same instance under another
/// name waits that long, or until the old Node is seen gone by a restart).
pub const CLAIM_TTL: Duration = Duration::from_secs(3600);

/// How often the claims are swept for expired ones (a scan of all of them).
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The order of Nodes naming one instance: the earliest created first, then by name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Seniority {
    /// `creationTimestamp` in seconds; a Node without one (never from the apiserver) comes last.
    created: i64,
    name: String,
}

#[derive(Debug)]
struct Claim {
    instance: InstanceId,
    seniority: Seniority,
    seen: Instant,
}

/// The Nodes naming one instance, eldest first. Nearly always one: a sorted vector of exactly that many, not a
/// set (a set's first node holds eleven, about 450 bytes an instance).
#[derive(Debug, Default)]
struct Claimants(Vec<Seniority>);

impl Claimants {
    fn insert(&mut self, seniority: Seniority) {
        if let Err(at) = self.0.binary_search(&seniority) {
            self.0.reserve_exact(1);
            self.0.insert(at, seniority);
        }
    }

    fn remove(&mut self, seniority: &Seniority) {
        if let Ok(at) = self.0.binary_search(seniority) {
            self.0.remove(at);
        }
    }

    fn iter(&self) -> std::slice::Iter<'_, Seniority> {
        self.0.iter()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The instance an older Node already names, and that Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Elder {
    /// The instance both Nodes name.
    pub instance: InstanceId,
    /// The older Node, whose instance it is.
    pub node: String,
}

/// The claims of the Nodes seen recently on their instances.
#[derive(Debug, Default)]
pub(super) struct Claims {
    nodes: HashMap<String, Claim>,
    instances: HashMap<InstanceId, Claimants>,
    swept: Option<Instant>,
}

// === impl Elder ===

impl Elder {
    /// Why the Node is refused, for its Warning Event and the errors that name it.
    pub fn reason(&self) -> String {
        format!(
            "instance {} is the instance of Node {}, created before this Node: the controller does not register it \
             with load balancers, open its security groups or route to it for this Node; delete this Node if it \
             is forged, or Node {} if that one is stale",
            self.instance, self.node, self.node
        )
    }
}

// === impl Claims ===

impl Claims {
    /// Records the claims of `nodes` (those naming an EC2 instance), seen now.
    pub(super) fn observe(&mut self, nodes: &[&NodeView]) {
        let now = Instant::now();
        for node in nodes {
            // A nameless Node (never from the apiserver) claims nothing.
            let name = node.name.as_str();
            let (false, Some(instance)) = (name.is_empty(), node_instance_id(node)) else {
                continue;
            };
            let seniority = Seniority {
                created: created(node),
                name: name.to_owned(),
            };
            if let Some(claim) = self.nodes.get_mut(name) {
                if claim.instance == instance && claim.seniority == seniority {
                    claim.seen = now;
                    continue;
                }
                // Re-created under the same name (another creation time) or naming another instance.
                self.forget(name);
            }
            self.instances
                .entry(instance.clone())
                .or_default()
                .insert(seniority.clone());
            let claim = Claim {
                instance,
                seniority,
                seen: now,
            };
            self.nodes.insert(name.to_owned(), claim);
        }
        self.sweep(now);
    }

    /// The older Node that names the instance of the Node `name`, if one does (and was seen recently).
    pub(super) fn elder(&self, name: &str) -> Option<Elder> {
        let claim = self.nodes.get(name)?;
        let now = Instant::now();
        let eldest = self.instances.get(&claim.instance)?.iter().find(|s| {
            self.nodes
                .get(&s.name)
                .is_some_and(|c| now.duration_since(c.seen) < CLAIM_TTL)
        })?;
        (eldest.name != name).then(|| Elder {
            instance: claim.instance.clone(),
            node: eldest.name.clone(),
        })
    }

    fn forget(&mut self, name: &str) {
        let Some(claim) = self.nodes.remove(name) else {
            return;
        };
        if let Some(set) = self.instances.get_mut(&claim.instance) {
            set.remove(&claim.seniority);
            if set.is_empty() {
                self.instances.remove(&claim.instance);
            }
        }
    }

    /// Drops the claims of Nodes not seen for [`CLAIM_TTL`], at most once every [`SWEEP_EVERY`].
    fn sweep(&mut self, now: Instant) {
        if self.swept.is_some_and(|at| now.duration_since(at) < SWEEP_EVERY) {
            return;
        }
        self.swept = Some(now);
        let stale: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, c)| now.duration_since(c.seen) >= CLAIM_TTL)
            .map(|(name, _)| name.clone())
            .collect();
        for name in stale {
            self.forget(&name);
        }
    }
}

fn created(node: &NodeView) -> i64 {
    node.creation_timestamp
        .as_ref()
        .map_or(i64::MAX, |t| t.0.as_second())
}
