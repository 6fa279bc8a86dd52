//! The command lines of the binaries, here rather than in each binary so that the tests and the generated
//! docs/flags.md see every flag: [`commands`] lists each binary's `clap::Command`.

pub mod aws_ccm;
mod configmap;
pub mod doctor;
pub mod lb_plan;

pub use configmap::ConfigMapRef;

use ccm_controller_manager::Options;
use clap::CommandFactory;

/// `custom-provider`: the runtime's flags only (examples/custom_provider.rs).
#[derive(Debug, clap::Parser)]
#[command(
    name = "custom-provider",
    about = "A cloud controller manager for an in-memory cloud",
    long_about = None
)]
pub struct CustomProviderCli {
    /// The runtime's flags.
    #[command(flatten)]
    pub manager: Options,
}

/// Every binary's command line (ecr-credential-provider, run by the kubelet, takes none but --help and
/// --version), so that a check over them covers a flag added to any.
pub fn commands() -> Vec<clap::Command> {
    vec![
        aws_ccm::Cli::command(),
        CustomProviderCli::command(),
        lb_plan::Cli::command(),
        doctor::Cli::command(),
    ]
}

#[cfg(test)]
mod tests;
