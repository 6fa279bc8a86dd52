//! The HTTPS server on `--secure-port`: `/healthz`, `/healthz/<check>` and `/metrics`, with the certificate from
//! `--tls-cert-file`/`--tls-private-key-file`, from `--cert-dir`, or self-signed in memory (as upstream); a
//! certificate from files is re-read when they change on disk.

use std::{
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
use prometheus_client::registry::Registry;
use rustls::ServerConfig;
use tokio::net::TcpListener;

use crate::{Error, auth::Denied};

mod accept;
mod certs;
mod limits;
mod metrics;
#[cfg(test)]
mod rotation_tests;
#[cfg(test)]
mod tests;
pub(crate) use accept::start;
pub(crate) use metrics::RuntimeMetrics;

/// Longest TLS handshake: the port is unauthenticated (and, with `hostNetwork`, reachable from every pod), so a
/// peer that connects and says nothing must not hold a connection for long.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
/// Longest wait for a request's headers, and for requests in flight at a connection's end.
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// The most connections peers hold at once (Prometheus needs one or two). When they hold that many, a new one
/// from a peer holding fewer than the heaviest closes the heaviest's longest-idle connection (see
/// [`limits::Admission::admit`]); otherwise it is closed as it arrives.
pub(crate) const MAX_CONNECTIONS: usize = 256;
/// The most connections one peer (an IPv4 address, an IPv6 /64) may hold, and how many of them may still be in
/// their TLS handshake: beyond either, its new connections are closed as they arrive, so that one address (a pod
/// flooding the port with idle connects) can never take more than its share.
pub(crate) const MAX_CONNECTIONS_PER_PEER: usize = 16;
pub(crate) const MAX_HANDSHAKES_PER_PEER: usize = 4;
/// Connections only the node itself may hold, beyond [`MAX_CONNECTIONS`] (see [`limits::from_node`]): the
/// kubelet opens one per probe (liveness, readiness, startup), each closed after its answer, so no number of
/// peers, however many connections they hold, can refuse a probe (issue #55). A handful would do; 32 leaves room
/// for a node-local scraper beside the probes.
pub(crate) const NODE_CONNECTIONS: usize = 32;
/// The kernel's queue of connections not yet accepted. When it is full the kernel drops new SYNs, and the client
/// sends its SYN again only after a second, which is the kubelet's whole probe timeout: a burst of connects (say
/// 50 peers reconnecting at once) must not fill it. The kernel caps it at `net.core.somaxconn` (4096 by default
/// since Linux 5.4; Go's listeners ask for that value too), tokio's `TcpListener::bind` asks for 1024.
const ACCEPT_BACKLOG: u32 = 4096;
/// A connection with no request in flight for this long is closed (HTTP/2 keeps a connection alive with pings
/// alone; HTTP/1's header timeout already closes an idle one sooner).
const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
/// The most concurrent HTTP/2 streams per connection.
const MAX_STREAMS: u32 = 32;
/// The largest request head (request line and headers) either protocol takes: with a bearer token, a request
/// here needs a few KiB. It bounds what a connection that trickles a request buffers.
const MAX_REQUEST_HEAD: u32 = 16 * 1024;
/// HTTP/2 flow-control windows, for a stream and for the connection: the request body a connection may
/// buffer.
const H2_WINDOW: u32 = 64 * 1024;
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

/// Builds the rustls configuration (aws-lc-rs only). A certificate from files (`--tls-cert-file` or
/// `--cert-dir`) is re-read when they change on disk (see [`certs`]); the in-memory self-signed one is fixed.
pub(crate) fn tls_config(src: &TlsSource<'_>) -> Result<ServerConfig, Error> {
    tls_config_checking(src, certs::CHECK_EVERY)
}

/// [`tls_config`], looking at the certificate files at most once per `every`.
fn tls_config_checking(src: &TlsSource<'_>, every: std::time::Duration) -> Result<ServerConfig, Error> {
    let tls_err = |what: String| Error::Serving(what);
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let resolver = if !src.cert_file.is_empty() {
        let files = certs::Files {
            cert: src.cert_file.into(),
            key: src.key_file.into(),
        };
        certs::Reloading::from_files(files, provider.clone(), every)?
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
        certs::Reloading::from_files(certs::Files { cert: crt, key }, provider.clone(), every)?
    } else {
        let (cert_pem, key_pem) = self_signed(src.bind)?;
        certs::Reloading::fixed(&cert_pem, &key_pem, provider.clone())?
    };
    let versions: &[&rustls::SupportedProtocolVersion] = if src.min_version == "VersionTLS13" {
        &[&rustls::version::TLS13]
    } else {
        &[&rustls::version::TLS13, &rustls::version::TLS12]
    };
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| tls_err(format!("TLS versions: {e}")))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
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

/// Binds the listener (so that a port conflict is an error at start, not later), with an accept queue of
/// [`ACCEPT_BACKLOG`].
pub(crate) async fn bind(addr: SocketAddr) -> Result<TcpListener, Error> {
    let listen = || {
        let socket = match addr {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        // As `TcpListener::bind`: a restarted process may bind while the old one's connections linger.
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(ACCEPT_BACKLOG)
    };
    listen().map_err(|e| {
        Error::Serving(format!(
            "cannot listen on {addr} (--bind-address/--secure-port): {e}"
        ))
    })
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
            health(state, path.trim_matches('/'), verbose)
        }
        "/configz" => typed(
            text(StatusCode::OK, state.configz.to_string()),
            "application/json",
        ),
        "/dry-run" if state.dry_run.is_some() => {
            let report = state.dry_run.as_ref().map(|log| log.report()).unwrap_or_default();
            typed(text(StatusCode::OK, format!("{report:#}\n")), "application/json")
        }
        "/metrics" => metrics_page(state),
        _ => match ["/healthz/", "/livez/", "/readyz/"]
            .iter()
            .find_map(|prefix| path.strip_prefix(prefix))
        {
            Some(name) => one_check(state, name),
            None => text(StatusCode::NOT_FOUND, "404 page not found\n".to_owned()),
        },
    }
}

/// `response` with its `Content-Type`.
fn typed(mut response: Response<Full<Bytes>>, content_type: &'static str) -> Response<Full<Bytes>> {
    response.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}

/// `/healthz`, `/livez` or `/readyz` (`endpoint`): `ok`, or every check's result when one failed or `verbose`.
fn health(state: &State, endpoint: &str, verbose: bool) -> Response<Full<Bytes>> {
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

/// `/healthz/<name>` and the like: the one check named.
fn one_check(state: &State, name: &str) -> Response<Full<Bytes>> {
    match state.health.run().into_iter().find(|(n, _)| n == name) {
        Some((_, Ok(()))) => text(StatusCode::OK, "ok".to_owned()),
        Some((_, Err(e))) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {e}\n"),
        ),
        None => text(StatusCode::NOT_FOUND, format!("no health check named {name:?}\n")),
    }
}

/// `/metrics`, in the OpenMetrics text format.
fn metrics_page(state: &State) -> Response<Full<Bytes>> {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
        Ok(()) => typed(
            text(StatusCode::OK, body),
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding metrics failed: {e}\n"),
        ),
    }
}
