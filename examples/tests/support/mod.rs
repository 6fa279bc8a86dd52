//! What the deployment tests share: the Helm chart rendered as `helm template` renders it (`helm`), and the
//! manifests' YAML, `kubectl kustomize`, server-side-apply dry runs and RBAC rules (`manifests`). Each test crate
//! uses part of it.

pub mod helm;
pub mod manifests;
