//! Nodes of other Regions (kubernetes/cloud-provider-aws#1372): a multi-Region cluster runs a controller per
//! Region, and each sees only its own Region's instances. A Node whose provider ID names a zone of another Region
//! of this partition is answered without a lookup: it exists and is not shut down as far as this controller knows
//! (so the node-lifecycle controller never deletes or taints it), and it has no metadata here (so the cloud-node
//! controller leaves its initialization to its own Region's controller).
//!
//! Only a Region AWS has gets that treatment. A zone of no Region of the partition (`aws:///zz-fake-1a/i-...`,
//! which anyone holding a kubelet credential may write into a Node of their own) names no instance anywhere: it
//! is answered "not found", also without a lookup, so the node-lifecycle controller deletes such a Node once it
//! is NotReady instead of keeping it forever as "another Region's".

use ccm_aws_api::{Ec2, ProviderId};
use ccm_cloud_provider::NodeView;

use super::{AwsInstances, InstancesError, existing_provider_id};

/// The Regions of each partition, as the partition table bundled with the AWS SDK for Rust lists them
/// (`aws-sdk-ec2` 1.274, `endpoint_lib`). Kept here rather than read at run time: the controller must not call
/// out to learn which Regions exist, and a Region missing here only means that a Node of a multi-Region cluster
/// in that Region is answered "not found" by the other Regions' controllers (add the Region when AWS opens one).
const PARTITIONS: [(&str, &[&str]); 8] = [
    (
        "aws",
        &[
            "af-south-1",
            "ap-east-1",
            "ap-east-2",
            "ap-northeast-1",
            "ap-northeast-2",
            "ap-northeast-3",
            "ap-south-1",
            "ap-south-2",
            "ap-southeast-1",
            "ap-southeast-2",
            "ap-southeast-3",
            "ap-southeast-4",
            "ap-southeast-5",
            "ap-southeast-6",
            "ap-southeast-7",
            "ca-central-1",
            "ca-west-1",
            "eu-central-1",
            "eu-central-2",
            "eu-north-1",
            "eu-south-1",
            "eu-south-2",
            "eu-west-1",
            "eu-west-2",
            "eu-west-3",
            "il-central-1",
            "me-central-1",
            "me-south-1",
            "mx-central-1",
            "sa-east-1",
            "us-east-1",
            "us-east-2",
            "us-west-1",
            "us-west-2",
        ],
    ),
    ("aws-cn", &["cn-north-1", "cn-northwest-1"]),
    ("aws-us-gov", &["us-gov-east-1", "us-gov-west-1"]),
    ("aws-eusc", &["eusc-de-east-1"]),
    ("aws-iso", &["us-iso-east-1", "us-iso-west-1"]),
    ("aws-iso-b", &["us-isob-east-1", "us-isob-west-1"]),
    ("aws-iso-e", &["eu-isoe-west-1"]),
    ("aws-iso-f", &["us-isof-east-1", "us-isof-south-1"]),
];

/// The name prefixes of the partitions other than `aws`, for a configured Region not listed yet (one opened after
/// this list was written): it is this controller's own Region all the same, and its partition tells the others.
const PARTITION_PREFIXES: [(&str, &str); 7] = [
    ("cn-", "aws-cn"),
    ("us-gov-", "aws-us-gov"),
    ("eusc-", "aws-eusc"),
    ("us-iso-", "aws-iso"),
    ("us-isob-", "aws-iso-b"),
    ("eu-isoe-", "aws-iso-e"),
    ("us-isof-", "aws-iso-f"),
];

/// Where a Node's provider ID places it, when that is not this Region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Away {
    /// Another Region of this partition: that Region's controller serves the Node.
    OtherRegion(String),
    /// No Region of this partition (the name the zone implies): there is no instance to find.
    NoRegion(String),
}

impl<E: Ec2 + Send + Sync + 'static> AwsInstances<E> {
    /// Answers the Nodes of this Region with `here`, in one batch, and those whose provider ID names a zone
    /// outside it with `away`, without a lookup: this Region's EC2 does not show another Region's instances, and
    /// "not found" would read as "gone" (a multi-Region cluster has a controller per Region); a Region that does
    /// not exist holds no instance, so asking would only cost a call.
    pub(super) async fn in_region_only<'n, T, F>(
        &self,
        nodes: &[&'n NodeView],
        away: impl Fn(&NodeView, &Away) -> Result<T, InstancesError>,
        here: impl FnOnce(Vec<&'n NodeView>) -> F,
    ) -> Vec<Result<T, InstancesError>>
    where
        F: std::future::Future<Output = Vec<Result<T, InstancesError>>>,
    {
        let region = self.config.region.as_str();
        let elsewhere: Vec<Option<Away>> = nodes.iter().map(|n| away_from(n, region)).collect();
        if elsewhere.iter().all(Option::is_none) {
            return here(nodes.to_vec()).await;
        }
        let local: Vec<&NodeView> = nodes
            .iter()
            .zip(&elsewhere)
            .filter(|(_, e)| e.is_none())
            .map(|(n, _)| *n)
            .collect();
        let mut answers: Vec<Option<Result<T, InstancesError>>> = nodes
            .iter()
            .zip(&elsewhere)
            .map(|(node, place)| {
                let place = place.as_ref()?;
                let name = node.name.as_str();
                match place {
                    Away::OtherRegion(other) => {
                        tracing::debug!(node = name, region = %other, "Node of another Region: left alone");
                    }
                    Away::NoRegion(other) => tracing::debug!(
                        node = name,
                        region = %other,
                        "provider ID names no Region of this partition: no instance to find"
                    ),
                }
                Some(away(node, place))
            })
            .collect();
        let slots: Vec<usize> = (0..nodes.len()).filter(|&i| elsewhere[i].is_none()).collect();
        for (slot, answer) in slots.into_iter().zip(here(local).await) {
            answers[slot] = Some(answer);
        }
        answers.into_iter().flatten().collect()
    }
}

/// Where the zone in `node`'s provider ID lies when that is not `region`; `None` for this Region's zones (Local
/// and Wavelength Zones included: `us-east-1-bos-1a` is in `us-east-1`) and for provider IDs without a zone or
/// that do not parse (those are looked up, and their errors reported, as before).
pub(super) fn away_from(node: &NodeView, region: &str) -> Option<Away> {
    let id = ProviderId::parse(existing_provider_id(node)?).ok()?;
    let zone = id.zone().filter(|z| !z.is_empty())?;
    let ours = zone
        .strip_prefix(region)
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_lowercase() || c == '-'));
    if ours || is_zone_id(zone) {
        return None;
    }
    let other = region_of_zone(zone);
    if other == region {
        // The Region's own name where a zone belongs: looked up here, as any zone of this Region.
        return None;
    }
    if partition_regions(region).contains(&other.as_str()) {
        Some(Away::OtherRegion(other))
    } else {
        Some(Away::NoRegion(other))
    }
}

/// A zone ID (`use1-az1`, `usw2-lax1-az1`) names no Region by name: looked up, as before.
fn is_zone_id(zone: &str) -> bool {
    zone.rsplit_once("-az")
        .is_some_and(|(_, n)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// The Region a zone name implies: `eu-west-1a` -> `eu-west-1`, `us-west-2-lax-1a` -> `us-west-2`,
/// `us-gov-west-1a` -> `us-gov-west-1`, `us-isob-east-1a` -> `us-isob-east-1`.
fn region_of_zone(zone: &str) -> String {
    // A Region name ends in its number; a zone adds a letter, a Local Zone `-<place>-<n><letter>` after it.
    let mut end = 0;
    let mut seen_digit = false;
    for (i, c) in zone.char_indices() {
        if c.is_ascii_digit() {
            seen_digit = true;
            end = i + c.len_utf8();
        } else if seen_digit {
            break;
        }
    }
    if end == 0 {
        zone.trim_end_matches(|c: char| c.is_ascii_lowercase()).to_owned()
    } else {
        zone[..end].to_owned()
    }
}

/// The Regions of `region`'s partition: the list that names it, else the one its prefix implies.
fn partition_regions(region: &str) -> &'static [&'static str] {
    if let Some((_, regions)) = PARTITIONS.iter().find(|(_, r)| r.contains(&region)) {
        return regions;
    }
    let partition = PARTITION_PREFIXES
        .iter()
        .find(|(prefix, _)| region.starts_with(prefix))
        .map_or("aws", |(_, p)| p);
    PARTITIONS
        .iter()
        .find(|(p, _)| *p == partition)
        .map_or(&[], |(_, r)| r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instances::tests::node;

    fn away(id: &str, region: &str) -> Option<Away> {
        away_from(&node("n", Some(id), &[]), region)
    }

    fn other(region: &str) -> Option<Away> {
        Some(Away::OtherRegion(region.to_owned()))
    }

    fn nowhere(region: &str) -> Option<Away> {
        Some(Away::NoRegion(region.to_owned()))
    }

    #[test]
    fn the_region_of_a_provider_id() {
        let region = |id: &str| away(id, "us-west-2");
        assert_eq!(region("aws:///us-west-2a/i-1"), None);
        assert_eq!(
            region("aws:///us-west-2-lax-1a/i-1"),
            None,
            "a Local Zone of ours"
        );
        assert_eq!(region("aws:///us-west-2/i-1"), None, "our Region as a zone");
        assert_eq!(region("aws:////i-1"), None, "no zone: looked up");
        assert_eq!(region("aws:///usw2-az1/i-1"), None, "a zone ID: looked up");
        assert_eq!(region("aws:///eu-west-1a/i-1"), other("eu-west-1"));
        assert_eq!(region("aws:///us-east-1-bos-1a/i-1"), other("us-east-1"));
        assert_eq!(region("aws:///us-west-20a/i-1"), nowhere("us-west-20"));
        assert_eq!(region("aws:///zz-fake-1a/i-1"), nowhere("zz-fake-1"));
        assert_eq!(
            region("aws:///cn-north-1a/i-1"),
            nowhere("cn-north-1"),
            "another partition's Region is none of ours"
        );
        assert_eq!(away_from(&node("n", None, &[]), "us-west-2"), None);
    }

    #[test]
    fn each_partition_knows_its_own_regions() {
        assert_eq!(
            away("aws:///cn-northwest-1a/i-1", "cn-north-1"),
            other("cn-northwest-1")
        );
        assert_eq!(away("aws:///us-east-1a/i-1", "cn-north-1"), nowhere("us-east-1"));
        assert_eq!(
            away("aws:///us-gov-east-1a/i-1", "us-gov-west-1"),
            other("us-gov-east-1")
        );
        assert_eq!(
            away("aws:///us-isob-west-1a/i-1", "us-isob-east-1"),
            other("us-isob-west-1")
        );
        // A Region newer than the list is ours all the same, and its partition's listed Regions are others'.
        assert_eq!(away("aws:///ap-new-9a/i-1", "ap-new-9"), None);
        assert_eq!(away("aws:///eu-west-1a/i-1", "ap-new-9"), other("eu-west-1"));
        assert_eq!(away("aws:///cn-north-1a/i-1", "cn-new-9"), other("cn-north-1"));
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

    /// A Node forged with a made-up zone (issue #55, item 5) was "another Region's" and lived forever.
    #[tokio::test]
    async fn a_node_of_no_region_is_not_found_without_a_lookup() {
        use ccm_aws_api::ec2::MockEc2;
        use ccm_cloud_provider::{CloudError, InstancesV2};

        // No expectation: any EC2 call fails the test.
        let aws = AwsInstances::new(MockEc2::new(), crate::InstancesConfig::new("us-west-2"));
        let fake = node("fake", Some("aws:///zz-fake-1a/i-0123456789abcdef0"), &[]);
        assert!(
            !aws.instance_exists(&fake).await.unwrap(),
            "gone: the node-lifecycle controller deletes it"
        );
        assert!(!aws.instance_shutdown(&fake).await.unwrap());
        assert!(matches!(
            aws.instance_metadata(&fake).await,
            Err(CloudError::InstanceNotFound)
        ));
        let far = node("far", Some("aws:///eu-west-1a/i-0fedcba9876543210"), &[]);
        let exists: Vec<bool> = aws
            .exists(&[&fake, &far])
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(exists, [false, true]);
    }
}
