//! The attributes of an NLB's listeners (`aws-load-balancer-listener-attributes.<PROTOCOL>-<port>`, the AWS
//! Load Balancer Controller's key; upstream #1023): the TCP idle timeout. Checked against the Service's
//! listeners when the NLB is modelled ([`attach`]), read only for the listeners that have some
//! (`DescribeListenerAttributes`, full ensures only) and set in place where they differ ([`change`]). Keys no
//! annotation names are left as AWS has them.

use std::collections::BTreeMap;

use ccm_aws_api::elbv2::ListenerV2;

use super::{Change, Listener};
use crate::{
    Error, InvalidService,
    annotations::{Problem, TCP_IDLE_TIMEOUT},
    spec::ServiceSpec,
};

/// Gives each listener the attributes its annotation sets; an annotation naming a listener the Service does not
/// have, a second one for the same listener, or the TCP idle timeout on another protocol is an error.
pub(super) fn attach(spec: &ServiceSpec, listeners: &mut [Listener]) -> Result<(), Error> {
    let mut problems = Vec::new();
    let available = listeners
        .iter()
        .map(|l| format!("{}-{}", l.protocol, l.port))
        .collect::<Vec<_>>()
        .join(", ");
    for annotation in &spec.listener_attributes {
        let problem = |accepted: String| Problem {
            field: annotation.annotation.clone(),
            value: pairs(&annotation.attributes),
            accepted,
        };
        let Some(listener) = listeners
            .iter_mut()
            .find(|l| l.port == annotation.port && l.protocol == annotation.protocol)
        else {
            problems.push(problem(format!(
                "a listener of this Service, by protocol and port: {available}"
            )));
            continue;
        };
        if !listener.attributes.is_empty() {
            problems.push(problem("one annotation per listener".to_owned()));
            continue;
        }
        if listener.protocol != "TCP" && annotation.attributes.iter().any(|(k, _)| k == TCP_IDLE_TIMEOUT.0) {
            problems.push(problem(format!("{} on a TCP listener only", TCP_IDLE_TIMEOUT.0)));
            continue;
        }
        listener.attributes = annotation.attributes.iter().cloned().collect();
    }
    Ok(InvalidService::check(spec, problems)?)
}

fn pairs(attributes: &[(String, String)]) -> String {
    attributes
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The attributes of `wanted` that `current` lacks, as one change; `None` when they agree or were not read
/// (`observed` is `None`: a host update, which reads no attributes). AWS reports a TCP listener's idle timeout
/// always; a missing key counts as AWS's default.
pub(super) fn change(
    wanted: &Listener,
    current: &ListenerV2,
    observed: Option<&BTreeMap<String, String>>,
) -> Option<Change> {
    let observed = observed?;
    let (idle, default, _) = TCP_IDLE_TIMEOUT;
    let differing: BTreeMap<String, String> = wanted
        .attributes
        .iter()
        .filter(|(k, v)| {
            let current = observed.get(*k).map(String::as_str);
            let current = current.or((k.as_str() == idle).then_some(default));
            current != Some(v.as_str())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!differing.is_empty()).then(|| Change::ModifyListenerAttributes {
        arn: current.arn.clone(),
        port: wanted.port,
        attributes: differing,
    })
}
