//! `ecr-credential-provider`: the kubelet image credential provider for ECR.
//!
//! Reads one `CredentialProviderRequest` (`credentialprovider.kubelet.k8s.io/v1`) on stdin and writes the
//! `CredentialProviderResponse` on stdout; on failure, one line on stderr and exit code 1. Arguments other than
//! `--version` and `--help` (the kubelet passes the provider's `args`) are ignored. AWS is reached through
//! `ccm-aws-sdk` with the default credential chain; `AWS_ENDPOINT_URL` redirects it (tests point it at moto).
//! `AWS_ECR_ROLE_ARN` names the role for service-account tokens whose service account has no
//! `eks.amazonaws.com/ecr-role-arn` annotation. `RUST_LOG` is a level (`warn` by default). See
//! `docs/credential-provider.md`.

use std::{
    io::{Read, Write},
    process::ExitCode,
    time::Duration,
};

use anyhow::Context as _;
use ccm_aws_sdk::{AdapterOptions, EcrAdapter};
use ccm_ecr_credentials::{
    Config, CredentialProvider, CredentialProviderRequest, ROLE_ARN_ENV, Registry, SystemClock,
};
use tracing_subscriber::filter::LevelFilter;

/// Below the kubelet's 60 s exec timeout, so that a hung call is reported by us rather than killed silently.
const DEADLINE: Duration = Duration::from_secs(50);

const USAGE: &str = "usage: ecr-credential-provider [--version] [--help]
Reads a credentialprovider.kubelet.k8s.io/v1 CredentialProviderRequest on stdin and writes the
CredentialProviderResponse with ECR credentials on stdout. Run by the kubelet (--image-credential-provider-config).";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|arg| arg == "--version" || arg == "-V") {
        println!("ecr-credential-provider {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    if args.iter().any(|arg| arg == "--help" || arg == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let level = std::env::var("RUST_LOG")
        .ok()
        .and_then(|level| level.parse().ok())
        .unwrap_or(LevelFilter::WARN);
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_max_level(level)
        .init();

    match run().and_then(|response| {
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(&response)
            .and_then(|()| stdout.flush())
            .context("writing the response to stdout")
    }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // `{:#}` prints the whole chain of causes on one line.
            eprintln!("Error running credential provider plugin: {err:#}");
            ExitCode::from(1)
        }
    }
}

fn run() -> anyhow::Result<Vec<u8>> {
    let mut input = Vec::new();
    std::io::stdin()
        .read_to_end(&mut input)
        .context("reading the request from stdin")?;
    // Validated before any AWS configuration is loaded: a bad request never reaches the network.
    let request = CredentialProviderRequest::from_json(&input)?;
    let registry = Registry::from_image(&request.image)?;
    let config = Config::default().with_default_role_arn(std::env::var(ROLE_ARN_ENV).ok());

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        // The registry's region: no region lookup (profile, IMDS) is needed.
        // Only the ECR and STS clients: the binary then links no EC2 or ELB client (docs/credential-provider.md).
        let adapter =
            EcrAdapter::from_env(Some(registry.region().to_owned()), AdapterOptions::default()).await;
        let provider =
            CredentialProvider::new(adapter.ecr().clone(), adapter.sts().clone(), SystemClock, config);
        let response = tokio::time::timeout(DEADLINE, provider.provide(&request))
            .await
            .with_context(|| format!("no answer from AWS within {}s", DEADLINE.as_secs()))??;
        Ok(response.to_json()?)
    })
}
