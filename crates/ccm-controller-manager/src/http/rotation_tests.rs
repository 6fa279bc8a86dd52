//! A serving certificate rotated on disk under a live connection: the open connection keeps working, new ones
//! get the new certificate, and a pair that cannot be used leaves the last good one served.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use hyper::body::Bytes;
use rustls::pki_types::ServerName;
use tokio::{net::TcpStream, task::JoinHandle};

use super::{
    TlsSource,
    tests::{Server, tls_connector},
    tls_config_checking,
};

/// A certificate for `localhost` and its key, as PEM (certificate, key), and the certificate as DER.
fn pair() -> (String, String, Vec<u8>) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    (
        ck.cert.pem(),
        ck.signing_key.serialize_pem(),
        ck.cert.der().to_vec(),
    )
}

/// An HTTP/2 connection: the certificate the server presented, and the handle to send requests on it.
struct Connection {
    peer_certificate: Vec<u8>,
    send: h2::client::SendRequest<Bytes>,
    _driver: JoinHandle<()>,
}

async fn connect(addr: SocketAddr) -> Connection {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let stream = tls_connector().connect(name, tcp).await.unwrap();
    let peer_certificate = stream.get_ref().1.peer_certificates().unwrap()[0].to_vec();
    let (send, conn) = h2::client::handshake(stream).await.unwrap();
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    Connection {
        peer_certificate,
        send,
        _driver: driver,
    }
}

impl Connection {
    /// `GET /healthz` on this connection: its status.
    async fn healthz(&mut self) -> u16 {
        let request = hyper::Request::get("https://localhost/healthz").body(()).unwrap();
        let mut send = self.send.clone().ready().await.unwrap();
        let (response, _) = send.send_request(request, true).unwrap();
        response.await.unwrap().status().as_u16()
    }
}

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_is_served_to_new_connections() {
    let dir = Dir(std::env::temp_dir().join(format!("ccm-rotation-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let (cert, key) = (dir.0.join("tls.crt"), dir.0.join("tls.key"));
    let (a_cert, a_key, a_der) = pair();
    std::fs::write(&cert, &a_cert).unwrap();
    std::fs::write(&key, &a_key).unwrap();
    let tls = tls_config_checking(
        &TlsSource {
            cert_file: cert.to_str().unwrap(),
            key_file: key.to_str().unwrap(),
            cert_dir: "",
            min_version: "",
            bind: "127.0.0.1".parse().unwrap(),
        },
        Duration::ZERO,
    )
    .unwrap();
    let server = Server::start_with(tls);
    let (b_cert, b_key, b_der) = pair();
    let (c_cert, c_key, c_der) = pair();
    // Which of the three certificates a connection got, by name (their DER would fill the failure message).
    let name = |der: &[u8]| {
        [("A", &a_der), ("B", &b_der), ("C", &c_der)]
            .iter()
            .find(|(_, d)| d.as_slice() == der)
            .map_or("another", |(n, _)| n)
    };
    let mut live = connect(server.addr).await;
    assert_eq!(
        name(&live.peer_certificate),
        "A",
        "the certificate from the files is served"
    );
    assert_eq!(live.healthz().await, 200);

    // A rotation that writes the certificate first: until the key follows, the pair does not match and the
    // last good certificate is still served.
    std::fs::write(&cert, &b_cert).unwrap();
    assert_eq!(
        name(&connect(server.addr).await.peer_certificate),
        "A",
        "a certificate without its key is not served"
    );
    std::fs::write(&key, &b_key).unwrap();
    let mut rotated = connect(server.addr).await;
    assert_eq!(
        name(&rotated.peer_certificate),
        "B",
        "a new connection after the rotation gets the new certificate"
    );
    assert_eq!(rotated.healthz().await, 200);
    assert_eq!(
        live.healthz().await,
        200,
        "the connection opened before the rotation keeps working"
    );

    // A broken file (half written, say) leaves the last good certificate served; a good pair again is taken.
    std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\ntruncated").unwrap();
    assert_eq!(
        name(&connect(server.addr).await.peer_certificate),
        "B",
        "a broken certificate file"
    );
    std::fs::remove_file(&key).unwrap();
    assert_eq!(
        name(&connect(server.addr).await.peer_certificate),
        "B",
        "a missing key file"
    );
    std::fs::write(&key, &c_key).unwrap();
    std::fs::write(&cert, &c_cert).unwrap();
    assert_eq!(
        name(&connect(server.addr).await.peer_certificate),
        "C",
        "a good pair again"
    );
    assert_eq!(live.healthz().await, 200);
}

#[test]
fn a_bad_pair_at_start_is_an_error_naming_both_files() {
    let dir = Dir(std::env::temp_dir().join(format!("ccm-bad-pair-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let (cert, key) = (dir.0.join("tls.crt"), dir.0.join("tls.key"));
    let (a_cert, _, _) = pair();
    let (_, b_key, _) = pair();
    std::fs::write(&cert, &a_cert).unwrap();
    std::fs::write(&key, &b_key).unwrap();
    let source = TlsSource {
        cert_file: cert.to_str().unwrap(),
        key_file: key.to_str().unwrap(),
        cert_dir: "",
        min_version: "",
        bind: "127.0.0.1".parse().unwrap(),
    };
    let e = tls_config_checking(&source, Duration::ZERO)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("do not form a usable pair") && e.contains("tls.crt") && e.contains("tls.key"),
        "{e}"
    );
}
