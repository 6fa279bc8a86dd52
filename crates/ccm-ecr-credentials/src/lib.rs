//! The kubelet image credential provider for ECR: the `credentialprovider.kubelet.k8s.io/v1` request and response types, image to registry and region for every partition, and authorization tokens turned into cached credentials.
//!
//! May depend on: `ccm-aws-api` (Ecr and Sts ports), `serde`, `serde_json`. Never on `aws-sdk-*` or other domain crates.
