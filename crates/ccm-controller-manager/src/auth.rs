//! Delegated authentication and authorization of the HTTPS endpoints, as upstream: a bearer token is reviewed with
//! a `TokenReview`, a request without one is `system:anonymous`, and the user must be allowed the non-resource URL
//! by a `SubjectAccessReview` (`system:masters` always is). Paths in `--authorization-always-allow-paths`
//! (default `/healthz`, `/readyz`, `/livez`) skip both. Answers are cached for 10 s, as upstream's defaults.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::api::{
    authentication::v1::{TokenReview, UserInfo},
    authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
};
use kube::{Api, Client, api::PostParams};
use tokio::time::Instant;

/// How long review answers are reused.
const CACHE_TTL: Duration = Duration::from_secs(10);
/// Cache size bound: beyond it, the cache is cleared (a flood of distinct tokens cannot grow memory).
const CACHE_MAX: usize = 4096;

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Denied {
    /// 401: the token is not valid.
    Unauthenticated,
    /// 403: the user may not access the path.
    Forbidden(String),
    /// 500: the review itself failed.
    Failed(String),
    /// 429: [`MAX_PENDING_REVIEWS`] requests already wait on their reviews.
    Busy,
}

/// How many requests may wait on their authentication and authorization reviews at once; more are answered 429
/// at once, so that a flood of requests to the port queues neither memory nor reviews without bound.
pub(crate) const MAX_PENDING_REVIEWS: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct User {
    name: String,
    uid: Option<String>,
    groups: Vec<String>,
    extra: Option<std::collections::BTreeMap<String, Vec<String>>>,
}

/// Entries with the time they were stored.
type Cache<K, V> = Arc<Mutex<HashMap<K, (Instant, V)>>>;

/// The authenticator and authorizer of the server.
#[derive(Clone)]
pub(crate) struct Auth {
    client: Client,
    always_allow: Arc<Vec<String>>,
    tokens: Cache<String, Option<User>>,
    /// Keyed by the whole review (user name, UID, groups, extra; path; verb): two users of one name but other
    /// groups (two tokens, a rename, an impersonated identity) never share a decision.
    decisions: Cache<(User, String, String), Result<(), String>>,
    /// Permits for requests that need reviews.
    pending: Arc<tokio::sync::Semaphore>,
}

fn cached<K: std::hash::Hash + Eq, V: Clone>(map: &Mutex<HashMap<K, (Instant, V)>>, key: &K) -> Option<V> {
    let map = map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    map.get(key)
        .filter(|(at, _)| at.elapsed() < CACHE_TTL)
        .map(|(_, v)| v.clone())
}

fn remember<K: std::hash::Hash + Eq, V>(map: &Mutex<HashMap<K, (Instant, V)>>, key: K, value: V) {
    let mut map = map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if map.len() >= CACHE_MAX {
        map.clear();
    }
    map.insert(key, (Instant::now(), value));
}

/// Whether `path` matches an always-allowed pattern: exact, or a prefix when the pattern ends in `*`.
pub(crate) fn always_allowed(patterns: &[String], path: &str) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => p == path,
    })
}

impl Auth {
    pub(crate) fn new(client: Client, always_allow: Vec<String>) -> Self {
        Self {
            client,
            always_allow: Arc::new(always_allow),
            tokens: Arc::default(),
            decisions: Arc::default(),
            pending: Arc::new(tokio::sync::Semaphore::new(MAX_PENDING_REVIEWS)),
        }
    }

    /// Checks one request.
    pub(crate) async fn check(
        &self,
        path: &str,
        method: &str,
        authorization: Option<&str>,
    ) -> Result<(), Denied> {
        if always_allowed(&self.always_allow, path) {
            return Ok(());
        }
        let Ok(_permit) = self.pending.clone().try_acquire_owned() else {
            return Err(Denied::Busy);
        };
        let user = match authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
        {
            Some(token) if !token.is_empty() => self.authenticate(token).await?,
            Some(_) => return Err(Denied::Unauthenticated),
            None => User {
                name: "system:anonymous".to_owned(),
                uid: None,
                groups: vec!["system:unauthenticated".to_owned()],
                extra: None,
            },
        };
        if user.groups.iter().any(|g| g == "system:masters") {
            return Ok(());
        }
        let verb = method.to_ascii_lowercase();
        let key = (user.clone(), path.to_owned(), verb.clone());
        if let Some(decision) = cached(&self.decisions, &key) {
            return decision.map_err(Denied::Forbidden);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: user.uid.clone(),
                groups: Some(user.groups.clone()),
                extra: user.extra.clone(),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some(verb),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answer = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| Denied::Failed(format!("SubjectAccessReview failed: {e}")))?;
        let status = answer.status.unwrap_or_default();
        let decision = if status.allowed {
            Ok(())
        } else {
            Err(format!(
                "forbidden: User {:?} cannot {} path {:?}{}",
                user.name,
                key.2,
                path,
                status.reason.map(|r| format!(": {r}")).unwrap_or_default()
            ))
        };
        remember(&self.decisions, key, decision.clone());
        decision.map_err(Denied::Forbidden)
    }

    async fn authenticate(&self, token: &str) -> Result<User, Denied> {
        if let Some(user) = cached(&self.tokens, &token.to_owned()) {
            return user.ok_or(Denied::Unauthenticated);
        }
        // Built from JSON: `spec.token` is optional in some Kubernetes API versions and not in others, and the
        // library leaves the version to the application.
        let review: TokenReview = serde_json::from_value(serde_json::json!({ "spec": { "token": token } }))
            .map_err(|e| Denied::Failed(format!("TokenReview: {e}")))?;
        let answer = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| Denied::Failed(format!("TokenReview failed: {e}")))?;
        let status = answer.status.unwrap_or_default();
        let user = status.authenticated.unwrap_or(false).then(|| {
            let UserInfo {
                username,
                uid,
                groups,
                extra,
            } = status.user.unwrap_or_default();
            User {
                name: username.unwrap_or_default(),
                uid,
                groups: groups.unwrap_or_default(),
                extra,
            }
        });
        remember(&self.tokens, token.to_owned(), user.clone());
        user.ok_or(Denied::Unauthenticated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_review_queue_answers_busy_at_once() {
        // An apiserver that accepts connections and never answers: every review hangs.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                held.push(s);
            }
        });
        let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        let auth = Auth::new(Client::try_from(config).unwrap(), vec!["/healthz".to_owned()]);
        let waiting: Vec<_> = (0..MAX_PENDING_REVIEWS)
            .map(|n| {
                let auth = auth.clone();
                tokio::spawn(async move {
                    let header = format!("Bearer token-{n}");
                    let _ = auth.check("/metrics", "GET", Some(&header)).await;
                })
            })
            .collect();
        while auth.pending.available_permits() > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let busy = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            auth.check("/metrics", "GET", Some("Bearer another")),
        )
        .await
        .expect("answered at once, not queued");
        assert!(matches!(busy, Err(Denied::Busy)), "{busy:?}");
        // Always-allowed paths need no review and are never refused.
        assert!(auth.check("/healthz", "GET", None).await.is_ok());
        for task in waiting {
            task.abort();
        }
    }

    /// A fake apiserver on loopback answering reviews: token `t-<group>` is the user `alice` in `<group>`, and a
    /// SubjectAccessReview is allowed for the group `readers` only. Counts the SubjectAccessReviews.
    async fn review_server() -> (std::net::SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let reviews = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = reviews.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut stream = BufReader::new(stream);
                    loop {
                        let (mut request, mut length) = (String::new(), 0usize);
                        loop {
                            let mut line = String::new();
                            if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                                return;
                            }
                            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                                length = v.trim().parse().unwrap();
                            }
                            if line == "\r\n" {
                                break;
                            }
                            request.push_str(&line);
                        }
                        let mut body = vec![0; length];
                        stream.read_exact(&mut body).await.unwrap();
                        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
                        let answer = if request.contains("tokenreviews") {
                            let token = body["spec"]["token"].as_str().unwrap_or_default();
                            let group = token.strip_prefix("t-").unwrap_or_default();
                            serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                "spec": {}, "status": {"authenticated": true,
                                "user": {"username": "alice", "groups": [group]}}})
                        } else {
                            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            let allowed = body["spec"]["groups"][0] == "readers";
                            serde_json::json!({"apiVersion": "authorization.k8s.io/v1",
                                "kind": "SubjectAccessReview", "spec": body["spec"],
                                "status": {"allowed": allowed}})
                        };
                        let answer = answer.to_string();
                        let head = format!(
                            "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                            answer.len()
                        );
                        let stream = stream.get_mut();
                        stream.write_all(head.as_bytes()).await.unwrap();
                        stream.write_all(answer.as_bytes()).await.unwrap();
                    }
                });
            }
        });
        (addr, reviews)
    }

    #[tokio::test]
    async fn decisions_are_cached_per_whole_review_not_per_user_name() {
        let (addr, reviews) = review_server().await;
        let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        let auth = Auth::new(Client::try_from(config).unwrap(), Vec::new());
        assert_eq!(
            auth.check("/metrics", "GET", Some("Bearer t-readers")).await,
            Ok(())
        );
        assert_eq!(
            auth.check("/metrics", "GET", Some("Bearer t-readers")).await,
            Ok(())
        );
        assert_eq!(
            reviews.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "the same review is cached"
        );
        // The same user name in another group: its own review, and refused.
        let other = auth.check("/metrics", "GET", Some("Bearer t-strangers")).await;
        assert!(matches!(other, Err(Denied::Forbidden(_))), "{other:?}");
        assert_eq!(reviews.load(std::sync::atomic::Ordering::SeqCst), 2);
        // Another path or verb is another review too.
        assert_eq!(
            auth.check("/debug/flags/v", "PUT", Some("Bearer t-readers"))
                .await,
            Ok(())
        );
        assert_eq!(reviews.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[test]
    fn always_allowed_paths() {
        let p = vec!["/healthz".to_owned(), "/debug/*".to_owned()];
        assert!(always_allowed(&p, "/healthz"));
        assert!(
            !always_allowed(&p, "/healthz/leaderElection"),
            "exact unless the pattern ends in *"
        );
        assert!(always_allowed(&p, "/debug/flags/v"));
        assert!(!always_allowed(&p, "/metrics"));
    }
}
