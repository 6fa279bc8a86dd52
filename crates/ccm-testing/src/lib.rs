//! Test support for the workspace: the handle to the real test environment (moto in server mode for AWS, a
//! real kube-apiserver with etcd for Kubernetes), helpers that give every test uniquely named objects so that
//! tests can share one environment, an in-memory `CloudProvider` with failure injection
//! ([`provider::FakeProvider`]), Node fixtures, the AWS fault proxy, a delaying TCP proxy and the IMDS
//! emulator.
//!
//! The environment is started by `scripts/testenv.sh up` (the README's test command does it) and reaches
//! tests through `CCM_TEST_*` variables. A test that needs it and does not find it fails with a message that
//! says what is missing: integration tests are never skipped silently.
//!
//! May depend on: every library crate of the workspace, `kube`, and `aws-config` behind the `aws` feature.
//! Only ever a dev-dependency.

#[cfg(feature = "aws")]
pub mod ec2;
mod env;
mod fault_proxy;
mod imds;
#[cfg(feature = "aws")]
pub mod load_balancers;
#[cfg(feature = "aws")]
pub mod metrics;
mod names;
pub mod nodes;
pub mod provider;
pub mod services;
mod tcp_proxy;
#[cfg(feature = "aws")]
pub mod vpc;

pub use env::{EnvError, TestEnv};
pub use fault_proxy::{Fault, FaultProxy};
pub use imds::ImdsEmulator;
pub use names::unique_name;
pub use tcp_proxy::TcpDelayProxy;
