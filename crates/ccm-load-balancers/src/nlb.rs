//! Network Load Balancers with instance targets: the desired model, the observed state, the ordered plan and the
//! apply step (the only one that changes AWS), like [`crate::classic`].
//!
//! [`node_rules`]: the rules an NLB needs on the nodes' security groups.

pub mod node_rules;
