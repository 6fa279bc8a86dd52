//! The controller registry: canonical names, the aliases upstream keeps for compatibility, the client (service
//! account) names, and the `--controllers` selection rules.

/// The built-in controllers: (canonical name, alias, client name, `running_managed_controllers` label).
pub(crate) const BUILTIN: &[(&str, &str, &str, &str)] = &[
    (
        "cloud-node-controller",
        "cloud-node",
        "node-controller",
        "cloud-node",
    ),
    (
        "cloud-node-lifecycle-controller",
        "cloud-node-lifecycle",
        "node-controller",
        "cloud-node-lifecycle",
    ),
    (
        "service-lb-controller",
        "service",
        "service-controller",
        "service",
    ),
    ("node-route-controller", "route", "route-controller", "route"),
];

/// Canonical name of the cloud-node controller.
pub(crate) const CLOUD_NODE: &str = "cloud-node-controller";
/// Canonical name of the node-lifecycle controller.
pub(crate) const NODE_LIFECYCLE: &str = "cloud-node-lifecycle-controller";
/// Canonical name of the service controller.
pub(crate) const SERVICE: &str = "service-lb-controller";
/// Canonical name of the route controller.
pub(crate) const ROUTE: &str = "node-route-controller";

/// Names kube-controller-manager used for the same controllers before they were renamed, as they appear in
/// leader-migration configurations (the upstream default configuration among them).
const LEGACY: &[(&str, &str)] = &[("route-controller", ROUTE), ("service-controller", SERVICE)];

/// One known controller.
#[derive(Debug, Clone)]
pub(crate) struct Known {
    pub(crate) name: String,
    pub(crate) alias: Option<String>,
    pub(crate) client_name: String,
    pub(crate) metric_label: String,
    pub(crate) enabled_by_default: bool,
}

/// Every controller a runtime knows: the built-ins plus the provider's own.
#[derive(Debug, Clone)]
pub(crate) struct Registry {
    known: Vec<Known>,
}

impl Registry {
    pub(crate) fn builtin() -> Self {
        Self {
            known: BUILTIN
                .iter()
                .map(|(name, alias, client, label)| Known {
                    name: (*name).to_owned(),
                    alias: Some((*alias).to_owned()),
                    client_name: (*client).to_owned(),
                    metric_label: (*label).to_owned(),
                    enabled_by_default: true,
                })
                .collect(),
        }
    }

    /// Adds a provider controller. Its client name is `<name>-controller` unless the name already ends in
    /// `-controller` (the AWS `tagging` controller uses client `tagging-controller`, as upstream).
    pub(crate) fn add(&mut self, name: &str, enabled_by_default: bool) {
        let client_name = if name.ends_with("-controller") {
            name.to_owned()
        } else {
            format!("{name}-controller")
        };
        self.known.retain(|k| k.name != name);
        self.known.push(Known {
            name: name.to_owned(),
            alias: None,
            client_name,
            metric_label: name.to_owned(),
            enabled_by_default,
        });
    }

    pub(crate) fn known(&self) -> &[Known] {
        &self.known
    }

    pub(crate) fn get(&self, canonical: &str) -> Option<&Known> {
        self.known.iter().find(|k| k.name == canonical)
    }

    /// The canonical name of `name` (itself or an alias).
    pub(crate) fn canonical(&self, name: &str) -> Option<&str> {
        self.known
            .iter()
            .find(|k| k.name == name || k.alias.as_deref() == Some(name))
            .map(|k| k.name.as_str())
    }

    /// The canonical name of a name found in a leader-migration configuration: canonical names, aliases and the
    /// names kube-controller-manager used before (`route-controller`, `service-controller`).
    pub(crate) fn migration_canonical(&self, name: &str) -> Option<&str> {
        self.canonical(name).or_else(|| {
            LEGACY
                .iter()
                .find(|(old, _)| *old == name)
                .and_then(|(_, new)| self.canonical(new))
        })
    }

    /// The names `--controllers` accepts, for error messages.
    pub(crate) fn accepted(&self) -> String {
        let mut names: Vec<String> = vec!["*".to_owned()];
        for k in &self.known {
            names.push(k.name.clone());
            if let Some(alias) = &k.alias {
                names.push(alias.clone());
            }
        }
        names.join(", ")
    }

    /// Problems with a `--controllers` list: entries that are neither `*` nor a known name (optionally with `-`).
    pub(crate) fn validate(&self, list: &[String]) -> Vec<String> {
        list.iter()
            .filter(|entry| {
                let entry = entry.trim();
                let name = entry.strip_prefix('-').unwrap_or(entry);
                entry != "*" && self.canonical(name).is_none()
            })
            .map(|entry| {
                format!(
                    "--controllers: {entry:?} is not in the list of known controllers (accepted: {}, each \
                     optionally prefixed with '-' to disable it)",
                    self.accepted()
                )
            })
            .collect()
    }

    /// Whether `canonical` runs under `list` (upstream `IsControllerEnabled`): the first entry naming it (or its
    /// alias) decides, `name` enables and `-name` disables; otherwise it runs if `*` is present and it is enabled
    /// by default.
    pub(crate) fn is_enabled(&self, list: &[String], canonical: &str) -> bool {
        let mut star = false;
        for entry in list {
            let entry = entry.trim();
            if entry == "*" {
                star = true;
                continue;
            }
            let (disable, name) = match entry.strip_prefix('-') {
                Some(name) => (true, name),
                None => (false, entry),
            };
            if self.canonical(name) == Some(canonical) {
                return !disable;
            }
        }
        star && self.get(canonical).is_some_and(|k| k.enabled_by_default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn names_follow_the_upstream_pattern() {
        for (name, ..) in BUILTIN {
            assert!(name.ends_with("-controller"), "{name}");
            assert!(
                name.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                    && !name.starts_with('-')
                    && !name.ends_with('-'),
                "{name}"
            );
        }
    }

    #[test]
    fn selection_rules() {
        let mut r = Registry::builtin();
        r.add("tagging", false);
        let star = list(&["*"]);
        assert!(r.is_enabled(&star, SERVICE));
        assert!(!r.is_enabled(&star, "tagging"), "disabled by default");
        assert!(r.is_enabled(&list(&["*", "tagging"]), "tagging"));
        assert!(!r.is_enabled(&list(&["*", "-route"]), ROUTE), "alias with -");
        assert!(!r.is_enabled(&list(&["*", "-node-route-controller"]), ROUTE));
        assert!(
            r.is_enabled(&list(&["route", "-route"]), ROUTE),
            "first match wins"
        );
        assert!(!r.is_enabled(&list(&["-route", "route"]), ROUTE));
        assert!(
            !r.is_enabled(&list(&["service"]), ROUTE),
            "no star: only named ones"
        );
        assert!(r.is_enabled(&list(&["service"]), SERVICE));
        assert!(!r.is_enabled(&list(&[]), SERVICE));
    }

    #[test]
    fn validation_names_unknown_entries() {
        let mut r = Registry::builtin();
        assert!(
            r.validate(&list(&["*", "-route", "cloud-node-controller"]))
                .is_empty()
        );
        let errs = r.validate(&list(&["*", "tagging", "-bogus"]));
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].contains("\"tagging\" is not in the list of known controllers"));
        assert!(errs[0].contains("service-lb-controller, service"));
        r.add("tagging", false);
        assert_eq!(r.validate(&list(&["*", "tagging", "-bogus"])).len(), 1);
        assert!(r.accepted().contains("tagging"));
        assert_eq!(
            r.get("tagging").map(|k| k.client_name.as_str()),
            Some("tagging-controller")
        );
    }

    #[test]
    fn migration_names_include_the_old_ones() {
        let r = Registry::builtin();
        assert_eq!(r.migration_canonical("route-controller"), Some(ROUTE));
        assert_eq!(r.migration_canonical("service-controller"), Some(SERVICE));
        assert_eq!(r.migration_canonical("route"), Some(ROUTE));
        assert_eq!(
            r.migration_canonical("cloud-node-lifecycle-controller"),
            Some(NODE_LIFECYCLE)
        );
        assert_eq!(r.migration_canonical("node-ipam-controller"), None);
    }
}
