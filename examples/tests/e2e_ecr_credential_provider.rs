//! End to end: the `ecr-credential-provider` binary as the kubelet runs it (request on stdin, response on
//! stdout, errors on stderr with exit 1), against moto.
//!
//! The binary is the one cargo built for this test's profile (`CARGO_BIN_EXE_*`), so `cargo test --release -p
//! ccm-examples --test e2e_ecr_credential_provider` runs the release binary; `ECR_CREDENTIAL_PROVIDER_BIN`
//! points the tests at another build (for example a release binary from a debug test run).
//!
//! Each process gets a cleared environment: static credentials, moto as `AWS_ENDPOINT_URL`, IMDS disabled, an
//! empty `HOME`, so nothing on the machine (profiles, real credentials, 169.254.169.254) is consulted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{
    io::Write,
    process::{Command, Output, Stdio},
    time::Duration,
};

use base64::Engine as _;
use ccm_testing::{Emulator, TestEnv};

/// The binary under test.
fn bin() -> String {
    std::env::var("ECR_CREDENTIAL_PROVIDER_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_ecr-credential-provider").to_owned())
}

/// moto's default account, which issues tokens `AWS:<account>-auth-token` valid "until 2015".
const MOTO_ACCOUNT: &str = "123456789012";

/// An ECR token's lifetime on AWS (API_GetAuthorizationToken: "valid for 12 hours"); ministack's tokens have it.
const TOKEN_LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// The lifetime of credentials from AssumeRoleWithWebIdentity without DurationSeconds (AWS's default, one hour).
const ROLE_LIFETIME: Duration = Duration::from_secs(3600);

/// `1h2m3s`, `29m59s`, `0s` (the response's Go duration) in whole seconds.
fn go_duration(text: &str) -> Duration {
    let mut total = 0;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => panic!("unexpected duration {text:?}"),
        };
        total += number.parse::<u64>().unwrap() * unit;
        number.clear();
    }
    assert!(number.is_empty(), "unexpected duration {text:?}");
    Duration::from_secs(total)
}

fn request(image: &str) -> String {
    serde_json::json!({
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "kind": "CredentialProviderRequest",
        "image": image,
    })
    .to_string()
}

/// Runs the provider with `stdin` and `extra` environment variables, against moto.
fn run(stdin: &str, extra: &[(&str, &str)]) -> Output {
    let env = TestEnv::get();
    let home = std::env::temp_dir().join("ecr-e2e-home");
    std::fs::create_dir_all(&home).unwrap();
    let mut command = Command::new(bin());
    command
        .arg("get-credentials") // The kubelet passes the provider's `args`; they are ignored.
        .env_clear()
        .env("HOME", &home)
        .env("AWS_ENDPOINT_URL", &env.aws_endpoint)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in extra {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("start ecr-credential-provider");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The response must be v1, registry-keyed, and hold `AWS` and the password the emulator's token decodes to
/// (moto's names `account`); it is cached for half of `lifetime`, the shortest of the token's and the
/// credentials' lifetimes, on an emulator whose tokens expire as AWS's do.
fn assert_credentials(output: &Output, host: &str, account: &str, lifetime: Duration) {
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.ends_with('\n'), "{stdout:?}");
    let response: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(response["apiVersion"], "credentialprovider.kubelet.k8s.io/v1");
    assert_eq!(response["kind"], "CredentialProviderResponse");
    assert_eq!(response["cacheKeyType"], "Registry");
    // The token's password is opaque on AWS (API_AuthorizationData: base64 of `user:password`). moto's names
    // the account whose credentials asked for it, and its tokens expired in 2015: the kubelet must not cache
    // them. ministack's is always `ministack-auth-token`, valid 12 hours as on AWS: cached for half the
    // lifetime left (whole seconds, so a second or so short of half).
    let (cached, expected_password) = match TestEnv::get().emulator {
        Emulator::Ministack => (lifetime / 2, "ministack-auth-token".to_owned()),
        _ => (Duration::ZERO, format!("{account}-auth-token")),
    };
    let duration = go_duration(response["cacheDuration"].as_str().unwrap());
    assert!(
        duration <= cached && duration + Duration::from_secs(60) >= cached,
        "cached for {duration:?}, expected about {cached:?}: {stdout}"
    );
    let auth = response["auth"].as_object().unwrap();
    assert_eq!(auth.keys().collect::<Vec<_>>(), [host], "{stdout}");
    let username = auth[host]["username"].as_str().unwrap();
    let password = auth[host]["password"].as_str().unwrap();
    assert_eq!(username, "AWS");
    assert_eq!(password, expected_password, "{stdout}");
    // The pair is exactly what the registry's basic auth will carry.
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
    assert_eq!(
        text(&base64::engine::general_purpose::STANDARD.decode(basic).unwrap()),
        format!("AWS:{expected_password}")
    );
}

fn assert_refused(output: &Output, expected: &[&str]) {
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(
        output.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.is_empty(), "nothing on stdout on failure: {stdout}");
    assert!(
        stderr.contains("Error running credential provider plugin: "),
        "{stderr}"
    );
    for part in expected {
        assert!(stderr.contains(part), "stderr lacks {part:?}:\n{stderr}");
    }
}

#[test]
fn e2e_ecr_credential_provider_answers_with_a_token_from_moto() {
    let host = format!("{MOTO_ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com");
    let output = run(&request(&format!("{host}/team/app:1.0")), &[]);
    assert_credentials(&output, &host, MOTO_ACCOUNT, TOKEN_LIFETIME);
}

#[test]
fn e2e_ecr_credential_provider_asks_the_registry_region() {
    // The port is dropped from the auth key; the region comes from the host (moto signs per region).
    let host = format!("{MOTO_ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com");
    let output = run(&request(&format!("https://{host}:443/app@sha256:abc")), &[]);
    assert_credentials(&output, &host, MOTO_ACCOUNT, TOKEN_LIFETIME);
}

#[test]
fn e2e_ecr_credential_provider_assumes_the_service_account_role() {
    // moto issues ECR tokens per account: a token for the role's account proves ECR was called with the
    // credentials AssumeRoleWithWebIdentity returned, not the ambient ones. ministack's tokens name no account;
    // there a cache of half the role credentials' hour (not of the token's 12 hours) shows they were used.
    let role_account = "210987654321";
    let host = format!("{MOTO_ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com");
    let input = serde_json::json!({
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "kind": "CredentialProviderRequest",
        "image": format!("{host}/app:1"),
        "serviceAccountToken": "eyJhbGciOiJSUzI1NiJ9.e30.c2ln",
        "serviceAccountAnnotations": {
            "eks.amazonaws.com/ecr-role-arn": format!("arn:aws:iam::{role_account}:role/ecr-pull"),
        },
    })
    .to_string();
    assert_credentials(&run(&input, &[]), &host, role_account, ROLE_LIFETIME);

    // Without the annotation, AWS_ECR_ROLE_ARN names the role.
    let env_account = "310987654321";
    let input = serde_json::json!({
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "kind": "CredentialProviderRequest",
        "image": format!("{host}/app:1"),
        "serviceAccountToken": "eyJhbGciOiJSUzI1NiJ9.e30.c2ln",
    })
    .to_string();
    let role = format!("arn:aws:iam::{env_account}:role/from-env");
    assert_credentials(
        &run(&input, &[("AWS_ECR_ROLE_ARN", &role)]),
        &host,
        env_account,
        ROLE_LIFETIME,
    );
}

#[test]
fn e2e_ecr_credential_provider_refuses_malformed_json() {
    let output = run(
        r#"{"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind":"#,
        &[],
    );
    assert_refused(
        &output,
        &["not a valid CredentialProviderRequest JSON object", "line 1"],
    );
}

#[test]
fn e2e_ecr_credential_provider_refuses_a_wrong_api_version() {
    let input = request("public.ecr.aws/a/b").replace("kubelet.k8s.io/v1", "kubelet.k8s.io/v1alpha1");
    let output = run(&input, &[]);
    assert_refused(
        &output,
        &[
            "apiVersion \"credentialprovider.kubelet.k8s.io/v1alpha1\" is not supported",
            "only \"credentialprovider.kubelet.k8s.io/v1\"",
        ],
    );
}

#[test]
fn e2e_ecr_credential_provider_refuses_a_wrong_kind() {
    let input =
        request("public.ecr.aws/a/b").replace("CredentialProviderRequest", "CredentialProviderResponse");
    let output = run(&input, &[]);
    assert_refused(
        &output,
        &[
            "kind \"CredentialProviderResponse\" is not supported",
            "expected \"CredentialProviderRequest\"",
        ],
    );
}

#[test]
fn e2e_ecr_credential_provider_refuses_a_non_ecr_image() {
    // An unreachable endpoint: a refusal must come before any AWS call.
    let output = run(
        &request("docker.io/library/nginx:1.27"),
        &[("AWS_ENDPOINT_URL", "http://127.0.0.1:9")],
    );
    assert_refused(
        &output,
        &[
            "\"docker.io/library/nginx:1.27\" is not in an ECR registry",
            "matchImages",
        ],
    );
}

#[test]
fn e2e_ecr_credential_provider_reports_aws_failures() {
    // moto has no ECR Public: the AWS error is reported with the registry and region, exit 1.
    let output = run(&request("public.ecr.aws/nginx/nginx:latest"), &[]);
    assert_refused(
        &output,
        &["failed to get an authorization token for public.ecr.aws from us-east-1"],
    );
}

#[test]
fn e2e_ecr_credential_provider_prints_its_version() {
    let output = Command::new(bin()).arg("--version").env_clear().output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(
        text(&output.stdout).starts_with("ecr-credential-provider "),
        "{}",
        text(&output.stdout)
    );
}
