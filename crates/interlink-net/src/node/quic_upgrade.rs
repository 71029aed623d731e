//! Moving a peer from TCP to QUIC when both ends speak it.
//!
//! Users give each other TCP addresses (the tailnet recipe, `--bootstrap`, invites
//! made before a node listened on QUIC), so two sessions often meet over TCP although
//! both listen on QUIC. On a lossy link that costs the tail: one lost segment stalls
//! everything behind it on the connection and TCP's retransmission backoff reaches
//! seconds (the lab's 5 %-loss link: p99 2.6 s over TCP, under 0.9 s over QUIC). So
//! when identify tells a session that a peer it dialled over TCP also listens on QUIC,
//! it dials the peer over QUIC at the host it already reached (the peer's listen
//! addresses may be private ones of another site) and, once that connection is up,
//! closes its TCP connections to the peer.
//!
//! Only the dialling side upgrades, so two sessions do not race each other into two
//! QUIC connections, and only that side closes TCP: while a peer has a direct QUIC
//! connection this node dialled, its direct TCP connections to the peer are closed,
//! also those made later (an AutoNAT dial-back, a dial to an announced address). The
//! QUIC connection counts once the peer's identify came over it: the dialler's side of
//! a QUIC handshake completes first, and a peer whose side had not yet completed when
//! its TCP connection closed had no connection left to send its requests again on —
//! they failed as unreachable and went to the mailbox (`queued` where `delivered` was
//! due: seen in the two-site lab on a loaded machine). The TCP connections are closed when none of this node's live
//! deliveries is waiting on the peer (libp2p's request-response would fail them with
//! `ConnectionClosed`, and their messages would go to the mailbox), or after
//! [`RETIRE_WAIT`] regardless. Until the swarm reports them closed, request-response
//! still counts them among the peer's connections and would hand a new request to one
//! of them, so new live deliveries to the peer wait for that report
//! (`node::held_live`). A request that the peer itself has in flight on a closed connection
//! fails there; the peer being connected still, it is sent again at once
//! (`SendFailure::ConnectionLost`, a bounded number of times).
//!
//! Relays are left alone: their reservation lives on the connection it was made on
//! (`relay_client` reaches them over QUIC as well, keeping TCP).

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use libp2p::{
    Multiaddr, PeerId,
    core::ConnectedPoint,
    multiaddr::Protocol,
    swarm::{
        ConnectionId,
        dial_opts::{DialOpts, PeerCondition},
    },
};
use tracing::debug;

use super::Actor;
use crate::Role;
use crate::diagnostics;

/// Most peers being moved to QUIC at once (dialled, or waiting for their TCP
/// connections to be closed). Past it, a peer stays on TCP.
const MAX_UPGRADES: usize = 256;
/// How long a QUIC dial may take before the peer is left on TCP.
const DIAL_WAIT: Duration = Duration::from_secs(20);
/// How long the TCP connections wait for this node's live deliveries on them.
const RETIRE_WAIT: Duration = Duration::from_secs(5);
/// Most QUIC addresses dialled for one peer.
const MAX_QUIC_ADDRS: usize = 2;

#[derive(Debug)]
enum Step {
    /// The QUIC dial is on its way (until the deadline).
    Dialling(Instant),
    /// QUIC is up; the TCP connections close when idle, or at the deadline.
    Retiring(Instant),
}

/// The peers being moved to QUIC. IO-free: the node tells it what identify and the
/// swarm said, with the peer's connections as they are, and carries out the dials and
/// closes it returns.
#[derive(Debug, Default)]
pub(super) struct QuicUpgrades {
    steps: HashMap<PeerId, Step>,
    /// QUIC connections this node dialled over which the peer's identify came: the
    /// peer holds them too (bounded by the swarm's connections; removed on close).
    heard_on: HashSet<ConnectionId>,
    /// TCP connections closed because QUIC took over (shown in the diagnostics).
    retired: u64,
}

/// A peer's connections and how each was made.
type Connections = HashMap<ConnectionId, ConnectedPoint>;

impl QuicUpgrades {
    /// Peers moved from TCP to QUIC.
    pub(super) fn retired(&self) -> u64 {
        self.retired
    }

    /// Identify told us `peer`'s `listen` addresses: if this session reaches it over
    /// TCP only, by a connection it dialled, and the peer listens on QUIC, the QUIC
    /// addresses to dial at the host it reached (then [`Self::dialling`]).
    pub(super) fn to_dial(
        &self,
        peer: &PeerId,
        connections: &Connections,
        listen: &[Multiaddr],
    ) -> Option<Vec<Multiaddr>> {
        if self.steps.contains_key(peer) || self.steps.len() >= MAX_UPGRADES {
            return None;
        }
        let only_tcp = connections
            .values()
            .all(|c| diagnostics::transport_of(c) == ("tcp", false));
        if connections.is_empty() || !only_tcp {
            return None;
        }
        let host = connections.values().find_map(dialled_tcp)?;
        let addrs = quic_addrs_at(host, listen);
        (!addrs.is_empty()).then_some(addrs)
    }

    /// The QUIC dial to `peer` started.
    pub(super) fn dialling(&mut self, peer: PeerId, now: Instant) {
        self.steps.insert(peer, Step::Dialling(now + DIAL_WAIT));
    }

    /// `peer`'s identify came over `connection`: if it is a QUIC connection this node
    /// dialled, the peer holds it too; whether TCP may now be retired (then
    /// [`Self::on_connected`]).
    pub(super) fn identified_over(
        &mut self,
        connection: ConnectionId,
        connections: &Connections,
    ) -> bool {
        let dialled_quic = connections
            .get(&connection)
            .is_some_and(|c| c.is_dialer() && diagnostics::transport_of(c) == ("quic", false));
        dialled_quic && self.heard_on.insert(connection)
    }

    /// A connection to `peer` opened, or its QUIC one was confirmed: while the peer has
    /// a direct QUIC connection this node dialled and confirmed, its direct TCP ones are
    /// to be retired — the one it was met on, and any made later (an AutoNAT dial-back,
    /// the peer dialling an announced address). Whether retiring starts now.
    pub(super) fn on_connected(
        &mut self,
        peer: PeerId,
        connections: &Connections,
        now: Instant,
    ) -> bool {
        if matches!(self.steps.get(&peer), Some(Step::Retiring(_))) {
            return false;
        }
        // Only the side that dialled QUIC retires TCP: the other side's requests on it
        // are this side's to protect.
        let (mut quic, mut tcp) = (false, false);
        for (id, c) in connections {
            match diagnostics::transport_of(c) {
                ("quic", false) if c.is_dialer() && self.heard_on.contains(id) => quic = true,
                ("tcp", false) => tcp = true,
                _ => {}
            }
        }
        if !(quic && tcp) || (self.steps.len() >= MAX_UPGRADES && !self.steps.contains_key(&peer)) {
            return false;
        }
        self.steps.insert(peer, Step::Retiring(now + RETIRE_WAIT));
        true
    }

    /// The TCP connections of `peer` to close now, if QUIC took over and none of our
    /// live deliveries waits on the peer (`waiting`), or the wait is over. Empty when
    /// nothing is to close (also when the QUIC connection is gone again: TCP is all
    /// there is).
    pub(super) fn retire(
        &mut self,
        peer: PeerId,
        connections: &Connections,
        waiting: bool,
        now: Instant,
    ) -> Vec<ConnectionId> {
        let Some(Step::Retiring(deadline)) = self.steps.get(&peer) else {
            return Vec::new();
        };
        if waiting && now < *deadline {
            return Vec::new();
        }
        self.steps.remove(&peer);
        if !connections
            .values()
            .any(|c| diagnostics::transport_of(c).0 == "quic")
        {
            return Vec::new();
        }
        let tcp: Vec<ConnectionId> = connections
            .iter()
            .filter(|(_, c)| diagnostics::transport_of(c) == ("tcp", false))
            .map(|(id, _)| *id)
            .collect();
        self.retired += tcp.len() as u64;
        tcp
    }

    /// Whether `peer`'s TCP connections are waiting to be retired.
    pub(super) fn is_retiring(&self, peer: &PeerId) -> bool {
        matches!(self.steps.get(peer), Some(Step::Retiring(_)))
    }

    /// Every tick: dials that did not connect in time are given up (the peer stays on
    /// TCP); the peers whose TCP connections wait to be retired.
    pub(super) fn handle_timeout(&mut self, now: Instant) -> Vec<PeerId> {
        self.steps.retain(|peer, step| match step {
            Step::Dialling(deadline) => {
                if now >= *deadline {
                    debug!(%peer, "QUIC dial did not connect: staying on TCP");
                }
                now < *deadline
            }
            Step::Retiring(_) => true,
        });
        self.steps
            .iter()
            .filter(|(_, s)| matches!(s, Step::Retiring(_)))
            .map(|(p, _)| *p)
            .collect()
    }

    pub(super) fn closed(&mut self, connection: ConnectionId) {
        self.heard_on.remove(&connection);
    }

    /// `peer` disconnected altogether: nothing left to move.
    pub(super) fn disconnected(&mut self, peer: &PeerId, connection: ConnectionId) {
        self.heard_on.remove(&connection);
        self.steps.remove(peer);
    }
}

/// The QUIC addresses to reach a node at: `host` (an IP or DNS component) with each
/// QUIC port among its `listen` addresses (at most [`MAX_QUIC_ADDRS`], lowest first).
fn quic_addrs_at(host: &Multiaddr, listen: &[Multiaddr]) -> Vec<Multiaddr> {
    let Some(host) = host.iter().next().filter(|p| {
        matches!(
            p,
            Protocol::Ip4(_)
                | Protocol::Ip6(_)
                | Protocol::Dns(_)
                | Protocol::Dns4(_)
                | Protocol::Dns6(_)
        )
    }) else {
        return Vec::new();
    };
    let mut ports: Vec<u16> = listen
        .iter()
        .filter(|a| a.iter().any(|p| p == Protocol::QuicV1))
        .filter(|a| a.iter().all(|p| p != Protocol::P2pCircuit))
        .filter_map(|a| {
            a.iter().find_map(|p| match p {
                Protocol::Udp(port) => Some(port),
                _ => None,
            })
        })
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
        .into_iter()
        .take(MAX_QUIC_ADDRS)
        .map(|port| {
            Multiaddr::empty()
                .with(host.clone())
                .with(Protocol::Udp(port))
                .with(Protocol::QuicV1)
        })
        .collect()
}

/// The address this node dialled a peer at over direct TCP, if it did.
fn dialled_tcp(endpoint: &ConnectedPoint) -> Option<&Multiaddr> {
    match endpoint {
        ConnectedPoint::Dialer { address, .. }
            if diagnostics::transport_of(endpoint) == ("tcp", false) =>
        {
            Some(address)
        }
        _ => None,
    }
}

impl Actor {
    /// Dials `peer` over QUIC at `host` with the QUIC ports among its `listen`
    /// addresses, beside whatever connections it has; whether a dial started. A relay
    /// reached by TCP is dialled so too (`relay_client`).
    pub(super) fn dial_quic(
        &mut self,
        peer: PeerId,
        host: &Multiaddr,
        listen: &[Multiaddr],
    ) -> bool {
        self.dial_quic_at(peer, quic_addrs_at(host, listen))
    }

    fn dial_quic_at(&mut self, peer: PeerId, addrs: Vec<Multiaddr>) -> bool {
        if addrs.is_empty() {
            return false;
        }
        debug!(%peer, ?addrs, "dialling over QUIC too");
        let opts = DialOpts::peer_id(peer)
            .addresses(addrs)
            .condition(PeerCondition::Always)
            .build();
        match self.swarm.dial(opts) {
            Ok(()) => true,
            Err(e) => {
                debug!(%peer, %e, "QUIC dial not started");
                false
            }
        }
    }

    /// Whether `peer` is one a session moves off TCP (relays keep theirs).
    fn moves_to_quic(&self, peer: &PeerId) -> bool {
        matches!(self.role, Role::Session(_)) && !self.relays.is_relay(peer)
    }

    /// Identify told us `peer`'s listen addresses, over `connection`.
    pub(super) fn on_upgrade_identified(
        &mut self,
        peer: PeerId,
        connection: ConnectionId,
        listen: &[Multiaddr],
    ) {
        if !self.moves_to_quic(&peer) {
            return;
        }
        let Some(info) = self.peers.get(&peer) else {
            return;
        };
        if let Some(addrs) = self.upgrades.to_dial(&peer, &info.connections, listen)
            && self.dial_quic_at(peer, addrs)
        {
            self.upgrades.dialling(peer, Instant::now());
        }
        let confirmed = self
            .peers
            .get(&peer)
            .is_some_and(|info| self.upgrades.identified_over(connection, &info.connections));
        if confirmed {
            self.on_upgrade_connected(peer);
        }
    }

    /// A connection to `peer` opened (already in `peers`), or its QUIC one was confirmed.
    pub(super) fn on_upgrade_connected(&mut self, peer: PeerId) {
        if !self.moves_to_quic(&peer) {
            return;
        }
        let now = Instant::now();
        let started = self
            .peers
            .get(&peer)
            .is_some_and(|info| self.upgrades.on_connected(peer, &info.connections, now));
        if started {
            self.retire_tcp(peer, now);
        }
    }

    /// Closes what [`QuicUpgrades::retire`] says of `peer`'s TCP connections.
    fn retire_tcp(&mut self, peer: PeerId, now: Instant) {
        let deliver = &self.swarm.behaviour().deliver;
        let waiting = self
            .parts
            .delivery()
            .is_some_and(|d| d.waits_on(peer, |id| deliver.is_pending_outbound(&peer, id)));
        let Some(info) = self.peers.get_mut(&peer) else {
            return;
        };
        let tcp = self.upgrades.retire(peer, &info.connections, waiting, now);
        if tcp.is_empty() {
            return;
        }
        for id in &tcp {
            info.connections.remove(id);
            self.swarm.close_connection(*id);
        }
        self.held_live.closing(peer, tcp, now);
        debug!(%peer, "moved to QUIC");
    }

    /// Every tick, and after each live answer: retire what is due, give up on dials
    /// that did not connect, send what waited too long for a close.
    pub(super) fn advance_upgrades(&mut self, now: Instant) {
        for peer in self.upgrades.handle_timeout(now) {
            self.retire_tcp(peer, now);
        }
        while let Some((peer, held)) = self.held_live.poll_due(now) {
            self.send_held(peer, held);
        }
    }

    /// A live answer came from `peer`: its TCP connections may be idle now.
    pub(super) fn on_upgrade_answered(&mut self, peer: PeerId) {
        if self.upgrades.is_retiring(&peer) {
            self.retire_tcp(peer, Instant::now());
        }
    }

    /// A connection to `peer` closed: when it was the last closing one, what was held
    /// back goes out.
    pub(super) fn on_upgrade_closed(&mut self, peer: PeerId, connection: ConnectionId) {
        self.upgrades.closed(connection);
        if let Some(held) = self.held_live.closed(peer, connection) {
            self.send_held(peer, held);
        }
    }

    /// `peer` disconnected altogether: nothing left to move; what was held back is sent
    /// (request-response dials the peer again, or reports it unreachable).
    pub(super) fn on_upgrade_disconnected(&mut self, peer: &PeerId, connection: ConnectionId) {
        self.upgrades.disconnected(peer, connection);
        if let Some(held) = self.held_live.release(peer) {
            self.send_held(*peer, held);
        }
    }

    fn send_held(
        &mut self,
        peer: PeerId,
        held: Vec<(
            interlink_delivery::ReqId,
            interlink_core::wire::DeliverRequest,
        )>,
    ) {
        debug!(%peer, held = held.len(), "live deliveries released");
        for (req, request) in held {
            self.send_live_request(peer, req, request);
        }
    }
}

#[cfg(test)]
#[path = "quic_upgrade_tests.rs"]
mod tests;
