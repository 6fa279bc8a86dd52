//! Cluster ownership tags: the rules for `kubernetes.io/cluster/<id>` (`owned` or `shared`) and the legacy `KubernetesCluster` tag, ownership checks made before any mutation, tag diffs that ignore `aws:` keys, and the tagging controller.
//!
//! May depend on: `std`, `thiserror`, `serde`; the controller part on `ccm-aws-api` ports and `kube`. Never on `aws-sdk-*` or other domain crates.
