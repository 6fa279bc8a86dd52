//! What the ECR and STS ports share: their clients are built per call, for the region the call names and with
//! either the ambient credentials or the temporary ones the caller passes (cheap: they share the adapter's HTTP
//! client).

use std::{sync::Arc, time::SystemTime};

use aws_credential_types::{Credentials, provider::SharedCredentialsProvider};
use aws_types::SdkConfig;
use ccm_aws_api::sts::TemporaryCredentials;

use crate::{AdapterOptions, endpoint_for, limiter::Service, runtime::Runtime};

/// The adapter's base configuration, options and runtime, shared by every client a port builds.
pub(crate) struct Base {
    pub(crate) config: SdkConfig,
    pub(crate) options: AdapterOptions,
    pub(crate) rt: Arc<Runtime>,
}

// === impl Base ===

impl Base {
    pub(crate) fn new(config: &SdkConfig, options: &AdapterOptions, rt: Arc<Runtime>) -> Arc<Self> {
        Arc::new(Self {
            config: config.clone(),
            options: options.clone(),
            rt,
        })
    }

    /// The endpoint and region for `service` when called for `region`.
    pub(crate) fn endpoint(&self, service: Service, region: &str) -> (Option<String>, String) {
        match endpoint_for(&self.options, service, Some(region)) {
            Some((url, signing_region)) => (Some(url), signing_region),
            None => (None, region.to_owned()),
        }
    }
}

/// The caller's temporary credentials as a client's credentials provider.
pub(crate) fn static_credentials(credentials: &TemporaryCredentials) -> SharedCredentialsProvider {
    SharedCredentialsProvider::new(Credentials::new(
        &credentials.access_key_id,
        &credentials.secret_access_key,
        Some(credentials.session_token.clone()),
        Some(credentials.expiration),
        "ccm-sts",
    ))
}

/// An SDK time as a `SystemTime`, when it is one.
pub(crate) fn to_system_time(time: Option<&aws_smithy_types::DateTime>) -> Option<SystemTime> {
    time.and_then(|t| SystemTime::try_from(*t).ok())
}
