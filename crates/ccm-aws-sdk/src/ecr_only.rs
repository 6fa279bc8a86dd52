//! The ECR credential provider's clients alone (ECR, ECR Public, STS; each as its feature allows). [`Adapter`](crate::Adapter) builds every
//! port's client, so a binary that makes one links the EC2 and ELB clients, most of a release binary's size,
//! even when it never calls them. A binary that builds only [`EcrAdapter`] references no EC2 or ELB code, and the
//! linker leaves it out.

use std::sync::Arc;

use aws_types::SdkConfig;

#[cfg(feature = "sts")]
use crate::AwsSts;
use crate::{AdapterOptions, AwsEcr, CallMetrics, limiter::Limiter, runtime::Runtime};

/// The ECR and STS ports on one limiter and one set of metrics, and nothing else. Cheap to clone.
#[derive(Debug, Clone)]
pub struct EcrAdapter {
    ecr: AwsEcr,
    #[cfg(feature = "sts")]
    sts: AwsSts,
    metrics: CallMetrics,
}

// === impl EcrAdapter ===

impl EcrAdapter {
    /// Loads the default credential chain and region as [`Adapter::from_env`](crate::Adapter::from_env) does,
    /// `region` taking precedence when given, and builds the ECR and STS clients on it.
    ///
    /// Made for a process that makes one request: its HTTPS client trusts the system's CA bundle file without
    /// also reading every file of the certificate directory, unless `SSL_CERT_FILE` or `SSL_CERT_DIR` is set
    /// (then the default trust store applies, as it does when no bundle is found).
    #[cfg(feature = "config")]
    pub async fn from_env(region: Option<String>, options: AdapterOptions) -> Self {
        let mut loader = crate::config_loader(region);
        if let Some(client) = crate::trust::bundle_https_client() {
            loader = loader.http_client(client);
        }
        Self::new(&loader.load().await, options)
    }

    /// Builds the ECR and STS clients on `sdk_config` and `options` (its endpoint overrides, limits and retries;
    /// ECR and STS never use `assume_role`, as with [`Adapter`](crate::Adapter)).
    pub fn new(sdk_config: &SdkConfig, options: AdapterOptions) -> Self {
        let metrics = CallMetrics::default();
        let rt: Arc<Runtime> = Runtime::new(
            Limiter::new(options.rate_limits.clone()),
            metrics.clone(),
            options.retry,
            options.read_only,
        );
        Self {
            #[cfg(feature = "sts")]
            sts: AwsSts::new(sdk_config, &options, rt.clone()),
            ecr: AwsEcr::new(sdk_config, &options, rt),
            metrics,
        }
    }

    /// The ECR port (private registries and ECR Public).
    pub fn ecr(&self) -> &AwsEcr {
        &self.ecr
    }

    /// The STS port.
    #[cfg(feature = "sts")]
    pub fn sts(&self) -> &AwsSts {
        &self.sts
    }

    /// The metrics of every call.
    pub fn metrics(&self) -> &CallMetrics {
        &self.metrics
    }
}
