//! Well-known keys the controllers read and write (the reference's section 7).

/// Taint the kubelet puts on a node registered with `--cloud-provider=external`; matched by key only.
pub const TAINT_UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// Taint (effect `NoSchedule`, no value) on NotReady nodes whose instance is shut down.
pub const TAINT_SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
/// Taint of nodes the cluster autoscaler is about to delete; such nodes leave load balancers.
pub const TAINT_TO_BE_DELETED: &str = "ToBeDeletedByClusterAutoscaler";
/// Annotation with the kubelet's `--node-ip` (one IP, or a dual-stack pair).
pub const ANNOTATION_PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";
/// Finalizer of Services whose load balancer this controller manages.
pub const FINALIZER_LB_CLEANUP: &str = "service.kubernetes.io/load-balancer-cleanup";
/// Label that takes a node out of external load balancers (`true`, or any value that is not a boolean).
pub const LABEL_EXCLUDE_FROM_LB: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
/// Instance type label (GA).
pub const LABEL_INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// Instance type label (beta; the source of truth for label reconciliation).
pub const LABEL_INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";
/// Zone label (GA).
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
/// Zone label (beta).
pub const LABEL_ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
/// Region label (GA).
pub const LABEL_REGION: &str = "topology.kubernetes.io/region";
/// Region label (beta).
pub const LABEL_REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";
/// Node condition the route controller owns.
pub const CONDITION_NETWORK_UNAVAILABLE: &str = "NetworkUnavailable";
