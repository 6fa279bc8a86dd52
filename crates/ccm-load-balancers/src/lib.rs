//! Service load balancers on AWS (Classic ELB and NLB): annotations parsed once into a typed spec, then a pure desired model, a pure ordered plan against the observed AWS state, and an apply step that alone calls AWS.
//!
//! May depend on: `ccm-cloud-provider`, `ccm-aws-api`, `ccm-tagging`, `k8s-openapi`. Never on `aws-sdk-*`, `kube` clients or other domain crates.
