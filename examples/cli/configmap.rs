//! `--cloud-config-configmap NAMESPACE/NAME` of lb-plan and doctor.

/// A ConfigMap named on the command line, `NAMESPACE/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigMapRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl ConfigMapRef {
    /// `NAMESPACE/NAME`, both non-empty.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.split_once('/') {
            Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(Self {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                })
            }
            _ => Err(format!(
                "{text:?} is not NAMESPACE/NAME (example: kube-system/aws-cloud-controller-manager-cloud-config)"
            )),
        }
    }
}

impl std::fmt::Display for ConfigMapRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}
