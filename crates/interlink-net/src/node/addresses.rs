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
#[path = "addresses_tests.rs"]
mod tests;
