//! The HTTPS server's limits seen from a client: an HTTP/2 connection is told the 32-stream cap in the server's
//! SETTINGS, and an HTTP/1.1 connection that sends nothing after the TLS handshake is closed by the header read
//! timeout instead of being held for good.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{sync::Arc, time::Duration};

use ccm_controller_manager::{Options, Runtime};
use ccm_testing::{TestEnv, provider::FakeProvider};
use rustls::{
    DigitallySignedStruct, SignatureScheme,
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    pki_types::{CertificateDer, ServerName, UnixTime},
};
use tokio::io::AsyncReadExt;

/// Accepts the server's self-signed certificate: these tests look at the connection, not at trust.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A TLS connection to the server on `port` offering `alpn`.
async fn connect(port: u16, alpn: &[u8]) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap()
}

/// A runtime serving on a free port until the returned sender is dropped or used.
async fn serve() -> (u16, tokio::sync::oneshot::Sender<()>) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let options = Options::try_parse_from([
        "--cloud-provider=fake".to_owned(),
        format!("--kubeconfig={}", TestEnv::get().kubeconfig.display()),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={port}"),
        "--leader-elect=false".to_owned(),
        "--controllers=probe".to_owned(),
    ])
    .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let runtime = Runtime::new(options).with_controller("probe", false, |ctx| async move {
        ctx.shutdown.cancelled().await;
        Ok(())
    });
    tokio::spawn(runtime.run_until(Arc::new(FakeProvider::new()), async {
        let _ = rx.await;
    }));
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return (port, tx);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not serving on {port}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_clients_are_told_the_stream_cap() {
    let (port, _stop) = serve().await;
    let tls = connect(port, b"h2").await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (_send, mut conn) = h2::client::handshake(tls).await.unwrap();
    // Drive the connection until the server's SETTINGS have been read (it never ends on its own).
    let _ = tokio::time::timeout(Duration::from_millis(500), &mut conn).await;
    assert_eq!(conn.max_concurrent_send_streams(), 32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_http1_connection_is_closed() {
    let (port, _stop) = serve().await;
    let mut tls = connect(port, b"http/1.1").await;
    let mut buf = [0u8; 1];
    // The header read timeout is 10 s: the server ends a connection that sends no request.
    let read = tokio::time::timeout(Duration::from_secs(30), tls.read(&mut buf))
        .await
        .expect("the idle connection was closed by the server");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}
