//! The service controller's work-queue key, [`ServiceKey`]: a Service (`<namespace>/<name>`) or the cleanup of
//! a previous incarnation of one (`<namespace>/<name>@<uid>`, see `predecessor`). Its text is written in one
//! place ([`Display`](std::fmt::Display), for logs, errors, metrics and dry-run plans) and read in one place
//! ([`FromStr`], for the keys the provider names drifted load balancers by); a key that does not read is a
//! [`BadServiceKey`], never a panic.

use std::{fmt, str::FromStr};

use ccm_cloud_provider::namespaced_key;
use k8s_openapi::api::core::v1::Service;
use kube::runtime::reflector::ObjectRef;

/// What one work-queue entry of the service controller syncs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum ServiceKey {
    /// The Service of this name: its load balancer ensured, or deleted when it goes.
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The load balancer deletion of a previous incarnation of the Service of this name, the one with `uid`.
    Predecessor {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The UID of the previous incarnation.
        uid: String,
    },
}

/// A key that is not `<namespace>/<name>` or `<namespace>/<name>@<uid>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad service work-queue key {key:?}: {reason}")]
pub(super) struct BadServiceKey {
    key: String,
    reason: &'static str,
}

// === impl ServiceKey ===

impl ServiceKey {
    /// The key of `svc`.
    pub(super) fn of(svc: &Service) -> Self {
        Self::Service {
            namespace: svc.metadata.namespace.clone().unwrap_or_default(),
            name: svc.metadata.name.clone().unwrap_or_default(),
        }
    }

    /// The key of the cleanup of `old`, a previous incarnation of the Service named by this key.
    pub(super) fn predecessor(&self, old: &Service) -> Self {
        let (namespace, name) = self.names();
        Self::Predecessor {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            uid: old.metadata.uid.clone().unwrap_or_default(),
        }
    }

    /// What the informer's store holds under this key's name: the Service, or a predecessor's successor.
    pub(super) fn object_ref(&self) -> ObjectRef<Service> {
        let (namespace, name) = self.names();
        ObjectRef::new(name).within(namespace)
    }

    fn names(&self) -> (&str, &str) {
        match self {
            Self::Service { namespace, name } | Self::Predecessor { namespace, name, .. } => {
                (namespace, name)
            }
        }
    }
}

impl fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The provider names Services the same way (`Drift::service`, the service-name tag), so both read alike.
        let (namespace, name) = self.names();
        f.write_str(&namespaced_key(namespace, name))?;
        match self {
            Self::Service { .. } => Ok(()),
            Self::Predecessor { uid, .. } => write!(f, "@{uid}"),
        }
    }
}

/// The key's text, for the `object` an [`Error`](crate::Error) names.
impl From<&ServiceKey> for String {
    fn from(key: &ServiceKey) -> Self {
        key.to_string()
    }
}

impl FromStr for ServiceKey {
    type Err = BadServiceKey;

    /// Reads what [`Display`](fmt::Display) wrote. Names, namespaces and UIDs never contain `/` or `@`, so
    /// either separator out of place means the key was not written by it.
    fn from_str(key: &str) -> Result<Self, Self::Err> {
        let bad = |reason| BadServiceKey {
            key: key.to_owned(),
            reason,
        };
        let (service, uid) = match key.split_once('@') {
            Some((service, uid)) => (service, Some(uid)),
            None => (key, None),
        };
        let (namespace, name) = service.split_once('/').unwrap_or(("", service));
        if name.is_empty() {
            return Err(bad("no name"));
        }
        if name.contains('/') {
            return Err(bad("more than one '/'"));
        }
        if namespace.is_empty() && service.contains('/') {
            return Err(bad("an empty namespace before '/'"));
        }
        let (namespace, name) = (namespace.to_owned(), name.to_owned());
        match uid {
            None => Ok(Self::Service { namespace, name }),
            Some("") => Err(bad("no UID after '@'")),
            Some(uid) if uid.contains(['@', '/']) => Err(bad("'@' or '/' in the UID")),
            Some(uid) => Ok(Self::Predecessor {
                namespace,
                name,
                uid: uid.to_owned(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_back_what_they_write() {
        for text in ["ns/svc", "svc", "ns/svc@uid-1", "svc@uid-1"] {
            let key: ServiceKey = text.parse().unwrap();
            assert_eq!(key.to_string(), text);
        }
        assert_eq!(
            "ns/svc@uid-1".parse::<ServiceKey>().unwrap(),
            ServiceKey::Predecessor {
                namespace: "ns".into(),
                name: "svc".into(),
                uid: "uid-1".into()
            }
        );
    }

    #[test]
    fn bad_keys_are_errors_that_name_them() {
        for text in ["", "ns/", "/svc", "a/b/c", "ns/svc@", "ns/svc@a@b", "ns@uid/svc"] {
            let error = text.parse::<ServiceKey>().expect_err(text);
            assert!(error.to_string().contains(&format!("{text:?}")), "{error}");
        }
    }

    #[test]
    fn a_predecessor_key_names_the_service_it_was() {
        let key: ServiceKey = "ns/svc".parse().unwrap();
        let mut old = Service::default();
        old.metadata.uid = Some("uid-1".into());
        let cleanup = key.predecessor(&old);
        assert_eq!(cleanup.to_string(), "ns/svc@uid-1");
        assert_eq!(cleanup.object_ref(), key.object_ref());
    }
}
