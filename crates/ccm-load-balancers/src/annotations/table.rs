//! The annotation table itself: one [`AnnotationDef`] per key, in the order of `docs/annotations.md`.

use super::{ALPN_POLICIES, AnnotationDef, Applies, Key, ValueType};

/// The accepted values of `aws-load-balancer-type`.
pub const TYPE_VALUES: &[&str] = &["classic", "clb", "nlb", "nlb-ip", "external"];

/// The annotation table. Declared once; everything else (parsing, docs) reads it.
pub const ANNOTATIONS: &[AnnotationDef] = &[
    AnnotationDef {
        key: Key::Type,
        name: "service.beta.kubernetes.io/aws-load-balancer-type",
        value: ValueType::OneOf(TYPE_VALUES),
        default: "Classic ELB",
        applies: Applies::Both,
        doc: "`nlb` makes a Network Load Balancer with instance targets; `nlb-ip` and `external` are left to the \
              AWS Load Balancer Controller; absent, empty, `classic` or `clb` make a Classic ELB. As in the Go \
              controller, any other value (`NLB`, `alb`, ...) also makes a Classic ELB, with a warning. \
              Cannot change after creation (the load balancer under the Service's name tells which flavour \
              exists).",
    },
    AnnotationDef {
        key: Key::Internal,
        name: "service.beta.kubernetes.io/aws-load-balancer-internal",
        value: ValueType::OneOf(&["true", "false", "0.0.0.0/0"]),
        default: "false (internet-facing)",
        applies: Applies::Both,
        doc: "`true` (or the legacy `0.0.0.0/0`) gives the `internal` scheme; `false` or empty internet-facing. \
              As in the Go controller, every other value is internal too (`1`, `yes`; `0`, `False` or `no` with \
              a warning). Changing it needs a new load \
              balancer: with `aws-load-balancer-allow-recreation` it is recreated under the same name with the new \
              scheme (a `RecreatingLoadBalancer` Warning Event; its DNS name changes), without it the load balancer \
              is kept (a `LoadBalancerRecreationRequired` Warning Event); a Classic ELB not tagged as owned by the cluster keeps its scheme (a warning is \
              logged).",
    },
    AnnotationDef {
        key: Key::Scheme,
        name: "service.beta.kubernetes.io/aws-load-balancer-scheme",
        value: ValueType::OneOf(&["internal", "internet-facing"]),
        default: "from `aws-load-balancer-internal`",
        applies: Applies::Both,
        doc: "The AWS Load Balancer Controller's key for the scheme. Set beside `aws-load-balancer-internal`, \
              the two must agree: otherwise the Service is not served, with an error naming both. Absent, \
              `aws-load-balancer-internal` decides (internet-facing by default, where the AWS Load Balancer \
              Controller defaults to internal). A change needs a new load balancer, as for \
              `aws-load-balancer-internal`.",
    },
    AnnotationDef {
        key: Key::Subnets,
        name: "service.beta.kubernetes.io/aws-load-balancer-subnets",
        value: ValueType::SubnetList,
        default: "discovered",
        applies: Applies::Both,
        doc: "Subnet IDs or `Name` tags, one per zone, instead of discovery (cluster-tagged subnets, role tags \
              `kubernetes.io/role/elb` / `kubernetes.io/role/internal-elb`, one per zone). On an NLB, subnets in \
              added zones are added in place; removing or swapping one needs a new NLB (see \
              `aws-load-balancer-allow-recreation`) (a Classic ELB \
              attaches and detaches).",
    },
    AnnotationDef {
        key: Key::SourceRanges,
        name: "service.beta.kubernetes.io/load-balancer-source-ranges",
        value: ValueType::CidrList,
        default: "0.0.0.0/0",
        applies: Applies::Both,
        doc: "Client CIDRs allowed by the load balancer's security group; `spec.loadBalancerSourceRanges` wins \
              when set.",
    },
    AnnotationDef {
        key: Key::SecurityGroupPrefixLists,
        name: "service.beta.kubernetes.io/aws-load-balancer-security-group-prefix-lists",
        value: ValueType::PrefixListIds,
        default: "none",
        applies: Applies::Both,
        doc: "Managed prefix lists whose CIDRs may reach the listener ports, as rules of the load balancer's own \
              managed group only (one rule per list and port, no ICMP): the nodes' groups reference that group \
              and pay no rule quota for the lists' entries. Without source ranges (the field or \
              `load-balancer-source-ranges`) only the lists are let in, not the default `0.0.0.0/0`; with \
              them, both. A Service with its own groups (`aws-load-balancer-security-groups`), a Classic ELB \
              under the cloud config's `ElbSecurityGroup`, and an NLB without a security group \
              (`NLBSecurityGroupMode` not `Managed`) are refused: their lists' rules would land on groups this \
              controller does not manage. Lists dropped from the annotation are revoked. An empty value is an \
              error: that controller would then let nobody in, where absent lets `0.0.0.0/0` in.",
    },
    AnnotationDef {
        key: Key::SecurityGroups,
        name: "service.beta.kubernetes.io/aws-load-balancer-security-groups",
        value: ValueType::IdList("sg-"),
        default: "a managed group `k8s-elb-<name>`",
        applies: Applies::Both,
        doc: "Security groups to use instead of the managed one; their rules are never changed. On NLB only \
              with `NLBSecurityGroupMode = Managed`.",
    },
    AnnotationDef {
        key: Key::ExtraSecurityGroups,
        name: "service.beta.kubernetes.io/aws-load-balancer-extra-security-groups",
        value: ValueType::IdList("sg-"),
        default: "none",
        applies: Applies::ClbRejectedOnNlb,
        doc: "Security groups added after the primary ones; their rules are never changed. An error on NLB.",
    },
    AnnotationDef {
        key: Key::AdditionalResourceTags,
        name: "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags",
        value: ValueType::TagList,
        default: "none",
        applies: Applies::Both,
        doc: "Extra tags for the load balancer and the resources made for it. The value is everything after the \
              first `=`. The keys applied are recorded on each resource (tag \
              `kubernetes.io/additional-resource-tags`; on an NLB and its listeners and target groups also under \
              the Go controller's `kubernetes.io/cloud-controller/managed-tags`, comma separated, and either record \
              is read): a key dropped from the annotation is removed from every resource that got it; tags added \
              by hand never are. `aws:` keys and the controller's own are refused.",
    },
    AnnotationDef {
        key: Key::TargetNodeLabels,
        name: "service.beta.kubernetes.io/aws-load-balancer-target-node-labels",
        value: ValueType::LabelList,
        default: "all nodes",
        applies: Applies::Both,
        doc: "Only nodes with every listed label are targets; an empty value matches any value of the label.",
    },
    AnnotationDef {
        key: Key::TargetNodesWithEndpoints,
        name: "service.beta.kubernetes.io/aws-load-balancer-target-nodes-with-endpoints",
        value: ValueType::Bool,
        default: "false (every node is a target)",
        applies: Applies::NlbRejectedOnClb,
        doc: "`true` with `externalTrafficPolicy: Local`: only the nodes that run a ready endpoint of the \
              Service are targets, following its EndpointSlices (the last ready one leaving a node deregisters \
              it, drained over the deregistration delay), so target health stops reporting every other node \
              unhealthy; endpoint changes that keep the set of nodes cost no AWS call. An error under \
              `externalTrafficPolicy: Cluster` (every node forwards there) and on a Classic ELB.",
    },
    AnnotationDef {
        key: Key::NlbTargetType,
        name: "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type",
        value: ValueType::OneOf(&["instance", "ip"]),
        default: "instance",
        // Read on both: `ip` on a Classic ELB is an error, not ignored.
        applies: Applies::Both,
        doc: "`ip`: the NLB's target groups (target type `ip`, on the Service's target port) register the \
              addresses of the Service's ready pods from the EndpointSlices the endpoint-slice controller writes \
              (never a slice written by hand: such a slice may list any address), each on its resolved target \
              port; a pod that turns not ready or terminating is deregistered and drained over the target \
              group's deregistration delay. Health checks go to the pods (TCP on the traffic port by default, \
              under either traffic policy), and the nodes' rules open the pods' ports to the NLB. A change \
              between `instance` and `ip` makes new target groups, swapped in before the old ones go, with no \
              new NLB. Pods must have addresses in the VPC (the AWS VPC CNI); with \
              `target-nodes-with-endpoints` it is an error, `target-node-labels` has no effect on the \
              targets. On a Classic ELB `ip` is an error.",
    },
    AnnotationDef {
        key: Key::BackendProtocol,
        name: "service.beta.kubernetes.io/aws-load-balancer-backend-protocol",
        value: ValueType::OneOf(&["http", "https", "ssl", "tcp"]),
        default: "tcp",
        applies: Applies::Both,
        doc: "Protocol to the nodes. Classic ELB: `http` gives HTTP listeners (HTTPS on SSL ports); `https`/`ssl` \
              also make the default health check SSL. NLB: only `ssl` (with `ssl-cert`) matters, giving TLS \
              target groups.",
    },
    AnnotationDef {
        key: Key::SslCert,
        name: "service.beta.kubernetes.io/aws-load-balancer-ssl-cert",
        value: ValueType::Arn,
        default: "none",
        applies: Applies::Both,
        doc: "ACM or IAM certificate ARN: the ports of `ssl-ports` get SSL/HTTPS (Classic) or TLS (NLB) listeners. \
              On an NLB, several comma-separated ARNs (as the AWS Load Balancer Controller takes them): the \
              first is the TLS listeners' default certificate, the others join their certificate list (chosen by \
              SNI), owned while several are given. A Classic ELB listener takes one.",
    },
    AnnotationDef {
        key: Key::SslPorts,
        name: "service.beta.kubernetes.io/aws-load-balancer-ssl-ports",
        value: ValueType::PortList,
        default: "`*` (every port)",
        applies: Applies::Both,
        doc: "Port numbers or names (trimmed; Classic compares names case-insensitively) that get the certificate.",
    },
    AnnotationDef {
        key: Key::SslNegotiationPolicy,
        name: "service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy",
        value: ValueType::Text,
        default: "AWS default",
        applies: Applies::Both,
        doc: "Predefined security policy (`ELBSecurityPolicy-TLS-1-2-2017-01`, ...). Classic: policy \
              `k8s-SSLNegotiationPolicy-<name>` on every SSL/HTTPS listener. NLB: the TLS listeners' `SslPolicy`.",
    },
    AnnotationDef {
        key: Key::ProxyProtocol,
        name: "service.beta.kubernetes.io/aws-load-balancer-proxy-protocol",
        value: ValueType::OneOf(&["*"]),
        default: "off",
        applies: Applies::Both,
        doc: "`*` enables proxy protocol: on a Classic ELB the policy `k8s-proxyprotocol-enabled` on every \
              back-end port; on an NLB proxy protocol v2 on every target group, only with \
              `aws-load-balancer-allow-proxy-protocol: \"true\"` (the Go controller ignored the key on NLBs, so \
              back ends of an NLB it made may not expect the header: without that consent, a Warning and no \
              change; another value there is a Warning too, never an error). Removing it leaves an NLB's target groups as \
              they are.",
    },
    AnnotationDef {
        key: Key::AllowProxyProtocol,
        name: "service.beta.kubernetes.io/aws-load-balancer-allow-proxy-protocol",
        value: ValueType::Bool,
        default: "false",
        applies: Applies::Nlb,
        doc: "Consent to turn proxy protocol v2 on for an NLB's target groups when `aws-load-balancer-proxy-protocol` \
              is `*`: every back end then receives the header before the client's bytes.",
    },
    AnnotationDef {
        key: Key::ConnectionIdleTimeout,
        name: "service.beta.kubernetes.io/aws-load-balancer-connection-idle-timeout",
        value: ValueType::Int { min: 1, max: 4000 },
        default: "60",
        applies: Applies::Clb,
        doc: "Idle timeout in seconds.",
    },
    AnnotationDef {
        key: Key::ConnectionDrainingEnabled,
        name: "service.beta.kubernetes.io/aws-load-balancer-connection-draining-enabled",
        value: ValueType::Bool,
        default: "false",
        applies: Applies::Clb,
        doc: "Connection draining for deregistered instances.",
    },
    AnnotationDef {
        key: Key::ConnectionDrainingTimeout,
        name: "service.beta.kubernetes.io/aws-load-balancer-connection-draining-timeout",
        value: ValueType::Int { min: 1, max: 3600 },
        default: "AWS's (300)",
        applies: Applies::Clb,
        doc: "Draining timeout in seconds; only compared while set.",
    },
    AnnotationDef {
        key: Key::CrossZoneLoadBalancingEnabled,
        name: "service.beta.kubernetes.io/aws-load-balancer-cross-zone-load-balancing-enabled",
        value: ValueType::Bool,
        default: "false",
        applies: Applies::Both,
        doc: "Cross-zone load balancing (Classic attribute; NLB `load_balancing.cross_zone.enabled`).",
    },
    AnnotationDef {
        key: Key::AccessLogEnabled,
        name: "service.beta.kubernetes.io/aws-load-balancer-access-log-enabled",
        value: ValueType::Bool,
        default: "false",
        applies: Applies::Both,
        doc: "Access logs to S3 (needs the bucket annotation).",
    },
    AnnotationDef {
        key: Key::AccessLogEmitInterval,
        name: "service.beta.kubernetes.io/aws-load-balancer-access-log-emit-interval",
        value: ValueType::IntOneOf(&[5, 60]),
        default: "60",
        applies: Applies::Clb,
        doc: "Minutes between access log files.",
    },
    AnnotationDef {
        key: Key::AccessLogS3BucketName,
        name: "service.beta.kubernetes.io/aws-load-balancer-access-log-s3-bucket-name",
        value: ValueType::Text,
        default: "none",
        applies: Applies::Both,
        doc: "S3 bucket for access logs; required when they are enabled.",
    },
    AnnotationDef {
        key: Key::AccessLogS3BucketPrefix,
        name: "service.beta.kubernetes.io/aws-load-balancer-access-log-s3-bucket-prefix",
        value: ValueType::Text,
        default: "none",
        applies: Applies::Both,
        doc: "Key prefix in the access log bucket.",
    },
    AnnotationDef {
        key: Key::HealthcheckProtocol,
        name: "service.beta.kubernetes.io/aws-load-balancer-healthcheck-protocol",
        value: ValueType::OneOf(&["TCP", "SSL", "HTTP", "HTTPS"]),
        default: "TCP (HTTP for `externalTrafficPolicy: Local`)",
        applies: Applies::Both,
        doc: "Health check protocol (case-insensitive). NLB accepts TCP, HTTP and HTTPS.",
    },
    AnnotationDef {
        key: Key::HealthcheckPort,
        name: "service.beta.kubernetes.io/aws-load-balancer-healthcheck-port",
        value: ValueType::HealthCheckPort,
        default: "traffic-port (the health-check node port for `Local`)",
        applies: Applies::Both,
        doc: "`traffic-port` (the first listener's node port), a port number, or the name of one of the \
              Service's ports, which stands for its node port (the AWS Load Balancer Controller's reading).",
    },
    AnnotationDef {
        key: Key::HealthcheckPath,
        name: "service.beta.kubernetes.io/aws-load-balancer-healthcheck-path",
        value: ValueType::Path,
        default: "`/` (`/healthz` for `Local`)",
        applies: Applies::Both,
        doc: "Path of HTTP and HTTPS health checks.",
    },
    AnnotationDef {
        key: Key::HealthcheckHealthyThreshold,
        name: "service.beta.kubernetes.io/aws-load-balancer-healthcheck-healthy-threshold",
        value: ValueType::Int { min: 2, max: 10 },
        default: "Classic 2; NLB 3 (2 for `Local`)",
        applies: Applies::Both,
        doc: "Consecutive successes before a target is healthy.",
    },
    AnnotationDef {
        key: Key::HealthcheckUnhealthyThreshold,
        name: "service.beta.kubernetes.io/aws-load-balancer-healthcheck-unhealthy-threshold",
        value: ValueType::Int { min: 2, max: 10 },
        default: "Classic 6; NLB 3 (2 for `Local`)",
        applies: Applies::Both,
        doc: "Consecutive failures before a target is unhealthy.",
    },
    AnnotationDef {
        key: Key::HealthcheckTimeout,
        name: "service.beta.kubernetes.io/aws-load-balancer-healthcheck-timeout",
        value: ValueType::Int { min: 2, max: 120 },
        default: "Classic 5; NLB 10",
        applies: Applies::Both,
        doc: "Seconds before a check fails; Classic ELB needs it below the interval and at most 60.",
    },
    AnnotationDef {
        key: Key::HealthcheckInterval,
        name: "service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval",
        value: ValueType::Int { min: 5, max: 300 },
        default: "Classic 10; NLB 30 (10 for `Local`)",
        applies: Applies::Both,
        doc: "Seconds between checks.",
    },
    AnnotationDef {
        key: Key::HealthcheckSuccessCodes,
        name: "service.beta.kubernetes.io/aws-load-balancer-healthcheck-success-codes",
        value: ValueType::Text,
        default: "AWS's (`200-399`), or what the target group has",
        applies: Applies::NlbRejectedOnClb,
        doc: "The HTTP codes of a healthy answer to an HTTP or HTTPS health check: codes from 200 to 599, a range \
              (`200-299`) or a comma-separated list (`200,202`). Owned while given (removing it leaves the \
              target groups as they are); a Warning and no effect with a TCP health check.",
    },
    AnnotationDef {
        key: Key::EipAllocations,
        name: "service.beta.kubernetes.io/aws-load-balancer-eip-allocations",
        value: ValueType::IdList("eipalloc-"),
        default: "none",
        applies: Applies::Nlb,
        doc: "Elastic IP allocations, one per subnet in subnet ID order (internet-facing NLB); a change recreates the \
              NLB.",
    },
    AnnotationDef {
        key: Key::PrivateIpv4Addresses,
        name: "service.beta.kubernetes.io/aws-load-balancer-private-ipv4-addresses",
        value: ValueType::Ipv4List,
        default: "none",
        applies: Applies::Nlb,
        doc: "Private IPv4 addresses, one per subnet in subnet ID order (internal NLB); a change recreates the NLB.",
    },
    AnnotationDef {
        key: Key::IpAddressType,
        name: "service.beta.kubernetes.io/aws-load-balancer-ip-address-type",
        value: ValueType::OneOf(&["ipv4", "dualstack"]),
        default: "ipv4",
        applies: Applies::Nlb,
        doc: "`dualstack` gives the NLB IPv6 addresses too (its subnets need IPv6 CIDR blocks: a Service whose \
              subnets lack one gets an error naming them, before anything is made); a change is made in \
              place (`SetIpAddressType`). With the default source ranges, the managed security group then also \
              admits `::/0`. Same key and values as the AWS Load Balancer Controller.",
    },
    AnnotationDef {
        key: Key::TargetGroupAttributes,
        name: "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes",
        value: ValueType::TargetGroupAttributes,
        default: "unchanged",
        applies: Applies::NlbRejectedOnClb,
        doc: "`preserve_client_ip.enabled` and `proxy_protocol_v2.enabled` (true/false) on every target group. \
              Client IP preservation cannot be disabled with UDP ports. A key that is no target group attribute \
              AWS documents for NLBs is skipped with a warning, as the Go controller did (unless the cloud \
              config's `ExtraLoadBalancerAttributeKeys` names it). An error on Classic ELB.",
    },
    AnnotationDef {
        key: Key::AllowRecreation,
        name: "service.beta.kubernetes.io/aws-load-balancer-allow-recreation",
        value: ValueType::Bool,
        default: "false (unless the controller runs with `--allow-load-balancer-recreation`)",
        applies: Applies::Both,
        doc: "Consent to replace the load balancer when a change can only be applied to a new one (a scheme \
              change; on an NLB also pinned subnets removed or swapped, EIPs, private addresses, or security \
              groups on an NLB made without). Without it the serving load balancer is kept as it is, everything \
              else is applied in place, and a `LoadBalancerRecreationRequired` Warning Event names what differs; \
              with it the load balancer is recreated (a `RecreatingLoadBalancer` Warning Event; its DNS name \
              changes).",
    },
    AnnotationDef {
        key: Key::AlpnPolicy,
        name: "service.beta.kubernetes.io/aws-load-balancer-alpn-policy",
        value: ValueType::OneOf(ALPN_POLICIES),
        default: "None",
        applies: Applies::Nlb,
        doc: "The ALPN policy of the NLB's TLS listeners (those `aws-load-balancer-ssl-cert` and \
              `aws-load-balancer-ssl-ports` make), changed in place; removing the annotation resets it to \
              `None`. Same key and values as the AWS Load Balancer Controller.",
    },
    AnnotationDef {
        key: Key::LoadBalancerAttributes,
        name: "service.beta.kubernetes.io/aws-load-balancer-attributes",
        value: ValueType::LoadBalancerAttributes,
        default: "unchanged",
        applies: Applies::NlbRejectedOnClb,
        doc: "Attributes of the NLB, set in place. With `deletion_protection.enabled=true` AWS refuses to \
              delete it: deleting the Service then keeps the NLB (and the Service, by its finalizer) with a \
              Warning Event naming deletion protection, until the annotation says \
              `deletion_protection.enabled=false`. \
              `load_balancing.cross_zone.enabled` is the cross-zone annotation's attribute: both with \
              different values is an error (where the AWS Load Balancer Controller lets the specific key win); \
              likewise `access_logs.s3.*` beside the access log annotations. \
              A key removed from the annotation leaves its attribute as it is in AWS (but those two, which \
              go back to their annotations' values). A key AWS does not document for NLBs (an ALB's \
              `idle_timeout.timeout_seconds`, a typo) is an error before anything is made, naming the accepted \
              keys; keys AWS added since can be allowed with the cloud config's \
              `ExtraLoadBalancerAttributeKeys`. Same key and format as the AWS Load Balancer \
              Controller (its origin).",
    },
    AnnotationDef {
        key: Key::ListenerAttributes,
        name: "service.beta.kubernetes.io/aws-load-balancer-listener-attributes.<PROTOCOL>-<port>",
        value: ValueType::ListenerAttributes,
        default: "unchanged",
        applies: Applies::NlbRejectedOnClb,
        doc: "Attributes of the NLB listener of that protocol and port (`TCP-80`), set in place with \
              `ModifyListenerAttributes`: `tcp.idle_timeout.seconds` (TCP listeners, 60 to 6000; AWS's default \
              350). Naming a listener the Service does not have is an error, as is another key (unless the \
              cloud config's `ExtraLoadBalancerAttributeKeys` names it); a key removed from the \
              annotation leaves its attribute as it is in AWS. Same keys and format as the AWS Load Balancer \
              Controller (its origin).",
    },
    AnnotationDef {
        key: Key::LoadBalancerName,
        name: "service.beta.kubernetes.io/aws-load-balancer-name",
        value: ValueType::LoadBalancerName,
        default: "`a` + the Service UID without dashes, 32 characters",
        applies: Applies::Both,
        doc: "The load balancer's name (and so the start of its DNS name) instead of one made of the Service \
              UID. Names are unique per account and region: a name whose load balancer another Service has \
              (its `kubernetes.io/service-name` tag), or that this cluster does not own, is refused with a \
              Warning Event and nothing is touched, and deleting the Service then leaves it alone. A change \
              of the name is a recreation: without consent (`aws-load-balancer-allow-recreation`) the load \
              balancer keeps its name with a `LoadBalancerRecreationRequired` Warning Event; with it the old \
              one is deleted and the new one made (its DNS name changes; traffic stops until the new one \
              serves). Same key and limits as the AWS Load Balancer Controller.",
    },
    AnnotationDef {
        key: Key::Adopt,
        name: "service.beta.kubernetes.io/aws-load-balancer-adopt",
        value: ValueType::Bool,
        default: "false",
        applies: Applies::Both,
        doc: "Consent to adopt the load balancer (NLB or Classic ELB) under the Service's name \
              (`aws-load-balancer-name`, or the UID name) that is handed over to it: tagged `kubernetes.io/hand-over/<cluster ID>=<namespace>/<name>`, by \
              someone with AWS rights on it once no other tool manages it, or by this controller when a \
              deletion released it. Whatever made it (the AWS Load Balancer Controller, another cluster, a \
              template, by hand), it is then tagged as the Service's (and `kubernetes.io/adopted=true`) and \
              managed like one made here; its DNS name, addresses and endpoint services stay (a Classic ELB's \
              groups become the managed group unless the Service gives its own). Without the tag \
              nothing is adopted (an annotation alone proves nothing about a load balancer its author can \
              name), nor is a load balancer this cluster holds for another Service.",
    },
    AnnotationDef {
        key: Key::ReleaseOnDeletion,
        name: "service.beta.kubernetes.io/aws-load-balancer-release-on-deletion",
        value: ValueType::Bool,
        default: "true for an adopted load balancer (tag `kubernetes.io/adopted`), false otherwise",
        applies: Applies::Both,
        doc: "What the Service's deletion does to its load balancer: `true` releases it instead of deleting it: \
              the targets are deregistered and the nodes' rules revoked, this cluster's tags are removed from it \
              (and an NLB's listeners and target groups) and its managed group, which all stay, and it is tagged \
              `kubernetes.io/hand-over/<cluster ID>=<namespace>/<name>`, so that a Service of that name, \
              re-created with `aws-load-balancer-adopt`, gets it back with its DNS name. `false` deletes it.",
    },
];
