//! The HTTPS server on `--secure-port`: `/healthz`, `/healthz/<check>` and `/metrics`, with the certificate from
//! `--tls-cert-file`/`--tls-private-key-file`, from `--cert-dir`, or self-signed in memory (as upstream).

use std::{
    convert::Infallible,
    net::SocketAddr,
    path::Path,
    sync::{Arc, RwLock},
};

use http_body_util::Full;
use hyper::{
    Request, Response, StatusCode,
    body::{Bytes, Incoming},
    header::CONTENT_TYPE,
};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use prometheus_client::registry::Registry;
use rustls::{
    ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::OwnedSemaphorePermit,
};
use tokio_rustls::{TlsAcceptor, server::TlsStream};
use tokio_util::sync::CancellationToken;

use crate::{Error, auth::Denied};

mod limits;
mod metrics;
use limits::{Activity, PeerSlot, Peers};
pub(crate) use metrics::RuntimeMetrics;

/// Longest TLS handshake: the port is unauthenticated (and, with `hostNetwork`, reachable from every pod), so a
/// peer that connects and says nothing must not hold a connection for long.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
/// Longest wait for a request's headers, and for requests in flight at a connection's end.
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// The most connections served at once; more are closed as they arrive (Prometheus and the kubelet's probes
/// need a handful).
pub(crate) const MAX_CONNECTIONS: usize = 256;
/// The most connections one peer address may hold, and how many of them may still be in their TLS handshake:
/// beyond either, its new connections are closed as they arrive, so that one address (a pod flooding the port
/// with idle connects) can never take the slots the kubelet's probes and Prometheus need. With the global cap,
/// it takes 16 addresses to fill the server.
pub(crate) const MAX_CONNECTIONS_PER_PEER: usize = 16;
pub(crate) const MAX_HANDSHAKES_PER_PEER: usize = 4;
/// A connection with no request in flight for this long is closed (HTTP/2 keeps a connection alive with pings
/// alone; HTTP/1's header timeout already closes an idle one sooner).
const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
/// The most concurrent HTTP/2 streams per connection.
const MAX_STREAMS: u32 = 32;
/// HTTP/2 keep-alive: a ping after this much silence, and the connection closed if it is not answered within
/// [`KEEP_ALIVE_TIMEOUT`] (a dead peer holds no connection slot).
const KEEP_ALIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);
const KEEP_ALIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// How long a connection may stay open at all; a client that keeps one longer reconnects.
const MAX_CONNECTION_AGE: std::time::Duration = std::time::Duration::from_secs(300);

type Check = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Named health checks, in registration order; the set changes while running (one per started controller).
#[derive(Clone, Default)]
pub(crate) struct Health(Arc<RwLock<Vec<(String, Check)>>>);

impl Health {
    pub(crate) fn add(&self, name: &str, check: impl Fn() -> Result<(), String> + Send + Sync + 'static) {
        let mut checks = self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        checks.retain(|(n, _)| n != name);
        checks.push((name.to_owned(), Arc::new(check)));
    }

    pub(crate) fn remove(&self, name: &str) {
        self.0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|(n, _)| n != name);
    }

    fn run(&self) -> Vec<(String, Result<(), String>)> {
        let checks = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if checks.is_empty() {
            return vec![("ping".to_owned(), Ok(()))];
        }
        checks.iter().map(|(n, c)| (n.clone(), c())).collect()
    }
}

/// What the server answers from.
#[derive(Clone)]
pub(crate) struct State {
    pub(crate) health: Health,
    pub(crate) registry: Arc<Registry>,
    pub(crate) auth: crate::auth::Auth,
    /// The `/configz` body.
    pub(crate) configz: Arc<String>,
    /// With `--dry-run`: what the controllers would have written, served at `/dry-run`.
    pub(crate) dry_run: Option<Arc<crate::dry_run::DryRunLog>>,
}

/// TLS settings from the flags.
pub(crate) struct TlsSource<'a> {
    pub(crate) cert_file: &'a str,
    pub(crate) key_file: &'a str,
    pub(crate) cert_dir: &'a str,
    pub(crate) min_version: &'a str,
    pub(crate) bind: std::net::IpAddr,
}

/// Builds the rustls configuration (aws-lc-rs only).
pub(crate) fn tls_config(src: &TlsSource<'_>) -> Result<ServerConfig, Error> {
    let tls_err = |what: String| Error::Serving(what);
    let (certs, key) = if !src.cert_file.is_empty() {
        load_pem(Path::new(src.cert_file), Path::new(src.key_file))?
    } else if !src.cert_dir.is_empty() {
        let dir = Path::new(src.cert_dir);
        let (crt, key) = (
            dir.join("cloud-controller-manager.crt"),
            dir.join("cloud-controller-manager.key"),
        );
        if !crt.exists() || !key.exists() {
            let (cert_pem, key_pem) = self_signed(src.bind)?;
            std::fs::create_dir_all(dir)
                .and_then(|()| std::fs::write(&crt, cert_pem))
                .and_then(|()| write_private(&key, key_pem.as_bytes()))
                .map_err(|e| {
                    tls_err(format!(
                        "cannot write a self-signed certificate to --cert-dir {}: {e}",
                        dir.display()
                    ))
                })?;
            tracing::info!(dir = %dir.display(), "generated a self-signed certificate");
        }
        load_pem(&crt, &key)?
    } else {
        let (cert_pem, key_pem) = self_signed(src.bind)?;
        let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| tls_err(format!("self-signed certificate: {e}")))?;
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|e| tls_err(format!("self-signed key: {e}")))?;
        (certs, key)
    };
    let versions: &[&rustls::SupportedProtocolVersion] = if src.min_version == "VersionTLS13" {
        &[&rustls::version::TLS13]
    } else {
        &[&rustls::version::TLS13, &rustls::version::TLS12]
    };
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_protocol_versions(versions)
            .map_err(|e| tls_err(format!("TLS versions: {e}")))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| tls_err(format!("the certificate and key do not form a usable pair: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

fn load_pem(
    cert: &Path,
    key: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), Error> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| Error::Serving(format!("cannot read certificates from {}: {e}", cert.display())))?;
    if certs.is_empty() {
        return Err(Error::Serving(format!("no certificate in {}", cert.display())));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| Error::Serving(format!("cannot read a private key from {}: {e}", key.display())))?;
    Ok((certs, key))
}

/// A self-signed certificate for `localhost`, `127.0.0.1`, `::1` (and the bind address when it is specific), as
/// PEM (certificate, key).
fn self_signed(bind: std::net::IpAddr) -> Result<(String, String), Error> {
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
    if !bind.is_unspecified() && !bind.is_loopback() {
        names.push(bind.to_string());
    }
    let ck = rcgen::generate_simple_self_signed(names)
        .map_err(|e| Error::Serving(format!("cannot generate a self-signed certificate: {e}")))?;
    Ok((ck.cert.pem(), ck.signing_key.serialize_pem()))
}

/// Writes a private key readable by its owner only (mode 0600 from creation, whatever the umask), replacing any
/// file there.
fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        let mut file = options.open(path)?;
        // A file that existed keeps its mode on open: set it.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        file.write_all(contents)
    }
    #[cfg(not(unix))]
    {
        options.open(path)?.write_all(contents)
    }
}

/// Binds the listener (so that a port conflict is an error at start, not later).
pub(crate) async fn bind(addr: SocketAddr) -> Result<TcpListener, Error> {
    TcpListener::bind(addr).await.map_err(|e| {
        Error::Serving(format!(
            "cannot listen on {addr} (--bind-address/--secure-port): {e}"
        ))
    })
}

/// Serves until `shutdown`.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: ServerConfig,
    state: State,
    shutdown: CancellationToken,
) {
    let acceptor = TlsAcceptor::from(Arc::new(tls));
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let peers = Peers::default();
    loop {
        // Biased: once shutdown is asked for, no further connection is taken, even one already waiting.
        let (stream, peer) = tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
        };
        let Some(peer_slot) = peers.admit(peer.ip()) else {
            tracing::debug!(%peer, "too many connections from this address; closing the new one");
            drop(stream);
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, limit = MAX_CONNECTIONS, "too many connections; closing the new one");
            drop(stream);
            continue;
        };
        tokio::spawn(connection(
            stream,
            peer,
            peer_slot,
            slot,
            acceptor.clone(),
            state.clone(),
            shutdown.clone(),
        ));
    }
}

/// Serves one admitted connection until the peer leaves, the connection ages out or goes idle, or `shutdown`.
/// It holds its server-wide slot (`_slot`) and its peer's slot until then, so that the caps count open
/// connections, not accepts.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    mut peer_slot: PeerSlot,
    _slot: OwnedSemaphorePermit,
    acceptor: TlsAcceptor,
    state: State,
    shutdown: CancellationToken,
) {
    let Some(tls) = handshake(&acceptor, stream, peer, &mut peer_slot).await else {
        return;
    };
    let activity = Activity::default();
    let seen = activity.clone();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let state = state.clone();
        let request = seen.begin();
        async move {
            let _request = request;
            Ok::<_, Infallible>(respond(&state, &req).await)
        }
    });
    // The protocol is the one ALPN chose: left to sniff the first bytes, the builder would wait for them
    // without any timeout, so a client that connects and sends nothing would hold a slot for good.
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
    let builder = connection_builder(h2);
    let conn = builder.serve_connection(TokioIo::new(tls), service);
    tokio::pin!(conn);
    // Biased: a connection woken by shutdown and a request at once closes instead of answering it (an
    // unbiased select serves it half the time, after the runtime has returned).
    tokio::select! {
        biased;
        () = shutdown.cancelled() => {}
        () = tokio::time::sleep(MAX_CONNECTION_AGE) => {
            // Finish what is in flight, then close.
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(HEADER_TIMEOUT, conn).await;
        }
        () = activity.idle_for(IDLE_TIMEOUT) => {
            tracing::debug!(%peer, "closing an idle connection");
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(HEADER_TIMEOUT, conn).await;
        }
        result = conn.as_mut() => if let Err(e) = result {
            tracing::debug!(%peer, error = %e, "connection error");
        },
    }
}

/// The TLS handshake, or `None` (logged) when it fails or times out. Either way the peer's handshake count
/// drops as soon as it is over, since a peer may only have a few under way.
async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    peer_slot: &mut PeerSlot,
) -> Option<TlsStream<TcpStream>> {
    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await;
    peer_slot.handshake_done();
    match handshake {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            None
        }
    }
}

/// A connection builder for the one protocol ALPN chose, with this server's timeouts and limits.
fn connection_builder(h2: bool) -> hyper_util::server::conn::auto::Builder<TokioExecutor> {
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder = if h2 {
        builder.http2_only()
    } else {
        builder.http1_only()
    };
    // HTTP/1: keep-alive, and the header read timeout also closes a connection idle between requests.
    builder
        .http1()
        .timer(TokioTimer::new())
        .keep_alive(true)
        .header_read_timeout(HEADER_TIMEOUT);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_STREAMS)
        .keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT);
    builder
}

/// Answers one request once the delegated authentication and authorization let it through.
async fn respond(state: &State, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let authorization = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let checked = state
        .auth
        .check(req.uri().path(), req.method().as_str(), authorization)
        .await;
    match checked {
        Ok(()) => handle(state, req),
        Err(denied) => refusal(denied),
    }
}

/// The answer to a refused request. A busy reviewer is no failure of the client's: it is told to retry.
fn refusal(denied: Denied) -> Response<Full<Bytes>> {
    match denied {
        Denied::Unauthenticated => text(StatusCode::UNAUTHORIZED, "Unauthorized\n".to_owned()),
        Denied::Forbidden(why) => text(StatusCode::FORBIDDEN, format!("{why}\n")),
        Denied::Busy => {
            let mut r = text(
                StatusCode::TOO_MANY_REQUESTS,
                "Too many requests are waiting on authorization, try again later\n".to_owned(),
            );
            r.headers_mut().insert(
                hyper::header::RETRY_AFTER,
                hyper::header::HeaderValue::from_static("1"),
            );
            r
        }
        Denied::Failed(why) => {
            tracing::warn!(error = %why, "request authorization failed");
            text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error: authorization failed\n".to_owned(),
            )
        }
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn handle(state: &State, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    let verbose = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "verbose" || p.starts_with("verbose=")));
    if req.method() != hyper::Method::GET && req.method() != hyper::Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n".to_owned());
    }
    match path {
        // /livez and /readyz answer from the same checks (the Go manager's default always-allowed paths).
        "/healthz" | "/healthz/" | "/livez" | "/livez/" | "/readyz" | "/readyz/" => {
            let endpoint = path.trim_matches('/');
            let results = state.health.run();
            let ok = results.iter().all(|(_, r)| r.is_ok());
            if ok && !verbose {
                return text(StatusCode::OK, "ok".to_owned());
            }
            let mut body = String::new();
            for (name, r) in &results {
                match r {
                    Ok(()) => body.push_str(&format!("[+]{name} ok\n")),
                    Err(e) => body.push_str(&format!("[-]{name} failed: {e}\n")),
                }
            }
            if ok {
                body.push_str(&format!("{endpoint} check passed\n"));
                text(StatusCode::OK, body)
            } else {
                body.push_str(&format!("{endpoint} check failed\n"));
                text(StatusCode::INTERNAL_SERVER_ERROR, body)
            }
        }
        "/configz" => {
            let mut r = text(StatusCode::OK, state.configz.to_string());
            r.headers_mut().insert(
                CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/json"),
            );
            r
        }
        "/dry-run" if state.dry_run.is_some() => {
            let report = state.dry_run.as_ref().map(|log| log.report()).unwrap_or_default();
            let mut r = text(StatusCode::OK, format!("{report:#}\n"));
            r.headers_mut().insert(
                CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/json"),
            );
            r
        }
        "/metrics" => {
            let mut body = String::new();
            match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
                Ok(()) => {
                    let mut r = text(StatusCode::OK, body);
                    r.headers_mut().insert(
                        CONTENT_TYPE,
                        hyper::header::HeaderValue::from_static(
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        ),
                    );
                    r
                }
                Err(e) => text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("encoding metrics failed: {e}\n"),
                ),
            }
        }
        _ => {
            if let Some(name) = ["/healthz/", "/livez/", "/readyz/"]
                .iter()
                .find_map(|prefix| path.strip_prefix(prefix))
            {
                match state.health.run().into_iter().find(|(n, _)| n == name) {
                    Some((_, Ok(()))) => text(StatusCode::OK, "ok".to_owned()),
                    Some((_, Err(e))) => text(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("internal server error: {e}\n"),
                    ),
                    None => text(StatusCode::NOT_FOUND, format!("no health check named {name:?}\n")),
                }
            } else {
                text(StatusCode::NOT_FOUND, "404 page not found\n".to_owned())
            }
        }
    }
}
