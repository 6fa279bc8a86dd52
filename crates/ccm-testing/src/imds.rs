//! An IMDSv2 emulator on loopback: `PUT /latest/api/token` with `X-aws-ec2-metadata-token-ttl-seconds` returns a
//! session token (and echoes the TTL header, which aws-config requires), then GETs carrying that token read
//! metadata. GETs without a valid token are answered 401, unknown paths 404. Tests must use this instead of the
//! real 169.254.169.254.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use tokio::{io::AsyncWriteExt, io::BufReader, net::TcpListener, task::JoinHandle};

use crate::fault_proxy::{read_request, response};

const TOKEN: &str = "ccm-testing-imds-token";

/// The running emulator; stops when dropped.
#[derive(Debug)]
pub struct ImdsEmulator {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

#[derive(Debug, Default)]
struct State {
    paths: BTreeMap<String, String>,
    token_requests: u64,
    get_requests: u64,
    rejected: u64,
}

// === impl ImdsEmulator ===

impl ImdsEmulator {
    /// Starts an emulator for an instance: `instance-id`, `placement/availability-zone`, `placement/region` and
    /// the identity document are served.
    pub async fn start(instance_id: &str, availability_zone: &str, region: &str) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let mut paths = BTreeMap::new();
        paths.insert("/latest/meta-data/instance-id".to_owned(), instance_id.to_owned());
        paths.insert(
            "/latest/meta-data/placement/availability-zone".to_owned(),
            availability_zone.to_owned(),
        );
        paths.insert("/latest/meta-data/placement/region".to_owned(), region.to_owned());
        paths.insert(
            "/latest/dynamic/instance-identity/document".to_owned(),
            format!(
                r#"{{"accountId":"123456789012","availabilityZone":"{availability_zone}","instanceId":"{instance_id}","instanceType":"m5.large","privateIp":"10.0.0.1","region":"{region}","version":"2017-09-30"}}"#
            ),
        );
        let state = Arc::new(Mutex::new(State {
            paths,
            ..State::default()
        }));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    let mut reader = BufReader::new(stream);
                    while let Ok(Some(request)) = read_request(&mut reader).await {
                        let answer = answer(&state, &request);
                        if reader.get_mut().write_all(&answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Ok(Self { addr, state, task })
    }

    /// The endpoint to configure (`http://127.0.0.1:PORT`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serves `value` at `path` (for example `/latest/meta-data/local-hostname`), or stops serving it (`None`).
    pub fn set(&self, path: &str, value: Option<&str>) {
        let mut state = lock(&self.state);
        match value {
            Some(v) => state.paths.insert(path.to_owned(), v.to_owned()),
            None => state.paths.remove(path),
        };
    }

    /// Token PUTs served.
    pub fn token_requests(&self) -> u64 {
        lock(&self.state).token_requests
    }

    /// Metadata GETs served with a valid token.
    pub fn get_requests(&self) -> u64 {
        lock(&self.state).get_requests
    }

    /// Requests refused (no TTL header on a token PUT, no or wrong token on a GET).
    pub fn rejected(&self) -> u64 {
        lock(&self.state).rejected
    }
}

impl Drop for ImdsEmulator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn answer(state: &Mutex<State>, request: &crate::fault_proxy::Request) -> Vec<u8> {
    let mut state = lock(state);
    let text = "text/plain";
    match (request.method.as_str(), request.path.as_str()) {
        ("PUT", "/latest/api/token") => match request.header("x-aws-ec2-metadata-token-ttl-seconds") {
            Some(ttl) if ttl.parse::<u32>().is_ok_and(|t| (1..=21600).contains(&t)) => {
                state.token_requests += 1;
                response(
                    200,
                    text,
                    &[("X-aws-ec2-metadata-token-ttl-seconds", ttl.to_owned())],
                    TOKEN.as_bytes(),
                )
            }
            _ => {
                state.rejected += 1;
                response(400, text, &[], b"missing or invalid TTL header")
            }
        },
        ("GET", path) => {
            if request.header("x-aws-ec2-metadata-token") != Some(TOKEN) {
                state.rejected += 1;
                return response(401, text, &[], b"");
            }
            state.get_requests += 1;
            match state.paths.get(path) {
                Some(value) => response(200, text, &[], value.as_bytes()),
                None => response(404, text, &[], b"Not Found"),
            }
        }
        _ => response(405, text, &[], b""),
    }
}
