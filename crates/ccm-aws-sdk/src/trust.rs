//! The HTTPS client of a short-lived process: the SDK's default client, trusting the system's CA bundle file
//! alone. The default trust store (rustls-native-certs) reads the bundle and then every file of the certificate
//! directory (`/etc/ssl/certs`: each certificate a second time, under its hash name too); for a process that
//! makes one request, such as the kubelet's credential provider, that directory scan is most of its run time.

use std::path::Path;

use aws_smithy_http_client::{
    Builder, ConnectorBuilder,
    proxy::ProxyConfig,
    tls::{self, TlsContext, TrustStore, rustls_provider::CryptoMode},
};
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use rustls_pki_types::CertificateDer;

/// Where Linux distributions keep the bundle (openssl-probe's list, most common first). Each is generated from
/// the same sources as the certificate directory by `update-ca-certificates` or `update-ca-trust`.
const BUNDLES: [&str; 6] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
    "/etc/pki/tls/cacert.pem",
];

const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
const END: &str = "-----END CERTIFICATE-----";

/// The SDK's default HTTPS client (rustls with aws-lc, proxies from the environment) trusting the certificates
/// of the system's CA bundle; `None` when `SSL_CERT_FILE` or `SSL_CERT_DIR` is set (the default client honours
/// them) or no bundle with a usable certificate is found, so that the default trust store applies.
pub(crate) fn bundle_https_client() -> Option<SharedHttpClient> {
    if std::env::var_os("SSL_CERT_FILE").is_some() || std::env::var_os("SSL_CERT_DIR").is_some() {
        return None;
    }
    let pem = BUNDLES
        .iter()
        .find_map(|path| std::fs::read_to_string(Path::new(path)).ok())?;
    let trusted = trusted_certificates(&pem);
    if trusted.is_empty() {
        return None;
    }
    let context = TlsContext::builder()
        .with_trust_store(TrustStore::empty().with_pem_certificate(trusted))
        .build()
        .ok()?;
    Some(
        Builder::new().build_with_connector_fn(move |settings, components| {
            let mut connector = ConnectorBuilder::default()
                .tls_provider(tls::Provider::Rustls(CryptoMode::AwsLc))
                .tls_context(context.clone());
            connector.set_connector_settings(settings.cloned());
            if let Some(components) = components {
                connector.set_sleep_impl(components.sleep_impl());
            }
            connector.set_proxy_config(Some(ProxyConfig::from_env()));
            connector.build()
        }),
    )
}

/// The certificates of `bundle` that rustls accepts as trust anchors, as PEM blocks. The SDK's client panics on a
/// certificate it cannot parse (the default trust store skips them), so the others are dropped here.
///
/// Each block is decoded with the SDK's SIMD base64 rather than rustls' PEM reader, whose constant-time decoding
/// (meant for private keys) measured a quarter of the credential provider's CPU time when run over the bundle
/// twice, here and in the SDK. The blocks kept are written back from the DER checked here, so the SDK's reader
/// decodes exactly the certificates webpki accepted, however the bundle was formatted.
fn trusted_certificates(bundle: &str) -> String {
    let mut trusted = String::new();
    let mut rest = bundle;
    while let Some(start) = rest.find(BEGIN) {
        let body = &rest[start + BEGIN.len()..];
        let Some(len) = body.find(END) else {
            break;
        };
        rest = &body[len + END.len()..];
        let base64: String = body[..len].split_ascii_whitespace().collect();
        let Ok(der) = aws_smithy_types::base64::decode(base64) else {
            continue;
        };
        if webpki::anchor_from_trusted_cert(&CertificateDer::from(der.as_slice())).is_ok() {
            push_pem(&mut trusted, &der);
        }
    }
    trusted
}

/// Appends `der` as a PEM certificate block (base64 in lines of 64 characters, as RFC 7468 writes it).
fn push_pem(out: &mut String, der: &[u8]) {
    let encoded = aws_smithy_types::base64::encode(der);
    out.push_str(BEGIN);
    out.push('\n');
    // Base64 is ASCII: every byte offset is a character boundary.
    let mut line = encoded.as_str();
    while !line.is_empty() {
        let (head, tail) = line.split_at(line.len().min(64));
        out.push_str(head);
        out.push('\n');
        line = tail;
    }
    out.push_str(END);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rustls_pki_types::pem::PemObject;

    use super::*;

    /// The DER of every certificate block of `pem`, read as the SDK's client reads its trust store.
    fn read_as_the_sdk_does(pem: &str) -> Vec<Vec<u8>> {
        CertificateDer::pem_slice_iter(pem.as_bytes())
            .map(|der| der.unwrap().to_vec())
            .collect()
    }

    #[test]
    fn keeps_parsable_certificates_and_drops_the_rest() {
        let Some(bundle) = BUNDLES.iter().find_map(|p| std::fs::read_to_string(p).ok()) else {
            return; // No system bundle on this machine: nothing to read.
        };
        let first = &bundle[bundle.find(BEGIN).unwrap()..];
        let first = &first[..first.find(END).unwrap() + END.len()];
        let first_der = read_as_the_sdk_does(first);
        assert_eq!(first_der.len(), 1);
        let broken = format!("{BEGIN}\nTUlJQm9ndXM=\n{END}");
        let not_base64 = format!("{BEGIN}\n!!!!\n{END}");
        let kept = trusted_certificates(&format!(
            "comment\n{first}\n{broken}\n{not_base64}\n{first}\ntrailing {BEGIN}"
        ));
        assert_eq!(
            read_as_the_sdk_does(&kept),
            [first_der.clone(), first_der].concat()
        );
        assert_eq!(kept.matches(BEGIN).count(), 2);
        assert!(trusted_certificates("no certificates").is_empty());
    }

    #[test]
    fn rewrites_blocks_in_the_canonical_form() {
        let Some(bundle) = BUNDLES.iter().find_map(|p| std::fs::read_to_string(p).ok()) else {
            return; // No system bundle on this machine: nothing to read.
        };
        let der = read_as_the_sdk_does(&bundle).swap_remove(0);
        // The same certificate in one long line with CRLF line ends and indentation.
        let base64 = aws_smithy_types::base64::encode(&der);
        let odd = format!("{BEGIN}\r\n  {base64}\r\n{END}\r\n");
        let kept = trusted_certificates(&odd);
        assert_eq!(read_as_the_sdk_does(&kept), [der]);
        let lines: Vec<&str> = kept.lines().collect();
        assert_eq!(lines.first(), Some(&BEGIN));
        assert_eq!(lines.last(), Some(&END));
        assert!(lines.iter().all(|line| line.len() <= 64));
    }
}
