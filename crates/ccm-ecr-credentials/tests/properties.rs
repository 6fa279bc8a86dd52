//! Property tests of what the kubelet hands the credential provider: image references and
//! `CredentialProviderRequest` JSON. Never a panic; credentials only ever for ECR hosts. The fuzz targets
//! `ecr_image` and `ecr_request` (fuzz/) cover the same functions with coverage guidance. See
//! docs/reliability.md.

use ccm_ecr_credentials::{CredentialProviderRequest, Registry};
use proptest::prelude::*;

fn image_like() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "https://",
        "123456789012",
        ".dkr.ecr",
        "-fips",
        ".eu-west-1",
        ".amazonaws.com",
        ".cn",
        ":443",
        "/",
        "app",
        ":1.2",
        "@sha256:00",
        "public.ecr.aws",
        "ecr-public.aws.com",
        ".evil.com",
        "docker.io",
        "\u{e9}",
    ]);
    prop_oneof![
        prop::collection::vec(piece, 0..8).prop_map(|p| p.concat()),
        "\\PC{0,60}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn images_give_an_ecr_registry_or_a_typed_refusal(image in image_like()) {
        if let Ok(registry) = Registry::from_image(&image) {
            prop_assert!(image.contains(registry.host()), "{} -> {}", image, registry.host());
            let host = registry.host().to_ascii_lowercase();
            prop_assert!(host.contains(".amazonaws.com") || host.contains("ecr"), "{}", host);
        }
    }

    #[test]
    fn requests_parse_or_fail_typed(
        api in prop::sample::select(vec!["credentialprovider.kubelet.k8s.io/v1", "v1", ""]),
        kind in prop::sample::select(vec!["CredentialProviderRequest", "Pod", ""]),
        image in image_like(),
        junk in "\\PC{0,20}",
        wrap in 0u8..4,
    ) {
        let object = serde_like(api, kind, &image);
        let text = match wrap {
            0 => object,
            1 => format!("[{object}]"),
            2 => format!("{object}{junk}"),
            _ => junk,
        };
        if let Ok(request) = CredentialProviderRequest::from_json(text.as_bytes()) {
            prop_assert!(!request.image.is_empty());
        }
    }
}

/// A request object with the image as a JSON string (escaped by hand: the test needs no serde dependency).
fn serde_like(api: &str, kind: &str, image: &str) -> String {
    let escaped: String = image
        .chars()
        .flat_map(|c| match c {
            '"' | '\\' => vec!['\\', c],
            c if c.is_control() => format!("\\u{:04x}", u32::from(c)).chars().collect(),
            c => vec![c],
        })
        .collect();
    format!(r#"{{"apiVersion":"{api}","kind":"{kind}","image":"{escaped}"}}"#)
}
