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
use rustls_pki_types::{CertificateDer, pem::PemObject};

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

/// The PEM blocks of `bundle` that rustls accepts as trust anchors, concatenated. The SDK's client panics on a
/// certificate it cannot parse (the default trust store skips them), so the others are dropped here.
fn trusted_certificates(bundle: &str) -> String {
    let mut trusted = String::new();
    let mut rest = bundle;
    while let Some(start) = rest.find(BEGIN) {
        let Some(len) = rest[start..].find(END) else {
            break;
        };
        let block = &rest[start..start + len + END.len()];
        rest = &rest[start + len + END.len()..];
        let usable = CertificateDer::from_pem_slice(block.as_bytes())
            .is_ok_and(|der| webpki::anchor_from_trusted_cert(&der).is_ok());
        if usable {
            trusted.push_str(block);
            trusted.push('\n');
        }
    }
    trusted
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn keeps_parsable_certificates_and_drops_the_rest() {
        let Some(bundle) = BUNDLES.iter().find_map(|p| std::fs::read_to_string(p).ok()) else {
            return; // No system bundle on this machine: nothing to read.
        };
        let first = &bundle[bundle.find(BEGIN).unwrap()..];
        let first = &first[..first.find(END).unwrap() + END.len()];
        let broken = format!("{BEGIN}\nTUlJQm9ndXM=\n{END}");
        let kept = trusted_certificates(&format!("comment\n{first}\n{broken}\n{first}\ntrailing {BEGIN}"));
        assert_eq!(kept, format!("{first}\n{first}\n"));
        assert!(trusted_certificates("no certificates").is_empty());
    }
}
