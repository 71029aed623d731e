#![allow(missing_docs)] // the NetworkBehaviour derive generates an undocumented event enum
//! The composed libp2p behaviour of a node.

use std::time::Duration;

use interlink_core::{
    limits::MAX_ROSTER_RESPONSE_BYTES,
    limits::{
        MAX_DELIVER_BATCH, MAX_DELIVER_REQUEST_BYTES, MAX_ENVELOPE_BYTES, MAX_MAILBOX_RECORD_BYTES,
    },
    names::Network,
    wire::{
        DeliverRequest, DeliverResponse, MAX_RECEIPT_REQUEST_BYTES, MAX_RECEIPT_RESPONSE_BYTES,
        MailboxRequest, MailboxResponse, ReceiptRequest, ReceiptResponse, RosterRequest,
        RosterResponse,
    },
};
use libp2p::{
    StreamProtocol, allow_block_list, autonat, connection_limits, dcutr, gossipsub, identify,
    identity::Keypair, kad, mdns, memory_connection_limits, ping, relay, request_response,
    swarm::NetworkBehaviour, swarm::behaviour::toggle::Toggle,
};

use crate::NetError;

/// Most mailbox records one session node holds for others.
pub const MAX_MAILBOX_RECORDS: usize = 1024;
/// Most bytes of mailbox copies one session node holds for others
/// (`Config::max_held_bytes`): a team's worth of sleeping sessions' mail (some 5,000
/// messages of 1-2 KB), not a stranger's flood (1,024 records of 4 MiB would be
/// 4 GiB). A held copy costs several times its size in memory (the record, and its
/// decoded envelopes kept for merging); the `hostile-load` bench measures what a flood
/// costs a session in all (about 70 MiB above idle for one stranger).
pub const MAX_HELD_BYTES: usize = 8 * 1024 * 1024;
/// Mailbox-protocol requests a node reads at once, over all its connections
/// ([`crate::gated`]); relays × [`connection_caps::RELAY_FACTOR`].
pub const MAILBOX_READS_AT_ONCE: usize = 4;
/// Mailbox requests a node keeps on the wire to one peer; more wait in its own queue
/// (`node::mailbox_calls`).
pub const MAILBOX_IN_FLIGHT_PER_PEER: usize = 2;
/// Mailbox requests of one connection waiting to be read, or being read, at once
/// ([`crate::gated`]); a connection opening more is closed. Every stream waiting to be
/// read buffers up to a yamux window (256 KiB), so libp2p's default of 100 streams per
/// connection let 32 peers make a session buffer about 140 MiB (the `hostile-load`
/// bench, 16 requests in flight). Twice what an honest peer keeps in flight.
pub const MAILBOX_UNREAD_PER_CONNECTION: usize = 2 * MAILBOX_IN_FLIGHT_PER_PEER;
/// Mailbox streams open at once on one connection, both directions, read or waiting
/// for their answer. Above [`MAILBOX_UNREAD_PER_CONNECTION`] so that a stream past that
/// reaches the reader (which has the connection closed) instead of being reset unseen.
pub const MAILBOX_STREAMS_PER_CONNECTION: usize = 16;
/// Live-delivery streams open at once on one connection, both directions. An honest
/// node keeps one request in flight per recipient session (one session per node), and
/// a node lets [`interlink_delivery::config::INBOUND_PER_PEER`] of a peer's requests
/// wait for its inbox (more are answered `busy`); libp2p's default of 100 let one
/// connection make this node read and hold 100 requests of up to 1 MiB at once.
pub const DELIVER_STREAMS_PER_CONNECTION: usize = 8;
/// How long a peer whose connection was closed for too many mailbox streams is refused
/// new connections: reconnecting at once would make this node pay a handshake, and
/// the protocols' greetings, every few milliseconds.
pub const OVERFLOW_BLOCK: Duration = Duration::from_secs(30);
/// Peers blocked at once; past it the oldest block is lifted early.
pub const MAX_BLOCKED_PEERS: usize = 1024;

/// What copies from one source network may add to a relay's store at once (an
/// identity's whole share, the relay's default `--max-identity-bytes`)…
pub const NETWORK_GROWTH_BURST: u64 = 64 << 20;
/// …and then per hour. A week's retention then holds at most about 736 MiB from one
/// network, under a fifth of a default store (4 GiB): fresh identities on one machine
/// cannot fill an open relay, and the team's mail from elsewhere still fits.
pub const NETWORK_GROWTH_PER_HOUR: u64 = 4 << 20;

/// Connection caps. A session talks to a team's sessions and a few relays; a relay to
/// everyone who uses it. Beyond them a connection is denied before any protocol runs,
/// so a peer (or a swarm of fresh ones) cannot hold unbounded connection state.
pub mod connection_caps {
    /// Connections being set up from others at once (sessions; relays × 8).
    pub const PENDING_INCOMING: u32 = 64;
    /// Established connections in all (sessions; relays × 8).
    pub const ESTABLISHED: u32 = 256;
    /// Established connections with one peer: a simultaneous dial, a relayed one each
    /// way and a fresh one to punch through again (`node::hole_punch`), a direct one,
    /// and a spare.
    pub const PER_PEER: u32 = 6;
    /// Process memory above which new connections are denied: sessions.
    pub const SESSION_MEMORY_BYTES: usize = 256 * 1024 * 1024;
    /// The same for relays.
    pub const RELAY_MEMORY_BYTES: usize = 1024 * 1024 * 1024;
    /// How many times the session caps a relay allows.
    pub const RELAY_FACTOR: u32 = 8;
}

/// Circuit relay server limits. Reservations are cheap (a session keeps one per relay
/// it uses); circuits carry whole sessions' traffic when two sessions can reach each
/// other only through the relay, so they are long and large compared with libp2p's
/// defaults (2 min, 128 KiB), which are meant for hole-punching handshakes.
pub mod relay_limits {
    use std::time::Duration;

    /// Reservations held at once.
    pub const MAX_RESERVATIONS: usize = 1024;
    pub const MAX_RESERVATIONS_PER_PEER: usize = 4;
    /// How long a reservation lasts before the client renews it.
    pub const RESERVATION_DURATION: Duration = Duration::from_secs(3600);
    /// Circuits open at once.
    pub const MAX_CIRCUITS: usize = 256;
    pub const MAX_CIRCUITS_PER_PEER: usize = 32;
    /// Longest life of one circuit (a new one is opened on the next dial).
    pub const MAX_CIRCUIT_DURATION: Duration = Duration::from_secs(3600);
    /// Most bytes one circuit carries (each direction).
    pub const MAX_CIRCUIT_BYTES: u64 = 64 * 1024 * 1024;
}

/// How long a mailbox `hold` or `fetch` may take (a relay commits to disk first).
pub const MAILBOX_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Most bytes of one encoded live delivery request: the envelopes' limit, one envelope
/// over it (a single large one goes alone), and the wrapping.
pub const MAX_DELIVER_REQUEST_ITEM_BYTES: usize =
    MAX_DELIVER_REQUEST_BYTES + MAX_ENVELOPE_BYTES + 64 * 1024;
/// Most bytes of one encoded live delivery response.
pub const MAX_DELIVER_RESPONSE_ITEM_BYTES: usize = MAX_DELIVER_BATCH * 2048;

/// How long one live delivery attempt may take. Short on purpose: a recipient that
/// does not answer within it is treated as asleep and the message is queued instead.
pub const LIVE_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a live delivery stream may stay open, on both ends. Not the live window:
/// the engine gives up on an attempt after the measured answer time (at least
/// [`LIVE_ATTEMPT_TIMEOUT`], at most 8 s) and queues its messages, but an answer that
/// comes later still counts as a sign of life and a measurement, and a batch that
/// takes seconds to cross a slow link must be read to its end. With the stream
/// closed at 1 s, a 200 KiB batch on a 1 Mbit/s link failed on every attempt.
pub const LIVE_STREAM_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a receipt for collected mail may take to reach its sender, dial included.
/// Nobody waits for it; a request that fails is tried again at the sender's next sign
/// of life (the delivery engine keeps it, a few attempts at most).
pub const RECEIPT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The agent-version string identify announces.
pub const AGENT_VERSION: &str = concat!("interlink-p2p/", env!("CARGO_PKG_VERSION"));

/// Everything a node speaks. Optional parts are `Toggle`s: mDNS can be turned off, and
/// the relay client and its hole punching exist only on swarms built with the relay
/// transport (in-memory test swarms have none).
#[derive(NetworkBehaviour)]
#[allow(missing_debug_implementations)] // the derived event enum can't derive Debug for all parts
pub struct Behaviour {
    /// Peers shut out for a while (`node::mailbox_server`: one that opened more mailbox
    /// streams at once than it may). First: a denied connection costs nothing more.
    pub blocked: allow_block_list::Behaviour<allow_block_list::BlockedPeers>,
    /// Connection caps (before the protocols: a denied connection costs them nothing).
    pub limits: connection_limits::Behaviour,
    /// New connections denied while the process holds too much memory.
    pub memory: memory_connection_limits::Behaviour,
    /// Presence topic.
    pub gossipsub: gossipsub::Behaviour,
    /// DHT: discovery now, mailboxes later.
    pub kad: kad::Behaviour<kad::store::MemoryStore>,
    /// Protocol and address exchange.
    pub identify: identify::Behaviour,
    /// Liveness and RTT.
    pub ping: ping::Behaviour,
    /// LAN discovery.
    pub mdns: Toggle<mdns::tokio::Behaviour>,
    /// Roster fetch on connect.
    pub roster: crate::cbor::Behaviour<RosterRequest, RosterResponse>,
    /// Live delivery of envelopes, answered with signed receipts.
    pub deliver: crate::cbor::Behaviour<DeliverRequest, DeliverResponse>,
    /// Live delivery on one kept stream per peer (`node::live_stream`); `deliver` is
    /// the way for what that stream cannot carry.
    pub streams: libp2p_stream::Behaviour,
    /// Mailbox copies handed to a holder directly, and fetched back (relays).
    pub mailbox: request_response::Behaviour<
        crate::gated::Gated<crate::cbor::Codec<MailboxRequest, MailboxResponse>>,
    >,
    /// Signed receipts for mail collected from a mailbox, to the sessions that sent it.
    pub receipts: crate::cbor::Behaviour<ReceiptRequest, ReceiptResponse>,
    /// Circuit relay server (relay nodes only).
    pub relay_server: Toggle<relay::Behaviour>,
    /// Circuit relay client.
    pub relay_client: Toggle<relay::client::Behaviour>,
    /// Hole punching over relayed connections.
    pub dcutr: Toggle<dcutr::Behaviour>,
    /// Reachability probing.
    pub autonat: Toggle<autonat::Behaviour>,
}

impl Behaviour {
    /// Builds the behaviour for `key` as `config` asks.
    pub fn new(
        key: &Keypair,
        config: &crate::Config,
        relay_client: Option<relay::client::Behaviour>,
    ) -> Result<Self, NetError> {
        let network = &config.network;
        let mdns_on = config.mdns;
        let peer_id = key.public().to_peer_id();
        // Presence messages are signed by their sessions' identities, each binding its
        // node's PeerId, so gossipsub carries them unsigned and names each by its
        // content (protocol version 8): a copy costs no second signature check per hop,
        // about 110 bytes less, and a 16-byte id in IHAVEs instead of 71
        // (PROTOCOL.md §8.1).
        let gossipsub = gossipsub::Behaviour::new(
            gossipsub::MessageAuthenticity::Anonymous,
            gossipsub::ConfigBuilder::default()
                .validation_mode(gossipsub::ValidationMode::Anonymous)
                .message_id_fn(|message: &gossipsub::Message| {
                    gossipsub::MessageId::from(
                        interlink_core::wire::gossip_message_id(&message.data).to_vec(),
                    )
                })
                .validate_messages()
                // A frame, not a message: gossipsub refuses to decode a larger frame,
                // and its IHAVE lists one id per message of the last 3 heartbeats. At
                // 8 KiB plus slack, an IHAVE of more than ~126 ids (a cold start of a few
                // hundred sessions) was dropped by every receiver and gossip repair
                // stopped (found by the presence simulation, issue 15). A message itself
                // is held to MAX_PRESENCE_MESSAGE_BYTES by validation.
                .max_transmit_size(MAX_GOSSIP_FRAME_BYTES)
                .heartbeat_interval(Duration::from_secs(1))
                // A node receives a copy of every presence message from each mesh peer,
                // so its load follows its mesh size: libp2p's default upper bound of 12
                // let the busiest node of a 10,000-session overlay receive 55 kB/s in
                // steady state, 8 under 44 (the presence simulation, issue 15). The
                // target (6) and lower bound (5) stay.
                .mesh_n_high(GOSSIP_MESH_N_HIGH)
                .heartbeat_initial_delay(Duration::from_millis(100))
                .build()
                .map_err(|e| NetError::Setup(format!("gossipsub config: {e}")))?,
        )
        .map_err(|e| NetError::Setup(format!("gossipsub: {e}")))?;
        let mut gossipsub = gossipsub;
        gossipsub
            .with_peer_score(
                presence_score_params(network),
                gossipsub::PeerScoreThresholds::default(),
            )
            .map_err(|e| NetError::Setup(format!("gossipsub scoring: {e}")))?;

        let kad_protocol = protocol(network.kad_protocol())?;
        let mut kad_config = kad::Config::new(kad_protocol);
        kad_config.set_query_timeout(Duration::from_secs(10));
        // The node walks the DHT itself once it has peers (node::discovery); kad's own
        // timer would only warn "no known peers" on every lone node.
        kad_config.set_periodic_bootstrap_interval(None);
        // Kademlia only routes: it finds a mailbox key's closest peers. Mailboxes travel
        // over the mailbox protocol and are held by node::mailbox, never in kad's
        // record store, which answers a get to anyone (a copy is its owner's to read).
        // With filtering on, inbound puts and provider records are reported, not
        // stored, and the default packet limit (16 KiB) keeps a put from costing more.
        kad_config.set_record_filtering(kad::StoreInserts::FilterBoth);
        // The routing table holds only peers the node adds (`node::discovery`: the
        // peers identify reports, once the node has joined the DHT).
        kad_config.set_kbucket_inserts(kad::BucketInserts::Manual);
        let store = kad::store::MemoryStore::new(peer_id);
        let mut kad = kad::Behaviour::with_config(peer_id, store, kad_config);
        // On a LAN or loopback no external address is ever confirmed, so kad would
        // stay a client forever; every session is a full DHT participant.
        kad.set_mode(Some(kad::Mode::Server));

        let identify = identify::Behaviour::new(
            identify::Config::new(network.identify_version(), key.public())
                .with_agent_version(AGENT_VERSION.to_owned()),
        );
        let mdns = if mdns_on {
            Some(
                mdns::tokio::Behaviour::new(mdns::Config::default(), peer_id)
                    .map_err(|e| NetError::Setup(format!("mdns: {e}")))?,
            )
        } else {
            None
        };
        let roster = request_response::Behaviour::with_codec(
            crate::cbor::Codec::new(RosterRequest::MAX_BYTES, MAX_ROSTER_RESPONSE_BYTES + 1024),
            [(
                protocol(network.roster_protocol())?,
                request_response::ProtocolSupport::Full,
            )],
            request_response::Config::default().with_request_timeout(Duration::from_secs(10)),
        );
        let deliver = request_response::Behaviour::with_codec(
            crate::cbor::Codec::new(
                MAX_DELIVER_REQUEST_ITEM_BYTES,
                MAX_DELIVER_RESPONSE_ITEM_BYTES,
            ),
            [(
                protocol(network.deliver_protocol())?,
                request_response::ProtocolSupport::Full,
            )],
            request_response::Config::default()
                .with_request_timeout(LIVE_STREAM_TIMEOUT)
                .with_max_concurrent_streams(config.deliver_streams_per_connection.max(1)),
        );
        let reads = MAILBOX_READS_AT_ONCE
            * if config.relay_server {
                connection_caps::RELAY_FACTOR as usize
            } else {
                1
            };
        let mailbox = request_response::Behaviour::with_codec(
            crate::gated::Gated::new(
                crate::cbor::Codec::new(
                    MAX_MAILBOX_RECORD_BYTES + 64 * 1024,
                    MAX_MAILBOX_RECORD_BYTES + 64 * 1024,
                ),
                reads,
                MAILBOX_UNREAD_PER_CONNECTION,
            ),
            [(
                protocol(network.mailbox_protocol())?,
                request_response::ProtocolSupport::Full,
            )],
            request_response::Config::default()
                .with_request_timeout(MAILBOX_REQUEST_TIMEOUT)
                .with_max_concurrent_streams(config.mailbox_streams_per_connection.max(1)),
        );
        let receipts = request_response::Behaviour::with_codec(
            crate::cbor::Codec::new(MAX_RECEIPT_REQUEST_BYTES, MAX_RECEIPT_RESPONSE_BYTES),
            [(
                protocol(network.receipt_protocol())?,
                request_response::ProtocolSupport::Full,
            )],
            request_response::Config::default().with_request_timeout(RECEIPT_REQUEST_TIMEOUT),
        );
        let relay_server = config.relay_server.then(|| {
            use relay_limits::*;
            relay::Behaviour::new(
                peer_id,
                relay::Config {
                    max_reservations: MAX_RESERVATIONS,
                    max_reservations_per_peer: MAX_RESERVATIONS_PER_PEER,
                    reservation_duration: RESERVATION_DURATION,
                    max_circuits: MAX_CIRCUITS,
                    max_circuits_per_peer: MAX_CIRCUITS_PER_PEER,
                    max_circuit_duration: MAX_CIRCUIT_DURATION,
                    max_circuit_bytes: MAX_CIRCUIT_BYTES,
                    ..Default::default()
                },
            )
        });
        let has_relay = relay_client.is_some();
        let (limits, memory) = {
            use connection_caps::*;
            let f = if config.relay_server { RELAY_FACTOR } else { 1 };
            let limits = connection_limits::ConnectionLimits::default()
                .with_max_pending_incoming(Some(PENDING_INCOMING * f))
                .with_max_established(Some(ESTABLISHED * f))
                .with_max_established_per_peer(Some(PER_PEER));
            let bytes = config.max_process_memory.unwrap_or(if config.relay_server {
                RELAY_MEMORY_BYTES
            } else {
                SESSION_MEMORY_BYTES
            });
            (
                connection_limits::Behaviour::new(limits),
                memory_connection_limits::Behaviour::with_max_bytes(bytes),
            )
        };
        Ok(Self {
            blocked: allow_block_list::Behaviour::default(),
            limits,
            memory,
            mailbox,
            receipts,
            relay_server: relay_server.into(),
            gossipsub,
            kad,
            identify,
            ping: ping::Behaviour::new(
                ping::Config::new()
                    .with_interval(crate::node::PING_INTERVAL)
                    .with_timeout(crate::node::PING_TIMEOUT),
            ),
            mdns: mdns.into(),
            roster,
            deliver,
            streams: libp2p_stream::Behaviour::new(),
            relay_client: relay_client.into(),
            dcutr: has_relay.then(|| dcutr::Behaviour::new(peer_id)).into(),
            // Relays serve AutoNAT probes (they are the peers outside a session's NAT);
            // sessions with a relay ask.
            autonat: (has_relay || config.relay_server)
                .then(|| autonat::Behaviour::new(peer_id, nat_probe_config()))
                .into(),
        })
    }
}

/// How AutoNAT probes: soon after start (the relay is dialled at once), and for private
/// addresses too — a tailnet's 100.64/10 and a LAN's are the networks this runs on,
/// and libp2p's default (global addresses only) would never confirm one. A server dials
/// back only the address it saw the asker at, so this reaches nobody else.
fn nat_probe_config() -> autonat::Config {
    autonat::Config {
        boot_delay: NAT_PROBE_BOOT_DELAY,
        retry_interval: NAT_PROBE_RETRY,
        only_global_ips: false,
        ..autonat::Config::default()
    }
}

/// When a node first asks whether it is reachable from outside.
pub const NAT_PROBE_BOOT_DELAY: Duration = Duration::from_secs(5);
/// How soon it asks again while unsure (once sure: every 15 minutes).
pub const NAT_PROBE_RETRY: Duration = Duration::from_secs(60);

/// Most peers in a node's gossip mesh before a heartbeat prunes it (see its use).
pub const GOSSIP_MESH_N_HIGH: usize = 8;

/// Largest gossipsub frame a node sends or decodes (see its use).
pub const MAX_GOSSIP_FRAME_BYTES: usize = 64 * 1024;

/// Peer scoring for the presence topic. Only invalid messages cost score: each one
/// rejected by the application counts squared (weight -10), so a peer that sends three
/// falls below the graylist threshold (-80) and is ignored until the penalty decays (by
/// 10 % a second). The mesh-delivery penalties are off: presence traffic is one message
/// per session per 30 s, and quiet honest peers must not look like bad mesh members.
fn presence_score_params(network: &Network) -> gossipsub::PeerScoreParams {
    let topic = gossipsub::IdentTopic::new(network.announce_topic()).hash();
    // Many sessions of one team share a host (or a NAT): gossipsub's default penalises
    // more than 10 peers from one IP, which on a 20-session laptop pushed honest peers'
    // scores below the gossip and publish thresholds. Presence is authenticated by
    // signatures, and admission by pairing; addresses prove nothing here.
    let mut params = gossipsub::PeerScoreParams {
        ip_colocation_factor_weight: 0.0,
        ..Default::default()
    };
    params.topics.insert(
        topic,
        gossipsub::TopicScoreParams {
            topic_weight: 1.0,
            time_in_mesh_weight: 0.01,
            first_message_deliveries_weight: 1.0,
            mesh_message_deliveries_weight: 0.0,
            mesh_failure_penalty_weight: 0.0,
            invalid_message_deliveries_weight: -10.0,
            invalid_message_deliveries_decay: 0.9,
            ..Default::default()
        },
    );
    params
}

fn protocol(name: String) -> Result<StreamProtocol, NetError> {
    StreamProtocol::try_from_owned(name).map_err(|e| NetError::Setup(format!("protocol id: {e}")))
}
