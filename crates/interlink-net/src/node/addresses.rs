//! The address book in the node: where the sessions of paired identities and of this
//! user's own were reached, learned as they show up and dialled at start and after a
//! network change, so two machines with no multicast between them and nothing
//! configured meet again.
//!
//! What is remembered, and from whom ([`interlink_store::address_book`] keeps it):
//! - only for identities the peers policy admits, and this user's own — a stranger's
//!   announcement or identify never adds an address that is dialled;
//! - from their verified signed announcements (the `addrs` they list), from identify of
//!   a connected session of theirs, and — when the policy admits a new peer (an invite
//!   knock let in, a pair request accepted) — from the knocker's announcement and the
//!   connection it came on (its IP at the host's well-known port, and the address
//!   itself for QUIC, which dials from its listening socket); `join` keeps the invite
//!   code's addresses itself (the CLI);
//! - without `/p2p/…`, never a relay circuit, an unspecified or link-local address, and
//!   a loopback one only for this user's own identity ([`keepable`]);
//! - addresses on the well-known port are a host's stable address; the book keeps at
//!   most a few others per identity (session ports that change with every start), so
//!   those never push a stable one out, and dials try stable ones first.
//!
//! Dialling ([`Addresses::plan`]) is bounded: at most [`MAX_DIALS_PER_IDENTITY`]
//! addresses of an identity and [`MAX_BOOK_DIALS`] in all, round robin over the
//! identities, each address redialled with the bootstrap addresses' backoff while it
//! does not answer and left alone after [`GIVE_UP_AFTER`] failures until the network
//! changes. The peer id is not known in advance (whichever session of the host holds
//! the well-known port answers): identify tells who answered. Answers and failures are
//! noted in the book; the book is saved at most every [`SAVE_AFTER`] and at shutdown.

use std::{
    collections::{BTreeSet, HashMap},
    time::{Duration, Instant},
};

use interlink_core::IdentityKey;
use interlink_store::address_book::{AddressBook, Source};
use libp2p::{
    Multiaddr, PeerId,
    core::ConnectedPoint,
    multiaddr::Protocol,
    swarm::{ConnectionId, dial_opts::DialOpts},
};
use tracing::{debug, warn};

use super::{
    Actor,
    discovery::{MAX_BACKOFF, MIN_BACKOFF},
};

/// Most book addresses being dialled or due in one node.
pub(super) const MAX_BOOK_DIALS: usize = 16;
/// Most addresses of one identity dialled.
pub(super) const MAX_DIALS_PER_IDENTITY: usize = 4;
/// Failed dials of an address after which it waits for a change of network (or a
/// wake) before it is dialled again: its backoff has reached a minute by then.
pub(super) const GIVE_UP_AFTER: u32 = 8;
/// How long a change of the book waits to be saved, so a burst of news (a peer's
/// sessions all announcing) is one write.
pub(super) const SAVE_AFTER: Duration = Duration::from_secs(5);
/// Most addresses taken from one announcement or identify.
const MAX_LEARNED_AT_ONCE: usize = interlink_core::limits::MAX_LISTEN_ADDRS;

/// What of `addr` is worth keeping in the book of an identity (`own`: this user's):
/// `addr` without `/p2p/…`, or `None` for a relay circuit, an address that is not an
/// IP or DNS name with a TCP or QUIC port, an unspecified or link-local IP, or a
/// loopback IP of someone else (it would name this host).
pub(super) fn keepable(addr: &Multiaddr, own: bool) -> Option<Multiaddr> {
    if addr.iter().any(|p| p == Protocol::P2pCircuit) {
        return None;
    }
    let stripped: Multiaddr = addr
        .iter()
        .filter(|p| !matches!(p, Protocol::P2p(_)))
        .collect();
    let mut parts = stripped.iter();
    match parts.next()? {
        Protocol::Ip4(ip) => {
            if ip.is_unspecified() || ip.is_link_local() || (ip.is_loopback() && !own) {
                return None;
            }
        }
        Protocol::Ip6(ip) => {
            let link_local = (ip.segments()[0] & 0xffc0) == 0xfe80;
            if ip.is_unspecified() || link_local || (ip.is_loopback() && !own) {
                return None;
            }
        }
        Protocol::Dns(_) | Protocol::Dns4(_) | Protocol::Dns6(_) => {}
        _ => return None,
    }
    let transport = match (parts.next(), parts.next()) {
        (Some(Protocol::Tcp(_)), None) => true,
        (Some(Protocol::Udp(_)), Some(Protocol::QuicV1)) => parts.next().is_none(),
        _ => false,
    };
    transport.then_some(stripped)
}

/// The host part of an address in text form (its IP or DNS name), to tell addresses
/// of one host apart from another's.
pub(super) fn host_of(addr: &str) -> Option<String> {
    let mut parts = addr.split('/').skip(1);
    match (parts.next()?, parts.next()?) {
        (kind @ ("ip4" | "ip6" | "dns" | "dns4" | "dns6"), host) => Some(format!("/{kind}/{host}")),
        _ => None,
    }
}

fn is_loopback(addr: &Multiaddr) -> bool {
    match addr.iter().next() {
        Some(Protocol::Ip4(ip)) => ip.is_loopback(),
        Some(Protocol::Ip6(ip)) => ip.is_loopback(),
        _ => false,
    }
}

/// The redial state of one address.
#[derive(Clone, Debug)]
struct DialState {
    next: Instant,
    backoff: Duration,
    failures: u32,
    connected: bool,
}

/// The book and its dials.
#[derive(Debug)]
pub(super) struct Addresses {
    book: AddressBook,
    /// Whether this node keeps and dials a book at all (sessions only).
    enabled: bool,
    /// The port that marks a host's stable address.
    well_known: u16,
    /// Addresses being dialled or due, with their state (at most [`MAX_BOOK_DIALS`]).
    dials: HashMap<String, DialState>,
    /// Dials in flight: the connection id and the address.
    in_flight: HashMap<ConnectionId, String>,
    /// Connections a book dial made, and its address.
    established: HashMap<ConnectionId, String>,
    /// The identities trusted when last told, to see which ones are new.
    trusted: BTreeSet<IdentityKey>,
    /// Since when the book has unsaved changes.
    dirty_since: Option<Instant>,
    /// Book dials started (diagnostics, tests).
    dialled: u64,
}

impl Addresses {
    /// Dials made from the address book.
    pub(super) fn dialled(&self) -> u64 {
        self.dialled
    }

    /// The book at `path` (in memory if `None`); a node that is not a session
    /// (`enabled` false) keeps none.
    pub(super) fn new(path: Option<std::path::PathBuf>, enabled: bool, well_known: u16) -> Self {
        Self {
            book: AddressBook::load(if enabled { path } else { None }),
            enabled,
            well_known,
            dials: HashMap::new(),
            in_flight: HashMap::new(),
            established: HashMap::new(),
            trusted: BTreeSet::new(),
            dirty_since: None,
            dialled: 0,
        }
    }

    /// Remembers `addrs` of `identity` learned from `source` (the caller checked that
    /// the identity is trusted; `own`: it is this user's). Returns how many changed
    /// the book.
    pub(super) fn learn(
        &mut self,
        identity: IdentityKey,
        addrs: impl IntoIterator<Item = Multiaddr>,
        source: Source,
        own: bool,
        now_ms: u64,
    ) -> usize {
        if !self.enabled {
            return 0;
        }
        let mut changed = 0;
        for addr in addrs.into_iter().take(MAX_LEARNED_AT_ONCE) {
            let Some(kept) = keepable(&addr, own) else {
                continue;
            };
            let stable = super::well_known::port_of(&kept) == Some(self.well_known);
            // A loopback address (only ever this user's own) is this host: its sessions
            // meet at the well-known port, and a session's random port there may belong
            // to anyone's process after a restart.
            if !stable && is_loopback(&kept) {
                continue;
            }
            if self
                .book
                .remember_with(identity, &kept.to_string(), source, stable, now_ms)
            {
                changed += 1;
            }
        }
        changed
    }

    /// The identities of `now_trusted` that were not trusted when last told (so the
    /// first call returns them all), and forgets the addresses of those no longer
    /// trusted (a peer removed).
    pub(super) fn set_trusted(&mut self, now_trusted: BTreeSet<IdentityKey>) -> Vec<IdentityKey> {
        if !self.enabled {
            return Vec::new();
        }
        let gone: Vec<IdentityKey> = self
            .book
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| !now_trusted.contains(k))
            .collect();
        for k in gone {
            debug!(identity = %k.fingerprint(), "no longer a peer: its addresses are forgotten");
            self.book.forget(&k);
        }
        let new: Vec<IdentityKey> = now_trusted.difference(&self.trusted).copied().collect();
        for k in &new {
            // Forgotten earlier in this session (removed, or not yet paired at start):
            // what another command wrote for it since is its again.
            self.book.unforget(k);
        }
        self.trusted = now_trusted;
        new
    }

    /// The addresses to dial now, each at most once per backoff, bounded: the
    /// trusted identities' best addresses (stable ones first), round robin, at most
    /// [`MAX_DIALS_PER_IDENTITY`] each and [`MAX_BOOK_DIALS`] in all; `skip` those this
    /// node listens on or is connected to already.
    pub(super) fn plan(&mut self, now: Instant, skip: impl Fn(&str) -> bool) -> Vec<Multiaddr> {
        if !self.enabled {
            return Vec::new();
        }
        let ranked: Vec<Vec<String>> = self
            .book
            .iter()
            .filter(|(k, _)| self.trusted.contains(*k))
            .map(|(_, entries)| {
                let mut mine: Vec<_> = entries.iter().collect();
                // Stable addresses first; otherwise the book's order (answered first).
                mine.sort_by_key(|e| !e.stable);
                mine.into_iter()
                    .take(MAX_DIALS_PER_IDENTITY)
                    .map(|e| e.addr.clone())
                    .collect()
            })
            .collect();
        let mut candidates: Vec<String> = Vec::new();
        'fill: for rank in 0..MAX_DIALS_PER_IDENTITY {
            for addrs in &ranked {
                if candidates.len() >= MAX_BOOK_DIALS {
                    break 'fill;
                }
                if let Some(a) = addrs.get(rank)
                    && !candidates.contains(a)
                {
                    candidates.push(a.clone());
                }
            }
        }
        self.dials.retain(|a, _| candidates.contains(a));
        // One dial in flight per host: the first to answer is all the book is for
        // (presence and delivery take it from there), and parallel dials of one host's
        // ports would each leave a connection to it.
        let mut busy: Vec<String> = self.in_flight.values().filter_map(|a| host_of(a)).collect();
        let mut due = Vec::new();
        for addr in candidates {
            let host = host_of(&addr);
            if skip(&addr) || host.as_ref().is_some_and(|h| busy.contains(h)) {
                continue;
            }
            let state = self.dials.entry(addr.clone()).or_insert(DialState {
                next: now,
                backoff: MIN_BACKOFF,
                failures: 0,
                connected: false,
            });
            if state.connected
                || state.failures >= GIVE_UP_AFTER
                || now < state.next
                || self.in_flight.values().any(|a| *a == addr)
            {
                continue;
            }
            let Ok(parsed) = addr.parse::<Multiaddr>() else {
                continue;
            };
            state.next = now + state.backoff;
            state.backoff = (state.backoff * 2).min(MAX_BACKOFF);
            busy.extend(host);
            due.push(parsed);
        }
        due
    }

    /// A dial of `addr` started as `id`.
    pub(super) fn dialling(&mut self, id: ConnectionId, addr: &Multiaddr) {
        if self.in_flight.len() < MAX_BOOK_DIALS {
            self.in_flight.insert(id, addr.to_string());
            self.dialled += 1;
        }
    }

    /// A connection was established: if a book dial made it, its address answered.
    pub(super) fn on_established(&mut self, id: ConnectionId, now_ms: u64) {
        let Some(addr) = self.in_flight.remove(&id) else {
            return;
        };
        self.book.answered(&addr, now_ms);
        if let Some(s) = self.dials.get_mut(&addr) {
            s.connected = true;
            s.failures = 0;
            s.backoff = MIN_BACKOFF;
        }
        if self.established.len() < MAX_BOOK_DIALS {
            self.established.insert(id, addr);
        }
    }

    /// A dial failed: if it was a book dial, its address did not answer.
    pub(super) fn on_dial_failed(&mut self, id: ConnectionId) {
        let Some(addr) = self.in_flight.remove(&id) else {
            return;
        };
        self.book.failed(&addr);
        if let Some(s) = self.dials.get_mut(&addr) {
            s.failures = s.failures.saturating_add(1);
        }
    }

    /// A connection closed: if a book dial made it, its address is dialled again
    /// after its backoff.
    pub(super) fn on_closed(&mut self, id: ConnectionId, now: Instant) {
        let Some(addr) = self.established.remove(&id) else {
            return;
        };
        if let Some(s) = self.dials.get_mut(&addr) {
            s.connected = false;
            s.next = now + s.backoff;
        }
    }

    /// The network changed (or the host woke): every address is due again, with the
    /// backoff started over.
    pub(super) fn network_changed(&mut self, now: Instant) {
        for s in self.dials.values_mut() {
            s.next = now;
            s.backoff = MIN_BACKOFF;
            s.failures = 0;
        }
    }

    /// Saves the book when it has had unsaved changes for [`SAVE_AFTER`] (or at once
    /// if `now_too`).
    pub(super) fn save_if_due(&mut self, now: Instant, now_ms: u64, now_too: bool) {
        if !self.book.is_dirty() {
            self.dirty_since = None;
            return;
        }
        let since = *self.dirty_since.get_or_insert(now);
        if now_too || now.duration_since(since) >= SAVE_AFTER {
            // A small file (at most `MAX_IDENTITIES` × `MAX_ADDRS_PER_IDENTITY` short
            // lines) written at most every few seconds: cheap enough for the node task.
            if let Err(e) = self.book.save(now_ms) {
                warn!("saving the address book: {e}");
            }
            self.dirty_since = None;
        }
    }

    #[cfg(test)]
    fn book(&self) -> &AddressBook {
        &self.book
    }
}

/// The addresses worth remembering of a connection a new peer's session came on:
/// its IP at the well-known port (where its host's sessions will be), and for QUIC the
/// address itself (QUIC dials from its listening socket, so that is a listen address).
pub(super) fn from_connection(endpoint: &ConnectedPoint, well_known: u16) -> Vec<Multiaddr> {
    let remote = endpoint.get_remote_address();
    let mut out = Vec::new();
    let ip = match remote.iter().next() {
        Some(p @ (Protocol::Ip4(_) | Protocol::Ip6(_))) => p,
        _ => return out,
    };
    if remote.iter().any(|p| p == Protocol::P2pCircuit) {
        return out;
    }
    if well_known != 0 {
        out.push(
            Multiaddr::empty()
                .with(ip.clone())
                .with(Protocol::Tcp(well_known)),
        );
        out.push(
            Multiaddr::empty()
                .with(ip)
                .with(Protocol::Udp(well_known))
                .with(Protocol::QuicV1),
        );
    }
    match endpoint {
        ConnectedPoint::Dialer { address, .. } => out.push(address.clone()),
        ConnectedPoint::Listener { send_back_addr, .. }
            if send_back_addr.iter().any(|p| p == Protocol::QuicV1) =>
        {
            out.push(send_back_addr.clone());
        }
        ConnectedPoint::Listener { .. } => {}
    }
    out
}

impl Actor {
    /// The identities whose addresses are kept and dialled: this user's own and the
    /// peers the policy admits.
    fn book_trusted(&self) -> BTreeSet<IdentityKey> {
        let own = self.own_addr().map(|a| a.key);
        let peers = self
            .parts
            .delivery()
            .map(|d| {
                d.engine()
                    .gate()
                    .policy()
                    .iter()
                    .map(|(_, k)| *k)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        own.into_iter().chain(peers).collect()
    }

    fn is_own_identity(&self, key: &IdentityKey) -> bool {
        self.own_addr().is_some_and(|a| a.key == *key)
    }

    /// The policy changed (or the node started): the addresses of identities no
    /// longer trusted are forgotten, and a peer just admitted whose sessions are on
    /// the roster (the knock's sender) has their addresses remembered.
    pub(super) fn book_policy_changed(&mut self) {
        let first = self.addresses.trusted.is_empty();
        let new = self.addresses.set_trusted(self.book_trusted());
        if first {
            // At start every identity is "new"; nothing was admitted just now.
            return;
        }
        let now_ms = self.now_ms();
        for key in new {
            let own = self.is_own_identity(&key);
            let mut learned = Vec::new();
            for ann in self.presence.roster().announcements() {
                let body = ann.body();
                if body.identity != key {
                    continue;
                }
                learned.extend(
                    body.addrs
                        .iter()
                        .filter_map(|a| a.parse::<Multiaddr>().ok()),
                );
                if let Some(info) = body.peer_id().and_then(|p| self.peers.get(&p)) {
                    for endpoint in info.connections.values() {
                        learned.extend(from_connection(endpoint, self.well_known.port()));
                    }
                }
            }
            let n = self
                .addresses
                .learn(key, learned, Source::Knock, own, now_ms);
            debug!(identity = %key.fingerprint(), learned = n, "a new peer's addresses");
        }
    }

    /// A verified announcement of `addr` was taken: a trusted identity's addresses are
    /// remembered.
    pub(super) fn book_announcement(&mut self, addr: &interlink_core::wire::SessionAddr) {
        if !self.addresses.trusted.contains(&addr.key) {
            return;
        }
        let Some(ann) = self.presence.roster().get(addr) else {
            return;
        };
        let addrs: Vec<Multiaddr> = ann
            .body()
            .addrs
            .iter()
            .filter_map(|a| a.parse().ok())
            .collect();
        let own = self.is_own_identity(&addr.key);
        self.addresses
            .learn(addr.key, addrs, Source::Announcement, own, self.now_ms());
    }

    /// Identify from `peer` listed `listen_addrs`: remembered if the roster says the
    /// peer is a session of a trusted identity.
    pub(super) fn book_identified(&mut self, peer: PeerId, listen_addrs: &[Multiaddr]) {
        let Some(key) = self
            .presence
            .roster()
            .announcements()
            .map(|a| a.body())
            .find(|b| b.peer_id() == Some(peer))
            .map(|b| b.identity)
        else {
            return;
        };
        if !self.addresses.trusted.contains(&key) {
            return;
        }
        let own = self.is_own_identity(&key);
        self.addresses.learn(
            key,
            listen_addrs.iter().cloned(),
            Source::Identify,
            own,
            self.now_ms(),
        );
    }

    /// Dials the book's addresses that are due (and the host's well-known port, when
    /// another session holds it).
    pub(super) fn dial_book(&mut self, now: Instant) {
        if let Some(target) = self.well_known.local_dial_due(now) {
            let opts = DialOpts::unknown_peer_id().address(target.clone()).build();
            let id = opts.connection_id();
            match self.swarm.dial(opts) {
                Ok(()) => self.well_known.local_dialled(id),
                Err(e) => debug!(%target, %e, "well-known port on this host not dialled"),
            }
        }
        let mine: Vec<String> = self.listen_addrs.iter().map(ToString::to_string).collect();
        // A host this node is connected to already (either way) is met: its sessions
        // are on the roster through that connection, and delivery dials what it needs.
        // Dialling its book addresses too made duplicate connections that the move
        // from TCP to QUIC (`node::quic_upgrade`) did not expect.
        let connected: Vec<String> = self
            .peers
            .values()
            .flat_map(|p| p.connections.values())
            .filter_map(|c| host_of(&c.get_remote_address().to_string()))
            .collect();
        let due = self.addresses.plan(now, |a| {
            mine.iter().any(|m| m == a) || host_of(a).is_some_and(|h| connected.contains(&h))
        });
        for addr in due {
            let opts = DialOpts::unknown_peer_id().address(addr.clone()).build();
            let id = opts.connection_id();
            match self.swarm.dial(opts) {
                Ok(()) => self.addresses.dialling(id, &addr),
                Err(e) => debug!(%addr, %e, "book address not dialled"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use interlink_core::Identity;

    use super::*;

    fn a(s: &str) -> Multiaddr {
        s.parse().unwrap()
    }

    fn id(n: u8) -> IdentityKey {
        Identity::from_seed(&[n; 32]).public()
    }

    const PEER: &str = "12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN";

    #[test]
    fn what_is_kept_of_an_address() {
        let keep = |s: &str, own| keepable(&a(s), own).map(|m| m.to_string());
        assert_eq!(
            keep(&format!("/ip4/10.0.0.2/tcp/7385/p2p/{PEER}"), false).as_deref(),
            Some("/ip4/10.0.0.2/tcp/7385")
        );
        assert_eq!(
            keep("/ip4/10.0.0.2/udp/4001/quic-v1", false).as_deref(),
            Some("/ip4/10.0.0.2/udp/4001/quic-v1")
        );
        assert_eq!(
            keep("/dns4/box.tailnet/tcp/7385", false).as_deref(),
            Some("/dns4/box.tailnet/tcp/7385")
        );
        let circuit = format!("/ip4/10.0.0.9/tcp/4001/p2p/{PEER}/p2p-circuit");
        for refused in [
            circuit.as_str(),
            "/ip4/0.0.0.0/tcp/7385",
            "/ip4/169.254.1.1/tcp/7385",
            "/ip6/fe80::1/tcp/7385",
            "/ip4/10.0.0.2/udp/4001",
            "/memory/5",
            "/ip4/10.0.0.2/tcp/1/ws",
        ] {
            assert_eq!(keep(refused, true), None, "{refused}");
        }
        // Loopback names this host: kept only for the user's own identity.
        assert_eq!(keep("/ip4/127.0.0.1/tcp/7385", false), None);
        assert!(keep("/ip4/127.0.0.1/tcp/7385", true).is_some());
    }

    #[test]
    fn only_trusted_identities_are_dialled_bounded_and_stable_first() {
        let now = Instant::now();
        let mut book = Addresses::new(None, true, 7385);
        let t0 = 1_800_000_000_000;
        // Identity 1: session ports and its host's well-known port.
        let learned = book.learn(
            id(1),
            [
                a("/ip4/10.0.0.1/tcp/41000"),
                a("/ip4/10.0.0.1/udp/41001/quic-v1"),
                a("/ip4/10.0.0.1/tcp/7385"),
                a("/ip4/127.0.0.1/tcp/7385"),
            ],
            Source::Announcement,
            false,
            t0,
        );
        assert_eq!(learned, 3, "loopback of someone else is not kept");
        // The user's own: loopback at the well-known port only.
        let own = book.learn(
            id(4),
            [a("/ip4/127.0.0.1/tcp/41000"), a("/ip4/127.0.0.1/tcp/7385")],
            Source::Announcement,
            true,
            t0,
        );
        assert_eq!(own, 1);
        assert_eq!(
            book.book().addresses(&id(4))[0].addr,
            "/ip4/127.0.0.1/tcp/7385"
        );
        // Identity 2 is not (or no longer) a peer: never dialled, and forgotten.
        book.learn(
            id(2),
            [a("/ip4/10.0.0.2/tcp/7385")],
            Source::Identify,
            false,
            t0,
        );
        let new: BTreeSet<IdentityKey> = book
            .set_trusted([id(1), id(3)].into_iter().collect())
            .into_iter()
            .collect();
        assert_eq!(new, [id(1), id(3)].into_iter().collect());
        assert!(book.book().addresses(&id(2)).is_empty());
        let due = book.plan(now, |_| false);
        assert_eq!(
            due,
            vec![a("/ip4/10.0.0.1/tcp/7385")],
            "the stable address first, one dial per host at a time"
        );
        // It failed: the host's next address is tried (the first waits its backoff).
        let conn = ConnectionId::new_unchecked(7);
        book.dialling(conn, &due[0]);
        assert!(
            book.plan(now, |_| false).is_empty(),
            "one in flight per host"
        );
        book.on_dial_failed(conn);
        let next = book.plan(now, |_| false);
        assert_eq!(next.len(), 1);
        assert_ne!(next[0], due[0]);
        assert_eq!(
            host_of("/ip4/10.0.0.1/udp/1/quic-v1").as_deref(),
            Some("/ip4/10.0.0.1")
        );
        assert_eq!(host_of("/dns4/box/tcp/1").as_deref(), Some("/dns4/box"));
        assert_eq!(host_of("/memory/1"), None);
        // Many identities with many addresses: bounded in all, round robin.
        let many: BTreeSet<IdentityKey> = (10..60u8).map(id).collect();
        for (i, k) in many.iter().enumerate() {
            for port in [7385u16, 1000, 1001, 1002, 1003, 1004] {
                book.learn(
                    *k,
                    [a(&format!("/ip4/10.9.0.{i}/tcp/{port}"))],
                    Source::Announcement,
                    false,
                    t0,
                );
            }
        }
        book.set_trusted(many.clone());
        let due = book.plan(now + Duration::from_secs(100), |_| false);
        assert_eq!(due.len(), MAX_BOOK_DIALS);
        assert!(
            due.iter().all(|d| d.to_string().ends_with("/tcp/7385")),
            "one stable address of each of 16 identities before anyone's second: {due:?}"
        );
        assert!(book.dials.len() <= MAX_BOOK_DIALS);
        // Addresses this node listens on or is connected to are skipped.
        let due = book.plan(now + Duration::from_secs(200), |a| a.ends_with("/7385"));
        assert!(due.iter().all(|d| !d.to_string().ends_with("/7385")));
    }

    #[test]
    fn dialling_cadence_backoff_answers_and_giving_up() {
        let now = Instant::now();
        let mut book = Addresses::new(None, true, 7385);
        book.learn(
            id(1),
            [a("/ip4/10.0.0.1/tcp/7385")],
            Source::Invite,
            false,
            1,
        );
        book.set_trusted([id(1)].into_iter().collect());
        let mut at = now;
        let mut dial_times = Vec::new();
        let mut n = 0;
        // Failing: dialled at 0, 1, 3, 7, 15, 31 s… (the bootstrap backoff), up to the
        // give-up count.
        while at < now + Duration::from_secs(3600) {
            for d in book.plan(at, |_| false) {
                assert_eq!(d, a("/ip4/10.0.0.1/tcp/7385"));
                let conn = ConnectionId::new_unchecked(n);
                n += 1;
                book.dialling(conn, &d);
                dial_times.push(at.duration_since(now).as_secs());
                book.on_dial_failed(conn);
            }
            at += Duration::from_millis(500);
        }
        assert_eq!(dial_times.len(), GIVE_UP_AFTER as usize, "{dial_times:?}");
        assert_eq!(&dial_times[..6], &[0, 1, 3, 7, 15, 31]);
        assert_eq!(book.book().addresses(&id(1))[0].failures, GIVE_UP_AFTER);
        // A change of network makes it due again at once; this time it answers.
        book.network_changed(at);
        let d = book.plan(at, |_| false);
        assert_eq!(d.len(), 1);
        let conn = ConnectionId::new_unchecked(1000);
        book.dialling(conn, &d[0]);
        assert!(
            book.plan(at + Duration::from_secs(10), |_| false)
                .is_empty(),
            "in flight"
        );
        book.on_established(conn, 99);
        let entry = &book.book().addresses(&id(1))[0];
        assert_eq!((entry.answered_ms, entry.failures), (Some(99), 0));
        assert!(
            book.plan(at + Duration::from_secs(100), |_| false)
                .is_empty(),
            "connected"
        );
        // Its connection closed: dialled again after the (reset) backoff.
        book.on_closed(conn, at + Duration::from_secs(100));
        assert!(
            book.plan(at + Duration::from_millis(100_500), |_| false)
                .is_empty()
        );
        assert_eq!(book.plan(at + Duration::from_secs(101), |_| false).len(), 1);
    }

    #[test]
    fn a_new_peer_is_remembered_at_its_connection_and_saves_are_coalesced() {
        let listener = ConnectedPoint::Listener {
            local_addr: a("/ip4/10.1.0.2/tcp/7385"),
            send_back_addr: a("/ip4/10.2.0.2/tcp/51234"),
        };
        assert_eq!(
            from_connection(&listener, 7385),
            vec![
                a("/ip4/10.2.0.2/tcp/7385"),
                a("/ip4/10.2.0.2/udp/7385/quic-v1")
            ],
            "a TCP client's port is not a listen port"
        );
        let quic = ConnectedPoint::Listener {
            local_addr: a("/ip4/10.1.0.2/udp/7385/quic-v1"),
            send_back_addr: a("/ip4/10.2.0.2/udp/40000/quic-v1"),
        };
        assert!(from_connection(&quic, 7385).contains(&a("/ip4/10.2.0.2/udp/40000/quic-v1")));
        assert_eq!(from_connection(&listener, 0).len(), 0);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("addresses.json");
        let mut book = Addresses::new(Some(path.clone()), true, 7385);
        let now = Instant::now();
        book.learn(
            id(1),
            from_connection(&listener, 7385),
            Source::Knock,
            false,
            1,
        );
        book.save_if_due(now, 1, false);
        assert!(!path.exists(), "not at the first change");
        book.learn(
            id(1),
            [a("/ip4/10.2.0.2/tcp/41000")],
            Source::Announcement,
            false,
            2,
        );
        book.save_if_due(now + Duration::from_secs(1), 2, false);
        assert!(!path.exists());
        book.save_if_due(now + SAVE_AFTER, 3, false);
        assert!(path.exists(), "saved once the changes waited long enough");
        let saved = AddressBook::load(Some(path.clone()));
        assert_eq!(saved.addresses(&id(1)).len(), 3);
        // A node that is not a session keeps nothing and writes nothing.
        let mut observer = Addresses::new(Some(path), false, 7385);
        assert_eq!(
            observer.learn(
                id(1),
                [a("/ip4/10.2.0.9/tcp/7385")],
                Source::Identify,
                false,
                5
            ),
            0
        );
        assert!(observer.set_trusted(BTreeSet::new()).is_empty());
    }
}
