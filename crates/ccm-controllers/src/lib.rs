//! The generic controllers of a cloud controller manager, each over any `P: CloudProvider`: cloud-node, node-lifecycle, service and route; and the controller-manager runtime (flags shared by every CCM, leader election and migration, `/healthz`, `/metrics`, Events, shutdown).
//!
//! May depend on: `ccm-cloud-provider`, `kube`, `kube-runtime`, `k8s-openapi`, `tokio`, `tracing`, metrics and HTTP crates. Never on anything AWS.
