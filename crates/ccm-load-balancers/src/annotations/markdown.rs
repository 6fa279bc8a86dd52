//! The generated `docs/annotations.md`: the annotation table as Markdown.

use super::{ANNOTATIONS, Applies, Origin, PREFIX, albc};

/// The Markdown reference of every annotation, generated from [`ANNOTATIONS`] (committed as
/// `docs/annotations.md`).
pub fn render_markdown() -> String {
    let mut out = String::new();
    out.push_str(
        "# Service annotations\n\n\
         <!-- Generated from crates/ccm-load-balancers/src/annotations.rs (ANNOTATIONS); do not edit.\n     \
         Regenerate with: UPDATE_DOCS=1 cargo test -p ccm-load-balancers --lib docs_annotations_md_is_current -->\n\n\
         Annotations on a Service of type `LoadBalancer`. Every value is validated before any AWS call: a \
         Service with bad values gets one error (a `SyncLoadBalancerFailed` Warning Event) naming each bad \
         annotation, its value and what is accepted, and nothing in AWS changes. Values are read as the Go \
         controller read them: an empty value is no annotation (except for subnets, the SSL negotiation policy, \
         the health check protocol, port and numbers, EIP allocations and private addresses, which Go or AWS \
         refused empty); a value Go served with a surprising meaning (`internal: \"False\"` is internal, an \
         unknown `type` is a Classic ELB, `backend-protocol: HTTP` without a certificate is TCP, key/value items \
         with an empty key are skipped) is served the same way, with an `UnexpectedAnnotationValue` Warning Event saying so.\n\n\
         Flavours: **CLB** = Classic ELB (the default), **NLB** = Network Load Balancer \
         (`aws-load-balancer-type: nlb`). An annotation of the other flavour is ignored (a bad value of it is only \
         logged), except where the \
         table says it is an error.\n\n\
         Origin: **Go** = the Go controller's (kubernetes/cloud-provider-aws), **LBC** = the AWS Load Balancer \
         Controller's (same key and format there), **ours** = this controller's own.\n\n\
         | Annotation | Values | Default | Applies to | Origin | Description |\n\
         |---|---|---|---|---|---|\n",
    );
    for def in ANNOTATIONS {
        let applies = match def.applies {
            Applies::Both => "CLB, NLB",
            Applies::Clb => "CLB",
            Applies::Nlb => "NLB",
            Applies::ClbRejectedOnNlb => "CLB (error on NLB)",
            Applies::NlbRejectedOnClb => "NLB (error on CLB)",
        };
        let origin = match def.key.origin() {
            Origin::Go => "Go",
            Origin::AwsLoadBalancerController => "LBC",
            Origin::Ours => "ours",
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            def.name,
            def.value.accepted().replace('|', "\\|"),
            def.default,
            applies,
            origin,
            def.doc.replace('|', "\\|"),
        ));
    }
    out.push_str(
        "\n## The AWS Load Balancer Controller's keys not served here\n\n\
         On a Service this controller serves (a Classic ELB or an NLB; `type: external` and `nlb-ip` are that \
         controller's), each of these keys gets an `UnsupportedAnnotation` Warning Event saying it has no effect, \
         so that nothing its author wrote is ignored in silence. One stops the Service's sync with an error \
         instead, because ignoring it would open more than the Service asks: \
         `aws-load-balancer-manage-backend-security-group-rules: \"false\"` (this controller adds the nodes' \
         rules).\n\n",
    );
    for suffix in albc::UNSERVED_KEYS {
        out.push_str(&format!("- `{PREFIX}{suffix}`\n"));
    }
    out
}
