//! Internal package holding the benchmarks (the scale harness is in `harness/src/scale/`). Each benchmark prints
//! its figures (AWS and Kubernetes calls counted, wall time as a ratio to a baseline measured in the same run);
//! none asserts on time.

#![cfg_attr(
    test,
    allow(
        clippy::too_many_lines,
        reason = "the function limit is for code, not for tests"
    )
)]
