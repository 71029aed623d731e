//! What `interlink-p2p peers` shows about the network itself.

use libp2p::{Multiaddr, PeerId, core::ConnectedPoint};

/// A snapshot of the node's network state.
#[derive(Clone, Debug, Default)]
pub struct Diagnostics {
    /// This node's PeerId.
    pub peer_id: Option<PeerId>,
    /// Addresses it listens on.
    pub listen_addrs: Vec<Multiaddr>,
    /// Connected peers.
    pub connected: Vec<ConnectedPeer>,
    /// Peers in the gossipsub mesh of the presence topic.
    pub mesh_peers: Vec<PeerId>,
    /// Peers subscribed to the presence topic.
    pub topic_peers: usize,
    /// Entries in the Kademlia routing table.
    pub kad_routing_table: usize,
    /// Relay reservations held (circuit listen addresses).
    pub relay_reservations: Vec<Multiaddr>,
    /// Mailbox records this node holds (for itself and others).
    pub mailboxes_held: usize,
    /// Mailbox puts refused (forged, wrong mailbox, oversized, …) since start.
    pub mailbox_puts_refused: u64,
    /// Mailbox fetches refused (not the owner's, stale, addressed to another holder,
    /// over budget) since start.
    pub mailbox_fetches_refused: u64,
    /// Our own mailbox requests waiting for a peer that already has as many on the
    /// wire as it takes (`MAILBOX_IN_FLIGHT_PER_PEER`).
    pub mailbox_requests_waiting: usize,
    /// Relay nodes: holds refused because the store took all it takes from their
    /// source network for now.
    pub holds_refused_network: u64,
    /// Connections closed for opening more mailbox streams at once than they may
    /// (`behaviour::MAILBOX_UNREAD_PER_CONNECTION`).
    pub mailbox_connections_closed: u64,
    /// Connections closed as dead: a ping went unanswered, or the address they were
    /// bound to went away (the host moved).
    pub dead_connections_closed: u64,
    /// TCP connections closed because the peer was reached over QUIC as well
    /// (`node::quic_upgrade`).
    pub tcp_moved_to_quic: u64,
    /// Circuits opened afresh to a peer reached only through relays, so the hole punch
    /// carries a UDP address learnt since (`node::hole_punch`).
    pub circuits_to_punch_again: u64,
    /// Relayed connections closed because the peer was reached directly as well
    /// (`node::retire_circuits`).
    pub circuits_closed_for_direct: u64,
    /// Relay nodes: peers holding a circuit reservation here.
    pub served_reservations: usize,
    /// Relay nodes: circuits open through here.
    pub served_circuits: usize,
    /// What learning and keeping the roster has cost this node since start.
    pub presence: PresenceCost,
    /// The addresses the swarm holds as this node's external ones (confirmed by
    /// AutoNAT or identify, or configured).
    pub external_addrs: Vec<Multiaddr>,
    /// AutoNAT's verdict on this node's reachability (`public <addr>`, `private`,
    /// `unknown`); `None` where AutoNAT does not run (no relay configured).
    pub nat: Option<String>,
    /// The host's well-known port, when this node holds it (`node::well_known`).
    pub well_known_port: Option<u16>,
    /// Addresses from the address book dialled since start (`node::addresses`).
    pub address_book_dials: u64,
}

/// What presence has cost a node since start: messages and bytes received, and the
/// announcement decodes this node ran (each checks two Ed25519 signatures: the
/// announcement's and its sealing-key binding's). Gossipsub's own check of each
/// received copy's libp2p signature, duplicates included, comes on top and is not
/// counted here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PresenceCost {
    /// Presence messages gossipsub delivered (not duplicates).
    pub gossip_messages: u64,
    /// Their bytes.
    pub gossip_bytes: u64,
    /// Roster fetches this node sent.
    pub roster_fetches: u64,
    /// Bytes of the roster responses it received.
    pub roster_bytes: u64,
    /// Bytes of the summaries (and away bitmaps) in roster requests it received.
    pub summary_bytes: u64,
    /// Roster requests it left unanswered: the asking peer was over its budget.
    pub roster_over_budget: u64,
    /// Announcements, beacons and goodbyes verified (gossip and roster fetches);
    /// copies recognised unverified as already held or older are not counted.
    pub verified: u64,
    /// Announcements and beacons anti-entropy brought that this node published again
    /// (gossip had missed them).
    pub republished: u64,
    /// Connections this node established (every one starts a roster fetch).
    pub connections: u64,
}

/// One connected peer.
#[derive(Clone, Debug)]
pub struct ConnectedPeer {
    /// Its PeerId.
    pub peer_id: PeerId,
    /// The remote address of a connection to it.
    pub addr: Multiaddr,
    /// Last measured round-trip time, in microseconds.
    pub rtt_us: Option<u64>,
    /// Its identify agent version, once known.
    pub agent: Option<String>,
    /// Its gossipsub peer score (negative after invalid presence messages).
    pub score: Option<f64>,
    /// Open connections to it.
    pub connections: usize,
    /// Whether every connection to it goes through a relay (a circuit).
    pub relayed: bool,
    /// The transport of its best connection: `tcp`, `quic`, `memory` or `relay` when
    /// only relayed.
    pub transport: &'static str,
    /// The transports of all its connections, each once.
    pub transports: Vec<&'static str>,
}

/// The transport of a connection, and whether it is relayed. An inbound circuit's
/// remote address is only `/p2p/<peer>` (the relay client knows no more), so a relayed
/// connection is told by its endpoint, not by the remote address.
pub(crate) fn transport_of(endpoint: &ConnectedPoint) -> (&'static str, bool) {
    use libp2p::multiaddr::Protocol;
    if endpoint.is_relayed() {
        return ("relay", true);
    }
    let transport = endpoint
        .get_remote_address()
        .iter()
        .find_map(|p| match p {
            Protocol::QuicV1 => Some("quic"),
            Protocol::Memory(_) => Some("memory"),
            Protocol::Tcp(_) => Some("tcp"),
            _ => None,
        })
        .unwrap_or("other");
    (transport, false)
}

/// The address to show for a connection: the remote one, or for an inbound circuit
/// (whose remote address names only the peer) the circuit it came in on.
pub(crate) fn shown_addr(endpoint: &ConnectedPoint) -> &Multiaddr {
    match endpoint {
        ConnectedPoint::Listener { local_addr, .. } if endpoint.is_relayed() => local_addr,
        _ => endpoint.get_remote_address(),
    }
}

#[cfg(test)]
#[path = "diagnostics_tests.rs"]
mod tests;
