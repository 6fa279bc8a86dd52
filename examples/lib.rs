//! Internal package holding the example binaries (the README's Layout table lists them; docs/getting-started.md
//! shows how to run each).
