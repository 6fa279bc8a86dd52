//! The proxy's faults, counts and timings.

use super::*;

fn chaos(per_mille: u16) -> Chaos {
    Chaos {
        seed: 7,
        per_mille,
        max_delay: Duration::from_millis(500),
    }
}

fn kinds(chaos: &Chaos, action: &str, is_ec2: bool) -> Vec<Option<ChaosKind>> {
    (1..=2000)
        .map(|rank| chaos.draw(action, rank, is_ec2).map(|(k, _)| k))
        .collect()
}

#[test]
fn a_seed_gives_the_same_faults_to_the_same_calls() {
    let a = kinds(&chaos(100), "CreateLoadBalancer", false);
    assert_eq!(a, kinds(&chaos(100), "CreateLoadBalancer", false));
    let other = Chaos {
        seed: 8,
        ..chaos(100)
    };
    assert_ne!(a, kinds(&other, "CreateLoadBalancer", false));
}

#[test]
fn the_rate_is_about_the_share_asked_for() {
    let faulted = kinds(&chaos(100), "DescribeInstances", true)
        .iter()
        .filter(|k| k.is_some())
        .count();
    assert!((150..=250).contains(&faulted), "{faulted} of 2000 at 10 %");
    assert!(
        kinds(&chaos(0), "DescribeInstances", true)
            .iter()
            .all(Option::is_none)
    );
}

#[test]
fn deletes_get_in_use_errors_and_others_never_do() {
    let sg = kinds(&chaos(500), "DeleteSecurityGroup", true);
    assert!(sg.contains(&Some(ChaosKind::DependencyViolation)));
    let tg = kinds(&chaos(500), "DeleteTargetGroup", false);
    assert!(tg.contains(&Some(ChaosKind::ResourceInUse)));
    let listener = kinds(&chaos(500), "CreateListener", false);
    assert!(listener.contains(&Some(ChaosKind::Refused)));
    let classic = kinds(&chaos(500), "CreateLoadBalancer", false);
    let every = [
        ChaosKind::Throttle,
        ChaosKind::ServerError,
        ChaosKind::Reset,
        ChaosKind::ResetAfter,
        ChaosKind::Latency,
    ];
    assert!(every.iter().all(|k| classic.contains(&Some(*k))), "{classic:?}");
    assert!(!classic.contains(&Some(ChaosKind::DependencyViolation)));
    assert!(!classic.contains(&Some(ChaosKind::ResourceInUse)));
    assert!(!classic.contains(&Some(ChaosKind::Refused)));
}

/// An upstream answering every request after `delay`, on one connection each.
async fn slow_upstream(delay: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut reader = BufReader::new(stream);
                if read_request(&mut reader).await.ok().flatten().is_some() {
                    tokio::time::sleep(delay).await;
                    let answer = response(200, "text/xml", &[], b"<ok/>");
                    let _ = reader.get_mut().write_all(&answer).await;
                }
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn the_upstreams_time_is_summed_per_action_and_faults_cost_none() {
    let proxy = FaultProxy::start(&slow_upstream(Duration::from_millis(40)).await)
        .await
        .unwrap();
    proxy.inject("DescribeTags", Fault::Throttle, 1);
    for action in ["DescribeInstances", "DescribeInstances", "DescribeTags"] {
        let body = format!("Action={action}&Version=2016-11-15");
        let mut conn = TcpStream::connect(proxy.addr).await.unwrap();
        let head = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        conn.read_to_end(&mut answer).await.unwrap();
        assert!(answer.starts_with(b"HTTP/1.1 "), "{action} answered");
    }
    let secs = proxy.upstream_secs_by_action();
    let instances = secs["DescribeInstances"];
    assert!(
        (0.08..5.0).contains(&instances),
        "two answers of 40 ms: {instances}"
    );
    assert!(
        !secs.contains_key("DescribeTags"),
        "throttled, never forwarded: {secs:?}"
    );
    assert_eq!(proxy.requests("DescribeTags"), 1);
}

#[tokio::test]
async fn chaos_faults_are_counted_and_queued_faults_come_first() {
    let proxy = FaultProxy::start("http://127.0.0.1:9").await.unwrap();
    proxy.set_chaos(Some(chaos(1000)));
    proxy.inject("DeleteSecurityGroup", Fault::Throttle, 1);
    let request = Request {
        method: "POST".into(),
        path: "/".into(),
        headers: Vec::new(),
        body: b"Action=DeleteSecurityGroup&Version=2016-11-15".to_vec(),
    };
    let state = &proxy.state;
    assert_eq!(
        record(state, &request, "DeleteSecurityGroup"),
        Some(Fault::Throttle)
    );
    assert!(record(state, &request, "DeleteSecurityGroup").is_some());
    assert_eq!(proxy.chaos_faults().values().sum::<u64>(), 1);
    assert_eq!(proxy.requests_by_action().get("DeleteSecurityGroup"), Some(&2));
    assert!(
        proxy.bodies("DeleteSecurityGroup").is_empty(),
        "bodies kept in chaos mode"
    );
}
