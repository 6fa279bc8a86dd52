//! Leader migration (`--enable-leader-migration`, `--leader-migration-config`): the
//! `controllermanager.config.k8s.io` `LeaderMigrationConfiguration` (v1alpha1, v1beta1, v1), decoded strictly and
//! validated as upstream, and the filter that sorts controllers into non-migrated, migrated and unowned.

use serde::Deserialize;

use crate::controllers::Registry;

/// The group of the configuration type.
const GROUP: &str = "controllermanager.config.k8s.io";
/// The component name controllers are assigned to for this manager.
pub(crate) const COMPONENT: &str = "cloud-controller-manager";

/// A decoded and validated leader-migration configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationConfig {
    /// The name of the migration Lease (in the leader-election namespace).
    pub leader_name: String,
    /// The lock type; always `leases` once validated for use.
    pub resource_lock: String,
    /// (controller name, component) pairs.
    pub controller_leaders: Vec<(String, String)>,
}

/// Where a controller runs under migration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Not listed: started under the main lease only.
    NonMigrated,
    /// Listed for this component (or `*`): started once the migration lease is held too.
    Migrated,
    /// Listed for another component: never started here.
    Unowned,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct V1Beta1 {
    #[allow(dead_code)]
    api_version: String,
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    leader_name: String,
    #[serde(default)]
    resource_lock: String,
    #[serde(default)]
    controller_leaders: Vec<Leader>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct V1 {
    #[allow(dead_code)]
    api_version: String,
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    leader_name: String,
    #[serde(default)]
    controller_leaders: Vec<Leader>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Leader {
    #[serde(default)]
    name: String,
    #[serde(default)]
    component: String,
}

// === impl MigrationConfig ===

impl MigrationConfig {
    /// Upstream's default configuration (used when `--leader-migration-config` is empty).
    pub fn default_config() -> Self {
        Self {
            leader_name: "cloud-provider-extraction-migration".to_owned(),
            resource_lock: "leases".to_owned(),
            controller_leaders: [
                "route-controller",
                "service-controller",
                "cloud-node-lifecycle-controller",
            ]
            .into_iter()
            .map(|n| (n.to_owned(), "*".to_owned()))
            .collect(),
        }
    }

    /// Decodes (strictly: unknown or duplicate fields are errors) and validates a configuration file's text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let meta: TypeMeta =
            serde_saphyr::from_str(text).map_err(|e| format!("not a YAML or JSON object: {e}"))?;
        if meta.kind != "LeaderMigrationConfiguration" {
            return Err(format!(
                "kind is {:?}, expected LeaderMigrationConfiguration",
                meta.kind
            ));
        }
        let leaders = |l: Vec<Leader>| l.into_iter().map(|l| (l.name, l.component)).collect();
        let config = match meta
            .api_version
            .strip_prefix(GROUP)
            .and_then(|v| v.strip_prefix('/'))
        {
            Some("v1alpha1" | "v1beta1") => {
                let c: V1Beta1 =
                    serde_saphyr::from_str(text).map_err(|e| format!("strict decoding failed: {e}"))?;
                Self {
                    leader_name: c.leader_name,
                    resource_lock: c.resource_lock,
                    controller_leaders: leaders(c.controller_leaders),
                }
            }
            Some("v1") => {
                let c: V1 =
                    serde_saphyr::from_str(text).map_err(|e| format!("strict decoding failed: {e}"))?;
                Self {
                    leader_name: c.leader_name,
                    resource_lock: "leases".to_owned(),
                    controller_leaders: leaders(c.controller_leaders),
                }
            }
            _ => {
                return Err(format!(
                    "apiVersion {:?} is not supported (accepted: {GROUP}/v1alpha1, {GROUP}/v1beta1, {GROUP}/v1)",
                    meta.api_version
                ));
            }
        };
        config.validate()?;
        Ok(config)
    }

    /// Upstream's validation rules, plus: only `leases` can be used as a lock here.
    fn validate(&self) -> Result<(), String> {
        let mut p = Vec::new();
        if self.leader_name.is_empty() {
            p.push("leaderName is required".to_owned());
        }
        match self.resource_lock.as_str() {
            "leases" => {}
            "endpoints" => p.push(
                "resourceLock endpoints is not supported by this manager (accepted: leases)".to_owned(),
            ),
            other => p.push(format!("resourceLock {other:?} is invalid (accepted: leases)")),
        }
        for (i, (name, component)) in self.controller_leaders.iter().enumerate() {
            if name.is_empty() {
                p.push(format!("controllerLeaders[{i}].name is required"));
            }
            if component.is_empty() {
                p.push(format!("controllerLeaders[{i}].component is required"));
            }
        }
        if p.is_empty() { Ok(()) } else { Err(p.join("; ")) }
    }

    /// Where the controller `canonical` runs. Names in the configuration are matched by canonical name, alias and
    /// kube-controller-manager's former names, so the default configuration's `route-controller` and
    /// `service-controller` do select this manager's route and service controllers (upstream compares canonical
    /// names only, and its default configuration migrates just the node-lifecycle controller).
    pub(crate) fn placement(&self, registry: &Registry, canonical: &str) -> Placement {
        let listed = self
            .controller_leaders
            .iter()
            .find(|(name, _)| registry.migration_canonical(name) == Some(canonical));
        match listed {
            None => Placement::NonMigrated,
            Some((_, component)) if component == "*" || component == COMPONENT => Placement::Migrated,
            Some(_) => Placement::Unowned,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::{CLOUD_NODE, NODE_LIFECYCLE, ROUTE, SERVICE};

    #[test]
    fn default_config_migrates_route_service_and_lifecycle() {
        let r = Registry::builtin();
        let c = MigrationConfig::default_config();
        assert_eq!(c.placement(&r, ROUTE), Placement::Migrated);
        assert_eq!(c.placement(&r, SERVICE), Placement::Migrated);
        assert_eq!(c.placement(&r, NODE_LIFECYCLE), Placement::Migrated);
        assert_eq!(c.placement(&r, CLOUD_NODE), Placement::NonMigrated);
    }

    #[test]
    fn versions_decode_strictly() {
        let v1 = "kind: LeaderMigrationConfiguration\napiVersion: controllermanager.config.k8s.io/v1\n\
                  leaderName: cloud-provider-extraction-migration\ncontrollerLeaders:\n  - name: route\n    \
                  component: '*'\n  - name: service\n    component: kube-controller-manager\n";
        let c = MigrationConfig::parse(v1).unwrap();
        assert_eq!(c.resource_lock, "leases");
        let r = Registry::builtin();
        assert_eq!(c.placement(&r, ROUTE), Placement::Migrated);
        assert_eq!(c.placement(&r, SERVICE), Placement::Unowned);
        let beta = "kind: LeaderMigrationConfiguration\napiVersion: controllermanager.config.k8s.io/v1beta1\n\
                    leaderName: m\nresourceLock: leases\ncontrollerLeaders:\n  - name: cloud-node-lifecycle\n    \
                    component: cloud-controller-manager\n";
        assert_eq!(
            MigrationConfig::parse(beta)
                .unwrap()
                .placement(&r, NODE_LIFECYCLE),
            Placement::Migrated
        );
        let json = r#"{"kind":"LeaderMigrationConfiguration","apiVersion":"controllermanager.config.k8s.io/v1alpha1","leaderName":"m","resourceLock":"leases","controllerLeaders":[]}"#;
        assert!(MigrationConfig::parse(json).is_ok());
    }

    #[test]
    fn invalid_configs_are_explained() {
        let head = "kind: LeaderMigrationConfiguration\n";
        let cases = [
            (
                "kind: Other\napiVersion: controllermanager.config.k8s.io/v1\n",
                "expected LeaderMigrationConfiguration",
            ),
            (
                &format!("{head}apiVersion: controllermanager.config.k8s.io/v2\n"),
                "is not supported",
            ),
            (
                &format!(
                    "{head}apiVersion: controllermanager.config.k8s.io/v1\nleaderName: m\nresourceLock: leases\n"
                ),
                "strict decoding failed",
            ),
            (
                &format!("{head}apiVersion: controllermanager.config.k8s.io/v1\nleaderName: m\nbogus: 1\n"),
                "strict decoding failed",
            ),
            (
                &format!("{head}apiVersion: controllermanager.config.k8s.io/v1\ncontrollerLeaders: []\n"),
                "leaderName is required",
            ),
            (
                &format!(
                    "{head}apiVersion: controllermanager.config.k8s.io/v1beta1\nleaderName: m\nresourceLock: configmaps\n"
                ),
                "resourceLock \"configmaps\" is invalid",
            ),
            (
                &format!(
                    "{head}apiVersion: controllermanager.config.k8s.io/v1beta1\nleaderName: m\nresourceLock: endpoints\n"
                ),
                "endpoints is not supported",
            ),
            (
                &format!(
                    "{head}apiVersion: controllermanager.config.k8s.io/v1\nleaderName: m\ncontrollerLeaders:\n  - name: route\n"
                ),
                "controllerLeaders[0].component is required",
            ),
            (
                &format!(
                    "{head}apiVersion: controllermanager.config.k8s.io/v1\nleaderName: m\ncontrollerLeaders:\n  - component: '*'\n"
                ),
                "controllerLeaders[0].name is required",
            ),
        ];
        for (text, want) in cases {
            let err = MigrationConfig::parse(text).unwrap_err();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }
}
