//! The cloud-provider contract: `CloudProvider` and its capability traits (InstancesV2, Instances, LoadBalancer, Routes, Zones), the domain types they speak (`InstanceMetadata`, `NodeAddress`, `Route`, `LoadBalancerStatus`, ...), error kinds for the upstream sentinels, and provider-ID helpers.
//!
//! May depend on: `k8s-openapi` types and `thiserror` only. No I/O, nothing AWS, no Kubernetes client.
