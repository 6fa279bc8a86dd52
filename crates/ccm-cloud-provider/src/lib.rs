//! The cloud-provider contract: [`CloudProvider`] and its capability traits ([`InstancesV2`], the legacy
//! [`Instances`] and [`Zones`], [`LoadBalancer`], [`Routes`]), the domain types they speak
//! ([`NodeView`], what the controllers keep of a Node; [`InstanceMetadata`], [`NodeAddress`], [`Route`], [`Zone`],
//! `LoadBalancerStatus`), the error kinds of the
//! upstream sentinels ([`CloudError`]), and provider-ID helpers.
//!
//! This is the Rust counterpart of `k8s.io/cloud-provider`'s `Interface`. A provider implements
//! [`CloudProvider`] and returns `Some` from the accessor of each capability it supports; a capability it does
//! not support names [`Unsupported`] as its associated type and keeps the accessor's default `None`:
//!
//! ```
//! use ccm_cloud_provider::{CloudProvider, Unsupported};
//!
//! struct NoCloud;
//! impl CloudProvider for NoCloud {
//!     type InstancesV2 = Unsupported;
//!     type Instances = Unsupported;
//!     type Zones = Unsupported;
//!     type LoadBalancer = Unsupported;
//!     type Routes = Unsupported;
//!     fn provider_name(&self) -> &str {
//!         "none"
//!     }
//! }
//! assert!(NoCloud.instances_v2().is_none());
//! ```
//!
//! Every async method returns a `Send` future, so the generic controllers can run them on a multi-threaded
//! runtime. Methods take Kubernetes objects by reference and must treat them as read-only.
//!
//! A provider chosen at run time, by `--cloud-provider` name as upstream's `RegisterCloudProvider` allows, goes
//! through [`ProviderRegistry`] and the dyn-compatible facade of [`dynamic`]: [`DynProvider`] is itself a
//! [`CloudProvider`], so the generic controllers run it unchanged.
//!
//! May depend on: `k8s-openapi` types, `thiserror` and `async-trait` (the facade's boxed futures) only. No I/O,
//! nothing AWS, no Kubernetes client.

#![cfg_attr(
    test,
    allow(
        clippy::too_many_lines,
        reason = "the function limit is for code, not for tests"
    )
)]

pub mod dynamic;
mod endpoints;
mod error;
mod instances;
mod load_balancer;
mod node_view;
mod object_key;
mod provider;
mod provider_id;
mod recorded_names;
mod registry;
mod routes;
mod types;

pub use dynamic::{DynCloudProvider, DynProvider};
pub use endpoints::{Backends, Endpoint, EndpointPort, ServiceEndpoints};
pub use error::CloudError;
pub use instances::{Instances, InstancesV2, Zones};
pub use k8s_openapi::api::core::v1::LoadBalancerStatus;
pub use load_balancer::{Drift, Ensured, LoadBalancer, LoadBalancerPlan, Notice};
pub use node_view::{ANNOTATION_PROVIDED_NODE_IP, Labels, NodeConditionView, NodeView};
pub use object_key::{namespaced_key, object_key};
pub use provider::{CloudProvider, Unsupported};
pub use provider_id::{ProviderIdError, format_provider_id, split_provider_id};
pub use recorded_names::{
    ANNOTATION_LOAD_BALANCER_NAMES, default_load_balancer_name, load_balancer_names_with,
    recorded_load_balancer_names,
};
pub use registry::{BoxError, ProviderRegistry, RegistryError};
pub use routes::Routes;
pub use types::{InstanceMetadata, NodeAddress, NodeAddressType, Route, Zone};

/// The result of a provider call.
pub type Result<T, E = CloudError> = std::result::Result<T, E>;

// The README's examples compile (and those without `no_run` run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
