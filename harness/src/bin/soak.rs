//! `soak`: randomized Service lifecycles under AWS faults, kills and leader changes; exit status 1 on any problem
//! (`ccm_harness::soak`).

#[tokio::main]
async fn main() -> anyhow::Result<std::process::ExitCode> {
    ccm_harness::soak::run().await
}
