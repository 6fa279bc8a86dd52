//! The Kubernetes side of the report: Nodes stuck uninitialized (with the instance lookup that failed them) and
//! Services whose load balancer is failing (with their last Warning Event).

use std::{collections::BTreeMap, time::SystemTime};

use ccm_aws_api::ec2::{Instance, InstanceState};
use k8s_openapi::api::core::v1::{Event, Service};

use super::{Finding, Kind, NodeLookup, Scope, Snapshot, node_instance_id, observe::Inventory};

/// Nodes whose (existing) instance lacks the cluster tag: the controller acts for none of them.
pub(super) fn nodes_outside_cluster(
    scope: &Scope,
    inventory: &Inventory,
    snapshot: &Snapshot,
    out: &mut Vec<Finding>,
) {
    for node in snapshot.nodes.iter().filter(|n| scope.selects_node(n)) {
        let Some(id) = node_instance_id(node) else {
            continue;
        };
        let Some(instance) = inventory
            .instances
            .get(&id)
            .or_else(|| inventory.node_instances.get(&id))
            .filter(|i| i.state != InstanceState::Terminated)
        else {
            continue;
        };
        let Some(why) = scope
            .cluster
            .not_member(&format!("its instance {id}"), &instance.tags)
        else {
            continue;
        };
        let name = node.metadata.name.clone().unwrap_or_default();
        let reason = format!(
            "{why}: the controller registers it with no load balancer, opens none of its security groups, routes \
             nothing to it and does not tag it; tag the instance if the Node is the cluster's, else delete the Node"
        );
        out.push(
            Finding::new(Kind::Node, &name, reason).created_at(
                node.metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| SystemTime::from(t.0)),
                scope.now,
            ),
        );
    }
}

pub(super) fn nodes(
    scope: &Scope,
    snapshot: &Snapshot,
    lookups: &BTreeMap<String, NodeLookup>,
    out: &mut Vec<Finding>,
) {
    for node in &snapshot.nodes {
        let labels = node.metadata.labels.as_ref();
        let selected = scope
            .node_labels
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
        let Some(lookup) = node
            .metadata
            .name
            .as_ref()
            .and_then(|n| lookups.get(n))
            .filter(|_| selected)
        else {
            continue;
        };
        let name = node.metadata.name.clone().unwrap_or_default();
        let mut finding = Finding::new(
            Kind::Node,
            &name,
            format!("uninitialized: {}", node_reason(scope, lookup)),
        )
        .created_at(
            node.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| SystemTime::from(t.0)),
            scope.now,
        );
        finding
            .details
            .push(format!("instance looked up by {}: {}", lookup.by, lookup.key));
        if let Some(event) = last_event(&snapshot.events, "Node", None, &name, None, true) {
            finding.details.push(describe_event(event));
        }
        out.push(finding);
    }
}

fn node_reason(scope: &Scope, lookup: &NodeLookup) -> String {
    let key = &lookup.key;
    if lookup.unparsable {
        return format!("its provider ID {key} names no EC2 instance (expected aws:///<zone>/i-...)");
    }
    let live: Vec<&Instance> = lookup
        .found
        .iter()
        .filter(|i| i.state != InstanceState::Terminated)
        .collect();
    match (live.as_slice(), lookup.found.first()) {
        ([], Some(dead)) => format!("instance {} is terminated", dead.id),
        ([], None) if lookup.by.contains("private DNS") => format!(
            "no instance has private DNS name {key}: the CCM finds a Node's instance by its private DNS name unless \
             the name is an instance ID, so a hostname override or a custom name never matches (set \
             spec.providerID, or name the Node after its instance)"
        ),
        ([], None) => format!("no instance {key} exists"),
        ([i], _) if !scope.cluster.is_tagged(&i.tags) => format!(
            "instance {} lacks the cluster tag {}=owned (or shared)",
            i.id,
            scope.cluster.key()
        ),
        ([i], _)
            if matches!(
                i.state,
                InstanceState::Stopped | InstanceState::Stopping | InstanceState::ShuttingDown
            ) =>
        {
            format!("instance {} is {}", i.id, i.state.as_str())
        }
        ([i], _) => format!(
            "instance {} exists and is tagged for the cluster: see the Node's Events and the CCM's log",
            i.id
        ),
        (many, _) => format!(
            "{} instances have private DNS name {key}: {}",
            many.len(),
            many.iter().map(|i| i.id.as_str()).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Services of type LoadBalancer whose latest Event is a Warning, or that have no address and a Warning.
pub(super) fn failing_services(scope: &Scope, snapshot: &Snapshot, out: &mut Vec<Finding>) {
    let selected = |s: &&Service| {
        is_load_balancer(s)
            && scope
                .service_namespace
                .as_ref()
                .is_none_or(|ns| s.metadata.namespace.as_ref() == Some(ns))
    };
    for service in snapshot.services.iter().filter(selected) {
        let (Some(namespace), Some(name)) = (&service.metadata.namespace, &service.metadata.name) else {
            continue;
        };
        let uid = service.metadata.uid.as_deref();
        let latest = last_event(&snapshot.events, "Service", Some(namespace), name, uid, false);
        let warning = last_event(&snapshot.events, "Service", Some(namespace), name, uid, true);
        let has_address = service
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|l| l.ingress.as_ref())
            .is_some_and(|i| !i.is_empty());
        let Some(warning) = warning.filter(|w| !has_address || latest.is_some_and(|l| std::ptr::eq(l, *w)))
        else {
            continue;
        };
        let reason = format!(
            "load balancer failing: {}",
            warning.reason.as_deref().unwrap_or("Warning")
        );
        let mut finding = Finding::new(
            Kind::Service,
            ccm_cloud_provider::namespaced_key(namespace, name),
            reason,
        );
        finding.details.push(describe_event(warning));
        out.push(finding);
    }
}

/// The latest Event (the latest Warning when `warning`) about an object.
fn last_event<'a>(
    events: &'a [Event],
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    uid: Option<&str>,
    warning: bool,
) -> Option<&'a Event> {
    events
        .iter()
        .filter(|e| {
            let o = &e.involved_object;
            o.kind.as_deref() == Some(kind)
                && o.name.as_deref() == Some(name)
                && (namespace.is_none() || o.namespace.as_deref() == namespace)
                && (uid.is_none() || o.uid.is_none() || o.uid.as_deref() == uid)
                && (!warning || e.type_.as_deref() == Some("Warning"))
        })
        .max_by_key(|e| event_time(e))
}

fn event_time(e: &Event) -> Option<k8s_openapi::jiff::Timestamp> {
    e.last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.first_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

fn describe_event(e: &Event) -> String {
    let when = event_time(e)
        .map(|t| t.to_string())
        .unwrap_or_else(|| "unknown time".to_owned());
    format!(
        "last {} Event {} ({}x, {when}): {}",
        e.type_.as_deref().unwrap_or("Normal"),
        e.reason.as_deref().unwrap_or("-"),
        e.count.unwrap_or(1),
        e.message.as_deref().unwrap_or("").trim()
    )
}

/// Whether the Service is of type LoadBalancer.
pub(super) fn is_load_balancer(service: &Service) -> bool {
    service.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
}
