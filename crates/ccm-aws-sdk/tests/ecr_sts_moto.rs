//! The ECR and STS ports against moto (ECR Public, missing from moto, through the fault proxy's error path).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use ccm_aws_api::{Ecr, ErrorKind, Sts, sts::WebIdentityRole};
use ccm_testing::{Fault, FaultProxy, TestEnv};
use common::adapter;

#[tokio::test]
async fn ecr_authorization_tokens() {
    let adapter = adapter(None).await;
    let token = adapter
        .ecr()
        .authorization_token("us-west-2", None)
        .await
        .unwrap();
    assert!(!token.token.is_empty());
    assert!(
        token
            .proxy_endpoint
            .as_deref()
            .is_some_and(|e| e.contains("us-west-2")),
        "{:?}",
        token.proxy_endpoint
    );
    assert!(token.expires_at.is_some());
    assert_eq!(
        adapter
            .metrics()
            .attempts_with("ecr", "GetAuthorizationToken", "ok"),
        1
    );
}

#[tokio::test]
async fn ecr_errors_are_mapped() {
    let proxy = FaultProxy::start(&TestEnv::get().aws_endpoint).await.unwrap();
    let adapter = adapter(Some(&proxy.url())).await;
    proxy.inject(
        "GetAuthorizationToken",
        Fault::error(400, "AccessDeniedException"),
        1,
    );
    let err = adapter
        .ecr()
        .authorization_token("us-east-1", None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AccessDenied, "{err}");
    // Throttling is retried, as for every service.
    proxy.inject("GetAuthorizationToken", Fault::Throttle, 1);
    adapter
        .ecr()
        .authorization_token("us-east-1", None)
        .await
        .unwrap();
    assert_eq!(
        adapter
            .metrics()
            .attempts_with("ecr", "GetAuthorizationToken", "throttled"),
        1
    );
    // moto has no ECR Public: the request still goes out (JSON protocol), and the proxy answers for it.
    proxy.inject(
        "GetAuthorizationToken",
        Fault::error(400, "RepositoryNotFoundException"),
        1,
    );
    let err = adapter.ecr().public_authorization_token(None).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    let headers = proxy.last_headers("GetAuthorizationToken").unwrap();
    assert!(
        headers["x-amz-target"].starts_with("SpencerFrontendService."),
        "{headers:?}"
    );
}

#[tokio::test]
async fn sts_web_identity_and_caller_identity() {
    let proxy = FaultProxy::start(&TestEnv::get().aws_endpoint).await.unwrap();
    let adapter = adapter(Some(&proxy.url())).await;
    let role = WebIdentityRole {
        role_arn: "arn:aws:iam::123456789012:role/ecr-pull".into(),
        session_name: "ecr-credential-provider".into(),
        web_identity_token: "eyJhbGciOiJSUzI1NiJ9.e30.sig".into(),
    };
    let credentials = adapter
        .sts()
        .assume_role_with_web_identity("us-east-1", &role)
        .await
        .unwrap();
    assert!(!credentials.access_key_id.is_empty() && !credentials.session_token.is_empty());
    let headers = proxy.last_headers("AssumeRoleWithWebIdentity").unwrap();
    assert!(
        !headers.contains_key("authorization"),
        "the call is not signed: {headers:?}"
    );

    // The temporary credentials work for ECR.
    let token = adapter
        .ecr()
        .authorization_token("us-east-1", Some(credentials))
        .await
        .unwrap();
    assert!(!token.token.is_empty());
    let auth = &proxy.last_headers("GetAuthorizationToken").unwrap()["authorization"];
    assert!(
        !auth.contains("Credential=testing/"),
        "signed with the temporary key: {auth}"
    );

    let identity = adapter.sts().caller_identity().await.unwrap();
    assert_eq!(identity.account.len(), 12, "{identity:?}");

    proxy.inject(
        "AssumeRoleWithWebIdentity",
        Fault::error(400, "InvalidIdentityToken"),
        1,
    );
    let err = adapter
        .sts()
        .assume_role_with_web_identity("us-east-1", &role)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AccessDenied, "{err}");
}
