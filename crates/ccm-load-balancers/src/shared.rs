//! Pieces shared by both flavours, one concern a module: [`names`] (names and tags), [`config`] (the cluster
//! configuration), [`subnets`] (subnet discovery), [`security_groups`] (group rules, managed groups, node
//! groups) and [`targets`] (target instances). Everything is re-exported here.

pub mod config;
pub mod names;
pub(crate) mod neighbours;
pub mod security_groups;
pub mod subnets;
pub mod targets;

pub use config::{HealthProbeMode, LoadBalancerConfig};
pub use names::{
    ADOPTED_TAG, ANNOTATION_TAGS_MARKER, HAND_OVER_TAG_PREFIX, SERVICE_NAME_TAG, SERVICE_UID_TAG,
    UPSTREAM_TAGS_MARKER, all_names, dropped_tags, hand_over_key, is_load_balancer_name, load_balancer_name,
    load_balancer_tags, names_in_hostname, network_load_balancer_tags, recreation_notice,
    recreation_withheld_notice, released_keys, renamed_from, scheme, security_group_description,
    security_group_name, security_group_tags, service_load_balancer_name, status_names, tag_additions,
    wanted_name,
};
pub use security_groups::{
    GroupDiff, GroupRef, ManagedGroup, Rule, add_source, authorize_idempotent, check_managed_group,
    check_prefix_lists, create_or_adopt_group, find_group, instance_group, is_group_source,
    is_prefix_list_source, load_balancer_ingress, observed_rules, retag_group, revoke_idempotent,
};
pub use subnets::{
    ROLE_ELB_TAG, ROLE_INTERNAL_ELB_TAG, is_public, resolve_subnets, resolve_subnets_and_ipv6, select_subnets,
};
pub(crate) use targets::target_key;
pub use targets::{node_instance_id, target_instances};

#[cfg(test)]
mod tests;
