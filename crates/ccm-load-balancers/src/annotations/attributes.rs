//! The values the NLB attribute, listener attribute and ALPN annotations accept: AWS's keys, ranges and
//! policies, as the annotation table and the parsers check them.

/// The name of the listener attribute annotations up to `<PROTOCOL>-<port>`.
pub const LISTENER_ATTRIBUTES_PREFIX: &str =
    "service.beta.kubernetes.io/aws-load-balancer-listener-attributes.";

/// The listener protocols a listener attribute annotation names.
pub const LISTENER_PROTOCOLS: &[&str] = &["TCP", "UDP", "TCP_UDP", "TLS"];

/// The NLB listener attribute of the TCP idle timeout, and AWS's default and range for it.
pub const TCP_IDLE_TIMEOUT: (&str, &str, std::ops::RangeInclusive<i64>) =
    ("tcp.idle_timeout.seconds", "350", 60..=6000);

/// The NLB attributes whose values are checked here (AWS checks the others): key and accepted values.
pub const NLB_ATTRIBUTES: &[(&str, &[&str])] = &[
    ("deletion_protection.enabled", &["true", "false"]),
    ("load_balancing.cross_zone.enabled", &["true", "false"]),
    (
        "dns_record.client_routing_policy",
        &[
            "availability_zone_affinity",
            "partial_availability_zone_affinity",
            "any_availability_zone",
        ],
    ),
    ("ipv6.deny_all_igw_traffic", &["true", "false"]),
    ("zonal_shift.config.enabled", &["true", "false"]),
    ("access_logs.s3.enabled", &["true", "false"]),
];

/// The NLB attribute that keeps AWS from deleting the load balancer.
pub const DELETION_PROTECTION: &str = "deletion_protection.enabled";

/// The accepted values of `aws-load-balancer-alpn-policy` (ELBv2's).
pub const ALPN_POLICIES: &[&str] = &[
    "HTTP1Only",
    "HTTP2Only",
    "HTTP2Optional",
    "HTTP2Preferred",
    "None",
];
