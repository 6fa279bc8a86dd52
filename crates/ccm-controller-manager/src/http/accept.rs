//! Accepting and serving connections on the secure port.
//!
//! One thread of its own (`secure-port`) takes every connection, admits it or closes it at once
//! ([`Admission`]), and serves the node's own connections (the kubelet's probes) itself; peers' connections are
//! handed to the process's runtime. However much work peers make the server do (TLS handshakes are the costly
//! part, and a flood of them keeps every worker of the runtime busy), a probe then waits neither behind their
//! accepts nor behind their handshakes in a task queue: the kernel runs this mostly idle thread as soon as the
//! probe arrives.

use std::{convert::Infallible, net::SocketAddr, sync::Arc};

use hyper::{Request, body::Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::ServerConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, server::TlsStream};
use tokio_util::sync::CancellationToken;

use super::{
    H2_WINDOW, HANDSHAKE_TIMEOUT, HEADER_TIMEOUT, IDLE_TIMEOUT, KEEP_ALIVE_INTERVAL, KEEP_ALIVE_TIMEOUT,
    MAX_CONNECTION_AGE, MAX_REQUEST_HEAD, MAX_STREAMS, State,
    limits::{Admission, Pool, Slot},
    respond,
};
use crate::Error;

/// What the accepting thread needs to serve a connection, wherever it runs.
#[derive(Clone)]
struct Server {
    acceptor: TlsAcceptor,
    state: State,
    shutdown: CancellationToken,
}

/// Serves on `listener` until `shutdown`, from the thread this starts; peers' connections run on the calling
/// runtime. Fails when not called on a runtime or when the thread cannot be started; the returned handle ends
/// with the server.
pub(crate) fn start(
    listener: TcpListener,
    tls: ServerConfig,
    state: State,
    shutdown: CancellationToken,
) -> Result<std::thread::JoinHandle<()>, Error> {
    let failed = |what: &str, e: &dyn std::fmt::Display| Error::Serving(format!("{what}: {e}"));
    let peers = tokio::runtime::Handle::try_current()
        .map_err(|e| failed("the secure port must be started on a tokio runtime", &e))?;
    // The listener moves to the thread's own runtime, whose reactor then watches it.
    let listener = listener
        .into_std()
        .map_err(|e| failed("cannot hand the secure port to its thread", &e))?;
    let front = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| failed("cannot build the secure port's runtime", &e))?;
    let server = Server {
        acceptor: TlsAcceptor::from(Arc::new(tls)),
        state,
        shutdown,
    };
    std::thread::Builder::new()
        .name("secure-port".to_owned())
        .spawn(move || {
            front.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(listener) => server.accept(listener, &peers).await,
                    Err(e) => tracing::error!(error = %e, "the secure port cannot be served"),
                }
            });
        })
        .map_err(|e| failed("cannot start the secure port's thread", &e))
}

impl Server {
    /// Takes connections until shutdown: each is admitted (possibly closing another to make room) or closed at
    /// once.
    async fn accept(self, listener: TcpListener, peers: &tokio::runtime::Handle) {
        let admission = Admission::default();
        loop {
            // Biased: once shutdown is asked for, no further connection is taken, even one already waiting.
            let (stream, peer) = tokio::select! {
                biased;
                () = self.shutdown.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        continue;
                    }
                },
            };
            // The address the peer reached: a peer connecting from it is the node itself.
            let local = stream.local_addr().ok().map(|a| a.ip());
            let slot = match admission.admit(peer.ip(), local) {
                Ok(slot) => slot,
                Err(refused) => {
                    tracing::debug!(%peer, reason = %refused, "closing a new connection");
                    continue;
                }
            };
            if slot.pool() == Pool::Node {
                tokio::spawn(self.clone().connection(stream, peer, slot));
            } else {
                self.hand_over(stream, peer, slot, peers);
            }
        }
    }

    /// Serves a peer's connection on the process's runtime (registered with its reactor).
    fn hand_over(&self, stream: TcpStream, peer: SocketAddr, slot: Slot, peers: &tokio::runtime::Handle) {
        let stream = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(%peer, error = %e, "cannot hand a connection over");
                return;
            }
        };
        let server = self.clone();
        peers.spawn(async move {
            match TcpStream::from_std(stream) {
                Ok(stream) => server.connection(stream, peer, slot).await,
                Err(e) => tracing::debug!(%peer, error = %e, "cannot hand a connection over"),
            }
        });
    }

    /// Serves one admitted connection until the peer leaves, the connection ages out, goes idle or is closed to
    /// make room for another, or shutdown. It holds its slot until then, so that the caps count open
    /// connections, not accepts.
    async fn connection(self, stream: TcpStream, peer: SocketAddr, slot: Slot) {
        let evicted = slot.evicted();
        let Some(tls) = handshake(&self.acceptor, stream, peer, &slot).await else {
            return;
        };
        let activity = slot.conn();
        let seen = activity.clone();
        let state = self.state;
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
            () = self.shutdown.cancelled() => {}
            // Chosen because no request was in flight: dropped at once, since its slot is already another's.
            () = evicted.cancelled() => tracing::debug!(%peer, "closed an idle connection to make room"),
            () = tokio::time::sleep(MAX_CONNECTION_AGE) => {
                // Finish what is in flight, then close.
                conn.as_mut().graceful_shutdown();
                finish(conn, &evicted).await;
            }
            () = activity.idle_for(IDLE_TIMEOUT) => {
                tracing::debug!(%peer, "closing an idle connection");
                conn.as_mut().graceful_shutdown();
                finish(conn, &evicted).await;
            }
            result = conn.as_mut() => if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection error");
            },
        }
    }
}

/// Lets a connection told to shut down finish what is in flight, for at most [`HEADER_TIMEOUT`], and not past
/// its eviction (its slot is then another's, and the connection must not outlive it).
async fn finish(conn: impl std::future::Future, evicted: &CancellationToken) {
    tokio::select! {
        () = evicted.cancelled() => {}
        _ = tokio::time::timeout(HEADER_TIMEOUT, conn) => {}
    }
}

/// The TLS handshake, or `None` (logged) when it fails, times out or is closed to make room for another
/// connection. Either way the peer's handshake count drops as soon as it is over, since a peer may only have a
/// few under way.
async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    slot: &Slot,
) -> Option<TlsStream<TcpStream>> {
    let evicted = slot.evicted();
    let handshake = tokio::select! {
        biased;
        () = evicted.cancelled() => {
            tracing::debug!(%peer, "closed a connection in its TLS handshake to make room");
            return None;
        }
        handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)) => handshake,
    };
    slot.handshake_done();
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
    // HTTP/1: keep-alive, and the header read timeout also closes a connection idle between requests. The
    // buffer cap bounds what a request's head may hold (hyper's default, 400 KiB, let a peer trickling a long
    // header make each of its connections cost that much); a whole response is still written, whatever its size.
    builder
        .http1()
        .timer(TokioTimer::new())
        .keep_alive(true)
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_REQUEST_HEAD as usize);
    // HTTP/2: the same cap on a request's headers, and flow-control windows of 64 KiB instead of hyper's 1 MiB,
    // which bound the request body a connection may buffer (these endpoints take none).
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_STREAMS)
        .max_header_list_size(MAX_REQUEST_HEAD)
        .initial_stream_window_size(H2_WINDOW)
        .initial_connection_window_size(H2_WINDOW)
        .keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT);
    builder
}
