//! Test support for the workspace, only ever a dev-dependency (and a dependency of the examples and benches):
//!
//! - [`TestEnv`]: the handle to the real test environment (moto in server mode for AWS, a real kube-apiserver
//!   with etcd for Kubernetes), and [`unique_name`], which gives every test its own object names so that tests
//!   can share one environment;
//! - [`provider::FakeProvider`]: an in-memory `CloudProvider` that records calls and injects failures, for the
//!   generic controllers' tests. It is the only fake here: the AWS ports are faked with the mockall mocks of
//!   `ccm-aws-api` (feature `mock`);
//! - [`fixtures`]: `NodeBuilder` and `ServiceBuilder`, the Nodes and Services tests start from;
//! - [`nodes`] (reading what the CCM did to a Node), [`services`] (LoadBalancer Services and their status) and
//!   [`process`] (a controller process's peak memory and CPU time);
//! - [`FaultProxy`] (AWS faults between a client and moto), [`TcpDelayProxy`] and [`ImdsEmulator`] (IMDSv2 on
//!   loopback);
//! - behind the `aws` feature, moto fixtures built with the AWS SDK: `world` (the one network fixture: a
//!   test's VPC, subnets, internet gateway, security groups, instances and route tables, from one builder, for
//!   the moto tests, the end-to-end tests and the harnesses alike), `ec2` (the client, the AMI, octets and the
//!   cloud config pointing the CCM at moto), `load_balancers` (reading load balancers back), `metrics`
//!   (scraping the CCM's `/metrics`), `lb_world` (the load balancers' moto world over the real adapter, for the
//!   composition's moto tests and the `aws-calls` bench) and `crash` (a hook in front of the AWS ports that
//!   refuses the k-th mutating call, as if the process died just before it).
//!
//! The environment is started by `scripts/testenv.sh up` (the README's test command does it) and reaches
//! tests through `CCM_TEST_*` variables. A test that needs it and does not find it fails with a message that
//! says what is missing: integration tests are never skipped silently.
//!
//! Depends on the contract (`ccm-cloud-provider`, for the fake), `kube` and `k8s-openapi`; the AWS SDK,
//! `aws-config`, the ports, the adapter and the load balancers only behind the `aws` feature, which the crates
//! whose tests talk to moto through the SDK enable (the adapter, the composition, the examples): the domain
//! crates' tests never build the SDK.

#![cfg_attr(
    test,
    allow(
        clippy::too_many_lines,
        reason = "the function limit is for code, not for tests"
    )
)]

#[cfg(feature = "aws")]
pub mod crash;
#[cfg(feature = "aws")]
pub mod ec2;
mod env;
mod fault_proxy;
pub mod fixtures;
mod go_ccm;
mod imds;
#[cfg(feature = "aws")]
pub mod lb_world;
#[cfg(feature = "aws")]
pub mod load_balancers;
#[cfg(feature = "aws")]
pub mod metrics;
mod names;
pub mod nodes;
pub mod process;
pub mod provider;
pub mod services;
mod tcp_proxy;
#[cfg(feature = "aws")]
pub mod world;

pub use env::{Emulator, EnvError, TestEnv};
pub use fault_proxy::{Chaos, ChaosKind, Fault, FaultProxy, Throttling, counts_since, throttling};
pub use go_ccm::{GO_CCM_VAR, GoCcm, GoCcmError, GoCcmOptions, GoCloudConfig};
pub use imds::ImdsEmulator;
pub use names::unique_name;
pub use tcp_proxy::TcpDelayProxy;
