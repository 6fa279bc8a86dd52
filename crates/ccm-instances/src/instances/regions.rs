//! Nodes of other Regions (kubernetes/cloud-provider-aws#1372): a multi-Region cluster runs a controller per
//! Region, and each sees only its own Region's instances. A Node whose provider ID names another Region's zone is
//! answered without a lookup: it exists and is not shut down as far as this controller knows (so the
//! node-lifecycle controller never deletes or taints it), and it has no metadata here (so the cloud-node
//! controller leaves its initialization to its own Region's controller).

use ccm_aws_api::{Ec2, ProviderId};
use k8s_openapi::api::core::v1::Node;

use super::{AwsInstances, InstancesError, existing_provider_id};

impl<E: Ec2 + Send + Sync> AwsInstances<E> {
    /// Answers the Nodes of this Region with `here`, in one batch, and those whose provider ID names another
    /// Region's zone with `away()`, without a lookup: this Region's EC2 does not show their instances, and
    /// "not found" would read as "gone" (a multi-Region cluster has a controller per Region).
    pub(super) async fn in_region_only<'n, T, F>(
        &self,
        nodes: &[&'n Node],
        away: impl Fn() -> T,
        here: impl FnOnce(Vec<&'n Node>) -> F,
    ) -> Vec<Result<T, InstancesError>>
    where
        F: std::future::Future<Output = Vec<Result<T, InstancesError>>>,
    {
        let region = self.config.region.as_str();
        let elsewhere: Vec<Option<String>> = nodes.iter().map(|n| other_region(n, region)).collect();
        if elsewhere.iter().all(Option::is_none) {
            return here(nodes.to_vec()).await;
        }
        let local: Vec<&Node> = nodes
            .iter()
            .zip(&elsewhere)
            .filter(|(_, e)| e.is_none())
            .map(|(n, _)| *n)
            .collect();
        let mut answers: Vec<Option<Result<T, InstancesError>>> = nodes
            .iter()
            .zip(&elsewhere)
            .map(|(node, other)| {
                let other = other.as_ref()?;
                let node = node.metadata.name.as_deref().unwrap_or_default();
                tracing::debug!(node, region = %other, "Node of another Region: left alone");
                Some(Ok(away()))
            })
            .collect();
        let slots: Vec<usize> = (0..nodes.len()).filter(|&i| elsewhere[i].is_none()).collect();
        for (slot, answer) in slots.into_iter().zip(here(local).await) {
            answers[slot] = Some(answer);
        }
        answers.into_iter().flatten().collect()
    }
}

/// The Region of the zone in `node`'s provider ID when that is not `region`; `None` for this Region's zones
/// (Local and Wavelength Zones included: `us-east-1-bos-1a` is in `us-east-1`) and for provider IDs without a
/// zone or that do not parse (those are looked up, and their errors reported, as before).
pub(super) fn other_region(node: &Node, region: &str) -> Option<String> {
    let id = ProviderId::parse(existing_provider_id(node)?).ok()?;
    let zone = id.zone().filter(|z| !z.is_empty())?;
    let ours = zone
        .strip_prefix(region)
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_lowercase() || c == '-'));
    if ours {
        return None;
    }
    // `eu-west-1a` -> `eu-west-1`, `us-west-2-lax-1a` -> `us-west-2`.
    let parts: Vec<&str> = zone.splitn(4, '-').take(3).collect();
    let mut other = parts.join("-");
    other.truncate(other.trim_end_matches(|c: char| c.is_ascii_lowercase()).len());
    Some(other)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instances::tests::node;

    #[test]
    fn the_region_of_a_provider_id() {
        let region = |id: &str| other_region(&node("n", Some(id), &[]), "us-west-2");
        assert_eq!(region("aws:///us-west-2a/i-1"), None);
        assert_eq!(
            region("aws:///us-west-2-lax-1a/i-1"),
            None,
            "a Local Zone of ours"
        );
        assert_eq!(region("aws:////i-1"), None, "no zone: looked up");
        assert_eq!(region("aws:///eu-west-1a/i-1").as_deref(), Some("eu-west-1"));
        assert_eq!(
            region("aws:///us-east-1-bos-1a/i-1").as_deref(),
            Some("us-east-1")
        );
        assert_eq!(region("aws:///us-west-20a/i-1").as_deref(), Some("us-west-20"));
        assert_eq!(other_region(&node("n", None, &[]), "us-west-2"), None);
    }

    #[tokio::test]
    async fn another_regions_node_is_answered_without_a_lookup() {
        use ccm_aws_api::ec2::MockEc2;
        use ccm_cloud_provider::InstancesV2;

        let mut ec2 = MockEc2::new();
        // One lookup per batch, of this Region's instance only (which is gone).
        ec2.expect_instances_by_id()
            .withf(|ids| ids.len() == 1 && ids[0].as_str() == "i-0123456789abcdef0")
            .times(2)
            .returning(|_| Box::pin(async { Ok(Vec::new()) }));
        let aws = AwsInstances::new(ec2, crate::InstancesConfig::new("us-west-2"));
        let far = node("far", Some("aws:///eu-west-1a/i-0fedcba9876543210"), &[]);
        let gone = node("gone", Some("aws:///us-west-2a/i-0123456789abcdef0"), &[]);
        assert!(aws.instance_exists(&far).await.unwrap(), "exists: never deleted");
        assert!(
            !aws.instance_shutdown(&far).await.unwrap(),
            "never tainted shut down"
        );
        assert_eq!(
            aws.instance_metadata(&far).await.unwrap(),
            None,
            "never initialized"
        );
        let both = [&gone, &far];
        let exists: Vec<bool> = aws.exists(&both).await.into_iter().map(Result::unwrap).collect();
        assert_eq!(exists, [false, true], "answers in the Nodes' order");
        let shut: Vec<bool> = aws
            .shutdown(&both)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(shut, [false, false]);
    }
}
