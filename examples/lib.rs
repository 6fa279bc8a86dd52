//! Internal package holding the example binaries (the README's Layout table lists them; docs/getting-started.md
//! shows how to run each), and what they share: [`cli`], every binary's command line (so that one test checks
//! every flag and docs/flags.md is generated from them, [`flags_doc`]), and [`tools`], what `lb-plan` and
//! `doctor` share (the cluster's client, the cloud config from a file or the chart's ConfigMap, manifests).
//!
//! Its tests, in `tests/`, are the end-to-end tier: each `e2e_*.rs` runs the built binaries
//! (`aws-cloud-controller-manager`, `ecr-credential-provider`, `doctor`, `lb-plan`, `custom-provider`, and the
//! Go controller as a peer in `e2e_go_peer_*.rs`) against moto and the real kube-apiserver. The `deploy_*.rs`
//! files and `docs_links.rs` need no environment: they check the manifests, the Helm chart, the Dockerfiles and
//! the docs against what the repository builds. The folders are modules those files share, not test binaries:
//! `tests/common/` (the CCM process, its AWS world, load balancer readers), `tests/go_peer/` (the Go peer's
//! cluster and what both controllers leave behind, normalised for comparison) and `tests/support/` (rendering
//! the chart and reading the manifests). One file, with the environment up (docs/testing.md):
//! `cargo test --workspace --test e2e_aws_ccm_nlb`.

#![cfg_attr(
    test,
    allow(
        clippy::too_many_lines,
        reason = "the function limit is for code, not for tests"
    )
)]

pub mod cli;
pub mod flags_doc;
pub mod tools;
