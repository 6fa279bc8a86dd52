//! A fixed endpoint with its own SigV4 signing name and region (cloud config `ServiceOverride` with
//! `SigningName`): the endpoint carries an `authSchemes` property, which the SigV4 signer honours.

use std::collections::HashMap;

use aws_smithy_runtime_api::client::endpoint::EndpointFuture;
use aws_smithy_types::{Document, endpoint::Endpoint};

/// Resolves every request of a client to one URL, signed with the given name and region.
#[derive(Debug, Clone)]
pub(crate) struct StaticEndpoint {
    endpoint: Endpoint,
}

impl StaticEndpoint {
    pub(crate) fn new(url: String, signing_region: &str, signing_name: Option<String>) -> Self {
        let mut scheme = HashMap::new();
        scheme.insert("name".to_owned(), Document::from("sigv4"));
        scheme.insert("signingRegion".to_owned(), Document::from(signing_region));
        if let Some(name) = signing_name {
            scheme.insert("signingName".to_owned(), Document::from(name));
        }
        let endpoint = Endpoint::builder()
            .url(url)
            .property("authSchemes", vec![Document::Object(scheme)])
            .build();
        Self { endpoint }
    }

    fn resolve(&self) -> EndpointFuture<'_> {
        EndpointFuture::ready(Ok(self.endpoint.clone()))
    }
}

macro_rules! resolve_for {
    ($($sdk:ident),*) => {$(
        impl $sdk::config::endpoint::ResolveEndpoint for StaticEndpoint {
            fn resolve_endpoint<'a>(&'a self, _params: &'a $sdk::config::endpoint::Params) -> EndpointFuture<'a> {
                self.resolve()
            }
        }
    )*};
}

#[cfg(feature = "ec2")]
resolve_for!(aws_sdk_ec2);
#[cfg(feature = "elb")]
resolve_for!(aws_sdk_elasticloadbalancing);
#[cfg(feature = "elbv2")]
resolve_for!(aws_sdk_elasticloadbalancingv2);
