//! The secure port's limits per peer address and per connection: how many connections one address may hold (and
//! keep in their TLS handshake), and when a connection without requests is idle.

use std::sync::{Arc, Mutex};

use super::{MAX_CONNECTIONS_PER_PEER, MAX_HANDSHAKES_PER_PEER};

/// Connections per peer address (see [`MAX_CONNECTIONS_PER_PEER`]); an address with none has no entry.
#[derive(Clone, Default)]
pub(super) struct Peers(Arc<Mutex<std::collections::HashMap<std::net::IpAddr, PeerCount>>>);

#[derive(Default)]
struct PeerCount {
    open: usize,
    handshaking: usize,
}

/// One admitted connection of a peer: counted until dropped, and as handshaking until [`PeerSlot::handshake_done`].
pub(super) struct PeerSlot {
    peers: Peers,
    ip: std::net::IpAddr,
    handshaking: bool,
}

impl Peers {
    fn counts(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<std::net::IpAddr, PeerCount>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for a new connection from `ip`, unless that address is at one of its caps.
    pub(super) fn admit(&self, ip: std::net::IpAddr) -> Option<PeerSlot> {
        let mut counts = self.counts();
        let count = counts.entry(ip).or_default();
        if count.open >= MAX_CONNECTIONS_PER_PEER || count.handshaking >= MAX_HANDSHAKES_PER_PEER {
            return None;
        }
        count.open += 1;
        count.handshaking += 1;
        Some(PeerSlot {
            peers: self.clone(),
            ip,
            handshaking: true,
        })
    }
}

impl PeerSlot {
    /// The handshake is over (done, failed or timed out).
    pub(super) fn handshake_done(&mut self) {
        if std::mem::take(&mut self.handshaking)
            && let Some(count) = self.peers.counts().get_mut(&self.ip)
        {
            count.handshaking -= 1;
        }
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        self.handshake_done();
        let mut counts = self.peers.counts();
        if let Some(count) = counts.get_mut(&self.ip) {
            count.open -= 1;
            if count.open == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

/// A connection's requests in flight and when the last one ended, for the idle timeout of `super::serve`.
#[derive(Clone)]
pub(super) struct Activity(Arc<Mutex<(usize, tokio::time::Instant)>>);

/// A request in flight; ends when dropped.
pub(super) struct InFlight(Activity);

impl Default for Activity {
    fn default() -> Self {
        Self(Arc::new(Mutex::new((0, tokio::time::Instant::now()))))
    }
}

impl Activity {
    fn state(&self) -> std::sync::MutexGuard<'_, (usize, tokio::time::Instant)> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn begin(&self) -> InFlight {
        self.state().0 += 1;
        InFlight(self.clone())
    }

    /// Returns once no request has been in flight for `limit`.
    pub(super) async fn idle_for(&self, limit: std::time::Duration) {
        loop {
            let (in_flight, since) = *self.state();
            let deadline = since + limit;
            if in_flight == 0 && tokio::time::Instant::now() >= deadline {
                return;
            }
            // A request in flight is bounded by the connection's age; look again after a while.
            tokio::time::sleep_until(deadline.max(tokio::time::Instant::now() + limit / 4)).await;
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.0.state();
        state.0 -= 1;
        state.1 = tokio::time::Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;

    #[test]
    fn one_address_is_capped_and_its_slots_come_back() {
        let peers = Peers::default();
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.1".parse().unwrap();
        let mut handshaking: Vec<PeerSlot> = (0..MAX_HANDSHAKES_PER_PEER)
            .map(|_| peers.admit(a).unwrap())
            .collect();
        assert!(
            peers.admit(a).is_none(),
            "at most {MAX_HANDSHAKES_PER_PEER} in their handshake"
        );
        assert!(peers.admit(b).is_some(), "another address is not affected");
        for slot in &mut handshaking {
            slot.handshake_done();
        }
        let mut open = handshaking;
        while open.len() < MAX_CONNECTIONS_PER_PEER {
            let mut slot = peers.admit(a).expect("room for established connections");
            slot.handshake_done();
            open.push(slot);
        }
        assert!(
            peers.admit(a).is_none(),
            "at most {MAX_CONNECTIONS_PER_PEER} open"
        );
        open.pop();
        assert!(peers.admit(a).is_some(), "a closed connection frees its slot");
        drop(open);
        assert!(
            peers.counts().is_empty(),
            "an address without connections has no entry"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_only_without_requests_for_the_limit() {
        let activity = Activity::default();
        let request = activity.begin();
        let limit = std::time::Duration::from_secs(60);
        let idle = tokio::time::timeout(limit * 3, activity.idle_for(limit)).await;
        assert!(idle.is_err(), "a request in flight keeps the connection");
        drop(request);
        let started = tokio::time::Instant::now();
        activity.idle_for(limit).await;
        assert!(started.elapsed() >= limit, "{:?}", started.elapsed());
    }
}
