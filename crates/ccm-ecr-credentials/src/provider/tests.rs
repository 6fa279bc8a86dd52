use std::{collections::BTreeMap, time::UNIX_EPOCH};

use ccm_aws_api::{AwsError, ErrorKind, ecr::MockEcr, sts::MockSts};

use super::*;
use crate::CacheKeyType;

const PRIVATE_IMAGE: &str = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/app:1.0";
const PRIVATE_HOST: &str = "123456789012.dkr.ecr.eu-west-1.amazonaws.com";
const ROLE: &str = "arn:aws:iam::123456789012:role/ecr-pull";
const OTHER_ROLE: &str = "arn:aws:iam::123456789012:role/from-env";

fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn hours(n: u64) -> Duration {
    Duration::from_secs(n * 3600)
}

fn token(user_password: &str, expires_in: Option<Duration>) -> AuthorizationToken {
    AuthorizationToken {
        token: base64::engine::general_purpose::STANDARD.encode(user_password),
        expires_at: expires_in.map(|d| now() + d),
        proxy_endpoint: Some(format!("https://{PRIVATE_HOST}")),
    }
}

fn session(expires_in: Duration) -> TemporaryCredentials {
    TemporaryCredentials {
        access_key_id: "ASIAROLE".into(),
        secret_access_key: "secret".into(),
        session_token: "session".into(),
        expiration: now() + expires_in,
    }
}

/// An ECR mock answering `times` private-token requests in `region` with `answer`.
fn ecr_private(
    region: &'static str,
    credentials_key: Option<&'static str>,
    answer: AuthorizationToken,
) -> MockEcr {
    let mut ecr = MockEcr::new();
    ecr.expect_authorization_token()
        .withf(move |r, c| r == region && c.as_ref().map(|c| c.access_key_id.as_str()) == credentials_key)
        .times(1)
        .returning(move |_, _| Box::pin(std::future::ready(Ok(answer.clone()))));
    ecr
}

fn provider(ecr: MockEcr, sts: MockSts) -> CredentialProvider<MockEcr, MockSts, FixedClock> {
    CredentialProvider::new(ecr, sts, FixedClock(now()), Config::default())
}

fn sa_request(annotation: Option<&str>) -> CredentialProviderRequest {
    CredentialProviderRequest {
        service_account_token: Some("eyJ.sa-token".into()),
        service_account_annotations: annotation
            .map(|arn| BTreeMap::from([(ROLE_ARN_ANNOTATION.to_owned(), arn.to_owned())]))
            .unwrap_or_default(),
        ..CredentialProviderRequest::new(PRIVATE_IMAGE)
    }
}

fn sts_expecting(role_arn: &'static str, region: &'static str, answer: TemporaryCredentials) -> MockSts {
    let mut sts = MockSts::new();
    sts.expect_assume_role_with_web_identity()
        .withf(move |r, role| {
            r == region
                && role.role_arn == role_arn
                && role.session_name == SESSION_NAME
                && role.web_identity_token == "eyJ.sa-token"
        })
        .times(1)
        .returning(move |_, _| Box::pin(std::future::ready(Ok(answer.clone()))));
    sts
}

#[tokio::test]
async fn a_private_registry_gets_one_token_call_in_its_region() {
    let ecr = ecr_private(
        "eu-west-1",
        None,
        token("AWS:s3cr3t:with:colons", Some(hours(12))),
    );
    let response = provider(ecr, MockSts::new())
        .provide(&CredentialProviderRequest::new(PRIVATE_IMAGE))
        .await
        .unwrap();
    assert_eq!(response.cache_key_type, CacheKeyType::Registry);
    assert_eq!(response.cache_duration, hours(6));
    let auth = &response.auth[PRIVATE_HOST];
    assert_eq!(
        (auth.username.as_str(), auth.password.as_str()),
        ("AWS", "s3cr3t:with:colons")
    );
    assert_eq!(response.auth.len(), 1);
}

#[tokio::test]
async fn ecr_public_uses_the_public_token_call() {
    let mut ecr = MockEcr::new();
    ecr.expect_public_authorization_token()
        .withf(|c| c.is_none())
        .times(1)
        .returning(|_| Box::pin(std::future::ready(Ok(token("AWS:public", Some(hours(12)))))));
    let response = provider(ecr, MockSts::new())
        .provide(&CredentialProviderRequest::new("public.ecr.aws/nginx/nginx"))
        .await
        .unwrap();
    assert_eq!(response.auth["public.ecr.aws"].password, "public");
}

#[tokio::test]
async fn an_expired_token_is_not_cached() {
    // moto's tokens expire in 2015.
    let mut expired = token("AWS:old", None);
    expired.expires_at = Some(UNIX_EPOCH + Duration::from_secs(1_420_070_400));
    let ecr = ecr_private("eu-west-1", None, expired);
    let response = provider(ecr, MockSts::new())
        .provide(&CredentialProviderRequest::new(PRIVATE_IMAGE))
        .await
        .unwrap();
    assert_eq!(response.cache_duration, Duration::ZERO);
    let json = String::from_utf8(response.to_json().unwrap()).unwrap();
    assert!(json.contains(r#""cacheDuration":"0s""#), "{json}");
}

#[test]
fn cache_duration_is_half_the_lifetime_and_never_past_expiry() {
    let secs = Duration::from_secs;
    for (expires_in, expected) in [
        (Some(hours(12)), hours(6)),
        (Some(hours(1)), secs(30 * 60)),
        (Some(secs(30 * 60)), secs(15 * 60)),
        // Half would be 7.5 min, but the last 10 minutes are off limits.
        (Some(secs(15 * 60)), secs(5 * 60)),
        (Some(secs(601)), secs(1)),
        (Some(EXPIRY_MARGIN), Duration::ZERO),
        (Some(secs(60)), Duration::ZERO),
        (Some(Duration::ZERO), Duration::ZERO),
        (None, Duration::ZERO),
    ] {
        let got = cache_duration(now(), expires_in.map(|d| now() + d));
        assert_eq!(got, expected, "expires in {expires_in:?}");
        if let Some(d) = expires_in.filter(|d| !d.is_zero() && *d > EXPIRY_MARGIN) {
            assert!(
                got + EXPIRY_MARGIN <= d,
                "{got:?} reaches into the margin before {d:?}"
            );
        }
    }
    // Past expiry, sub-second fractions.
    assert_eq!(cache_duration(now(), Some(now() - hours(1))), Duration::ZERO);
    assert_eq!(
        cache_duration(now(), Some(now() + hours(12) + Duration::from_millis(1500))),
        hours(6)
    );
}

#[tokio::test]
async fn service_account_mode_assumes_the_annotated_role_in_the_registry_region() {
    let sts = sts_expecting(ROLE, "eu-west-1", session(hours(1)));
    let ecr = ecr_private("eu-west-1", Some("ASIAROLE"), token("AWS:pw", Some(hours(12))));
    let provider = CredentialProvider::new(
        ecr,
        sts,
        FixedClock(now()),
        Config::default().with_default_role_arn(Some(OTHER_ROLE.into())),
    );
    let response = provider.provide(&sa_request(Some(ROLE))).await.unwrap();
    // Bounded by the one-hour session, not the 12-hour token.
    assert_eq!(response.cache_duration, Duration::from_secs(30 * 60));
}

#[tokio::test]
async fn service_account_mode_falls_back_to_the_configured_role() {
    let sts = sts_expecting(OTHER_ROLE, "eu-west-1", session(hours(12)));
    let ecr = ecr_private("eu-west-1", Some("ASIAROLE"), token("AWS:pw", Some(hours(12))));
    let provider = CredentialProvider::new(
        ecr,
        sts,
        FixedClock(now()),
        Config::default().with_default_role_arn(Some(format!(" {OTHER_ROLE} "))),
    );
    let response = provider.provide(&sa_request(None)).await.unwrap();
    assert_eq!(response.cache_duration, hours(6));
}

#[tokio::test]
async fn a_token_without_a_role_uses_the_ambient_credentials() {
    let ecr = ecr_private("eu-west-1", None, token("AWS:pw", Some(hours(12))));
    // MockSts without expectations fails the test if STS is called.
    provider(ecr, MockSts::new())
        .provide(&sa_request(None))
        .await
        .unwrap();
    let ecr = ecr_private("eu-west-1", None, token("AWS:pw", Some(hours(12))));
    let blank = CredentialProvider::new(
        ecr,
        MockSts::new(),
        FixedClock(now()),
        Config::default().with_default_role_arn(Some("  ".into())),
    );
    blank.provide(&sa_request(Some(" "))).await.unwrap();
}

#[tokio::test]
async fn an_annotation_without_a_token_does_not_assume() {
    let ecr = ecr_private("eu-west-1", None, token("AWS:pw", Some(hours(12))));
    let request = CredentialProviderRequest {
        service_account_token: None,
        ..sa_request(Some(ROLE))
    };
    provider(ecr, MockSts::new()).provide(&request).await.unwrap();
}

#[tokio::test]
async fn a_public_registry_assumes_in_us_east_1() {
    let sts = sts_expecting(ROLE, "us-east-1", session(hours(12)));
    let mut ecr = MockEcr::new();
    ecr.expect_public_authorization_token()
        .withf(|c| c.as_ref().is_some_and(|c| c.access_key_id == "ASIAROLE"))
        .times(1)
        .returning(|_| Box::pin(std::future::ready(Ok(token("AWS:pw", Some(hours(12)))))));
    let request = CredentialProviderRequest {
        image: "public.ecr.aws/a/b".into(),
        ..sa_request(Some(ROLE))
    };
    provider(ecr, sts).provide(&request).await.unwrap();
}

#[tokio::test]
async fn a_malformed_role_arn_is_refused_before_any_call() {
    for (annotation, env, origin) in [
        (Some("ecr-pull"), None, "annotation"),
        (Some("arn:aws:iam::123:role/short-account"), None, "annotation"),
        (Some("arn:aws:iam::123456789012:user/bob"), None, "annotation"),
        (Some("arn:aws:iam::123456789012:role/"), None, "annotation"),
        (
            None,
            Some("arn:aws:sts::123456789012:assumed-role/x/y"),
            "AWS_ECR_ROLE_ARN",
        ),
    ] {
        let provider = CredentialProvider::new(
            MockEcr::new(),
            MockSts::new(),
            FixedClock(now()),
            Config::default().with_default_role_arn(env.map(Into::into)),
        );
        let err = provider.provide(&sa_request(annotation)).await.unwrap_err();
        assert!(matches!(err, Error::InvalidRoleArn { .. }), "{err:?}");
        assert!(err.to_string().contains(origin), "{err}");
    }
}

#[test]
fn role_arns_of_every_partition_are_accepted() {
    for arn in [
        "arn:aws:iam::123456789012:role/ecr-pull",
        "arn:aws-cn:iam::123456789012:role/path/to/ecr-pull",
        "arn:aws-us-gov:iam::123456789012:role/r",
        "arn:aws-iso-b:iam::123456789012:role/r",
    ] {
        assert!(is_role_arn(arn), "{arn}");
    }
}

#[tokio::test]
async fn sts_failure_stops_before_ecr() {
    let mut sts = MockSts::new();
    sts.expect_assume_role_with_web_identity()
        .times(1)
        .returning(|_, _| {
            Box::pin(std::future::ready(Err(AwsError::new(
                ErrorKind::AccessDenied,
                "sts",
                "AssumeRoleWithWebIdentity",
            )
            .with_code("InvalidIdentityToken"))))
        });
    let err = provider(MockEcr::new(), sts)
        .provide(&sa_request(Some(ROLE)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::AssumeRole { .. }), "{err:?}");
    let shown = err.to_string();
    assert!(
        shown.contains(ROLE) && shown.contains("eu-west-1") && shown.contains("trust policy"),
        "{shown}"
    );
    let cause = std::error::Error::source(&err).unwrap().to_string();
    assert!(cause.contains("InvalidIdentityToken"), "{cause}");
}

#[tokio::test]
async fn ecr_failure_names_registry_and_region() {
    let mut ecr = MockEcr::new();
    ecr.expect_authorization_token().times(1).returning(|_, _| {
        Box::pin(std::future::ready(Err(AwsError::new(
            ErrorKind::AccessDenied,
            "ecr",
            "GetAuthorizationToken",
        ))))
    });
    let err = provider(ecr, MockSts::new())
        .provide(&CredentialProviderRequest::new(PRIVATE_IMAGE))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Token { .. }), "{err:?}");
    let shown = err.to_string();
    assert!(
        shown.contains(PRIVATE_HOST) && shown.contains("eu-west-1"),
        "{shown}"
    );
}

#[tokio::test]
async fn unusable_tokens_are_reported() {
    for (raw, reason) in [
        ("", "empty token"),
        ("%%%not base64", "base64"),
        (
            &*base64::engine::general_purpose::STANDARD.encode("no-colon"),
            "user:password",
        ),
        (
            &*base64::engine::general_purpose::STANDARD.encode(":pw"),
            "empty user",
        ),
        (
            &*base64::engine::general_purpose::STANDARD.encode([0xff, 0xfe, b':', b'x']),
            "UTF-8",
        ),
    ] {
        let answer = AuthorizationToken {
            token: raw.to_owned(),
            expires_at: None,
            proxy_endpoint: None,
        };
        let ecr = ecr_private("eu-west-1", None, answer);
        let err = provider(ecr, MockSts::new())
            .provide(&CredentialProviderRequest::new(PRIVATE_IMAGE))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidToken { .. }), "{raw}: {err:?}");
        assert!(err.to_string().contains(reason), "{raw}: {err}");
    }
}

#[tokio::test]
async fn bad_requests_make_no_calls() {
    // Mocks without expectations panic on any call.
    let provider = provider(MockEcr::new(), MockSts::new());
    for (input, check) in [
        (&b"{not json"[..], "MalformedRequest"),
        (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1beta1","kind":"CredentialProviderRequest","image":"x"}"#, "UnsupportedApiVersion"),
        (br#"{"kind":"CredentialProviderRequest","image":"x"}"#, "UnsupportedApiVersion"),
        (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","image":"x"}"#, "UnexpectedKind"),
        (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":""}"#, "EmptyImage"),
        (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest"}"#, "EmptyImage"),
        (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"docker.io/library/nginx"}"#, "NotEcr"),
    ] {
        let err = provider.respond(input).await.unwrap_err();
        assert!(format!("{err:?}").starts_with(check), "{}: {err:?}", String::from_utf8_lossy(input));
    }
}
