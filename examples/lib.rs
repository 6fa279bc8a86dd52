//! Internal package holding the example binaries; see `examples/README.md`.
