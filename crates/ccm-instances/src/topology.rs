//! The negative cache of `DescribeInstanceTopology`: which region, instances and instance types have no
//! topology, so that they are not asked again for a day (upstream's 24-hour "unsupported" store).

use std::{collections::HashMap, time::Duration};

use ccm_aws_api::{AwsError, ErrorKind, InstanceId};
use tokio::time::Instant;

/// How long a "no topology" answer is trusted.
pub const UNSUPPORTED_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The label prefix of the network node layers: `topology.k8s.aws/network-node-layer-<N>`, N from 1.
pub const NETWORK_NODE_LAYER_PREFIX: &str = "topology.k8s.aws/network-node-layer-";

/// What is known not to have a topology, each until a deadline.
#[derive(Debug, Default)]
pub(crate) struct UnsupportedStore {
    region_until: Option<Instant>,
    ids: HashMap<InstanceId, Instant>,
    types: HashMap<String, Instant>,
}

// === impl UnsupportedStore ===

impl UnsupportedStore {
    /// Forgets what expired by `now`.
    pub(crate) fn prune(&mut self, now: Instant) {
        self.ids.retain(|_, until| *until > now);
        self.types.retain(|_, until| *until > now);
    }

    /// Whether asking for this instance is pointless at `now`.
    pub(crate) fn skip(&self, now: Instant, id: &InstanceId, instance_type: &str) -> bool {
        let live = |until: &Instant| *until > now;
        self.region_until.as_ref().is_some_and(live)
            || self.ids.get(id).is_some_and(live)
            || self.types.get(instance_type).is_some_and(live)
    }

    /// The region (or our permissions) does not offer the call at all.
    pub(crate) fn mark_region(&mut self, now: Instant) {
        self.region_until = Some(now + UNSUPPORTED_TTL);
    }

    /// An instance of a type that should have a topology had none (it may come later).
    pub(crate) fn mark_id(&mut self, now: Instant, id: InstanceId) {
        self.ids.insert(id, now + UNSUPPORTED_TTL);
    }

    /// An instance type without topology.
    pub(crate) fn mark_type(&mut self, now: Instant, instance_type: String) {
        self.types.insert(instance_type, now + UNSUPPORTED_TTL);
    }
}

/// Whether a failed `DescribeInstanceTopology` means "not in this region or not allowed": no labels, and no
/// question for a day.
pub(crate) fn region_unsupported(err: &AwsError) -> bool {
    err.kind() == ErrorKind::AccessDenied
        || matches!(err.code(), Some("UnsupportedOperation" | "UnauthorizedOperation"))
}

/// The labels of a topology: `network-node-layer-1` is the top layer.
pub fn network_node_labels(network_nodes: &[String]) -> impl Iterator<Item = (String, String)> + '_ {
    network_nodes
        .iter()
        .enumerate()
        .map(|(i, node)| (format!("{NETWORK_NODE_LAYER_PREFIX}{}", i + 1), node.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn entries_expire_after_a_day() {
        let mut store = UnsupportedStore::default();
        let id = InstanceId::new("i-1");
        let now = Instant::now();
        assert!(!store.skip(now, &id, "p4d.24xlarge"));
        store.mark_type(now, "m5.large".into());
        store.mark_id(now, id.clone());
        assert!(store.skip(now, &id, "p4d.24xlarge"));
        assert!(store.skip(now, &InstanceId::new("i-2"), "m5.large"));
        assert!(!store.skip(now, &InstanceId::new("i-2"), "p4d.24xlarge"));
        let later = now + UNSUPPORTED_TTL;
        assert!(!store.skip(later, &id, "m5.large"));
        store.prune(later);
        assert!(store.ids.is_empty() && store.types.is_empty());
        store.mark_region(later);
        assert!(store.skip(later, &InstanceId::new("i-3"), "trn1.32xlarge"));
        assert!(!store.skip(later + UNSUPPORTED_TTL, &InstanceId::new("i-3"), "trn1.32xlarge"));
    }

    #[test]
    fn region_errors_and_labels() {
        let e = |kind, code: &str| AwsError::new(kind, "ec2", "DescribeInstanceTopology").with_code(code);
        assert!(region_unsupported(&e(ErrorKind::Invalid, "UnsupportedOperation")));
        assert!(region_unsupported(&e(
            ErrorKind::AccessDenied,
            "UnauthorizedOperation"
        )));
        assert!(!region_unsupported(&e(
            ErrorKind::Throttled,
            "RequestLimitExceeded"
        )));
        let labels: Vec<_> = network_node_labels(&["nn-1".into(), "nn-2".into()]).collect();
        assert_eq!(
            labels,
            vec![
                ("topology.k8s.aws/network-node-layer-1".into(), "nn-1".into()),
                ("topology.k8s.aws/network-node-layer-2".into(), "nn-2".into())
            ]
        );
    }
}
