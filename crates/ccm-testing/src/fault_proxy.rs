//! A reverse proxy between an AWS SDK client and moto that answers chosen actions with faults: throttling
//! (in each protocol's own error format), HTTP errors, added latency or a dropped connection. Everything else
//! is forwarded unchanged. It also counts the requests it saw per action, so tests can assert exact attempts.
//!
//! The action is read from the form body (`Action=...`, EC2 and ELB query APIs) or from `X-Amz-Target` (JSON
//! APIs such as ECR).

use std::{
    collections::{BTreeMap, VecDeque},
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
    task::JoinHandle,
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
}

/// One parsed HTTP/1.1 request.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
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
        let state = Arc::new(Mutex::new(State::default()));
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

    /// Requests of `action` seen so far.
    pub fn requests(&self, action: &str) -> u64 {
        lock(&self.state).seen.get(action).copied().unwrap_or(0)
    }

    /// The bodies of every request of `action` seen so far, in order (form-encoded for query APIs).
    pub fn bodies(&self, action: &str) -> Vec<String> {
        lock(&self.state).bodies.get(action).cloned().unwrap_or_default()
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
        let fault = {
            let mut state = lock(state);
            *state.seen.entry(action.clone()).or_default() += 1;
            let headers = request
                .headers
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
                .collect();
            state.last_headers.insert(action.clone(), headers);
            let body = String::from_utf8_lossy(&request.body).into_owned();
            state.bodies.entry(action.clone()).or_default().push(body);
            state.faults.get_mut(&action).and_then(VecDeque::pop_front)
        };
        let response = match fault {
            Some(Fault::Drop) => return Ok(()),
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
                forward(upstream, &request).await?
            }
            None => forward(upstream, &request).await?,
        };
        reader.get_mut().write_all(&response).await?;
    }
    Ok(())
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
        String::from_utf8_lossy(&self.body)
            .split('&')
            .any(|p| p == "Version=2016-11-15")
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
