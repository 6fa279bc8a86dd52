//! Golden input/output: every `golden/NAME.request.json` is answered through mocked ECR and STS at a fixed
//! time, and the output must equal `golden/NAME.response.json` byte for byte, or, for requests that must fail,
//! the error chain must equal `golden/NAME.error.txt`.
//!
//! The mocks answer like AWS: a 12-hour token for `AWS:password-<region>` (with `-as-<access key>` when called
//! with assumed credentials), except in `ap-south-1`, whose token carries moto's fixed 2015 expiry; STS returns
//! one-hour credentials. Regenerate after an intended change with `UPDATE_GOLDEN=1 cargo test -p
//! ccm-ecr-credentials --test golden`, then review the diff.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{
    fs,
    path::{Path, PathBuf},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use base64::Engine as _;
use ccm_aws_api::{
    ecr::{AuthorizationToken, MockEcr},
    sts::{MockSts, TemporaryCredentials},
};
use ccm_ecr_credentials::{Config, CredentialProvider, FixedClock};

/// 2027-01-15T08:00:00Z.
const NOW_SECS: u64 = 1_800_000_000;
/// 2015-01-01T00:00:00Z, the expiry moto puts on every ECR token.
const MOTO_EXPIRY_SECS: u64 = 1_420_070_400;

fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(NOW_SECS)
}

fn encode(user_password: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(user_password)
}

fn token_for(region: &str, credentials: Option<&TemporaryCredentials>) -> AuthorizationToken {
    let password = match credentials {
        Some(c) => format!("password-{region}-as-{}", c.access_key_id),
        None => format!("password-{region}"),
    };
    let expires_at = if region == "ap-south-1" {
        UNIX_EPOCH + Duration::from_secs(MOTO_EXPIRY_SECS)
    } else {
        now() + Duration::from_secs(12 * 3600)
    };
    AuthorizationToken {
        token: encode(&format!("AWS:{password}")),
        expires_at: Some(expires_at),
        proxy_endpoint: None,
    }
}

fn provider() -> CredentialProvider<MockEcr, MockSts, FixedClock> {
    let mut ecr = MockEcr::new();
    ecr.expect_authorization_token().returning(|region, credentials| {
        Box::pin(std::future::ready(Ok(token_for(region, credentials.as_ref()))))
    });
    ecr.expect_public_authorization_token().returning(|credentials| {
        let mut token = token_for("us-east-1", credentials.as_ref());
        token.token = encode(
            &String::from_utf8(base64_decode(&token.token))
                .unwrap()
                .replace("password", "public"),
        );
        Box::pin(std::future::ready(Ok(token)))
    });
    let mut sts = MockSts::new();
    sts.expect_assume_role_with_web_identity().returning(|_, role| {
        // The session name is part of the contract (CloudTrail shows it).
        assert_eq!(role.session_name, "ecr-credential-provider");
        let account = role.role_arn.split(':').nth(4).unwrap_or_default().to_owned();
        Box::pin(std::future::ready(Ok(TemporaryCredentials {
            access_key_id: format!("ASIA{account}"),
            secret_access_key: "secret".into(),
            session_token: "session".into(),
            expiration: now() + Duration::from_secs(3600),
        })))
    });
    let config =
        Config::default().with_default_role_arn(Some("arn:aws:iam::210987654321:role/from-env".into()));
    CredentialProvider::new(ecr, sts, FixedClock(now()), config)
}

fn base64_decode(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut shown = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        shown.push_str(": ");
        shown.push_str(&cause.to_string());
        source = cause.source();
    }
    shown
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

#[tokio::test]
async fn golden_requests_and_responses() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut requests: Vec<PathBuf> = fs::read_dir(golden_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.to_string_lossy().ends_with(".request.json"))
        .collect();
    requests.sort();
    assert!(requests.len() >= 12, "golden cases went missing: {requests:?}");
    let provider = provider();
    let mut failures = Vec::new();
    for request in &requests {
        let name = request
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".request.json")
            .to_owned();
        let input = fs::read(request).unwrap();
        let (path, actual) = match provider.respond(&input).await {
            Ok(output) => (golden_dir().join(format!("{name}.response.json")), output),
            Err(err) => (
                golden_dir().join(format!("{name}.error.txt")),
                format!("{}\n", error_chain(&err)).into_bytes(),
            ),
        };
        if update {
            fs::write(&path, &actual).unwrap();
            continue;
        }
        match fs::read(&path) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!(
                "{name}: expected {}\n--- got ---\n{}",
                String::from_utf8_lossy(&expected),
                String::from_utf8_lossy(&actual)
            )),
            Err(_) => failures.push(format!(
                "{name}: no {} (got {})",
                path.file_name().unwrap().to_string_lossy(),
                String::from_utf8_lossy(&actual)
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Each golden response is what the kubelet expects: v1, registry-keyed, a password that decodes from a token.
#[test]
fn golden_responses_are_well_formed() {
    for entry in fs::read_dir(golden_dir()).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(".response.json") {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.ends_with('\n'), "{path:?}");
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            json["apiVersion"], "credentialprovider.kubelet.k8s.io/v1",
            "{path:?}"
        );
        assert_eq!(json["kind"], "CredentialProviderResponse", "{path:?}");
        assert_eq!(json["cacheKeyType"], "Registry", "{path:?}");
        let auth = json["auth"].as_object().unwrap();
        assert_eq!(auth.len(), 1, "{path:?}");
        let (_, creds) = auth.iter().next().unwrap();
        assert_eq!(creds["username"], "AWS", "{path:?}");
        assert!(
            creds["password"].as_str().unwrap().contains("password-")
                || creds["password"].as_str().unwrap().contains("public-")
        );
    }
}
