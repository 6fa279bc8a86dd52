//! The certificate lists of an NLB's TLS listeners: the certificates after the first in
//! `aws-load-balancer-ssl-cert`, beside each listener's default one. Owned while the annotation gives several:
//! only then are they read (one `DescribeListenerCertificates` per such listener, none for any other Service)
//! and compared. A list an operator added by hand to a listener of a Service with one certificate is left
//! alone, as the Go controller left it.

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{Elbv2, elbv2::ListenerV2};

use super::{Change, Desired, Listener};
use crate::Error;

/// The certificate lists (default excluded) of the TLS listeners whose port wants further certificates, by
/// listener ARN.
pub(super) async fn observe<V: Elbv2>(
    elbv2: &V,
    desired: &Desired,
    listeners: &[ListenerV2],
) -> Result<BTreeMap<String, Vec<String>>, Error> {
    let mut out = BTreeMap::new();
    for current in listeners
        .iter()
        .filter(|l| l.protocol.eq_ignore_ascii_case("TLS"))
    {
        if desired
            .listeners
            .iter()
            .any(|l| l.port == current.port && !l.extra_certificates.is_empty())
        {
            let certificates = elbv2
                .listener_certificates(&current.arn)
                .await
                .map_err(Error::aws("reading a listener's certificates"))?;
            out.insert(current.arn.clone(), certificates);
        }
    }
    Ok(out)
}

/// The certificates `wanted` lacks and those it no longer lists, as one change; `None` when they agree or were
/// not read (`observed` is `None`). The default certificate is never removed from the list (AWS refuses it):
/// after a swap of the first two ARNs the new default may stay listed too, which serves the same.
pub(super) fn change(
    wanted: &Listener,
    current: &ListenerV2,
    observed: Option<&Vec<String>>,
) -> Option<Change> {
    let observed = observed?;
    let have: BTreeSet<&String> = observed.iter().collect();
    let add: Vec<String> = wanted
        .extra_certificates
        .iter()
        .filter(|c| !have.contains(c))
        .cloned()
        .collect();
    let remove: Vec<String> = observed
        .iter()
        .filter(|c| !wanted.extra_certificates.contains(c) && wanted.certificate.as_ref() != Some(*c))
        .cloned()
        .collect();
    (!add.is_empty() || !remove.is_empty()).then(|| Change::ListenerCertificates {
        arn: current.arn.clone(),
        port: wanted.port,
        add,
        remove,
    })
}
