use std::sync::Arc;

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};

/// Where the controllers get wall-clock time for the timestamps they write (Events, conditions). Delays use
/// tokio time, so tests pause it; wall-clock time is injected here so that tests can fix it.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> Timestamp + Send + Sync>);

// === impl Clock ===

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Self(Arc::new(Timestamp::now))
    }

    /// A clock that always says `at`.
    pub fn fixed(at: Timestamp) -> Self {
        Self(Arc::new(move || at))
    }

    /// Now, as a Kubernetes `Time`.
    pub fn now(&self) -> Time {
        Time((self.0)())
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Clock").field(&(self.0)()).finish()
    }
}
