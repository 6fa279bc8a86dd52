use std::{net::IpAddr, time::Duration};

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Where the server listens in these tests (a peer from it is the node).
fn local() -> Option<IpAddr> {
    Some(ip("10.0.0.1"))
}

/// An established connection of `peer` (its handshake over).
fn established(admission: &Admission, peer: &str) -> Slot {
    let slot = admission.admit(ip(peer), local()).unwrap();
    slot.handshake_done();
    slot
}

/// Fills the peers' pool with one connection from each of `n` addresses (10.1.x.y), a tick apart.
async fn one_each(admission: &Admission, n: usize) -> Vec<Slot> {
    let mut held = Vec::new();
    for i in 0..n {
        held.push(established(
            admission,
            &format!("10.1.{}.{}", i / 200, i % 200 + 1),
        ));
        tokio::time::advance(Duration::from_millis(1)).await;
    }
    held
}

#[test]
fn one_address_is_capped_and_its_slots_come_back() {
    let admission = Admission::default();
    let (a, b) = ("10.0.0.2", "10.0.0.3");
    let handshaking: Vec<Slot> = (0..MAX_HANDSHAKES_PER_PEER)
        .map(|_| admission.admit(ip(a), local()).unwrap())
        .collect();
    assert_eq!(
        admission.admit(ip(a), local()).err(),
        Some(Refused::PeerCap),
        "at most {MAX_HANDSHAKES_PER_PEER} in their handshake"
    );
    assert!(
        admission.admit(ip(b), local()).is_ok(),
        "another address is not affected"
    );
    for slot in &handshaking {
        slot.handshake_done();
    }
    let mut open = handshaking;
    while open.len() < MAX_CONNECTIONS_PER_PEER {
        open.push(established(&admission, a));
    }
    assert_eq!(
        admission.admit(ip(a), local()).err(),
        Some(Refused::PeerCap),
        "at most {MAX_CONNECTIONS_PER_PEER} open"
    );
    open.pop();
    assert!(
        admission.admit(ip(a), local()).is_ok(),
        "a closed connection frees its slot"
    );
    drop(open);
    let table = admission.table();
    assert!(
        table.peers.is_empty(),
        "an address without connections has no entry"
    );
    assert!(table.entries.is_empty());
}

#[test]
fn an_ipv6_slash_64_is_one_peer() {
    let admission = Admission::default();
    let held: Vec<Slot> = (1..=MAX_CONNECTIONS_PER_PEER)
        .map(|i| established(&admission, &format!("2001:db8:1:2::{i:x}")))
        .collect();
    assert_eq!(
        admission.admit(ip("2001:db8:1:2:ffff::1"), local()).err(),
        Some(Refused::PeerCap),
        "one /64 is one peer"
    );
    assert!(
        admission.admit(ip("2001:db8:1:3::1"), local()).is_ok(),
        "the next /64 is another"
    );
    assert_eq!(PeerKey::of(ip("::ffff:10.0.0.9")), PeerKey::of(ip("10.0.0.9")));
    drop(held);
}

#[test]
fn the_node_is_its_own_addresses_and_loopback() {
    let node = |peer: &str, local: &str| from_node(ip(peer), Some(ip(local)));
    assert!(node("10.0.0.1", "10.0.0.1"), "a probe of the node's address");
    assert!(
        node("::ffff:10.0.0.1", "10.0.0.1"),
        "through a dual-stack listener"
    );
    assert!(node("127.0.0.1", "10.0.0.1"), "a probe of localhost");
    assert!(node("::1", "::1"));
    assert!(!node("10.0.0.2", "10.0.0.1"), "a pod");
    assert!(!node("127.0.0.2", "127.0.0.1"), "a source bound on purpose");
    assert!(!from_node(ip("10.0.0.1"), None));
}

/// Issue #55, item 2 (b): when the peers' pool is full, a newcomer closes the longest-idle connection of the
/// peer holding the most, never one with a request in flight, and never one of a peer holding no more than the
/// newcomer's.
#[tokio::test(start_paused = true)]
async fn a_full_server_closes_the_longest_idle_connection_of_the_heaviest_peer() {
    let admission = Admission::default();
    // The oldest connection overall is a light peer's; the heaviest peer's oldest has a request in flight.
    let light = established(&admission, "10.2.0.1");
    tokio::time::advance(Duration::from_millis(1)).await;
    let heavy: Vec<Slot> = (0..MAX_CONNECTIONS_PER_PEER)
        .map(|_| established(&admission, "10.2.0.2"))
        .collect();
    let busy = heavy[0].conn().begin();
    tokio::time::advance(Duration::from_millis(1)).await;
    let rest = one_each(&admission, MAX_CONNECTIONS - 1 - MAX_CONNECTIONS_PER_PEER).await;
    assert_eq!(admission.open(Pool::Peers), MAX_CONNECTIONS);

    let newcomer = admission.admit(ip("10.3.0.1"), local()).expect("room made");
    assert!(
        heavy[1].evicted().is_cancelled(),
        "the heaviest peer's longest idle"
    );
    assert!(
        !heavy[0].evicted().is_cancelled(),
        "a request in flight keeps its connection"
    );
    assert!(!light.evicted().is_cancelled() && rest.iter().all(|s| !s.evicted().is_cancelled()));
    assert_eq!(admission.open(Pool::Peers), MAX_CONNECTIONS);
    // The evicted connection's task ends later: its slot is not counted twice.
    let mut heavy = heavy;
    drop(heavy.remove(1));
    assert_eq!(admission.open(Pool::Peers), MAX_CONNECTIONS);
    drop((busy, newcomer));
}

#[tokio::test(start_paused = true)]
async fn a_newcomer_takes_no_more_than_an_even_share() {
    let admission = Admission::default();
    // 64 peers with 4 each: all equal.
    let mut held = Vec::new();
    for p in 1..=MAX_CONNECTIONS / 4 {
        for _ in 0..4 {
            held.push(established(&admission, &format!("10.4.0.{p}")));
        }
    }
    assert_eq!(
        admission.admit(ip("10.4.0.1"), local()).err(),
        Some(Refused::Full),
        "nobody holds more than this peer"
    );
    assert!(
        admission.admit(ip("10.5.0.1"), local()).is_ok(),
        "a new peer holds less"
    );
    assert!(held[0].evicted().is_cancelled(), "ties go to the longest idle");
}

/// Issue #55, item 2 (a): the node has slots no peer can take; when they are full, the node's longest-idle
/// connection there makes room; when every one has a request in flight, the node may use the peers' pool.
#[tokio::test(start_paused = true)]
async fn the_node_has_slots_of_its_own() {
    let admission = Admission::default();
    let peers = one_each(&admission, MAX_CONNECTIONS).await;
    let busy: Vec<InFlight> = peers.iter().map(|s| s.conn().begin()).collect();
    assert_eq!(
        admission.admit(ip("10.6.0.1"), local()).err(),
        Some(Refused::Full)
    );
    assert_eq!(
        admission.admit(ip("127.0.0.2"), local()).err(),
        Some(Refused::Full)
    );

    let mut node = Vec::new();
    for _ in 0..NODE_CONNECTIONS / 2 {
        node.push(admission.admit(ip("127.0.0.1"), local()).expect("loopback"));
        node.push(
            admission
                .admit(ip("10.0.0.1"), local())
                .expect("the local address"),
        );
        tokio::time::advance(Duration::from_millis(1)).await;
    }
    assert_eq!(admission.open(Pool::Node), NODE_CONNECTIONS);
    let probe = admission
        .admit(ip("10.0.0.1"), local())
        .expect("the oldest makes room");
    assert!(node[0].evicted().is_cancelled() && !node[2].evicted().is_cancelled());
    assert_eq!(admission.open(Pool::Node), NODE_CONNECTIONS);

    // Every node slot busy: the node overflows into the peers' pool, where a peer's idle connection makes room.
    let node_busy: Vec<InFlight> = node[1..]
        .iter()
        .chain([&probe])
        .map(|s| s.conn().begin())
        .collect();
    assert_eq!(
        admission.admit(ip("10.0.0.1"), local()).err(),
        Some(Refused::Full)
    );
    drop(busy);
    assert!(admission.admit(ip("10.0.0.1"), local()).is_ok());
    assert_eq!(admission.open(Pool::Node), NODE_CONNECTIONS);
    drop(node_busy);
}

#[tokio::test(start_paused = true)]
async fn a_connection_is_idle_only_without_requests_for_the_limit() {
    let admission = Admission::default();
    let slot = established(&admission, "10.0.0.2");
    let activity = slot.conn();
    let request = activity.begin();
    let limit = Duration::from_secs(60);
    let idle = tokio::time::timeout(limit * 3, activity.idle_for(limit)).await;
    assert!(idle.is_err(), "a request in flight keeps the connection");
    drop(request);
    let started = Instant::now();
    activity.idle_for(limit).await;
    assert!(started.elapsed() >= limit, "{:?}", started.elapsed());
}
