//! `sandbox [NODES] [--pause | --compare]`: the CCM at work on a local cluster, every capability in one run
//! (`ccm_harness::sandbox`). `scripts/sandbox.sh` starts the test environment and runs it.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    ccm_harness::sandbox::run().await
}
