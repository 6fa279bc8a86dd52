//! The adapter: implements the `ccm-aws-api` ports on aws-sdk-rust. Paginators, error-code mapping, retries with jitter, client-side rate limits, per-call metrics, endpoint overrides, IMDSv2, role assumption and request batching live here and only here.
//!
//! May depend on: `ccm-aws-api`, `aws-config`, `aws-sdk-*`, `tokio`, `tracing`. It is the only crate that names `aws-sdk-*` or `aws-config`.
