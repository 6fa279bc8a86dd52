//! Targets that follow a Service's endpoints: with `aws-load-balancer-target-nodes-with-endpoints` on an NLB
//! under `externalTrafficPolicy: Local`, only the nodes that run a ready endpoint are targets
//! (`ServiceSpec::endpoint_nodes_only`); with `aws-load-balancer-nlb-target-type: ip` the pods' addresses are
//! (`ServiceSpec::ip_targets`, given the endpoints by `ServiceSpec::with_endpoints`). The service controller
//! hands the endpoints in [`Backends`]; for node targets the nodes they leave are what every other path (model,
//! plan, host memory) sees, so an endpoint change that leaves the set of nodes as it is costs nothing.

use ccm_cloud_provider::{Backends, NodeView};
use k8s_openapi::api::core::v1::Service;

use crate::{LoadBalancerConfig, annotations::Key, spec::parse_service_with};

/// Whether the load balancer of `service` follows its endpoints: it targets only the nodes with a ready
/// endpoint, or the pods themselves. An invalid Service follows none: its ensure reports why.
pub(super) fn follows_endpoints(config: &LoadBalancerConfig, service: &Service) -> bool {
    following(config, service).is_some_and(|(nodes_only, ip)| nodes_only || ip)
}

/// `(endpoint_nodes_only, ip_targets)` of a Service that writes either key and parses.
fn following(config: &LoadBalancerConfig, service: &Service) -> Option<(bool, bool)> {
    // Asked on every ensure and host update of every Service: the whole parse only where a key is written.
    let annotations = service.metadata.annotations.as_ref()?;
    let keys = [Key::TargetNodesWithEndpoints, Key::NlbTargetType];
    if !keys.iter().any(|k| annotations.contains_key(k.name())) {
        return None;
    }
    let spec = parse_service_with(service, &config.attribute_keys).ok()?;
    Some((spec.endpoint_nodes_only, spec.ip_targets))
}

/// The nodes of `backends` that may be targets of `service`: those with a ready endpoint when it follows its
/// endpoints and they were given, else all of them (a caller that hands no endpoints gets every node, as before
/// the annotation: kube-proxy's health check then keeps traffic off the others).
pub(super) fn backend_nodes<'a>(
    config: &LoadBalancerConfig,
    service: &Service,
    backends: Backends<'a>,
) -> Vec<&'a NodeView> {
    let nodes_only = || following(config, service).is_some_and(|(nodes_only, _)| nodes_only);
    let Some(endpoints) = backends.endpoints.filter(|_| nodes_only()) else {
        return backends.nodes.to_vec();
    };
    let with_endpoints = endpoints.nodes_with_ready_endpoints();
    backends
        .nodes
        .iter()
        .copied()
        .filter(|node| {
            let name = node.name.as_str();
            with_endpoints.binary_search(&name).is_ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use ccm_cloud_provider::{Endpoint, EndpointPort, ServiceEndpoints};
    use serde_json::json;

    use super::*;

    fn service(policy: &str, annotated: bool) -> Service {
        let mut annotations = json!({ "service.beta.kubernetes.io/aws-load-balancer-type": "nlb" });
        if annotated {
            annotations["service.beta.kubernetes.io/aws-load-balancer-target-nodes-with-endpoints"] =
                json!("true");
        }
        serde_json::from_value(json!({
            "metadata": { "name": "web", "namespace": "shop", "uid": "u-1", "annotations": annotations },
            "spec": { "type": "LoadBalancer", "externalTrafficPolicy": policy,
                      "ports": [{ "port": 80, "nodePort": 30080, "protocol": "TCP" }] },
        }))
        .unwrap()
    }

    fn node(name: &str) -> NodeView {
        NodeView::named(name)
    }

    fn on(node: &str, last: u8, ready: bool) -> Endpoint {
        let port = vec![EndpointPort::new("", 8080, "TCP")];
        Endpoint::ready(IpAddr::from([10, 0, 0, last]), Some(node), port)
            .with_conditions(ready, ready, !ready)
    }

    fn names(nodes: &[&NodeView]) -> Vec<String> {
        nodes.iter().map(|n| n.name.clone()).collect()
    }

    #[test]
    fn only_nodes_with_a_ready_endpoint_are_backends_when_the_service_asks() {
        let cluster = ccm_tagging::ClusterTags::new("c1", false).unwrap();
        let config = LoadBalancerConfig::new(cluster, ccm_aws_api::VpcId::new("vpc-1"));
        let all = [node("a"), node("b"), node("c")];
        let refs: Vec<&NodeView> = all.iter().collect();
        let endpoints = ServiceEndpoints::new([on("c", 1, true), on("a", 2, false), on("c", 3, true)]);
        let backends = Backends::with_endpoints(&refs, &endpoints);

        let asked = service("Local", true);
        assert!(follows_endpoints(&config, &asked));
        assert_eq!(names(&backend_nodes(&config, &asked, backends)), ["c"]);
        // No endpoints given (a controller that does not pass them): every node, as without the annotation.
        assert_eq!(
            names(&backend_nodes(&config, &asked, Backends::nodes(&refs))),
            ["a", "b", "c"]
        );
        // Not asked for, or invalid (Cluster): every node, and the controller is not asked to follow.
        for other in [service("Local", false), service("Cluster", true)] {
            assert!(!follows_endpoints(&config, &other));
            assert_eq!(names(&backend_nodes(&config, &other, backends)), ["a", "b", "c"]);
        }
    }

    #[test]
    fn ip_targets_follow_the_endpoints_and_keep_every_node_for_the_rules() {
        let cluster = ccm_tagging::ClusterTags::new("c1", false).unwrap();
        let config = LoadBalancerConfig::new(cluster, ccm_aws_api::VpcId::new("vpc-1"));
        let all = [node("a"), node("b")];
        let refs: Vec<&NodeView> = all.iter().collect();
        let endpoints = ServiceEndpoints::new([on("b", 1, true)]);
        let mut ip = service("Cluster", false);
        ip.metadata.annotations.as_mut().unwrap().insert(
            "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type".into(),
            "ip".into(),
        );
        assert!(follows_endpoints(&config, &ip));
        let backends = Backends::with_endpoints(&refs, &endpoints);
        assert_eq!(names(&backend_nodes(&config, &ip, backends)), ["a", "b"]);
        // `instance` follows nothing.
        let mut instance = ip.clone();
        instance.metadata.annotations.as_mut().unwrap().insert(
            "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type".into(),
            "instance".into(),
        );
        assert!(!follows_endpoints(&config, &instance));
    }
}
