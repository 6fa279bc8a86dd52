//! A Service with arbitrary fields and annotations (keys mostly from the annotation table, so that values reach
//! their parsers) → `parse_service` → the Classic and NLB builders. Must never panic; a Service that parses must
//! build or fail with a typed error.
#![no_main]

use std::collections::BTreeMap;

use ccm_aws_api::{SubnetId, VpcId};
use ccm_load_balancers::annotations::Key;
use ccm_load_balancers::{Flavour, LoadBalancerConfig, classic, nlb, parse_service, shared};
use ccm_tagging::ClusterTags;
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Service, ServicePort, ServiceSpec, ServiceStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Port {
    name: Option<String>,
    protocol: Option<String>,
    port: i32,
    node_port: Option<i32>,
}

#[derive(Debug, Arbitrary)]
struct Input {
    known: Vec<(u8, String)>,
    other: Vec<(String, String)>,
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    type_: Option<String>,
    ports: Option<Vec<Port>>,
    source_ranges: Option<Vec<String>>,
    external_traffic_policy: Option<String>,
    health_check_node_port: Option<i32>,
    session_affinity: Option<String>,
    load_balancer_ip: Option<String>,
    allocate_node_ports: Option<bool>,
    hostname: Option<String>,
}

fn service(input: Input) -> Service {
    let mut annotations: BTreeMap<String, String> = input.other.into_iter().collect();
    for (k, v) in input.known {
        let key = Key::ALL[usize::from(k) % Key::ALL.len()];
        annotations.insert(key.name().to_owned(), v);
    }
    let ports = input.ports.map(|ports| {
        ports
            .into_iter()
            .map(|p| ServicePort {
                name: p.name,
                protocol: p.protocol,
                port: p.port,
                node_port: p.node_port,
                ..Default::default()
            })
            .collect()
    });
    Service {
        metadata: ObjectMeta {
            namespace: input.namespace,
            name: input.name,
            uid: input.uid,
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: input.type_,
            ports,
            load_balancer_source_ranges: input.source_ranges,
            external_traffic_policy: input.external_traffic_policy,
            health_check_node_port: input.health_check_node_port,
            session_affinity: input.session_affinity,
            load_balancer_ip: input.load_balancer_ip,
            allocate_load_balancer_node_ports: input.allocate_node_ports,
            ..Default::default()
        }),
        status: Some(ServiceStatus {
            load_balancer: Some(LoadBalancerStatus {
                ingress: Some(vec![LoadBalancerIngress {
                    hostname: input.hostname,
                    ..Default::default()
                }]),
            }),
            ..Default::default()
        }),
    }
}

fuzz_target!(|input: Input| {
    let Ok(spec) = parse_service(&service(input)) else {
        return;
    };
    let Ok(cluster) = ClusterTags::new("fuzz", false) else {
        return;
    };
    let config = LoadBalancerConfig::new(cluster, VpcId::new("vpc-1"));
    let subnets = [SubnetId::new("subnet-1")];
    if let Ok(name) = shared::load_balancer_name(&spec.uid) {
        assert!(name.len() <= 32, "{name:?}");
    }
    match spec.flavour {
        Flavour::Classic => {
            let _ = classic::build(&spec, &[], &config, &subnets);
        }
        Flavour::Network => {
            for listener in nlb::listeners(&spec, &config) {
                let name = &listener.target_group.name;
                assert!(name.len() <= 32, "{name:?}");
            }
            let _ = nlb::build(&spec, &[], &config, "fuzz", &subnets);
        }
        Flavour::External => {}
    }
});
