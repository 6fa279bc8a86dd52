//! The STS port: role assumption and caller identity.
