//! Internal package holding the example binaries (the README's Layout table lists them; docs/getting-started.md
//! shows how to run each).

#![cfg_attr(
    test,
    allow(
        clippy::too_many_lines,
        reason = "the function limit is for code, not for tests"
    )
)]
