//! Providers by name, chosen at run time: the counterpart of upstream's `cloudprovider.RegisterCloudProvider`
//! and `InitCloudProvider`, for a distribution that serves several clouds from one binary.

use std::{collections::BTreeMap, future::Future, pin::Pin};

use crate::{CloudProvider, DynProvider};

/// Why a provider could not be made.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

type ProviderFuture = Pin<Box<dyn Future<Output = Result<DynProvider, BoxError>> + Send>>;
type Factory = Box<dyn Fn(Option<String>) -> ProviderFuture + Send + Sync>;

/// Provider factories by `--cloud-provider` name.
///
/// A factory gets the cloud configuration's content (the `--cloud-config` file, read by the caller; `None`
/// without one), as upstream's factories get a reader of it.
///
/// ```
/// use ccm_cloud_provider::{CloudProvider, ProviderRegistry, Unsupported};
///
/// struct NoCloud;
/// impl CloudProvider for NoCloud {
///     type InstancesV2 = Unsupported;
///     type Instances = Unsupported;
///     type Zones = Unsupported;
///     type LoadBalancer = Unsupported;
///     type Routes = Unsupported;
///     fn provider_name(&self) -> &str {
///         "nocloud"
///     }
/// }
///
/// let mut registry = ProviderRegistry::new();
/// registry.register("nocloud", |_config| async { Ok(NoCloud) }).unwrap();
/// let provider = futures_lite_block_on(registry.init("nocloud", None)).unwrap();
/// assert_eq!(provider.provider_name(), "nocloud");
///
/// let unknown = futures_lite_block_on(registry.init("other", None)).unwrap_err();
/// assert_eq!(unknown.to_string(), "unknown cloud provider \"other\": this binary knows nocloud");
/// # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     // The factories above never wait, so one poll finishes them.
/// #     let waker = std::task::Waker::noop();
/// #     let mut cx = std::task::Context::from_waker(waker);
/// #     match std::pin::pin!(f).poll(&mut cx) {
/// #         std::task::Poll::Ready(out) => out,
/// #         std::task::Poll::Pending => panic!("pending"),
/// #     }
/// # }
/// ```
#[derive(Default)]
pub struct ProviderRegistry {
    factories: BTreeMap<String, Factory>,
}

/// What [`ProviderRegistry`] refuses.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// No provider of that name is registered.
    #[error("unknown cloud provider {name:?}: this binary knows {}", known_names(known))]
    Unknown {
        /// The name asked for.
        name: String,
        /// The registered names, sorted.
        known: Vec<String>,
    },
    /// The name is registered already.
    #[error("cloud provider {name:?} is registered twice")]
    Duplicate {
        /// The name.
        name: String,
    },
    /// The factory failed.
    #[error("cloud provider {name:?} could not be initialized: {source}")]
    Init {
        /// The provider's name.
        name: String,
        /// The factory's error.
        source: BoxError,
    },
    /// The provider made calls itself by another name, which its provider IDs would carry.
    #[error("cloud provider registered as {registered:?} calls itself {reported:?}")]
    NameMismatch {
        /// The name it is registered under.
        registered: String,
        /// Its [`CloudProvider::provider_name`].
        reported: String,
    },
}

fn known_names(known: &[String]) -> String {
    if known.is_empty() {
        "no provider".to_owned()
    } else {
        known.join(", ")
    }
}

impl std::fmt::Debug for ProviderRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderRegistry")
            .field("names", &self.factories.keys())
            .finish()
    }
}

// === impl ProviderRegistry ===

impl ProviderRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the factory of the provider called `name` (its [`CloudProvider::provider_name`]).
    pub fn register<F, Fut, P>(&mut self, name: &str, factory: F) -> Result<&mut Self, RegistryError>
    where
        F: Fn(Option<String>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<P, BoxError>> + Send + 'static,
        P: CloudProvider,
    {
        if self.factories.contains_key(name) {
            return Err(RegistryError::Duplicate {
                name: name.to_owned(),
            });
        }
        let factory: Factory = Box::new(move |config| {
            let made = factory(config);
            Box::pin(async move { made.await.map(DynProvider::new) })
        });
        self.factories.insert(name.to_owned(), factory);
        Ok(self)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.factories.keys().map(String::as_str)
    }

    /// Makes the provider called `name` from the cloud configuration's content.
    pub async fn init(&self, name: &str, config: Option<String>) -> Result<DynProvider, RegistryError> {
        let Some(factory) = self.factories.get(name) else {
            let known = self.factories.keys().cloned().collect();
            return Err(RegistryError::Unknown {
                name: name.to_owned(),
                known,
            });
        };
        let provider = factory(config).await.map_err(|source| RegistryError::Init {
            name: name.to_owned(),
            source,
        })?;
        if provider.provider_name() != name {
            return Err(RegistryError::NameMismatch {
                registered: name.to_owned(),
                reported: provider.provider_name().to_owned(),
            });
        }
        Ok(provider)
    }
}
