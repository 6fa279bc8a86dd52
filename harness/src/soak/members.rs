//! The instances an NLB sends traffic to, as the soak reads them from moto.

use std::collections::BTreeSet;

use ccm_aws_api::{Elbv2, elbv2::ListenerV2};

/// The instances of the target groups `listeners` forward to; every group must hold the same set.
///
/// Read through the listeners, as AWS routes traffic, not with DescribeTargetGroups by load balancer: moto
/// attaches a target group to a load balancer only in CreateListener, never in ModifyListener, so once the CCM
/// moved a listener to a new group (a health-check change renames it) and deleted the old one, moto answers
/// that call with TargetGroupNotFound although the new group holds every target.
pub async fn nlb_members<V: Elbv2>(v2: &V, listeners: &[ListenerV2]) -> anyhow::Result<BTreeSet<String>> {
    let groups: BTreeSet<&str> = listeners
        .iter()
        .flat_map(|l| l.default_target_groups.iter().map(String::as_str))
        .collect();
    let mut sets = BTreeSet::new();
    for group in groups {
        // A group the CCM deletes meanwhile fails the read: the caller's "not converged yet".
        let health = v2.target_health(group).await?;
        sets.insert(
            health
                .iter()
                .map(|t| t.target.id.to_string())
                .collect::<BTreeSet<String>>(),
        );
    }
    Ok(match sets.len() {
        1 => sets.into_iter().next().unwrap_or_default(),
        0 => BTreeSet::new(),
        _ => ["<target groups differ>".to_owned()].into(),
    })
}

#[cfg(test)]
mod tests {
    use ccm_aws_api::{
        AwsError, ErrorKind, InstanceId,
        elbv2::{MockElbv2, Target, TargetHealth},
    };

    use super::*;

    const LB: &str = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/a1/1";
    const NEW: &str = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-new/2";
    const OTHER: &str = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-other/3";

    fn healthy(ids: &[&str]) -> Vec<TargetHealth> {
        ids.iter()
            .map(|id| TargetHealth {
                target: Target {
                    id: InstanceId::new(*id).into(),
                    port: 31490,
                },
                state: "healthy".into(),
                reason: None,
            })
            .collect()
    }

    fn listener(port: i32, group: &str) -> ListenerV2 {
        ListenerV2::new(&format!("arn:listener/{port}"), LB, port, "TCP", group)
    }

    /// Moto after the CCM moved the listener to a new target group (a health-check change renames the group)
    /// and deleted the old one: `ModifyListener` does not attach the new group to the load balancer in moto, so
    /// DescribeTargetGroups by load balancer answers TargetGroupNotFound (soak seed 2026112406, `s0-0`, read as
    /// "members {}" for 180 s twice while the group held every Node's instance).
    fn moto_after_a_group_swap() -> MockElbv2 {
        let mut v2 = MockElbv2::new();
        v2.expect_target_groups().returning(|_| {
            Box::pin(async {
                Err(AwsError::new(
                    ErrorKind::NotFound,
                    "elasticloadbalancingv2",
                    "DescribeTargetGroups",
                )
                .with_code("TargetGroupNotFound"))
            })
        });
        v2.expect_target_health()
            .withf(|arn| arn == NEW)
            .returning(|_| Box::pin(async { Ok(healthy(&["i-1", "i-2"])) }));
        v2.expect_target_health()
            .withf(|arn| arn == OTHER)
            .returning(|_| Box::pin(async { Ok(healthy(&["i-1"])) }));
        v2
    }

    #[tokio::test]
    async fn a_group_a_listener_was_moved_to_is_read() {
        let v2 = moto_after_a_group_swap();
        let members = nlb_members(&v2, &[listener(80, NEW)]).await.unwrap();
        assert_eq!(members, BTreeSet::from(["i-1".to_owned(), "i-2".to_owned()]));
    }

    #[tokio::test]
    async fn groups_holding_different_instances_are_reported() {
        let v2 = moto_after_a_group_swap();
        let members = nlb_members(&v2, &[listener(80, NEW), listener(443, OTHER)])
            .await
            .unwrap();
        assert_eq!(members, BTreeSet::from(["<target groups differ>".to_owned()]));
    }

    #[tokio::test]
    async fn a_load_balancer_without_listeners_has_no_members() {
        let members = nlb_members(&MockElbv2::new(), &[]).await.unwrap();
        assert!(members.is_empty());
    }
}
