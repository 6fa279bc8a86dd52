//! Which connections the secure port holds, and which one it closes to make room for a new one.
//!
//! Two pools. Peers share [`MAX_CONNECTIONS`], at most [`MAX_CONNECTIONS_PER_PEER`] each (an IPv4 address, or an
//! IPv6 /64: one host may hold a whole /64), of which at most [`MAX_HANDSHAKES_PER_PEER`] in their TLS
//! handshake. The node itself (the kubelet's probes) has [`NODE_CONNECTIONS`] of its own that no peer can take,
//! without per-peer caps (the kubelet shares the node's addresses with every `hostNetwork` pod, so a cap on them
//! would let one such pod lock the probes out). When a pool is full, the newcomer does not wait for a slot: the
//! longest-idle connection of the peer holding the most is closed for it, so that idle and slow connections,
//! however many peers hold them, can never keep out a probe (issue #55).

use std::{
    cmp::Reverse,
    collections::HashMap,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER, MAX_HANDSHAKES_PER_PEER, NODE_CONNECTIONS};

#[cfg(test)]
mod tests;

/// The connections the server holds, shared by the accept loop and every connection's task.
#[derive(Clone, Default)]
pub(super) struct Admission(Arc<Mutex<Table>>);

/// Why a new connection is closed as it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(super) enum Refused {
    /// The peer is at [`MAX_CONNECTIONS_PER_PEER`] or [`MAX_HANDSHAKES_PER_PEER`].
    #[error("too many connections from this peer")]
    PeerCap,
    /// The pool is full, and no connection of a heavier peer is idle.
    #[error("the server is full and no heavier peer has an idle connection")]
    Full,
}

/// The two pools a connection may take a slot in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Pool {
    /// [`MAX_CONNECTIONS`], for every peer.
    Peers,
    /// [`NODE_CONNECTIONS`], for the node's own addresses only.
    Node,
}

/// A peer as the caps count it: an IPv4 address, or the /64 prefix of an IPv6 one (an IPv4-mapped IPv6 address
/// is its IPv4 address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum PeerKey {
    V4(Ipv4Addr),
    V6([u16; 4]),
}

/// One admitted connection: counted until dropped or evicted.
pub(super) struct Slot {
    conn: Conn,
    pool: Pool,
    evicted: CancellationToken,
}

/// A handle on an admitted connection's entry, for its requests and its idle timeout.
#[derive(Clone)]
pub(super) struct Conn {
    admission: Admission,
    id: u64,
}

/// A request in flight on a connection (which is not idle, and so never evicted, meanwhile); ends when dropped.
pub(super) struct InFlight(Conn);

#[derive(Default)]
struct Table {
    next_id: u64,
    entries: HashMap<u64, Entry>,
    peers: HashMap<(Pool, PeerKey), PeerCount>,
    open: HashMap<Pool, usize>,
}

struct Entry {
    pool: Pool,
    peer: PeerKey,
    handshaking: bool,
    in_flight: usize,
    /// When the last request ended, or the connection was accepted.
    idle_since: Instant,
    evict: CancellationToken,
}

#[derive(Default)]
struct PeerCount {
    open: usize,
    handshaking: usize,
}

impl PeerKey {
    pub(super) fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Self::V4(v4),
            IpAddr::V6(v6) => {
                let s = v6.segments();
                Self::V6([s[0], s[1], s[2], s[3]])
            }
        }
    }
}

impl Pool {
    fn capacity(self) -> usize {
        match self {
            Self::Peers => MAX_CONNECTIONS,
            Self::Node => NODE_CONNECTIONS,
        }
    }
}

/// Whether a connection comes from the node itself. A client on the node that connects to one of the node's
/// addresses gets that address as its source (unless it binds another), so a peer address equal to the local
/// address the connection reached is the node, whichever address the probe names; so are `127.0.0.1` and `::1`
/// (a probe of `localhost` reaching a listener on another address). Other 127.0.0.0/8 sources are ordinary peers:
/// only a client that binds one on purpose has it.
pub(super) fn from_node(peer: IpAddr, local: Option<IpAddr>) -> bool {
    let peer = peer.to_canonical();
    local.is_some_and(|l| l.to_canonical() == peer)
        || peer == IpAddr::V4(Ipv4Addr::LOCALHOST)
        || peer == IpAddr::V6(Ipv6Addr::LOCALHOST)
}

impl Admission {
    fn table(&self) -> MutexGuard<'_, Table> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a new connection from `peer` that reached the local address `local`, closing another
    /// connection for it when its pool is full; or why it is refused.
    ///
    /// The node takes its own pool first, closing there when full the longest-idle connection of the node
    /// address holding the most, and the peers' pool only when every connection in its own has a request in
    /// flight. A peer takes the peers' pool, and
    /// when it is full closes the longest-idle connection of the peer holding the most there, provided that peer
    /// holds more than the newcomer's does: a peer never gains at another's expense beyond an even share, so a
    /// flood settles instead of closing connections round and round.
    pub(super) fn admit(&self, peer: IpAddr, local: Option<IpAddr>) -> Result<Slot, Refused> {
        let key = PeerKey::of(peer);
        let mut table = self.table();
        if from_node(peer, local) {
            if table.make_room(Pool::Node, None) {
                return Ok(self.insert(&mut table, Pool::Node, key));
            }
        } else {
            let count = table.count(Pool::Peers, key);
            if count.open >= MAX_CONNECTIONS_PER_PEER || count.handshaking >= MAX_HANDSHAKES_PER_PEER {
                return Err(Refused::PeerCap);
            }
        }
        let held = table.count(Pool::Peers, key).open;
        if table.make_room(Pool::Peers, Some(held)) {
            Ok(self.insert(&mut table, Pool::Peers, key))
        } else {
            Err(Refused::Full)
        }
    }

    fn insert(&self, table: &mut Table, pool: Pool, peer: PeerKey) -> Slot {
        let id = table.next_id;
        table.next_id += 1;
        let evict = CancellationToken::new();
        table.entries.insert(
            id,
            Entry {
                pool,
                peer,
                handshaking: true,
                in_flight: 0,
                idle_since: Instant::now(),
                evict: evict.clone(),
            },
        );
        *table.open.entry(pool).or_default() += 1;
        let count = table.peers.entry((pool, peer)).or_default();
        count.open += 1;
        count.handshaking += 1;
        Slot {
            conn: Conn {
                admission: self.clone(),
                id,
            },
            pool,
            evicted: evict,
        }
    }

    /// Connections held in `pool`.
    #[cfg(test)]
    pub(super) fn open(&self, pool: Pool) -> usize {
        self.table().open.get(&pool).copied().unwrap_or(0)
    }
}

impl Table {
    fn count(&self, pool: Pool, peer: PeerKey) -> &PeerCount {
        static NONE: PeerCount = PeerCount {
            open: 0,
            handshaking: 0,
        };
        self.peers.get(&(pool, peer)).unwrap_or(&NONE)
    }

    /// Whether `pool` has a free slot, after closing a connection if need be: the longest-idle one (no request
    /// in flight; a handshake counts as idle since the accept) of the peer that holds the most in `pool`, and
    /// only of a peer holding more than `heavier_than` when given.
    fn make_room(&mut self, pool: Pool, heavier_than: Option<usize>) -> bool {
        if self.open.get(&pool).copied().unwrap_or(0) < pool.capacity() {
            return true;
        }
        let victim = self
            .entries
            .iter()
            .filter(|(_, e)| e.pool == pool && e.in_flight == 0)
            .map(|(id, e)| (self.count(pool, e.peer).open, Reverse(e.idle_since), Reverse(*id)))
            .filter(|(held, ..)| heavier_than.is_none_or(|n| *held > n))
            .max();
        match victim.and_then(|(_, _, Reverse(id))| self.remove(id)) {
            Some(entry) => {
                entry.evict.cancel();
                true
            }
            None => false,
        }
    }

    /// Forgets a connection (closed, or evicted: whichever comes first).
    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.entries.remove(&id)?;
        if let Some(open) = self.open.get_mut(&entry.pool) {
            *open -= 1;
        }
        let key = (entry.pool, entry.peer);
        if let Some(count) = self.peers.get_mut(&key) {
            count.open -= 1;
            count.handshaking -= usize::from(entry.handshaking);
            if count.open == 0 {
                self.peers.remove(&key);
            }
        }
        Some(entry)
    }
}

impl Slot {
    /// The connection's handle, for its requests and idle timeout.
    pub(super) fn conn(&self) -> Conn {
        self.conn.clone()
    }

    /// The pool the connection holds a slot in.
    pub(super) fn pool(&self) -> Pool {
        self.pool
    }

    /// Cancelled when the connection is closed to make room for another: its task then drops it at once.
    pub(super) fn evicted(&self) -> CancellationToken {
        self.evicted.clone()
    }

    /// The handshake is over (done, failed or timed out): the peer's handshake count drops at once, since it
    /// may only have a few under way.
    pub(super) fn handshake_done(&self) {
        let mut table = self.conn.admission.table();
        let Some(entry) = table.entries.get_mut(&self.conn.id) else {
            return;
        };
        if !std::mem::take(&mut entry.handshaking) {
            return;
        }
        let key = (entry.pool, entry.peer);
        if let Some(count) = table.peers.get_mut(&key) {
            count.handshaking -= 1;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.conn.admission.table().remove(self.conn.id);
    }
}

impl Conn {
    /// Marks a request in flight until the returned guard is dropped.
    pub(super) fn begin(&self) -> InFlight {
        if let Some(entry) = self.admission.table().entries.get_mut(&self.id) {
            entry.in_flight += 1;
        }
        InFlight(self.clone())
    }

    /// Returns once no request has been in flight for `limit` (at once when the connection was evicted).
    pub(super) async fn idle_for(&self, limit: std::time::Duration) {
        loop {
            let Some((in_flight, since)) = self
                .admission
                .table()
                .entries
                .get(&self.id)
                .map(|e| (e.in_flight, e.idle_since))
            else {
                return;
            };
            let deadline = since + limit;
            if in_flight == 0 && Instant::now() >= deadline {
                return;
            }
            // A request in flight is bounded by the connection's age; look again after a while.
            tokio::time::sleep_until(deadline.max(Instant::now() + limit / 4)).await;
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(entry) = self.0.admission.table().entries.get_mut(&self.0.id) {
            entry.in_flight -= 1;
            entry.idle_since = Instant::now();
        }
    }
}
