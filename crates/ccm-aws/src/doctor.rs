//! `doctor`: the leak report. Reads AWS through the ports and takes the Kubernetes side as a [`Snapshot`] of plain
//! objects, and lists what the cluster owns in AWS but no Kubernetes object owns any more, plus Nodes stuck
//! uninitialized and Services whose load balancer is failing.
//!
//! What is a leak, and why (each [`Finding`] says which rule applies):
//!
//! - Only resources tagged `kubernetes.io/cluster/<id>=owned` (or `KubernetesCluster=<id>`) are ever considered:
//!   `shared`, untagged and other clusters' resources are never listed and never deleted.
//! - A Classic ELB or NLB (type `network`) with a `kubernetes.io/service-name` tag is leaked when that Service
//!   does not exist, is no longer of type LoadBalancer and has no `service.kubernetes.io/load-balancer-cleanup`
//!   finalizer, or was recreated (its UID names another load balancer: names are `a` + the UID without dashes).
//! - A target group with the tag is leaked when its Service is gone (or no longer wants a load balancer) and no
//!   live load balancer forwards to it, or when only leaked load balancers forward to it.
//! - Only security groups that carry the tag or a Classic ELB group name (`k8s-elb-<load balancer>`) are load
//!   balancer groups: node, instance and VPC groups that installers tag `owned` are never leaks. A group used by a
//!   live load balancer is never leaked. The rules of other groups that name a leaked group as their source are
//!   part of its finding (they must go before the group can).
//! - NLB client and health rules on the cluster's node groups whose description names a load balancer that no
//!   longer exists.
//! - Routes of the cluster's route tables to instances that are terminated or gone (removable when the table is
//!   owned), and to running cluster instances that are no Node's (reported only).
//! - Nodes whose instance lacks the cluster tag (reported only): the controller writes nothing for them (no load
//!   balancer target, security group rule, route or tag), which the Go controller did.
//!
//! [`delete`] never trusts the report it is given: it reads AWS again, then takes a fresh [`Snapshot`], and removes
//! only what the fresh reading still finds leaked, in dependency order: load balancers, target groups, rules
//! that reference leaked groups and stale NLB rules, groups, routes. A group AWS still holds
//! (`DependencyViolation`: a deleted load balancer's interfaces drain for minutes) is [`Outcome::InUse`], to be
//! retried later, never a failure of the rest. Before it removes anything it checks that the apiserver is the
//! cloud config's cluster (against another cluster's apiserver, every load balancer of this one would look
//! leaked): when Nodes name EC2 instances and none of those carries the cluster tag, it refuses; when no Node
//! names an EC2 instance, or the cluster owns load balancers and not one Service of the apiserver is the one any
//! of them names ([`Doubt`]), it refuses unless told [`EmptyCluster::Allow`]. The report warns of both doubts.

mod analyze;
mod classic_rules;
mod objects;
mod observe;
mod remove;
mod render;
mod same_cluster;

use std::{collections::BTreeMap, time::SystemTime};

use ccm_aws_api::{
    AwsError, Ec2, Elb, Elbv2, InstanceId, ProviderId, RouteTableId, SecurityGroupId, VpcId,
    ec2::IpPermission,
};
use ccm_tagging::ClusterTags;
use k8s_openapi::api::core::v1::{Event, Node, Service};
use serde::Serialize;

pub use remove::{DeleteOutcome, Outcome, Removal};

/// The taint of Nodes the cloud node controller has not initialized yet.
pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// The finalizer the service controller keeps on a Service until its load balancer is deleted.
pub const LOAD_BALANCER_CLEANUP_FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

/// What [`delete`] does when nothing shows that the apiserver is the cloud config's cluster (a [`Doubt`]):
/// `doctor`'s `--allow-empty-cluster`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EmptyCluster {
    /// Refuse with [`DoctorError::Unverified`], removing nothing.
    #[default]
    Refuse,
    /// Go on (with a warning in the log): the cluster really has no EC2 Node, or none of its load balancers'
    /// Services is left.
    Allow,
}

/// Why nothing shows that the apiserver is the cloud config's cluster: what a kind cluster's kubeconfig beside
/// the production cloud config looks like, and what makes every owned load balancer look leaked.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Doubt {
    /// No Node names an EC2 instance (`aws:///<zone>/i-...`): nothing to compare the cluster tag with.
    NoEc2Nodes,
    /// The cluster owns these load balancers (with a `kubernetes.io/service-name` tag) and not one Service of the
    /// apiserver is the one any of them names, by that tag or by the load balancer's name.
    NoServiceMatches {
        /// The load balancers' names.
        load_balancers: Vec<String>,
    },
}

/// The AWS ports the report reads (and [`delete`] writes) through.
#[derive(Debug)]
pub struct Ports<'a, E, L, V> {
    /// EC2: security groups, route tables, instances.
    pub ec2: &'a E,
    /// Classic ELB.
    pub elb: &'a L,
    /// ELBv2: NLBs and target groups.
    pub elbv2: &'a V,
}

/// Which cluster to look at, and where.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Scope {
    /// The cluster's tags: only resources this cluster owns are considered.
    pub cluster: ClusterTags,
    /// The cluster's VPC; security groups are read from it only (the whole region when unknown).
    pub vpc_id: Option<VpcId>,
    /// Route tables named by the cloud config (`RouteTableID`); empty means the cluster-tagged tables.
    pub route_table_ids: Vec<RouteTableId>,
    /// The time ages are measured against.
    pub now: SystemTime,
    /// Labels (key, value) a Node must carry to be checked for stuck initialization; empty means every Node.
    /// Never narrows the ownership checks.
    pub node_labels: Vec<(String, String)>,
    /// The namespace whose Services are checked for failing load balancers; `None` means every namespace.
    /// Never narrows the ownership checks: a load balancer's Service is looked for in every namespace.
    pub service_namespace: Option<String>,
}

/// The Kubernetes side, as listed from the apiserver.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Every Service of every namespace.
    pub services: Vec<Service>,
    /// Every Node.
    pub nodes: Vec<Node>,
    /// Events (at least the Warning Events) of every namespace.
    pub events: Vec<Event>,
}

/// What the report found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The cluster ID the report is about.
    pub cluster_id: String,
    /// Why the findings may not be this cluster's to judge ([`Doubt`]s), one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The findings, leaked AWS resources first.
    pub findings: Vec<Finding>,
}

/// One thing found wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What it is.
    pub kind: Kind,
    /// Its identity: name, ARN, group ID, `<table> <cidr>`, `<group> <load balancer>`, Node name or
    /// `namespace/name`.
    pub id: String,
    /// Its name, when the ID is not one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The `kubernetes.io/service-name` tag, for AWS resources that have one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// When it was created (RFC 3339), where AWS or Kubernetes tells.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// Its age in seconds, where the creation time is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub age_seconds: Option<u64>,
    /// Why it is listed.
    pub reason: String,
    /// Supporting facts: the rules that reference a group, the last Warning Event, ...
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
    /// Whether `--delete` removes it (owned, and its owner absent); the others are for an operator to look at.
    pub deletable: bool,
    #[serde(skip)]
    action: Option<Action>,
}

/// The kinds of findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Kind {
    /// A Classic ELB.
    ClassicLoadBalancer,
    /// A Network Load Balancer.
    NetworkLoadBalancer,
    /// An ELBv2 target group.
    TargetGroup,
    /// A load balancer's security group.
    SecurityGroup,
    /// Load balancer rules on a node security group (NLB rules, Classic ELB rules).
    NodeGroupRules,
    /// A route of a cluster route table.
    Route,
    /// A Node stuck uninitialized.
    Node,
    /// A Service whose load balancer is failing.
    Service,
}

/// How a finding is removed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    DeleteClassic(String),
    DeleteNetwork(String),
    DeleteTargetGroup(String),
    /// Revokes the rules, per group.
    RevokeRules(Vec<(SecurityGroupId, Vec<IpPermission>)>),
    /// Revokes the rules that reference the group, then deletes it.
    DeleteGroup(SecurityGroupId, Vec<(SecurityGroupId, Vec<IpPermission>)>),
    DeleteRoute(RouteTableId, String),
}

/// Why the report could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DoctorError {
    /// An AWS read failed.
    #[error("{what}")]
    Aws {
        /// What was being read.
        what: &'static str,
        /// The failure.
        #[source]
        source: Box<AwsError>,
    },
    /// The fresh Kubernetes listing for [`delete`] failed.
    #[error("listing the cluster again before deleting")]
    Snapshot(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// [`delete`] refused: Nodes name EC2 instances and none carries the cluster tag, so the kubeconfig is
    /// probably another cluster's than the cloud config.
    #[error("{}", same_cluster::describe(.cluster, *.nodes, *.not_found, .tagged_for))]
    OtherCluster {
        /// The cloud config's cluster ID (or `--cluster-id`).
        cluster: String,
        /// How many Nodes name an EC2 instance.
        nodes: usize,
        /// How many of them name an instance AWS does not know.
        not_found: usize,
        /// The clusters the Nodes' instances are tagged for instead.
        tagged_for: Vec<String>,
    },
    /// [`delete`] refused: nothing shows that the apiserver is the cloud config's cluster, and
    /// [`EmptyCluster::Allow`] was not given.
    #[error("{}", same_cluster::refusal(.cluster, .doubt))]
    Unverified {
        /// The cloud config's cluster ID (or `--cluster-id`).
        cluster: String,
        /// Why (the first doubt found).
        doubt: Doubt,
    },
}

/// The report: reads AWS (a handful of paged listings, see `docs/operations.md`) and compares with `snapshot`.
pub async fn inspect<E, L, V>(
    ports: Ports<'_, E, L, V>,
    scope: &Scope,
    snapshot: &Snapshot,
) -> Result<Report, DoctorError>
where
    E: Ec2 + Sync,
    L: Elb + Sync,
    V: Elbv2 + Sync,
{
    let mut inventory = observe::aws(ports, scope).await?;
    inventory.node_instances = observe::node_instances(ports.ec2, snapshot, &inventory.instances).await?;
    let lookups = observe::uninitialized_nodes(ports.ec2, scope, snapshot).await?;
    let cluster = scope.cluster.id();
    Ok(Report {
        cluster_id: cluster.to_owned(),
        warnings: same_cluster::doubts(scope, &inventory, snapshot)
            .iter()
            .map(|doubt| same_cluster::warning(cluster, doubt))
            .collect(),
        findings: analyze::findings(scope, &inventory, snapshot, &lookups),
    })
}

/// Removes the deletable findings of `report` that are still leaked: AWS is read again first, then `fresh` lists
/// the cluster (after the AWS reading, so that a Service created meanwhile is seen), and only findings of `report`
/// that this fresh look still finds deletable are removed. Nothing is removed, and the call fails with
/// [`DoctorError::OtherCluster`], when the fresh Nodes' instances show that the apiserver is another cluster's,
/// and with [`DoctorError::Unverified`] when nothing shows it is this one's (a [`Doubt`]) unless `empty` is
/// [`EmptyCluster::Allow`]. Per-finding failures are in the outcome; only the readings and those checks fail the
/// call.
pub async fn delete<E, L, V, F, Fut, SE>(
    ports: Ports<'_, E, L, V>,
    scope: &Scope,
    report: &Report,
    empty: EmptyCluster,
    fresh: F,
) -> Result<DeleteOutcome, DoctorError>
where
    E: Ec2 + Sync,
    L: Elb + Sync,
    V: Elbv2 + Sync,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Snapshot, SE>>,
    SE: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut inventory = observe::aws(ports, scope).await?;
    let snapshot = fresh().await.map_err(|e| DoctorError::Snapshot(e.into()))?;
    // Read only to tell which cluster the apiserver is: they make no finding deletable.
    inventory.node_instances = observe::node_instances(ports.ec2, &snapshot, &inventory.instances).await?;
    same_cluster::check(scope, &inventory, &snapshot)?;
    let cluster = scope.cluster.id();
    for doubt in same_cluster::doubts(scope, &inventory, &snapshot) {
        if empty == EmptyCluster::Refuse {
            return Err(DoctorError::Unverified {
                cluster: cluster.to_owned(),
                doubt,
            });
        }
        tracing::warn!(
            cluster,
            doubt = %same_cluster::warning(cluster, &doubt),
            "deleting anyway: allowed by --allow-empty-cluster"
        );
    }
    let current = analyze::findings(scope, &inventory, &snapshot, &BTreeMap::new());
    Ok(remove::run(ports, report, &current).await)
}

// === impl Ports ===

// By hand: derived impls would require the ports themselves to be `Copy`.
impl<E, L, V> Clone for Ports<'_, E, L, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E, L, V> Copy for Ports<'_, E, L, V> {}

// === impl Report ===

impl Report {
    /// Whether nothing was found.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }

    /// The findings `--delete` would remove.
    pub fn deletable(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.deletable)
    }
}

// === impl Finding ===

impl Finding {
    fn new(kind: Kind, id: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            kind,
            id: id.into(),
            name: None,
            service: None,
            created: None,
            age_seconds: None,
            reason: reason.into(),
            details: Vec::new(),
            deletable: false,
            action: None,
        }
    }

    fn with_action(mut self, action: Action) -> Self {
        self.deletable = true;
        self.action = Some(action);
        self
    }

    fn created_at(mut self, created: Option<SystemTime>, now: SystemTime) -> Self {
        if let Some(created) = created {
            self.created = k8s_openapi::jiff::Timestamp::try_from(created)
                .ok()
                .map(|t| t.to_string());
            self.age_seconds = now.duration_since(created).ok().map(|d| d.as_secs());
        }
        self
    }
}

// === impl Kind ===

impl Kind {
    /// The kebab-case name used in the text and JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClassicLoadBalancer => "classic-load-balancer",
            Self::NetworkLoadBalancer => "network-load-balancer",
            Self::TargetGroup => "target-group",
            Self::SecurityGroup => "security-group",
            Self::NodeGroupRules => "node-group-rules",
            Self::Route => "route",
            Self::Node => "node",
            Self::Service => "service",
        }
    }

    /// Whether this kind is an AWS resource (the others are Kubernetes objects to look at).
    pub fn is_aws(self) -> bool {
        !matches!(self, Self::Node | Self::Service)
    }
}

// === impl Scope ===

impl Scope {
    /// The scope of cluster `cluster`, region-wide, ages measured against `now`.
    pub fn new(cluster: ClusterTags, now: SystemTime) -> Self {
        Self {
            cluster,
            vpc_id: None,
            route_table_ids: Vec::new(),
            now,
            node_labels: Vec::new(),
            service_namespace: None,
        }
    }

    /// Checks only the Nodes carrying all of `labels` for stuck initialization.
    #[must_use]
    pub fn with_node_labels(mut self, labels: Vec<(String, String)>) -> Self {
        self.node_labels = labels;
        self
    }

    /// Checks only the Services of `namespace` for failing load balancers.
    #[must_use]
    pub fn with_service_namespace(mut self, namespace: Option<String>) -> Self {
        self.service_namespace = namespace;
        self
    }

    /// Limits security groups to the cluster's VPC.
    #[must_use]
    pub fn with_vpc_id(mut self, vpc_id: Option<VpcId>) -> Self {
        self.vpc_id = vpc_id;
        self
    }

    /// Takes the route tables named by the cloud config instead of the cluster-tagged ones.
    #[must_use]
    pub fn with_route_table_ids(mut self, ids: impl IntoIterator<Item = RouteTableId>) -> Self {
        self.route_table_ids = ids.into_iter().collect();
        self
    }
}

impl Scope {
    /// Whether `node` carries the labels Nodes are selected by.
    fn selects_node(&self, node: &Node) -> bool {
        let labels = node.metadata.labels.as_ref();
        self.node_labels
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
    }
}

/// The instance ID of a Node, from its provider ID, as the controllers read it (Fargate and malformed provider IDs
/// give `None`). The doctor's own because it reads whole Nodes listed from the apiserver, which it hands to no
/// provider, where the controllers' helper takes their view of a Node.
fn node_instance_id(node: &Node) -> Option<InstanceId> {
    ProviderId::ec2_instance_of(node.spec.as_ref()?.provider_id.as_deref()?)
}

/// An instance lookup of an uninitialized Node: how it was looked up and what was found.
#[derive(Debug, Clone)]
struct NodeLookup {
    /// `provider ID aws:///...`, `instance ID` or `private DNS name`.
    by: String,
    /// The instance ID or DNS name looked up.
    key: String,
    /// What AWS returned.
    found: Vec<ccm_aws_api::ec2::Instance>,
    /// A provider ID that names no instance.
    unparsable: bool,
}

#[cfg(test)]
mod tests;
