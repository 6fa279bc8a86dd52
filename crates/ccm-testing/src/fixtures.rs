//! Builders of the Nodes and Services tests start from, so that a test says only what matters to it:
//! `NodeBuilder::new("n1").provider_id("aws:///us-east-1a/i-1").label("pool", "a").build()`.
//!
//! They build objects in memory (nothing is sent to an apiserver) with only the fields asked for set; fields a
//! test leaves alone stay `None`, as in an object the apiserver has not defaulted.

use std::collections::BTreeMap;

use ccm_cloud_provider::NodeView;
use k8s_openapi::{
    api::core::v1::{
        Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Service, ServicePort, ServiceSpec, Taint,
    },
    apimachinery::pkg::{apis::meta::v1::Time, util::intstr::IntOrString},
    jiff::Timestamp,
};

/// The setters of `metadata` both builders share (each wraps its object in `.0`).
macro_rules! metadata_setters {
    () => {
        /// Sets `metadata.uid`.
        pub fn uid(mut self, uid: &str) -> Self {
            self.0.metadata.uid = Some(uid.to_owned());
            self
        }

        /// Adds the label `key=value`.
        pub fn label(mut self, key: &str, value: &str) -> Self {
            insert(&mut self.0.metadata.labels, key, value);
            self
        }

        /// Adds every label of `labels`.
        pub fn labels(self, labels: &[(&str, &str)]) -> Self {
            labels.iter().fold(self, |b, (k, v)| b.label(k, v))
        }

        /// Adds the annotation `key=value`.
        pub fn annotation(mut self, key: &str, value: &str) -> Self {
            insert(&mut self.0.metadata.annotations, key, value);
            self
        }

        /// Adds every annotation of `annotations`.
        pub fn annotations(self, annotations: &[(&str, &str)]) -> Self {
            annotations
                .iter()
                .fold(self, |b, (k, v)| b.annotation(k, v))
        }
    };
}

fn insert(map: &mut Option<BTreeMap<String, String>>, key: &str, value: &str) {
    map.get_or_insert_with(BTreeMap::new)
        .insert(key.to_owned(), value.to_owned());
}

/// A Node, field by field.
#[derive(Debug, Clone)]
#[must_use]
pub struct NodeBuilder(Node);

impl NodeBuilder {
    /// A Node named `name`, with a spec and nothing else.
    pub fn new(name: &str) -> Self {
        let mut node = Node::default();
        node.metadata.name = Some(name.to_owned());
        node.spec = Some(NodeSpec::default());
        Self(node)
    }

    fn spec(&mut self) -> &mut NodeSpec {
        self.0.spec.get_or_insert_with(NodeSpec::default)
    }

    fn status(&mut self) -> &mut NodeStatus {
        self.0.status.get_or_insert_with(NodeStatus::default)
    }

    /// Sets `spec.providerID`.
    pub fn provider_id(mut self, provider_id: &str) -> Self {
        self.spec().provider_id = Some(provider_id.to_owned());
        self
    }

    metadata_setters!();

    /// Sets `metadata.creationTimestamp` to `seconds` after the epoch.
    pub fn created_at(mut self, seconds: i64) -> Self {
        let at = Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH);
        self.0.metadata.creation_timestamp = Some(Time(at));
        self
    }

    /// Sets `spec.taints` (an empty list stays a list).
    pub fn taints(mut self, taints: Vec<Taint>) -> Self {
        self.spec().taints = Some(taints);
        self
    }

    /// Adds the taint `key` with `effect` and no value.
    pub fn taint(mut self, key: &str, effect: &str) -> Self {
        let taint = Taint {
            key: key.to_owned(),
            effect: effect.to_owned(),
            ..Taint::default()
        };
        self.spec().taints.get_or_insert_with(Vec::new).push(taint);
        self
    }

    /// Sets `spec.podCIDRs` (and `spec.podCIDR` to the first).
    pub fn pod_cidrs(mut self, cidrs: &[&str]) -> Self {
        let spec = self.spec();
        spec.pod_cidr = cidrs.first().map(|c| (*c).to_owned());
        spec.pod_cidrs = Some(cidrs.iter().map(|c| (*c).to_owned()).collect());
        self
    }

    /// Adds the status address `address` of type `type_` (`InternalIP`, `Hostname`, ...).
    pub fn address(mut self, type_: &str, address: &str) -> Self {
        let addresses = self.status().addresses.get_or_insert_with(Vec::new);
        addresses.push(NodeAddress {
            type_: type_.to_owned(),
            address: address.to_owned(),
        });
        self
    }

    /// Adds the status condition `type_` with `status` (`True`, `False`, `Unknown`).
    pub fn condition(mut self, type_: &str, status: &str) -> Self {
        let conditions = self.status().conditions.get_or_insert_with(Vec::new);
        conditions.push(NodeCondition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            ..NodeCondition::default()
        });
        self
    }

    /// The Node.
    pub fn build(self) -> Node {
        self.0
    }

    /// What the controllers keep of the Node, as they hand it to a provider.
    pub fn view(self) -> NodeView {
        NodeView::from(&self.0)
    }
}

/// A Service, field by field: by default of type LoadBalancer, selecting `app=<name>`, without ports.
#[derive(Debug, Clone)]
#[must_use]
pub struct ServiceBuilder(Service);

impl ServiceBuilder {
    /// A LoadBalancer Service `namespace/name` selecting `app=<name>`.
    pub fn new(namespace: &str, name: &str) -> Self {
        let mut svc = Service::default();
        svc.metadata.name = Some(name.to_owned());
        svc.metadata.namespace = Some(namespace.to_owned());
        svc.spec = Some(ServiceSpec {
            type_: Some("LoadBalancer".to_owned()),
            selector: Some([("app".to_owned(), name.to_owned())].into()),
            ..ServiceSpec::default()
        });
        Self(svc)
    }

    fn spec(&mut self) -> &mut ServiceSpec {
        self.0.spec.get_or_insert_with(ServiceSpec::default)
    }

    metadata_setters!();

    /// Sets `spec.type`.
    pub fn type_(mut self, type_: &str) -> Self {
        self.spec().type_ = Some(type_.to_owned());
        self
    }

    /// Adds the finalizer `name`.
    pub fn finalizer(mut self, name: &str) -> Self {
        let finalizers = self.0.metadata.finalizers.get_or_insert_with(Vec::new);
        finalizers.push(name.to_owned());
        self
    }

    /// Adds the port `port`/`protocol` named `p<port>-<protocol in lower case>` (so one port number may serve two
    /// protocols), to target port 8080, with `node_port` when given.
    pub fn port(mut self, port: i32, protocol: &str, node_port: Option<i32>) -> Self {
        let ports = self.spec().ports.get_or_insert_with(Vec::new);
        ports.push(ServicePort {
            name: Some(format!("p{port}-{}", protocol.to_lowercase())),
            port,
            protocol: Some(protocol.to_owned()),
            node_port,
            target_port: Some(IntOrString::Int(8080)),
            ..ServicePort::default()
        });
        self
    }

    /// The Service.
    pub fn build(self) -> Service {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_set_only_what_they_are_told() {
        let node = NodeBuilder::new("n1")
            .provider_id("aws:///us-east-1a/i-1")
            .label("pool", "a")
            .pod_cidrs(&["10.0.1.0/24"])
            .address("InternalIP", "10.0.0.1")
            .condition("Ready", "True")
            .build();
        assert_eq!(
            node.metadata.labels,
            Some([("pool".to_owned(), "a".to_owned())].into())
        );
        let spec = node.spec.unwrap_or_default();
        assert_eq!(spec.provider_id.as_deref(), Some("aws:///us-east-1a/i-1"));
        assert_eq!(spec.pod_cidr.as_deref(), Some("10.0.1.0/24"));
        assert_eq!(spec.taints, None);
        let status = node.status.unwrap_or_default();
        assert_eq!(status.addresses.map(|a| a.len()), Some(1));
        assert_eq!(
            status.conditions.map(|c| c[0].status.clone()),
            Some("True".to_owned())
        );

        let svc = ServiceBuilder::new("ns", "web")
            .port(80, "TCP", Some(30080))
            .build();
        assert_eq!(crate::services::ingress_hostname(&svc), None);
        let spec = svc.spec.unwrap_or_default();
        assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
        assert_eq!(spec.ports.map(|p| p[0].node_port), Some(Some(30080)));
    }
}
