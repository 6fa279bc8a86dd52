//! Start-up checks: what a provider must see agree with the cluster before any controller may write, run each
//! time this process starts leading (so never against a cluster another leader is still changing under it).

use super::*;

/// One check: its name and what it runs.
pub(super) type Check = (
    String,
    Arc<dyn Fn(Client) -> BoxFuture<'static, Result<(), BoxError>> + Send + Sync>,
);

impl Runtime {
    /// Adds a check run before the controllers start, each time this process starts leading (with
    /// `--leader-elect=false` or `--dry-run`, once), with the runtime's Kubernetes client. An error stops the
    /// manager ([`Error::StartCheck`], exit non-zero) before any controller runs: for a setting that must agree
    /// with what the cluster already holds (the AWS provider's `NodeZoneLabel` against the Nodes' zone labels).
    #[must_use]
    pub fn with_start_check<F, Fut>(mut self, name: &str, check: F) -> Self
    where
        F: Fn(Client) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.checks
            .push((name.to_owned(), Arc::new(move |client| Box::pin(check(client)))));
        self
    }

    /// Runs the start-up checks in the order added; the first that fails stops the rest.
    pub(super) async fn run_checks(&self, ctx: &Ctx) -> Result<(), Error> {
        for (name, check) in &self.checks {
            tracing::info!(check = %name, "running start-up check");
            check(ctx.root.clone()).await.map_err(|source| {
                tracing::error!(check = %name, error = %source, "start-up check refused to start the controllers");
                Error::StartCheck {
                    name: name.clone(),
                    source,
                }
            })?;
        }
        Ok(())
    }
}
