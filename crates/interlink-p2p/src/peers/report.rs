//! The data `interlink-p2p peers` prints, in the stable shape of its `--json` output
//! (documented in docs/CLI.md). Field order is declaration order; lists are sorted.

use interlink_core::{IdentityKey, presence::IdentityView, trust::PeerPolicy};
use interlink_net::Diagnostics;
use serde::Serialize;

/// Version of the JSON shape; bumped on any incompatible change.
pub const REPORT_VERSION: u32 = 2;

/// Everything `peers` shows.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// [`REPORT_VERSION`].
    pub version: u32,
    /// The overlay name.
    pub network: String,
    /// When the snapshot was taken, ms since the Unix epoch.
    pub taken_at_ms: u64,
    /// Identities and their sessions, by identity key.
    pub identities: Vec<IdentityReport>,
    /// The observer node's own view of the network.
    pub diagnostics: NetworkReport,
}

/// One identity.
#[derive(Clone, Debug, Serialize)]
pub struct IdentityReport {
    /// 64 hex digits.
    pub identity_key: String,
    /// `xxxx-xxxx-xxxx`.
    pub fingerprint: String,
    /// The petname it is paired under in peers.json, if any.
    pub petname: Option<String>,
    /// True when it is this user's own identity (the key in the home directory).
    pub own: bool,
    /// Its live and away sessions, by session id.
    pub sessions: Vec<SessionReport>,
}

/// One session.
#[derive(Clone, Debug, Serialize)]
pub struct SessionReport {
    #[allow(missing_docs)]
    pub session_id: String,
    /// `live` or `away`.
    pub presence: String,
    /// Milliseconds since its newest announcement.
    pub age_ms: u64,
    /// True when its details (the fields below, down to `delivery`) are sealed for
    /// others: not this user's own session, nor a peer's that shares them with it.
    pub private: bool,
    /// Working directory.
    pub cwd: Option<String>,
    /// Git root label.
    pub git_label: Option<String>,
    #[allow(missing_docs)]
    pub summary: Option<String>,
    /// `claude`, `codex` or `other`.
    pub host: Option<String>,
    /// `inbox`, `channel`, `codex`, `host_inbox` or `poll`.
    pub delivery: Option<String>,
    /// Its PeerId (base58), if the announced one parses.
    pub peer_id: Option<String>,
    /// Announced listen addresses.
    pub addrs: Vec<String>,
    /// Whether the observer holds a connection to it.
    pub connected: bool,
    /// Last ping round trip in microseconds, when connected and measured.
    pub rtt_us: Option<u64>,
}

/// The observer's network state.
#[derive(Clone, Debug, Serialize)]
pub struct NetworkReport {
    /// The observer's own PeerId.
    pub peer_id: String,
    /// Its listen addresses.
    pub listen_addrs: Vec<String>,
    /// Its connections, by PeerId.
    pub connected_peers: Vec<ConnectedReport>,
    /// PeerIds in the presence topic's gossipsub mesh.
    pub mesh_peers: Vec<String>,
    /// How many peers subscribe to the presence topic.
    pub topic_peers: usize,
    /// Entries in the Kademlia routing table.
    pub dht_routing_table: usize,
    /// Relay reservations held (circuit listen addresses).
    pub relay_reservations: Vec<String>,
}

/// One connection.
#[derive(Clone, Debug, Serialize)]
pub struct ConnectedReport {
    /// PeerId.
    pub peer_id: String,
    /// Remote address of a connection.
    pub addr: String,
    /// Last ping round trip in microseconds.
    pub rtt_us: Option<u64>,
    /// Identify agent version, once known.
    pub agent: Option<String>,
}

/// Assembles a report from the roster, the diagnostics, the petnames and the user's
/// own key.
pub fn build(
    network: &str,
    taken_at_ms: u64,
    roster: &[IdentityView],
    diagnostics: &Diagnostics,
    petnames: &PeerPolicy,
    own: Option<&IdentityKey>,
) -> Report {
    let identities = roster
        .iter()
        .map(|ident| IdentityReport {
            identity_key: ident.key.to_hex(),
            fingerprint: ident.key.fingerprint().to_string(),
            petname: petnames.name_of(&ident.key).map(str::to_owned),
            own: own == Some(&ident.key),
            sessions: ident
                .sessions
                .iter()
                .map(|s| {
                    let ann = &s.announcement;
                    let d = s.details.as_ref();
                    let peer = ann.peer_id();
                    let link =
                        peer.and_then(|p| diagnostics.connected.iter().find(|c| c.peer_id == p));
                    SessionReport {
                        session_id: s.addr.session.to_string(),
                        presence: s.presence.to_string(),
                        age_ms: s.age_ms,
                        private: d.is_none(),
                        cwd: d.map(|d| d.cwd.clone()),
                        git_label: d.and_then(|d| d.git_label.clone()),
                        summary: d.map(|d| d.summary.clone()),
                        host: d.map(|d| wire_name(&d.host)),
                        delivery: d.map(|d| wire_name(&d.delivery)),
                        peer_id: peer.map(|p| p.to_string()),
                        addrs: ann.addrs.clone(),
                        connected: link.is_some(),
                        rtt_us: link.and_then(|c| c.rtt_us),
                    }
                })
                .collect(),
        })
        .collect();
    let mut connected_peers: Vec<ConnectedReport> = diagnostics
        .connected
        .iter()
        .map(|c| ConnectedReport {
            peer_id: c.peer_id.to_string(),
            addr: without_p2p(&c.addr).to_string(),
            rtt_us: c.rtt_us,
            agent: c.agent.clone(),
        })
        .collect();
    connected_peers.sort_by(|a, b| a.peer_id.cmp(&b.peer_id));
    let mut mesh_peers: Vec<String> = diagnostics
        .mesh_peers
        .iter()
        .map(|p| p.to_string())
        .collect();
    mesh_peers.sort();
    Report {
        version: REPORT_VERSION,
        network: network.to_owned(),
        taken_at_ms,
        identities,
        diagnostics: NetworkReport {
            peer_id: diagnostics
                .peer_id
                .map(|p| p.to_string())
                .unwrap_or_default(),
            listen_addrs: diagnostics
                .listen_addrs
                .iter()
                .map(|a| a.to_string())
                .collect(),
            connected_peers,
            mesh_peers,
            topic_peers: diagnostics.topic_peers,
            dht_routing_table: diagnostics.kad_routing_table,
            relay_reservations: diagnostics
                .relay_reservations
                .iter()
                .map(|a| a.to_string())
                .collect(),
        },
    }
}

/// `addr` without a trailing `/p2p/<id>` (the peer id is shown next to it).
fn without_p2p(addr: &libp2p::Multiaddr) -> libp2p::Multiaddr {
    let mut addr = addr.clone();
    if matches!(
        addr.iter().last(),
        Some(libp2p::multiaddr::Protocol::P2p(_))
    ) {
        addr.pop();
    }
    addr
}

/// The wire name of a host or delivery mode (`Other` → `other`), as serde writes it.
fn wire_name(value: &impl Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl Report {
    /// A cheap fingerprint of what a person watching cares about: which sessions
    /// exist and their presence. `--watch` re-prints when it changes.
    pub fn presence_signature(&self) -> Vec<(String, String, String)> {
        self.identities
            .iter()
            .flat_map(|i| {
                i.sessions.iter().map(|s| {
                    (
                        i.identity_key.clone(),
                        s.session_id.clone(),
                        s.presence.clone(),
                    )
                })
            })
            .collect()
    }
}
