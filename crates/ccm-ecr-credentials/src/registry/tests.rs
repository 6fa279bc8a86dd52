use super::*;

/// What a host is expected to parse to: `(partition, region, fips, dual_stack)` for private registries.
enum Expect {
    Private(Partition, &'static str, bool, bool),
    Public,
    NotEcr,
}

const ACCOUNT: &str = "123456789012";

#[test]
fn registry_hosts_across_partitions() {
    use Expect::*;
    use Partition::*;
    #[rustfmt::skip]
    let cases: &[(&str, Expect)] = &[
        // Commercial, with the reference forms the kubelet passes.
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com/app:1.0", Private(Aws, "us-east-1", false, false)),
        ("123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/app@sha256:0123456789abcdef", Private(Aws, "eu-west-1", false, false)),
        ("123456789012.dkr.ecr.ap-southeast-5.amazonaws.com", Private(Aws, "ap-southeast-5", false, false)),
        ("123456789012.dkr.ecr.me-central-1.amazonaws.com:443/app", Private(Aws, "me-central-1", false, false)),
        ("https://123456789012.dkr.ecr.sa-east-1.amazonaws.com/app", Private(Aws, "sa-east-1", false, false)),
        ("123456789012.DKR.ECR.US-WEST-2.AMAZONAWS.COM/app", Private(Aws, "us-west-2", false, false)),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com/a/b/c/d:tag", Private(Aws, "us-east-1", false, false)),
        // FIPS.
        ("123456789012.dkr.ecr-fips.us-east-1.amazonaws.com/app", Private(Aws, "us-east-1", true, false)),
        ("123456789012.dkr.ecr-fips.ca-central-1.amazonaws.com/app", Private(Aws, "ca-central-1", true, false)),
        // GovCloud, plain and FIPS.
        ("123456789012.dkr.ecr.us-gov-west-1.amazonaws.com/app", Private(AwsUsGov, "us-gov-west-1", false, false)),
        ("123456789012.dkr.ecr-fips.us-gov-east-1.amazonaws.com/app", Private(AwsUsGov, "us-gov-east-1", true, false)),
        // China.
        ("123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/app", Private(AwsCn, "cn-north-1", false, false)),
        ("123456789012.dkr.ecr.cn-northwest-1.amazonaws.com.cn/app:v2", Private(AwsCn, "cn-northwest-1", false, false)),
        // Dual-stack (IPv4 and IPv6) endpoints.
        ("123456789012.dkr-ecr.us-west-2.on.aws/app", Private(Aws, "us-west-2", false, true)),
        ("123456789012.dkr-ecr-fips.us-east-2.on.aws/app", Private(Aws, "us-east-2", true, true)),
        ("123456789012.dkr-ecr.us-gov-west-1.on.aws/app", Private(AwsUsGov, "us-gov-west-1", false, true)),
        ("123456789012.dkr-ecr.cn-north-1.on.amazonwebservices.com.cn/app", Private(AwsCn, "cn-north-1", false, true)),
        // ISO partitions and the European Sovereign Cloud.
        ("123456789012.dkr.ecr.us-iso-east-1.c2s.ic.gov/app", Private(AwsIso, "us-iso-east-1", false, false)),
        ("123456789012.dkr.ecr.us-isob-east-1.sc2s.sgov.gov/app", Private(AwsIsoB, "us-isob-east-1", false, false)),
        ("123456789012.dkr.ecr.eu-isoe-west-1.cloud.adc-e.uk/app", Private(AwsIsoE, "eu-isoe-west-1", false, false)),
        ("123456789012.dkr.ecr.us-isof-south-1.csp.hci.ic.gov/app", Private(AwsIsoF, "us-isof-south-1", false, false)),
        ("123456789012.dkr.ecr.eusc-de-east-1.amazonaws.eu/app", Private(AwsEusc, "eusc-de-east-1", false, false)),
        // ECR Public.
        ("public.ecr.aws/nginx/nginx:latest", Public),
        ("public.ecr.aws/eks-distro/kubernetes/pause:3.9", Public),
        ("ecr-public.aws.com/alias/app", Public),
        ("PUBLIC.ECR.AWS/alias/app", Public),
        // Not ECR: never given ECR credentials.
        ("docker.io/library/nginx:latest", NotEcr),
        ("nginx", NotEcr),
        ("gcr.io/distroless/static", NotEcr),
        ("registry.k8s.io/pause:3.9", NotEcr),
        ("localhost:5000/app", NotEcr),
        ("[::1]:5000/app", NotEcr),
        ("12345678901.dkr.ecr.us-east-1.amazonaws.com/app", NotEcr),
        ("1234567890123.dkr.ecr.us-east-1.amazonaws.com/app", NotEcr),
        ("12345678901a.dkr.ecr.us-east-1.amazonaws.com/app", NotEcr),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com.evil.example/app", NotEcr),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.co/app", NotEcr),
        ("evil.example/123456789012.dkr.ecr.us-east-1.amazonaws.com/app", NotEcr),
        ("evil.example/x://123456789012.dkr.ecr.us-east-1.amazonaws.com/app", NotEcr),
        ("oci://123456789012.dkr.ecr.us-east-1.amazonaws.com/app", Private(Aws, "us-east-1", false, false)),
        ("123456789012.dkr.ecr..amazonaws.com/app", NotEcr),
        ("123456789012.dkr.ecr.-east-1.amazonaws.com/app", NotEcr),
        ("123456789012.dkr.ecr.us.east.1.amazonaws.com/app", NotEcr),
        ("123456789012.ecr.us-east-1.amazonaws.com/app", NotEcr),
        ("123456789012.dkr.ecr-gov.us-east-1.amazonaws.com/app", NotEcr),
        ("ecr.us-east-1.amazonaws.com/app", NotEcr),
        ("public.ecr.aws.evil.example/app", NotEcr),
        ("xpublic.ecr.aws/app", NotEcr),
    ];
    assert!(cases.len() >= 25);
    for (image, expect) in cases {
        let parsed = Registry::from_image(image);
        match (expect, parsed) {
            (Private(partition, region, fips, dual_stack), Ok(registry)) => {
                let RegistryKind::Private(private) = registry.kind() else {
                    panic!("{image}: expected a private registry, got {registry:?}");
                };
                assert_eq!(private.account_id, ACCOUNT, "{image}");
                assert_eq!(
                    (
                        private.partition,
                        private.region.as_str(),
                        private.fips,
                        private.dual_stack
                    ),
                    (*partition, *region, *fips, *dual_stack),
                    "{image}"
                );
                assert_eq!(registry.region(), *region, "{image}");
            }
            (Public, Ok(registry)) => {
                assert_eq!(registry.kind(), &RegistryKind::Public, "{image}");
                assert_eq!(registry.region(), "us-east-1", "{image}");
            }
            (NotEcr, Err(Error::NotEcr { image: reported, .. })) => assert_eq!(reported, *image),
            (_, other) => panic!("{image}: unexpected {other:?}"),
        }
    }
}

#[test]
fn the_host_is_kept_as_written_without_scheme_and_port() {
    for (image, host) in [
        (
            "123456789012.dkr.ecr.us-east-1.amazonaws.com/app",
            "123456789012.dkr.ecr.us-east-1.amazonaws.com",
        ),
        (
            "https://123456789012.dkr.ecr.us-east-1.amazonaws.com:443/a",
            "123456789012.dkr.ecr.us-east-1.amazonaws.com",
        ),
        (
            "123456789012.DKR.ECR.US-WEST-2.AMAZONAWS.COM/app",
            "123456789012.DKR.ECR.US-WEST-2.AMAZONAWS.COM",
        ),
        ("public.ecr.aws/nginx/nginx", "public.ecr.aws"),
    ] {
        assert_eq!(Registry::from_image(image).unwrap().host(), host);
    }
}

#[test]
fn unusable_references_are_named() {
    assert!(matches!(Registry::from_image(""), Err(Error::EmptyImage)));
    for (image, reason_part) in [
        ("/app", "empty"),
        ("host:abc/app", "port"),
        (
            "user@123456789012.dkr.ecr.us-east-1.amazonaws.com/app",
            "user name",
        ),
        ("123456789012.dkr.ecr.us-east-1.amazon aws.com/app", "white space"),
    ] {
        match Registry::from_image(image) {
            Err(Error::InvalidImage {
                image: reported,
                reason,
            }) => {
                assert_eq!(reported, image);
                assert!(reason.contains(reason_part), "{image}: {reason}");
            }
            other => panic!("{image}: unexpected {other:?}"),
        }
    }
}

#[test]
fn a_non_ecr_error_names_the_image_host_and_accepted_forms() {
    let shown = Registry::from_image("docker.io/library/nginx")
        .unwrap_err()
        .to_string();
    assert!(shown.contains("docker.io/library/nginx"), "{shown}");
    assert!(shown.contains("\"docker.io\""), "{shown}");
    assert!(
        shown.contains("dkr.ecr") && shown.contains("public.ecr.aws") && shown.contains("matchImages"),
        "{shown}"
    );
}

#[test]
fn partitions_spell_like_arns() {
    assert_eq!(Partition::AwsUsGov.to_string(), "aws-us-gov");
    assert_eq!(Partition::AwsIsoB.as_str(), "aws-iso-b");
}
