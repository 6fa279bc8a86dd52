//! The project's harnesses, an internal package that is never published nor shipped: the sandbox (the README's
//! main command), the scale harness (docs/performance.md) and the chaos soak (docs/reliability.md). Each is a
//! module with a `run` function that its binary in `src/bin/` calls; their end-to-end tests are in `tests/`.
//!
//! They drive the shipped binaries of the `ccm-examples` package (`aws-cloud-controller-manager`, `lb-plan`,
//! `doctor`, `custom-provider`) as processes found next to their own executable, against the real test
//! environment (`scripts/testenv.sh`). `cargo test --workspace --no-run`, the test command's first build, builds
//! both packages' binaries into the same directory.
//!
//! Tests: unit tests sit beside the code in `src/` (the scale figures and cluster, the soak's plans and members),
//! without an environment; `tests/e2e_*.rs` are end to end (the sandbox binary against the test environment).
//! The scale harness and the soak are not tests but commands whose full runs write their tables into docs/
//! (docs/performance.md, docs/reliability.md); a short smoke run of each is a step of the test command.

#![cfg_attr(
    test,
    allow(
        clippy::too_many_lines,
        reason = "the function limit is for code, not for tests"
    )
)]

pub mod sandbox;
pub mod scale;
pub mod soak;
