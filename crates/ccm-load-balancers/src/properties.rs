//! "A second ensure plans nothing", over generated Services of both flavours: the plan from the state an apply
//! leaves (the tests' `converged` models what AWS holds after applying a desired load balancer) is empty, so a
//! steady Service never makes a mutating call.

use proptest::prelude::*;

use crate::{
    annotations::Key,
    classic::{self, tests as classic_tests},
    nlb::{self, tests as nlb_tests},
};

/// Annotations of both flavours with valid values; `None` leaves one out.
fn annotations() -> impl Strategy<Value = Vec<(Key, String)>> {
    (
        proptest::option::of(any::<bool>()),
        proptest::option::of(1u32..=4000),
        proptest::option::of(any::<bool>()),
        proptest::option::of(2u32..=10),
        proptest::option::of(2u32..=10),
        proptest::option::of(prop_oneof![Just(10u32), Just(30u32)]),
    )
        .prop_map(|(internal, idle, cross_zone, healthy, unhealthy, interval)| {
            let mut out = Vec::new();
            if let Some(v) = internal {
                out.push((Key::Internal, v.to_string()));
            }
            if let Some(v) = idle {
                out.push((Key::ConnectionIdleTimeout, v.to_string()));
            }
            if let Some(v) = cross_zone {
                out.push((Key::CrossZoneLoadBalancingEnabled, v.to_string()));
            }
            if let Some(v) = healthy {
                out.push((Key::HealthcheckHealthyThreshold, v.to_string()));
            }
            if let Some(v) = unhealthy {
                out.push((Key::HealthcheckUnhealthyThreshold, v.to_string()));
            }
            if let Some(v) = interval {
                out.push((Key::HealthcheckInterval, v.to_string()));
            }
            out
        })
}

/// One to four distinct ports, each with its own node port.
fn ports() -> impl Strategy<Value = Vec<(i32, i32)>> {
    proptest::collection::btree_set(1i32..=65535, 1..=4).prop_map(|ports| {
        ports
            .into_iter()
            .enumerate()
            .map(|(i, p)| (p, 30000 + i32::try_from(i).unwrap_or(0)))
            .collect()
    })
}

fn borrowed(annotations: &[(Key, String)]) -> Vec<(Key, &str)> {
    annotations.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_steady_classic_elb_plans_nothing(
        annotations in annotations(),
        ports in ports(),
        proxy in any::<bool>(),
        nodes in proptest::collection::btree_set("i-[0-9a-f]{8}", 0..=4),
    ) {
        let mut annotations = borrowed(&annotations);
        if proxy {
            annotations.push((Key::ProxyProtocol, "*"));
        }
        let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
        let desired = classic_tests::desired_for(&annotations, &ports, &nodes);
        let changes = classic::plan(&desired, &classic_tests::converged(&desired));
        prop_assert!(changes.is_empty(), "{:?}", changes);
    }

    #[test]
    fn a_steady_nlb_plans_nothing(annotations in annotations(), ports in ports()) {
        let desired = nlb_tests::desired(&borrowed(&annotations), &ports);
        let changes = nlb::plan(&desired, &nlb_tests::converged(&desired));
        prop_assert!(changes.is_empty(), "{:?}", changes);
    }
}
