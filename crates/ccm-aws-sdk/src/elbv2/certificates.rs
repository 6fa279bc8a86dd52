//! The certificate list of a TLS listener: the certificates besides the default one (served by SNI), read,
//! added and removed. The default certificate is the listener's own (`CreateListener`, `ModifyListener`).

use aws_sdk_elasticloadbalancingv2::types as sdk;
use ccm_aws_api::{Result, elbv2::TargetGroupHealthCheck};

use super::{
    ADD_LISTENER_CERTIFICATES, AwsElbv2, DESCRIBE_LISTENER_CERTIFICATES, REMOVE_LISTENER_CERTIFICATES,
};

/// Certificates per `AddListenerCertificates` and `RemoveListenerCertificates` call: the API takes a list, but
/// its reference says "You can specify one certificate per call".
const CERTIFICATES_PER_CALL: usize = 1;

fn sdk_certificates(arns: &[String]) -> Vec<sdk::Certificate> {
    arns.iter()
        .map(|arn| sdk::Certificate::builder().certificate_arn(arn).build())
        .collect()
}

/// The matcher of an HTTP or HTTPS check, when one is given.
pub(super) fn matcher(hc: &TargetGroupHealthCheck) -> Option<sdk::Matcher> {
    hc.matcher
        .as_ref()
        .map(|codes| sdk::Matcher::builder().http_code(codes).build())
}

impl AwsElbv2 {
    pub(super) async fn describe_listener_certificates(&self, arn: &str) -> Result<Vec<String>> {
        self.rt
            .paged(
                DESCRIBE_LISTENER_CERTIFICATES,
                |marker| {
                    self.client
                        .describe_listener_certificates()
                        .listener_arn(arn)
                        .set_marker(marker)
                        .send()
                },
                |page, out| {
                    out.extend(
                        page.certificates()
                            .iter()
                            .filter(|c| c.is_default() != Some(true))
                            .filter_map(|c| c.certificate_arn().map(str::to_owned)),
                    );
                    page.next_marker().map(str::to_owned)
                },
            )
            .await
    }

    pub(super) async fn add_certificates(&self, arn: &str, certificates: &[String]) -> Result<()> {
        for chunk in certificates.chunks(CERTIFICATES_PER_CALL) {
            let list = Some(sdk_certificates(chunk));
            self.rt
                .call(ADD_LISTENER_CERTIFICATES, || {
                    let call = self.client.add_listener_certificates();
                    call.listener_arn(arn).set_certificates(list.clone()).send()
                })
                .await?;
        }
        Ok(())
    }

    pub(super) async fn remove_certificates(&self, arn: &str, certificates: &[String]) -> Result<()> {
        for chunk in certificates.chunks(CERTIFICATES_PER_CALL) {
            let list = Some(sdk_certificates(chunk));
            self.rt
                .call(REMOVE_LISTENER_CERTIFICATES, || {
                    let call = self.client.remove_listener_certificates();
                    call.listener_arn(arn).set_certificates(list.clone()).send()
                })
                .await?;
        }
        Ok(())
    }
}
