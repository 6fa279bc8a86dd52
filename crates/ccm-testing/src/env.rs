use std::{path::PathBuf, sync::OnceLock};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Why the test environment could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnvError {
    /// A `CCM_TEST_*` variable is not set: the environment was not started for this process.
    #[error(
        "{var} is not set: the integration test environment is not running. Run `scripts/test.sh` \
         (or `scripts/testenv.sh up` and source the printed directory's `env` file)"
    )]
    Missing {
        /// The variable that is missing.
        var: &'static str,
    },
    /// The kubeconfig written by `testenv.sh` could not be read or used.
    #[error("the test kubeconfig {path} is unusable")]
    Kubeconfig {
        /// Path of the kubeconfig.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The AWS emulator did not accept a request.
    #[error("the AWS emulator at {endpoint} failed: {detail}")]
    Moto {
        /// The emulator's endpoint.
        endpoint: String,
        /// What happened.
        detail: String,
    },
}

/// Where the shared test environment runs. One per process, read from the `CCM_TEST_*` variables that
/// `scripts/testenv.sh` writes.
#[derive(Debug, Clone)]
pub struct TestEnv {
    /// The kubeconfig for the test apiserver (token auth, `system:masters`).
    pub kubeconfig: PathBuf,
    /// The apiserver's URL.
    pub kube_apiserver: String,
    /// The AWS emulator's endpoint, for every AWS service.
    pub aws_endpoint: String,
    /// The region the tests use.
    pub aws_region: String,
    /// Which emulator answers at `aws_endpoint` (`CCM_TEST_AWS_EMULATOR`, moto when unset).
    pub emulator: Emulator,
}

/// The AWS emulators the tests run against (docs/testing.md, "Two emulators").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Emulator {
    /// moto in server mode, with the answers `scripts/moto-server.py` changes: every AWS service the
    /// controller uses.
    Moto,
    /// ministack as shipped: EC2, ELBv2, ECR and STS (no Classic ELB).
    Ministack,
}

// === impl Emulator ===

impl Emulator {
    /// The emulator named by `CCM_TEST_AWS_EMULATOR` (`moto` or `ministack`; moto when unset or empty).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "" | "moto" => Some(Self::Moto),
            "ministack" => Some(Self::Ministack),
            _ => None,
        }
    }

    /// The path of the request that wipes all of the emulator's state.
    fn reset_path(self) -> &'static str {
        match self {
            Self::Moto => "/moto-api/reset",
            Self::Ministack => "/_ministack/reset",
        }
    }

    /// The path of a read that answers 200 while the emulator serves.
    fn health_path(self) -> &'static str {
        match self {
            Self::Moto => "/moto-api/",
            Self::Ministack => "/_ministack/health",
        }
    }
}

// === impl TestEnv ===

impl TestEnv {
    /// Reads the environment's coordinates from the process environment.
    pub fn from_env() -> Result<Self, EnvError> {
        fn var(var: &'static str) -> Result<String, EnvError> {
            std::env::var(var)
                .ok()
                .filter(|v| !v.is_empty())
                .ok_or(EnvError::Missing { var })
        }
        let emulator = std::env::var("CCM_TEST_AWS_EMULATOR").unwrap_or_default();
        let emulator = Emulator::from_name(&emulator).ok_or(EnvError::Moto {
            endpoint: String::new(),
            detail: format!("CCM_TEST_AWS_EMULATOR={emulator:?} is neither \"moto\" nor \"ministack\""),
        })?;
        Ok(Self {
            kubeconfig: var("CCM_TEST_KUBECONFIG")?.into(),
            kube_apiserver: var("CCM_TEST_KUBE_APISERVER")?,
            aws_endpoint: var("CCM_TEST_AWS_ENDPOINT")?,
            aws_region: var("CCM_TEST_AWS_REGION").unwrap_or_else(|_| "us-east-1".to_owned()),
            emulator,
        })
    }

    /// The environment of this process.
    ///
    /// # Panics
    /// When the environment is not running: a test that needs it must fail, never pass or skip silently.
    #[allow(clippy::panic)]
    pub fn get() -> &'static Self {
        static ENV: OnceLock<Result<TestEnv, String>> = OnceLock::new();
        match ENV.get_or_init(|| Self::from_env().map_err(|e| e.to_string())) {
            Ok(env) => env,
            Err(e) => panic!("{e}"),
        }
    }

    /// A kube client for the test apiserver, with cluster-admin rights.
    pub async fn kube_client(&self) -> Result<kube::Client, EnvError> {
        let err = |source: Box<dyn std::error::Error + Send + Sync>| EnvError::Kubeconfig {
            path: self.kubeconfig.clone(),
            source,
        };
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig).map_err(|e| err(e.into()))?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .map_err(|e| err(e.into()))?;
        kube::Client::try_from(config).map_err(|e| err(e.into()))
    }

    /// An AWS SDK configuration pointed at moto: fixed region, static credentials, and no lookups that could
    /// reach the instance metadata service (region and credentials are explicit).
    #[cfg(feature = "aws")]
    pub async fn aws_config(&self) -> aws_config::SdkConfig {
        let credentials = aws_credential_types::Credentials::from_keys("testing", "testing", None);
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(self.aws_region.clone()))
            .endpoint_url(&self.aws_endpoint)
            .credentials_provider(credentials)
            .load()
            .await
    }

    /// Wipes all of the emulator's state (about 0.25 s). Only for test groups that own the environment: tests that share
    /// it isolate themselves by names and tags instead.
    pub async fn reset_aws(&self) -> Result<(), EnvError> {
        let status = self.moto_request("POST", self.emulator.reset_path()).await?;
        if status == 200 {
            Ok(())
        } else {
            Err(self.moto_err(format!("reset answered HTTP {status}")))
        }
    }

    /// Checks that the emulator answers, without touching its state.
    pub async fn aws_reachable(&self) -> Result<(), EnvError> {
        match self.moto_request("GET", self.emulator.health_path()).await? {
            200 => Ok(()),
            status => Err(self.moto_err(format!("dashboard answered HTTP {status}"))),
        }
    }

    /// A bare HTTP/1.1 request returning the status; the emulators' control APIs needs nothing more, and this keeps an
    /// HTTP client out of the dependencies.
    async fn moto_request(&self, method: &str, path: &str) -> Result<u16, EnvError> {
        let authority = self
            .aws_endpoint
            .strip_prefix("http://")
            .ok_or_else(|| self.moto_err("endpoint is not http://host:port".into()))?
            .trim_end_matches('/');
        let mut stream = tokio::net::TcpStream::connect(authority)
            .await
            .map_err(|e| self.moto_err(e.to_string()))?;
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| self.moto_err(e.to_string()))?;
        let mut response = Vec::new();
        stream
            .read_to_end(&mut response)
            .await
            .map_err(|e| self.moto_err(e.to_string()))?;
        let head = String::from_utf8_lossy(&response[..response.len().min(64)]).into_owned();
        head.split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| self.moto_err(format!("unreadable response {head:?}")))
    }

    fn moto_err(&self, detail: String) -> EnvError {
        EnvError::Moto {
            endpoint: self.aws_endpoint.clone(),
            detail,
        }
    }
}
