//! The `kubernetes/<version>` key the Go controller adds to its AWS user agent (`AddUserAgentKeyValue`), so
//! that CloudTrail filters and IAM conditions written for it (`aws:UserAgent`) match this controller's calls.

use aws_smithy_runtime_api::{
    box_error::BoxError,
    client::{
        interceptors::{Intercept, context::BeforeTransmitInterceptorContextMut},
        runtime_components::RuntimeComponents,
    },
};
use aws_smithy_types::config_bag::ConfigBag;

/// The user-agent key/value: `kubernetes/v<crate version>`.
pub fn kubernetes_user_agent() -> String {
    format!("kubernetes/v{}", env!("CARGO_PKG_VERSION"))
}

/// Appends [`kubernetes_user_agent`] to the `User-Agent` header. It runs after signing, which never covers
/// `User-Agent` (SigV4 excludes it), after the SDK has written its own agent.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct KubernetesUserAgent;

impl Intercept for KubernetesUserAgent {
    fn name(&self) -> &'static str {
        "KubernetesUserAgent"
    }

    fn modify_before_transmit(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let headers = context.request_mut().headers_mut();
        let agent = match headers.get("user-agent") {
            Some(current) => format!("{current} {}", kubernetes_user_agent()),
            None => kubernetes_user_agent(),
        };
        headers.insert("user-agent", agent);
        Ok(())
    }
}
