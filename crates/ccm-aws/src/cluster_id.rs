//! Which cluster this CCM serves: the cloud config's `KubernetesClusterID` (or legacy `KubernetesClusterTag`),
//! else the cluster tags of the instance the CCM runs on.

use ccm_aws_api::{AwsError, Ec2, InstanceId, ec2::Instance};
use ccm_tagging::{ClusterTags, DiscoveryError, OwnershipError};

use crate::cloud_config::GlobalConfig;

/// Why the cluster ID could not be determined.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterIdError {
    /// The ID is not usable in a tag key.
    #[error(transparent)]
    Invalid(#[from] OwnershipError),
    /// The instance's tags name no cluster, or several.
    #[error("AWS cloud failed to find the cluster ID on instance {instance}: {source}")]
    Tags {
        /// The instance whose tags were read.
        instance: InstanceId,
        /// What was wrong with them.
        #[source]
        source: DiscoveryError,
    },
    /// The instance the CCM runs on does not exist (per EC2).
    #[error(
        "instance {0} (from instance metadata) was not found in EC2; set KubernetesClusterID in the cloud config"
    )]
    InstanceNotFound(InstanceId),
    /// Neither the config nor an instance to read tags from.
    #[error("no cluster ID: set KubernetesClusterID in the cloud config")]
    Unknown,
    /// EC2 could not be asked.
    #[error("reading the tags of instance {instance}")]
    Aws {
        /// The instance.
        instance: InstanceId,
        /// The failure.
        #[source]
        source: Box<AwsError>,
    },
}

/// The cluster's tags: from the config when it names the cluster, else from `self_instance`'s tags (the
/// instance the CCM runs on, from IMDS). `None` and no configured ID is [`ClusterIdError::Unknown`].
pub async fn discover<E: Ec2>(
    config: &GlobalConfig,
    ec2: &E,
    self_instance: Option<&InstanceId>,
) -> Result<ClusterTags, ClusterIdError> {
    if let Some((id, legacy)) = config.cluster_id() {
        return Ok(ClusterTags::new(id, legacy)?);
    }
    let instance = self_instance.ok_or(ClusterIdError::Unknown)?;
    let found = ec2
        .instances_by_id(std::slice::from_ref(instance))
        .await
        .map_err(|source| ClusterIdError::Aws {
            instance: instance.clone(),
            source: Box::new(source),
        })?;
    let found = found
        .into_iter()
        .find(|i| i.id == *instance)
        .ok_or_else(|| ClusterIdError::InstanceNotFound(instance.clone()))?;
    from_config_or_tags(config, Some(&found))
}

/// The cluster's tags from the config, else from the tags of `self_instance` (already described), without
/// calling AWS. `None` and no configured ID is [`ClusterIdError::Unknown`].
pub fn from_config_or_tags(
    config: &GlobalConfig,
    self_instance: Option<&Instance>,
) -> Result<ClusterTags, ClusterIdError> {
    if let Some((id, legacy)) = config.cluster_id() {
        return Ok(ClusterTags::new(id, legacy)?);
    }
    let instance = self_instance.ok_or(ClusterIdError::Unknown)?;
    let discovered =
        ccm_tagging::discover_cluster_id(&instance.tags).map_err(|source| ClusterIdError::Tags {
            instance: instance.id.clone(),
            source,
        })?;
    Ok(ClusterTags::new(discovered.id, discovered.legacy)?)
}

#[cfg(test)]
mod tests {
    use ccm_aws_api::{
        ErrorKind, Tags,
        ec2::{Instance, InstanceState, MockEc2},
    };

    use super::*;
    use crate::cloud_config::CloudConfig;

    fn ec2_with(tags: &[(&str, &str)]) -> MockEc2 {
        let tags: Tags = tags
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let mut ec2 = MockEc2::new();
        ec2.expect_instances_by_id().times(1).returning(move |ids| {
            let mut instance = Instance::new(ids[0].clone(), InstanceState::Running);
            instance.tags = tags.clone();
            Box::pin(async move { Ok(vec![instance]) })
        });
        ec2
    }

    fn config(text: &str) -> GlobalConfig {
        CloudConfig::parse(text).unwrap().global
    }

    #[tokio::test]
    async fn the_config_wins_without_any_call() {
        let ec2 = MockEc2::new();
        let id = InstanceId::new("i-1");
        let tags = discover(&config("[Global]\nKubernetesClusterID = prod"), &ec2, Some(&id))
            .await
            .unwrap();
        assert_eq!((tags.id(), tags.legacy()), ("prod", false));
        let tags = discover(&config("[Global]\nKubernetesClusterTag = old"), &ec2, None)
            .await
            .unwrap();
        assert_eq!((tags.id(), tags.legacy()), ("old", true));
    }

    #[tokio::test]
    async fn otherwise_the_instance_tags_decide() {
        let id = InstanceId::new("i-1");
        let ec2 = ec2_with(&[("kubernetes.io/cluster/prod", "owned")]);
        let tags = discover(&GlobalConfig::default(), &ec2, Some(&id)).await.unwrap();
        assert_eq!((tags.id(), tags.legacy()), ("prod", false));

        let ec2 = ec2_with(&[("KubernetesCluster", "old")]);
        let tags = discover(&GlobalConfig::default(), &ec2, Some(&id)).await.unwrap();
        assert_eq!((tags.id(), tags.legacy()), ("old", true));

        let ec2 = ec2_with(&[("Name", "x")]);
        let err = discover(&GlobalConfig::default(), &ec2, Some(&id))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                ClusterIdError::Tags {
                    source: DiscoveryError::Missing,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[tokio::test]
    async fn missing_instance_and_aws_errors() {
        let id = InstanceId::new("i-1");
        let mut ec2 = MockEc2::new();
        ec2.expect_instances_by_id()
            .returning(|_| Box::pin(async { Ok(Vec::new()) }));
        let err = discover(&GlobalConfig::default(), &ec2, Some(&id))
            .await
            .unwrap_err();
        assert!(matches!(err, ClusterIdError::InstanceNotFound(_)), "{err}");

        let mut ec2 = MockEc2::new();
        ec2.expect_instances_by_id().returning(|_| {
            Box::pin(async { Err(AwsError::new(ErrorKind::Throttled, "ec2", "DescribeInstances")) })
        });
        let err = discover(&GlobalConfig::default(), &ec2, Some(&id))
            .await
            .unwrap_err();
        assert!(matches!(&err, ClusterIdError::Aws { source, .. } if source.kind() == ErrorKind::Throttled));

        let err = discover(&GlobalConfig::default(), &MockEc2::new(), None)
            .await
            .unwrap_err();
        assert!(matches!(err, ClusterIdError::Unknown));
    }
}
