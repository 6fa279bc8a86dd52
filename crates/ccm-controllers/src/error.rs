use std::borrow::Borrow;

use ccm_cloud_provider::CloudError;

use crate::{Backoff, addresses::NodeIpError};

/// What went wrong in a controller. Per-object errors are logged, counted and retried with backoff by the
/// controllers themselves; only [`Error::Unsupported`] and [`Error::Config`] are returned from `run`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The provider lacks the capability this controller needs: do not start the controller.
    #[error("the cloud provider does not support {capability}")]
    Unsupported {
        /// The missing capability, e.g. `instances`.
        capability: &'static str,
    },
    /// The controller's configuration is invalid: fix the named setting.
    #[error("invalid {setting}: {reason}")]
    Config {
        /// The setting, e.g. `cluster-cidr`.
        setting: &'static str,
        /// What is wrong and what is accepted.
        reason: String,
    },
    /// The provider answered with an error for an object.
    #[error("{context} for {object}")]
    Cloud {
        /// What was being done.
        context: &'static str,
        /// The object (node name or `namespace/name`).
        object: String,
        /// The provider's error.
        #[source]
        source: CloudError,
    },
    /// Not a failure: the provider waits on the cloud to release something (a load balancer's deletion whose
    /// security group is still in use). Retried after `after`; the object keeps its finalizer meanwhile.
    #[error("{object} waits for {waiting_for}")]
    Waiting {
        /// The object (`namespace/name`).
        object: String,
        /// What is waited for, in the provider's words.
        waiting_for: String,
        /// The delay chosen before the next attempt.
        after: std::time::Duration,
    },
    /// The Kubernetes API failed for an object.
    #[error("{context} for {object}")]
    Kube {
        /// What was being done.
        context: &'static str,
        /// The object.
        object: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The provider returned no provider ID and the Node has none (retried; the node stays uninitialized).
    #[error("cloud provider does not set node provider ID for node {node}")]
    MissingProviderId {
        /// The node.
        node: String,
    },
    /// A reconcile or pass took longer than its deadline and was abandoned (retried later).
    #[error("{what} did not finish within {deadline:?}")]
    DeadlineExceeded {
        /// What was abandoned.
        what: &'static str,
        /// The deadline.
        deadline: std::time::Duration,
    },
    /// The node's `alpha.kubernetes.io/provided-node-ip` does not fit the cloud's addresses.
    #[error("provided node ip for node {node:?} is not valid")]
    NodeIp {
        /// The node.
        node: String,
        /// Why.
        #[source]
        source: NodeIpError,
    },
}

// === impl Error ===

impl Error {
    pub(crate) fn kube(context: &'static str, object: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            context,
            object: object.into(),
            source,
        }
    }

    pub(crate) fn cloud(context: &'static str, object: impl Into<String>, source: CloudError) -> Self {
        Self::Cloud {
            context,
            object: object.into(),
            source,
        }
    }

    /// The delay a provider asked for with [`CloudError::RetryAfter`] (or chosen for a wait), if any.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            Self::Cloud { source, .. } => source.retry_delay(),
            Self::Waiting { after, .. } => Some(*after),
            _ => None,
        }
    }

    /// What a controller does after this failure of `key`: the one mapping from failures to retries shared by
    /// the queue-driven controllers. A provider that named a delay ([`CloudError::RetryAfter`],
    /// [`CloudError::Waiting`]) is retried after exactly that delay, without counting a failure; anything else
    /// after the key's exponential `backoff`.
    pub fn retry_delay<K, Q>(&self, backoff: &Backoff<K>, key: &Q) -> std::time::Duration
    where
        K: Eq + std::hash::Hash + Borrow<Q>,
        Q: ToOwned<Owned = K> + std::hash::Hash + Eq + ?Sized,
    {
        self.retry_after().unwrap_or_else(|| backoff.next(key))
    }
}

pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_conflict())
}

pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_not_found())
}
