use crate::OptionsError;

/// Why the controller manager stopped or could not start. Every variant names what to fix; the binary should
/// log it and exit non-zero.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The flags are invalid: fix the flags listed.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// `--cloud-provider` names another provider than the one this binary is built with.
    #[error("unknown cloud provider {given:?}: this binary serves only --cloud-provider={expected}")]
    ProviderMismatch {
        /// The flag's value.
        given: String,
        /// The provider's name.
        expected: String,
    },
    /// The leader-migration configuration is unusable: fix the file named by `--leader-migration-config`.
    #[error("invalid --leader-migration-config {path}: {reason}")]
    Migration {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The Kubernetes client could not be built or authenticated: check `--kubeconfig`/`--master` and RBAC.
    #[error("{context}")]
    Kube {
        /// What was being done.
        context: &'static str,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The HTTPS server could not start: check `--bind-address`, `--secure-port` and the TLS flags.
    #[error("secure serving: {0}")]
    Serving(String),
    /// Logging was already initialized in this process.
    #[error("logging is already initialized: call init_logging once, before anything logs")]
    Logging,
    /// Another holder took a lease this process led (a lapse, the renew deadline missed, is not an error: the
    /// runtime stops the controllers and rejoins the election); the process must exit so that it restarts as a
    /// candidate (upstream exits with status 1).
    #[error("leader election lost on lease {lease}: {reason}")]
    LeaderElectionLost {
        /// `namespace/name` of the lease.
        lease: String,
        /// Why.
        reason: String,
    },
    /// A start-up check ([`Runtime::with_start_check`](crate::Runtime::with_start_check)) refused: the cluster
    /// holds something the configuration contradicts; the cause names what to change.
    #[error("start-up check {name} refused to start the controllers")]
    StartCheck {
        /// The check's name.
        name: String,
        /// What it found.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A controller failed to start or stopped with an error.
    #[error("controller {name} failed")]
    Controller {
        /// Its canonical name.
        name: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}
