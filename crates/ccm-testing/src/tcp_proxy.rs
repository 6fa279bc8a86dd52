//! A plain TCP proxy (TLS passes through untouched) that can slow down or cut the path to its upstream, for tests
//! of what a slow or partitioned apiserver does to a client: replies delayed by a set time (each chunk is
//! delivered that long after it arrived, in order), and a partition that holds everything the clients send
//! (nothing reaches the upstream while it lasts; replies already on their way are still delivered).

use std::{net::SocketAddr, sync::Arc, time::Duration};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream, tcp::OwnedReadHalf, tcp::OwnedWriteHalf},
    sync::{mpsc, watch},
    task::JoinHandle,
    time::Instant,
};

/// The proxy; stops accepting when dropped (open connections end with their peers).
#[derive(Debug)]
pub struct TcpDelayProxy {
    addr: SocketAddr,
    settings: Arc<watch::Sender<Settings>>,
    task: JoinHandle<()>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Settings {
    reply_delay: Duration,
    partitioned: bool,
}

// === impl TcpDelayProxy ===

impl TcpDelayProxy {
    /// Listens on a free 127.0.0.1 port and forwards every connection to `upstream` (`host:port`).
    pub async fn start(upstream: &str) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let settings = Arc::new(watch::Sender::new(Settings::default()));
        let upstream = upstream.to_owned();
        let shared = settings.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let settings = shared.subscribe();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(&upstream).await {
                        connect(client, server, settings);
                    }
                });
            }
        });
        Ok(Self { addr, settings, task })
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Delays every reply chunk that arrives from now on by `delay` (zero: none).
    pub fn set_reply_delay(&self, delay: Duration) {
        self.settings.send_modify(|s| s.reply_delay = delay);
    }

    /// Holds (`true`) or releases (`false`) everything the clients send.
    pub fn set_partitioned(&self, partitioned: bool) {
        self.settings.send_modify(|s| s.partitioned = partitioned);
    }
}

impl Drop for TcpDelayProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn connect(client: TcpStream, server: TcpStream, settings: watch::Receiver<Settings>) {
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::spawn(requests(client_read, server_write, settings.clone()));
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(replies_in(server_read, tx, settings));
    tokio::spawn(replies_out(rx, client_write));
}

/// Client to upstream, held while partitioned.
async fn requests(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut settings: watch::Receiver<Settings>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if settings.wait_for(|s| !s.partitioned).await.is_err() {
            break;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// Upstream replies, stamped with when they may be delivered.
async fn replies_in(
    mut from: OwnedReadHalf,
    to: mpsc::UnboundedSender<(Instant, Vec<u8>)>,
    settings: watch::Receiver<Settings>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let at = Instant::now() + settings.borrow().reply_delay;
        if to.send((at, buf[..n].to_vec())).is_err() {
            break;
        }
    }
}

/// Delivers replies in order, each at its time.
async fn replies_out(mut from: mpsc::UnboundedReceiver<(Instant, Vec<u8>)>, mut to: OwnedWriteHalf) {
    while let Some((at, chunk)) = from.recv().await {
        tokio::time::sleep_until(at).await;
        if to.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
