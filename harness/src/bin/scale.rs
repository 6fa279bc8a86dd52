//! `scale`: the release `aws-cloud-controller-manager` at scale beside the upstream call pattern; prints figures
//! and writes them into docs/performance.md (`ccm_harness::scale`).

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    ccm_harness::scale::run().await
}
