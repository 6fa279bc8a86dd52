//! A reverse proxy between an AWS SDK client and moto that answers chosen actions with faults: throttling
//! (in each protocol's own error format), HTTP errors, added latency or a dropped connection. Everything else
//! is forwarded unchanged. It also counts the requests it saw per action, so tests can assert exact attempts.
//!
//! The action is read from the form body (`Action=...`, EC2 and ELB query APIs) or from `X-Amz-Target` (JSON
//! APIs such as ECR).
//!
//! Besides faults queued per action, a seeded random mode ([`Chaos`]) answers a share of all other requests with
//! a fault drawn from the seed, the action and the request's rank among that action's requests: the same seed
//! gives the same faults to the same sequence of calls of each action, whatever the interleaving of actions.
//!
//! A throttling mode ([`Throttling`], [`FaultProxy::set_throttling`]) holds AWS's documented token buckets for
//! one account, shared by every client of the proxy: a request finding a bucket empty gets the service's
//! throttling error and never reaches moto; the throttled answers are counted per action
//! ([`FaultProxy::throttled_by_action`]). It is checked before the queued faults, as AWS's front door comes
//! before its answer: a throttled request uses no queued fault.

use std::{
    collections::{BTreeMap, VecDeque},
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

mod aws_limits;
mod chaos;
pub mod throttling;

pub use chaos::{Chaos, ChaosKind};
pub use throttling::Throttling;
use throttling::{Api, Throttler};
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
    task::JoinHandle,
    time::Instant,
};

/// A fault to answer one request with.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// The service's throttling error: EC2 `RequestLimitExceeded`, ELB `Throttling`, JSON `ThrottlingException`.
    Throttle,
    /// An error with this HTTP status and AWS code, in the service's format.
    Error {
        /// HTTP status.
        status: u16,
        /// AWS error code.
        code: String,
        /// The error message (AWS puts details there, such as the unknown IDs of a `DescribeInstances`).
        message: String,
    },
    /// Forward the request, after this delay.
    Delay(Duration),
    /// Answer with this canned response instead of asking moto (to produce pages, odd shapes, missing fields).
    Respond {
        /// HTTP status.
        status: u16,
        /// `Content-Type` of the body.
        content_type: String,
        /// The body.
        body: String,
    },
    /// Close the connection without answering.
    Drop,
    /// Forward the request, then close the connection without passing the answer on.
    DropAfterForward,
}

/// The proxy; stops when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

#[derive(Debug, Default)]
struct State {
    /// Faults queued per action, used first-in first-out, one per request.
    faults: BTreeMap<String, VecDeque<Fault>>,
    /// Requests seen per action (faulted or forwarded).
    seen: BTreeMap<String, u64>,
    /// Headers of the last request per action (lower-case names).
    last_headers: BTreeMap<String, BTreeMap<String, String>>,
    /// Bodies of every request per action, in order.
    bodies: BTreeMap<String, Vec<String>>,
    /// Whether request bodies are kept (off in chaos mode: a soak sends too many).
    keep_bodies: bool,
    /// The random mode, when on.
    chaos: Option<Chaos>,
    /// Faults injected by the random mode, per kind.
    chaos_faults: BTreeMap<ChaosKind, u64>,
    /// The account's token buckets, when the throttling mode is on.
    throttler: Option<Throttler>,
    /// Requests answered with a throttling error by the throttling mode, per action.
    throttled: BTreeMap<String, u64>,
    /// Time spent waiting for the upstream's answers, per action (forwarded requests only).
    upstream_time: BTreeMap<String, Duration>,
}

/// One parsed HTTP/1.1 request.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

/// The counts of `after` that grew since `before` (two readings of [`FaultProxy::requests_by_action`]), by how
/// much: the requests of one phase.
pub fn counts_since(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(action, n)| {
            let d = n.saturating_sub(before.get(action).copied().unwrap_or(0));
            (d > 0).then(|| (action.clone(), d))
        })
        .collect()
}

// === impl FaultProxy ===

impl FaultProxy {
    /// Starts a proxy on a free loopback port in front of `upstream` (`http://host:port`).
    pub async fn start(upstream: &str) -> std::io::Result<Self> {
        let upstream = upstream
            .strip_prefix("http://")
            .ok_or_else(|| std::io::Error::other("upstream must be http://host:port"))?
            .trim_end_matches('/')
            .to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State {
            keep_bodies: true,
            ..State::default()
        }));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let _ = serve(stream, &upstream, &state).await;
                });
            }
        });
        Ok(Self { addr, state, task })
    }

    /// The URL to give the SDK as endpoint.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answers the next `times` requests of `action` with `fault`.
    pub fn inject(&self, action: &str, fault: Fault, times: usize) {
        let mut state = lock(&self.state);
        let queue = state.faults.entry(action.to_owned()).or_default();
        queue.extend(std::iter::repeat_n(fault, times));
    }

    /// Drops the faults still queued for `action`: from now on it reaches the upstream.
    pub fn clear(&self, action: &str) {
        lock(&self.state).faults.remove(action);
    }

    /// Requests of `action` seen so far.
    pub fn requests(&self, action: &str) -> u64 {
        lock(&self.state).seen.get(action).copied().unwrap_or(0)
    }

    /// The bodies of every request of `action` seen so far, in order (form-encoded for query APIs).
    pub fn bodies(&self, action: &str) -> Vec<String> {
        lock(&self.state).bodies.get(action).cloned().unwrap_or_default()
    }

    /// Turns the seeded random mode on (`Some`) or off. While on, request bodies are no longer kept.
    pub fn set_chaos(&self, chaos: Option<Chaos>) {
        let mut state = lock(&self.state);
        state.keep_bodies = chaos.is_none();
        state.chaos = chaos;
    }

    /// Faults the random mode injected so far, per kind.
    pub fn chaos_faults(&self) -> BTreeMap<ChaosKind, u64> {
        lock(&self.state).chaos_faults.clone()
    }

    /// Turns the throttling mode on with these buckets, all full (`Some`), or off (`None`). Every client of the
    /// proxy shares them, as the clients of one AWS account and Region do. The throttled answers counted so far
    /// are kept.
    pub fn set_throttling(&self, throttling: Option<Throttling>) {
        lock(&self.state).throttler = throttling.map(Throttler::new);
    }

    /// Requests the throttling mode answered with the service's throttling error so far, per action (they are
    /// counted in [`requests_by_action`](Self::requests_by_action) too).
    pub fn throttled_by_action(&self) -> BTreeMap<String, u64> {
        lock(&self.state).throttled.clone()
    }

    /// Requests seen so far per action (faulted or forwarded).
    pub fn requests_by_action(&self) -> BTreeMap<String, u64> {
        lock(&self.state).seen.clone()
    }

    /// Seconds spent so far waiting for the upstream's answers, per action: from connecting to the last byte of
    /// the answer, summed over the forwarded requests (a faulted one costs the upstream nothing). Where the
    /// upstream (moto) spends its time on a controller's calls, and how that grows with what it holds.
    pub fn upstream_secs_by_action(&self) -> BTreeMap<String, f64> {
        let state = lock(&self.state);
        state
            .upstream_time
            .iter()
            .map(|(action, t)| (action.clone(), t.as_secs_f64()))
            .collect()
    }

    /// The headers (names lower-cased) of the last request of `action`.
    pub fn last_headers(&self, action: &str) -> Option<BTreeMap<String, String>> {
        lock(&self.state).last_headers.get(action).cloned()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn serve(stream: TcpStream, upstream: &str, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    while let Some(request) = read_request(&mut reader).await? {
        let action = request.action();
        let fault = record(state, &request, &action);
        let response = match fault {
            Some(Fault::Drop) => return Ok(()),
            Some(Fault::DropAfterForward) => {
                timed_forward(upstream, &request, state, &action).await?;
                return Ok(());
            }
            Some(Fault::Throttle) => request.error_response(None, "Rate exceeded"),
            Some(Fault::Error {
                status,
                code,
                message,
            }) => request.error_response(Some((status, &code)), &message),
            Some(Fault::Respond {
                status,
                content_type,
                body,
            }) => response(status, &content_type, &[], body.as_bytes()),
            Some(Fault::Delay(delay)) => {
                tokio::time::sleep(delay).await;
                timed_forward(upstream, &request, state, &action).await?
            }
            None => timed_forward(upstream, &request, state, &action).await?,
        };
        reader.get_mut().write_all(&response).await?;
        // A client that reads its answer to the end (as `forward` does when one proxy is another's upstream)
        // waits for the close it asked for.
        if request
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
        {
            return Ok(());
        }
    }
    Ok(())
}

/// Counts the request and returns its fault: throttling first (when the account's buckets lack its tokens), then
/// a queued one, else one of the random mode.
fn record(state: &Mutex<State>, request: &Request, action: &str) -> Option<Fault> {
    let mut state = lock(state);
    let seen = state.seen.entry(action.to_owned()).or_default();
    *seen += 1;
    let rank = *seen;
    let headers = request
        .headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .collect();
    state.last_headers.insert(action.to_owned(), headers);
    if state.keep_bodies {
        let body = String::from_utf8_lossy(&request.body).into_owned();
        state.bodies.entry(action.to_owned()).or_default().push(body);
    }
    if let Some(throttler) = state.throttler.as_mut()
        && let Some(api) = request.api()
        && !throttler.admit(
            api,
            action,
            &String::from_utf8_lossy(&request.body),
            Instant::now(),
        )
    {
        *state.throttled.entry(action.to_owned()).or_default() += 1;
        return Some(Fault::Throttle);
    }
    if let Some(fault) = state.faults.get_mut(action).and_then(VecDeque::pop_front) {
        return Some(fault);
    }
    let (kind, fault) = state.chaos?.draw(action, rank, request.is_ec2())?;
    *state.chaos_faults.entry(kind).or_default() += 1;
    Some(fault)
}

/// [`forward`], adding the time the upstream took to the action's.
async fn timed_forward(
    upstream: &str,
    request: &Request,
    state: &Mutex<State>,
    action: &str,
) -> std::io::Result<Vec<u8>> {
    let started = Instant::now();
    let response = forward(upstream, request).await;
    *lock(state).upstream_time.entry(action.to_owned()).or_default() += started.elapsed();
    response
}

/// Sends the request upstream on a fresh connection and returns the raw response.
async fn forward(upstream: &str, request: &Request) -> std::io::Result<Vec<u8>> {
    let mut conn = TcpStream::connect(upstream).await?;
    let mut head = format!("{} {} HTTP/1.1\r\n", request.method, request.path);
    for (name, value) in &request.headers {
        if name.eq_ignore_ascii_case("connection") {
            continue;
        }
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("Connection: close\r\n\r\n");
    conn.write_all(head.as_bytes()).await?;
    conn.write_all(&request.body).await?;
    let mut response = Vec::new();
    conn.read_to_end(&mut response).await?;
    Ok(response)
}

/// Reads one request; `None` at a clean end of the connection.
pub(crate) async fn read_request<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
) -> std::io::Result<Option<Request>> {
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        if reader.read_until(b'\n', &mut line).await? == 0 {
            return Ok(None);
        }
        let end = line == b"\r\n" || line == b"\n";
        head.extend_from_slice(&line);
        if end {
            break;
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines = text.lines();
    let mut start = lines.next().unwrap_or_default().split_whitespace();
    let method = start.next().unwrap_or_default().to_owned();
    let path = start.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let length = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    Ok(Some(Request {
        method,
        path,
        headers,
        body,
    }))
}

/// A complete HTTP/1.1 response.
pub(crate) fn response(status: u16, content_type: &str, extra: &[(&str, String)], body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n",
        reason(status),
        body.len()
    );
    for (name, value) in extra {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

// === impl Fault ===

impl Fault {
    /// An error with this HTTP status and AWS code, and a generic message.
    pub fn error(status: u16, code: &str) -> Self {
        Self::Error {
            status,
            code: code.to_owned(),
            message: "Injected fault".to_owned(),
        }
    }

    /// The same fault with another message (errors only).
    pub fn with_message(self, text: &str) -> Self {
        match self {
            Self::Error { status, code, .. } => Self::Error {
                status,
                code,
                message: text.to_owned(),
            },
            other => other,
        }
    }
}

// === impl Request ===

impl Request {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// `DescribeInstances` from `Action=DescribeInstances&...`, or `GetAuthorizationToken` from
    /// `X-Amz-Target: AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken`.
    fn action(&self) -> String {
        if let Some(target) = self.header("x-amz-target") {
            return target.rsplit('.').next().unwrap_or(target).to_owned();
        }
        String::from_utf8_lossy(&self.body)
            .split('&')
            .find_map(|pair| pair.strip_prefix("Action="))
            .unwrap_or("unknown")
            .to_owned()
    }

    fn is_ec2(&self) -> bool {
        self.api() == Some(Api::Ec2)
    }

    /// The query API of the request, from its `Version` (`None` for JSON APIs and the APIs not throttled).
    fn api(&self) -> Option<Api> {
        String::from_utf8_lossy(&self.body)
            .split('&')
            .find_map(|pair| pair.strip_prefix("Version="))
            .and_then(Api::from_version)
    }

    /// The service's error document: `fault` is (status, code), or throttling when `None`.
    fn error_response(&self, fault: Option<(u16, &str)>, message: &str) -> Vec<u8> {
        if self.header("x-amz-target").is_some() {
            let (status, code) = fault.unwrap_or((400, "ThrottlingException"));
            let body = format!(r#"{{"__type":"{code}","message":"{message}"}}"#);
            return response(status, "application/x-amz-json-1.1", &[], body.as_bytes());
        }
        if self.is_ec2() {
            let (status, code) = fault.unwrap_or((503, "RequestLimitExceeded"));
            let body = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code>\
                 <Message>{message}</Message></Error></Errors><RequestID>fault-proxy</RequestID></Response>"
            );
            return response(status, "text/xml;charset=UTF-8", &[], body.as_bytes());
        }
        let (status, code) = fault.unwrap_or((400, "Throttling"));
        let body = format!(
            "<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>\
             <RequestId>fault-proxy</RequestId></ErrorResponse>"
        );
        response(status, "text/xml", &[], body.as_bytes())
    }
}

#[cfg(test)]
mod tests;
