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
//! of them, so new live deliveries to the peer wait for that report (at most
//! [`CLOSE_WAIT`]). A request that the peer itself has in flight on a closed connection
//! fails there; the peer being connected still, it is sent again at once
//! (`SendFailure::ConnectionLost`, a bounded number of times).
//!
//! Relays are left alone: their reservation lives on the connection it was made on
//! (`relay_client` reaches them over QUIC as well, keeping TCP).

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use interlink_core::wire::DeliverRequest;
use interlink_delivery::ReqId;
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
/// How long live deliveries wait for the retired connections' closing to be reported.
const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// How long a live delivery sent again after its connection was lost under it (the
/// peer still connected) waits for the swarm to report that connection closed: sent at
/// once, it may land on the same dying connection — the peer closed it, and the stream
/// error came before the close — and be lost again. Well under the live attempt's
/// timeout (1 s), which runs while it waits.
const LOST_WAIT: Duration = Duration::from_millis(300);
/// Most live deliveries held back for one peer while its TCP connections close (the
/// engine keeps far fewer in flight); past it they are sent at once.
const MAX_HELD_LIVE: usize = 64;

/// A peer whose TCP connections are closing, and the live deliveries held back until
/// they are gone.
#[derive(Debug)]
struct Closing {
    connections: Vec<ConnectionId>,
    deadline: Instant,
    held: Vec<(ReqId, DeliverRequest)>,
}

#[derive(Debug)]
enum Step {
    /// The QUIC dial is on its way (until the deadline).
    Dialling(Instant),
    /// QUIC is up; the TCP connections close when idle, or at the deadline.
    Retiring(Instant),
}

/// The peers being moved to QUIC.
#[derive(Debug, Default)]
pub(super) struct QuicUpgrades {
    steps: HashMap<PeerId, Step>,
    closing: HashMap<PeerId, Closing>,
    /// QUIC connections this node dialled over which the peer's identify came: the
    /// peer holds them too (bounded by the swarm's connections; removed on close).
    heard_on: HashSet<ConnectionId>,
    /// TCP connections closed because QUIC took over (shown in the diagnostics).
    retired: u64,
}

impl QuicUpgrades {
    /// Peers moved from TCP to QUIC.
    pub(super) fn retired(&self) -> u64 {
        self.retired
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
        let addrs = quic_addrs_at(host, listen);
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

    /// Identify told us `peer`'s listen addresses: if this session reaches it over TCP
    /// only, by a connection it dialled, and the peer listens on QUIC, dial QUIC too.
    pub(super) fn upgrade_to_quic(&mut self, peer: PeerId, listen: &[Multiaddr]) {
        if !self.moves_to_quic(&peer)
            || self.upgrades.steps.contains_key(&peer)
            || self.upgrades.steps.len() >= MAX_UPGRADES
        {
            return;
        }
        let Some(info) = self.peers.get(&peer) else {
            return;
        };
        if info.transports() != ["tcp"] {
            return;
        }
        let Some(host) = info.connections.values().find_map(dialled_tcp).cloned() else {
            return;
        };
        if self.dial_quic(peer, &host, listen) {
            self.upgrades
                .steps
                .insert(peer, Step::Dialling(Instant::now() + DIAL_WAIT));
        }
    }

    /// A connection to `peer` opened (already in `peers`): while the peer has a direct
    /// QUIC connection this node dialled, its direct TCP ones are retired — the one it was met on, and
    /// any made later (an AutoNAT dial-back, the peer dialling an announced address).
    pub(super) fn on_upgrade_connected(&mut self, peer: PeerId) {
        if !self.moves_to_quic(&peer)
            || matches!(self.upgrades.steps.get(&peer), Some(Step::Retiring(_)))
        {
            return;
        }
        let Some(info) = self.peers.get(&peer) else {
            return;
        };
        // Only the side that dialled QUIC retires TCP: the other side's requests on it
        // are this side's to protect.
        let (mut quic, mut tcp) = (false, false);
        for (id, c) in &info.connections {
            match diagnostics::transport_of(c) {
                ("quic", false) if c.is_dialer() && self.upgrades.heard_on.contains(id) => {
                    quic = true;
                }
                ("tcp", false) => tcp = true,
                _ => {}
            }
        }
        if !(quic && tcp)
            || (self.upgrades.steps.len() >= MAX_UPGRADES
                && !self.upgrades.steps.contains_key(&peer))
        {
            return;
        }
        self.upgrades
            .steps
            .insert(peer, Step::Retiring(Instant::now() + RETIRE_WAIT));
        self.retire_tcp(peer, Instant::now());
    }

    /// Closes `peer`'s direct TCP connections if QUIC took over and none of our live
    /// deliveries waits on the peer (or the wait is over).
    fn retire_tcp(&mut self, peer: PeerId, now: Instant) {
        let Some(Step::Retiring(deadline)) = self.upgrades.steps.get(&peer) else {
            return;
        };
        let deliver = &self.swarm.behaviour().deliver;
        let waiting = self
            .parts
            .delivery()
            .is_some_and(|d| d.waits_on(peer, |id| deliver.is_pending_outbound(&peer, id)));
        if waiting && now < *deadline {
            return;
        }
        self.upgrades.steps.remove(&peer);
        let Some(info) = self.peers.get_mut(&peer) else {
            return;
        };
        if !info.transports().contains(&"quic") {
            // The QUIC connection is gone again: TCP is all there is.
            return;
        }
        let tcp: Vec<_> = info
            .connections
            .iter()
            .filter(|(_, c)| diagnostics::transport_of(c) == ("tcp", false))
            .map(|(id, _)| *id)
            .collect();
        for id in &tcp {
            info.connections.remove(id);
            self.upgrades.retired += 1;
            self.swarm.close_connection(*id);
        }
        self.hold_while_closing(peer, tcp, now);
        debug!(%peer, "moved to QUIC");
    }

    /// `connections` to `peer` are closing for a better one (here, or
    /// `retire_circuits`): new live deliveries to the peer wait for the swarm's report
    /// that they are gone, at most [`CLOSE_WAIT`] from now.
    pub(super) fn hold_while_closing(
        &mut self,
        peer: PeerId,
        connections: Vec<ConnectionId>,
        now: Instant,
    ) {
        if connections.is_empty() {
            return;
        }
        // Merged into what is closing already: what was held back stays held.
        let c = self
            .upgrades
            .closing
            .entry(peer)
            .or_insert_with(|| Closing {
                connections: Vec::new(),
                deadline: now + CLOSE_WAIT,
                held: Vec::new(),
            });
        c.connections.extend(connections);
        c.deadline = now + CLOSE_WAIT;
    }

    /// A live delivery to `peer`: held back while the peer's retired connections are
    /// closing (given back otherwise, to be sent now).
    pub(super) fn hold_live(
        &mut self,
        peer: PeerId,
        req: ReqId,
        request: DeliverRequest,
    ) -> Option<(ReqId, DeliverRequest)> {
        match self.upgrades.closing.get_mut(&peer) {
            Some(c) if c.held.len() < MAX_HELD_LIVE => {
                c.held.push((req, request));
                None
            }
            _ => Some((req, request)),
        }
    }

    /// A live delivery to `peer` was lost with its connection while the peer stays
    /// connected (the peer closed that connection for a better one: `retire_circuits`
    /// on its side, or its move to QUIC): what is sent to the peer next waits until
    /// the swarm reports a connection to it closed, at most [`LOST_WAIT`].
    pub(super) fn hold_until_a_close(&mut self, peer: PeerId, now: Instant) {
        if self.upgrades.closing.contains_key(&peer) {
            return;
        }
        debug!(%peer, "a live delivery lost with its connection: what follows waits for the close");
        // No connection named: the first close reported for the peer releases it.
        self.upgrades.closing.insert(
            peer,
            Closing {
                connections: Vec::new(),
                deadline: now + LOST_WAIT,
                held: Vec::new(),
            },
        );
    }

    /// When held live deliveries are next due out whatever happens.
    pub(super) fn held_deadline(&self) -> Option<Instant> {
        self.upgrades.closing.values().map(|c| c.deadline).min()
    }

    /// `peer`'s identify came over `connection`: if it is a QUIC connection this node
    /// dialled, the peer holds it too, and TCP may be retired.
    pub(super) fn on_upgrade_identified(&mut self, peer: PeerId, connection: ConnectionId) {
        let dialled_quic = self
            .peers
            .get(&peer)
            .and_then(|info| info.connections.get(&connection))
            .is_some_and(|c| c.is_dialer() && diagnostics::transport_of(c) == ("quic", false));
        if dialled_quic && self.upgrades.heard_on.insert(connection) {
            self.on_upgrade_connected(peer);
        }
    }

    /// A connection to `peer` closed: when it was the last retired one, what was held
    /// back goes out.
    pub(super) fn on_upgrade_closed(&mut self, peer: PeerId, connection: ConnectionId) {
        self.upgrades.heard_on.remove(&connection);
        let Some(c) = self.upgrades.closing.get_mut(&peer) else {
            return;
        };
        c.connections.retain(|id| *id != connection);
        if c.connections.is_empty() {
            self.release_held(peer);
        }
    }

    fn release_held(&mut self, peer: PeerId) {
        let Some(c) = self.upgrades.closing.remove(&peer) else {
            return;
        };
        debug!(%peer, held = c.held.len(), left = c.connections.len(), "live deliveries released");
        for (req, request) in c.held {
            self.send_live_request(peer, req, request);
        }
    }

    /// Every tick, and after each live answer: retire what is due, give up on dials
    /// that did not connect.
    pub(super) fn advance_upgrades(&mut self, now: Instant) {
        self.upgrades.steps.retain(|peer, step| match step {
            Step::Dialling(deadline) => {
                if now >= *deadline {
                    debug!(%peer, "QUIC dial did not connect: staying on TCP");
                }
                now < *deadline
            }
            Step::Retiring(_) => true,
        });
        let retiring: Vec<PeerId> = self
            .upgrades
            .steps
            .iter()
            .filter(|(_, s)| matches!(s, Step::Retiring(_)))
            .map(|(p, _)| *p)
            .collect();
        for peer in retiring {
            self.retire_tcp(peer, now);
        }
        let overdue: Vec<PeerId> = self
            .upgrades
            .closing
            .iter()
            .filter(|(_, c)| now >= c.deadline)
            .map(|(p, _)| *p)
            .collect();
        for peer in overdue {
            self.release_held(peer);
        }
    }

    /// A live answer came from `peer`: its TCP connections may be idle now.
    pub(super) fn on_upgrade_answered(&mut self, peer: PeerId) {
        if matches!(self.upgrades.steps.get(&peer), Some(Step::Retiring(_))) {
            self.retire_tcp(peer, Instant::now());
        }
    }

    /// `peer` disconnected altogether: nothing left to move; what was held back is sent
    /// (request-response dials the peer again, or reports it unreachable).
    pub(super) fn on_upgrade_disconnected(&mut self, peer: &PeerId, connection: ConnectionId) {
        self.upgrades.heard_on.remove(&connection);
        self.upgrades.steps.remove(peer);
        self.release_held(*peer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quic_is_dialled_at_the_host_reached_with_the_listen_ports() {
        let listen: Vec<Multiaddr> = [
            "/ip4/127.0.0.1/udp/4001/quic-v1",
            "/ip4/10.0.0.5/udp/4001/quic-v1",
            "/ip4/10.0.0.5/udp/4002/quic-v1",
            "/ip4/10.0.0.5/udp/4003/quic-v1",
            "/ip4/10.0.0.5/tcp/4001",
            "/ip4/198.51.100.1/tcp/4001/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN/p2p-circuit",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        let tcp: Multiaddr = "/ip4/203.0.113.9/tcp/4001".parse().unwrap();
        let got: Vec<String> = quic_addrs_at(&tcp, &listen)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            got,
            [
                "/ip4/203.0.113.9/udp/4001/quic-v1",
                "/ip4/203.0.113.9/udp/4002/quic-v1"
            ]
        );
        let dns: Multiaddr = "/dns4/relay.example.org/tcp/4001".parse().unwrap();
        assert_eq!(
            quic_addrs_at(&dns, &listen)[0].to_string(),
            "/dns4/relay.example.org/udp/4001/quic-v1"
        );
        let tcp_only: Vec<Multiaddr> = vec!["/ip4/10.0.0.5/tcp/4001".parse().unwrap()];
        assert!(quic_addrs_at(&tcp, &tcp_only).is_empty());
        let circuit: Multiaddr = "/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN"
            .parse()
            .unwrap();
        assert!(quic_addrs_at(&circuit, &listen).is_empty());
    }

    #[test]
    fn only_a_direct_tcp_connection_we_dialled_gives_the_host() {
        use libp2p::core::{Endpoint, transport::PortUse};
        let dialer = |a: &str| ConnectedPoint::Dialer {
            address: a.parse().unwrap(),
            role_override: Endpoint::Dialer,
            port_use: PortUse::New,
        };
        assert!(dialled_tcp(&dialer("/ip4/203.0.113.9/tcp/4001")).is_some());
        assert!(dialled_tcp(&dialer("/ip4/203.0.113.9/udp/4001/quic-v1")).is_none());
        let listener = ConnectedPoint::Listener {
            local_addr: "/ip4/10.0.0.2/tcp/4001".parse().unwrap(),
            send_back_addr: "/ip4/203.0.113.9/tcp/50000".parse().unwrap(),
        };
        assert!(dialled_tcp(&listener).is_none());
    }
}
