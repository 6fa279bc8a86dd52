//! Kubernetes clients: the root client from `--kubeconfig`/`--master`, the client-side rate limiter
//! (`--kube-api-qps`/`--kube-api-burst`, which kube-rs does not have), and per-controller clients that
//! authenticate as `kube-system/<client name>` with TokenRequest tokens (`--use-service-account-credentials`).

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, RwLock},
    task::{Context, Poll},
    time::Duration,
};

use ccm_controllers::TokenBucket;
use k8s_openapi::api::{authentication::v1::TokenRequest, core::v1::ServiceAccount};
use kube::{
    Api, Client, Config,
    api::{ObjectMeta, PostParams},
    client::ClientBuilder,
    config::{AuthInfo, KubeConfigOptions, Kubeconfig},
};
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;

use crate::Error;

/// The namespace of the per-controller service accounts, as upstream.
const SA_NAMESPACE: &str = "kube-system";
/// Lifetime asked for per-controller tokens; they are renewed at 80 %.
const TOKEN_SECONDS: i64 = 3600;

/// The root client configuration from `--kubeconfig` and `--master`.
pub(crate) async fn root_config(kubeconfig: &str, master: &str) -> Result<Config, Error> {
    let mut config = if kubeconfig.is_empty() {
        Config::infer().await.map_err(|e| Error::Kube {
            context: "no --kubeconfig given, and neither the default kubeconfig nor the in-cluster configuration is usable",
            source: Box::new(e),
        })?
    } else {
        let file = Kubeconfig::read_from(kubeconfig).map_err(|e| Error::Kube {
            context: "cannot read --kubeconfig",
            source: Box::new(e),
        })?;
        Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
            .await
            .map_err(|e| Error::Kube {
                context: "cannot use --kubeconfig",
                source: Box::new(e),
            })?
    };
    if !master.is_empty() {
        config.cluster_url = master.parse().map_err(|e| Error::Kube {
            context: "--master is not a URL",
            source: Box::new(e),
        })?;
    }
    Ok(config)
}

/// A client over `config` behind the rate limiter (`qps <= 0`: none), adding `bearer` when given.
pub(crate) fn build(
    config: Config,
    limiter: Option<Arc<Bucket>>,
    bearer: Option<Arc<RwLock<String>>>,
    user_agent: &str,
    dry_run: Option<&Arc<crate::dry_run::DryRunLog>>,
) -> Result<Client, Error> {
    let mut config = config;
    let host = config
        .cluster_url
        .authority()
        .map_or_else(String::new, ToString::to_string);
    if let Ok(v) = user_agent.parse() {
        config.headers.push((hyper::header::USER_AGENT, v));
    }
    let builder = ClientBuilder::try_from(config).map_err(|e| Error::Kube {
        context: "cannot build a Kubernetes client",
        source: Box::new(e),
    })?;
    let builder = builder.with_layer(&BearerLayer(bearer));
    let builder = builder.with_layer(&TimeoutLayer(REQUEST_TIMEOUT));
    let builder = builder.with_layer(&RateLimitLayer(limiter));
    let builder = builder.with_layer(&crate::upstream_metrics::RestMetricsLayer { host });
    // Outermost: a refused write takes no rate-limit token and is never sent.
    let controller = user_agent.rsplit('/').next().unwrap_or(user_agent).to_owned();
    let builder = builder.with_layer(&crate::dry_run::DryRunLayer {
        log: dry_run.cloned(),
        controller,
    });
    Ok(builder.build())
}

/// A token bucket shared by every client of the process (as client-go's per-config limiter).
#[derive(Debug)]
pub(crate) struct Bucket(Mutex<TokenBucket>);

impl Bucket {
    pub(crate) fn new(qps: f32, burst: i32) -> Option<Arc<Self>> {
        (qps > 0.0).then(|| {
            Arc::new(Self(Mutex::new(TokenBucket::new(
                f64::from(qps),
                f64::from(burst.max(1)),
            ))))
        })
    }

    /// Takes one token and returns how long to wait for it (zero when one was available).
    fn reserve(&self) -> Duration {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .reserve()
    }
}

#[derive(Clone)]
struct RateLimitLayer(Option<Arc<Bucket>>);

struct RateLimit<S> {
    inner: S,
    bucket: Option<Arc<Bucket>>,
    sleep: Option<Pin<Box<Sleep>>>,
    reserved: bool,
}

impl<S> tower::Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            bucket: self.0.clone(),
            sleep: None,
            reserved: false,
        }
    }
}

impl<S: tower::Service<R>, R> tower::Service<R> for RateLimit<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    // The wait happens in `poll_ready`: kube's client drives it from one buffer worker, so requests take tokens
    // in arrival order.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if let Some(bucket) = &self.bucket
            && !self.reserved
        {
            if self.sleep.is_none() {
                let wait = bucket.reserve();
                if wait.is_zero() {
                    self.reserved = true;
                } else {
                    self.sleep = Some(Box::pin(tokio::time::sleep(wait)));
                }
            }
            if let Some(sleep) = self.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.sleep = None;
                self.reserved = true;
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        self.reserved = false;
        self.inner.call(req)
    }
}

#[derive(Clone)]
struct BearerLayer(Option<Arc<RwLock<String>>>);

struct Bearer<S> {
    inner: S,
    token: Option<Arc<RwLock<String>>>,
}

impl<S> tower::Layer<S> for BearerLayer {
    type Service = Bearer<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Bearer {
            inner,
            token: self.0.clone(),
        }
    }
}

impl<S: tower::Service<hyper::Request<B>>, B> tower::Service<hyper::Request<B>> for Bearer<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: hyper::Request<B>) -> Self::Future {
        if let Some(token) = &self.token {
            let token = token.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Ok(mut v) = hyper::header::HeaderValue::from_str(&format!("Bearer {token}")) {
                v.set_sensitive(true);
                req.headers_mut().insert(hyper::header::AUTHORIZATION, v);
            }
        }
        self.inner.call(req)
    }
}

/// A client that authenticates as service account `kube-system/<name>` (created if missing), with a token from
/// the TokenRequest API that a background task renews until `shutdown`.
pub(crate) async fn service_account_client(
    root: &Client,
    config: &Config,
    limiter: Option<Arc<Bucket>>,
    name: &str,
    shutdown: CancellationToken,
) -> Result<Client, Error> {
    let sas: Api<ServiceAccount> = Api::namespaced(root.clone(), SA_NAMESPACE);
    let kube_err = |context: &'static str| {
        move |e: kube::Error| Error::Kube {
            context,
            source: Box::new(e),
        }
    };
    if sas
        .get_opt(name)
        .await
        .map_err(kube_err("cannot read the controller's service account"))?
        .is_none()
    {
        let sa = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(SA_NAMESPACE.to_owned()),
                ..ObjectMeta::default()
            },
            ..ServiceAccount::default()
        };
        match sas.create(&PostParams::default(), &sa).await {
            Ok(_) => tracing::info!(service_account = name, "created the controller's service account"),
            Err(kube::Error::Api(s)) if s.is_already_exists() => {}
            Err(e) => return Err(kube_err("cannot create the controller's service account")(e)),
        }
    }
    let (token, lifetime) = request_token(&sas, name).await.map_err(kube_err(
        "cannot get a token for the controller's service account (TokenRequest)",
    ))?;
    let token = Arc::new(RwLock::new(token));
    let mut sa_config = config.clone();
    sa_config.auth_info = AuthInfo::default();
    let client = build(
        sa_config,
        limiter,
        Some(token.clone()),
        &format!("cloud-controller-manager/{name}"),
        None,
    )?;
    let name = name.to_owned();
    tokio::spawn(async move {
        let mut lifetime = lifetime;
        loop {
            let renew_in = lifetime.mul_f64(0.8);
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(renew_in) => {}
            }
            match request_token(&sas, &name).await {
                Ok((t, l)) => {
                    *token.write().unwrap_or_else(std::sync::PoisonError::into_inner) = t;
                    lifetime = l;
                }
                Err(e) => {
                    tracing::warn!(service_account = %name, error = %e, "token renewal failed; retrying in 10s");
                    lifetime = Duration::from_secs(12);
                }
            }
        }
    });
    Ok(client)
}

async fn request_token(sas: &Api<ServiceAccount>, name: &str) -> Result<(String, Duration), kube::Error> {
    // Built and read as JSON: which fields are optional differs between Kubernetes API versions, and the library
    // leaves the version to the application.
    let req: TokenRequest = serde_json::from_value(serde_json::json!({
        "spec": { "audiences": [], "expirationSeconds": TOKEN_SECONDS }
    }))
    .map_err(kube::Error::SerdeError)?;
    let answer = sas
        .create_token_request(name, &PostParams::default(), &req)
        .await?;
    let answer = serde_json::to_value(&answer).map_err(kube::Error::SerdeError)?;
    let status = &answer["status"];
    let Some(token) = status["token"].as_str().filter(|t| !t.is_empty()) else {
        return Err(kube::Error::Api(Box::new(kube::core::Status::failure(
            "the TokenRequest answer has no token",
            "InternalError",
        ))));
    };
    // The apiserver may shorten (or extend) the lifetime; renew against what was granted when it says so.
    let granted = status["expirationTimestamp"]
        .as_str()
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .and_then(|t| {
            t.duration_since(k8s_openapi::jiff::Timestamp::now())
                .try_into()
                .ok()
        })
        .filter(|d: &Duration| !d.is_zero())
        .unwrap_or(Duration::from_secs(u64::try_from(TOKEN_SECONDS).unwrap_or(3600)));
    Ok((token.to_owned(), granted))
}

/// How long a Kubernetes request may take, reply body included, before it fails (the apiserver's own
/// `--request-timeout` default): a call to an apiserver that accepted the connection and then stopped answering
/// must not hold a controller forever. Watches are exempt: they are long by design, and kube-runtime's watcher
/// restarts one that stays idle.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Fails requests that take longer than its duration (watches excepted).
#[derive(Clone)]
pub(crate) struct TimeoutLayer(pub(crate) Duration);

pub(crate) struct Timeout<S> {
    inner: S,
    limit: Duration,
}

/// The error of a request that took longer than [`REQUEST_TIMEOUT`].
#[derive(Debug, thiserror::Error)]
#[error("the Kubernetes API did not answer within {0:?}")]
pub(crate) struct TimedOut(Duration);

impl<S> tower::Layer<S> for TimeoutLayer {
    type Service = Timeout<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Timeout { inner, limit: self.0 }
    }
}

fn is_watch(uri: &hyper::Uri) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|kv| matches!(kv, "watch=true" | "watch=1")))
}

impl<S, B> tower::Service<hyper::Request<B>> for Timeout<S>
where
    S: tower::Service<hyper::Request<B>>,
    S::Error: Into<tower::BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, tower::BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: hyper::Request<B>) -> Self::Future {
        let limit = (!is_watch(req.uri())).then_some(self.limit);
        let response = self.inner.call(req);
        Box::pin(async move {
            match limit {
                None => response.await.map_err(Into::into),
                Some(limit) => match tokio::time::timeout(limit, response).await {
                    Ok(r) => r.map_err(Into::into),
                    Err(_) => Err(Box::new(TimedOut(limit)) as tower::BoxError),
                },
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A service that never answers.
    struct Silent;

    impl tower::Service<hyper::Request<()>> for Silent {
        type Response = ();
        type Error = tower::BoxError;
        type Future = Pin<Box<dyn Future<Output = Result<(), tower::BoxError>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: hyper::Request<()>) -> Self::Future {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn requests_time_out_but_watches_do_not() {
        use tower::{Layer, Service};
        let mut svc = TimeoutLayer(REQUEST_TIMEOUT).layer(Silent);
        let get = hyper::Request::get("/api/v1/nodes/n").body(()).unwrap();
        let t0 = tokio::time::Instant::now();
        let err = svc.call(get).await.unwrap_err();
        assert!(err.to_string().contains("did not answer within 60s"), "{err}");
        assert_eq!(t0.elapsed(), REQUEST_TIMEOUT);
        let watch = hyper::Request::get("/api/v1/nodes?watch=true&resourceVersion=1")
            .body(())
            .unwrap();
        let waited = tokio::time::timeout(REQUEST_TIMEOUT * 10, svc.call(watch)).await;
        assert!(waited.is_err(), "a watch is not cut by the request timeout");
    }

    /// The clients `build` makes carry the timeout: a GET to an apiserver that accepted the connection and
    /// never answers fails after `REQUEST_TIMEOUT` instead of hanging its controller.
    #[tokio::test(start_paused = true)]
    async fn built_clients_time_out_on_a_silent_apiserver() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                held.push(conn);
            }
        });
        let config = Config::new(url.parse().unwrap());
        let client = build(config, None, None, "test", None).unwrap();
        let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
        let t0 = tokio::time::Instant::now();
        let err = tokio::time::timeout(REQUEST_TIMEOUT * 2, nodes.get("n"))
            .await
            .expect("the client gave up by itself")
            .unwrap_err();
        assert!(format!("{err:?}").contains("60s"), "{err:?}");
        assert!(t0.elapsed() >= REQUEST_TIMEOUT, "{:?}", t0.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_allows_the_burst_then_paces() {
        let b = Bucket::new(10.0, 3).unwrap();
        for _ in 0..3 {
            assert_eq!(b.reserve(), Duration::ZERO);
        }
        assert_eq!(b.reserve(), Duration::from_millis(100));
        assert_eq!(b.reserve(), Duration::from_millis(200));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(b.reserve(), Duration::ZERO, "refilled (capped at the burst)");
        assert!(Bucket::new(0.0, 10).is_none(), "qps 0 disables the limiter");
    }
}
