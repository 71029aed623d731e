//! What a simulated overlay looks like: the protocol version, size, links, gossipsub
//! settings, wire sizes, CPU costs and the heartbeat rule. Every default names where it
//! comes from.

use std::fmt;

use crate::presence::pacer::Config as PacerConfig;

use crate::{
    limits::{HEARTBEAT_MS, MINUTE_MS, SECOND_MS},
    presence::heartbeat::{TARGET_ANNOUNCEMENTS_PER_S, interval_for_rate},
};

/// Which presence protocol the nodes speak (docs/PROTOCOL.md, "Versions").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Every heartbeat is a whole new announcement version, gossipsub signs every
    /// message (one Ed25519 check per copy received, duplicates included), and
    /// anti-entropy is a full roster request every 10 s.
    V7,
    /// The node as built: beacons between announcements, unsigned gossipsub with
    /// content ids, roster requests with an away bitmap, digest requests, a second
    /// look 500 ms after a connection, fast anti-entropy while the roster grows, and
    /// what a repair fetch brings published again.
    V8,
}

impl Protocol {
    /// Whether re-announcements are beacons (which name no new announcement version).
    pub fn beacons(self) -> bool {
        self == Self::V8
    }

    /// Whether gossipsub checks a signature on every copy it receives.
    pub fn gossip_signed(self) -> bool {
        self == Self::V7
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::V7 => "v7",
            Self::V8 => "v8",
        })
    }
}

/// How sessions pick their re-announcement interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeartbeatRule {
    /// Every session re-announces every `interval_ms` (today: [`HEARTBEAT_MS`]).
    Fixed {
        #[allow(missing_docs)]
        interval_ms: u64,
    },
    /// [`interval_for_rate`] of the sender's roster length: the overlay carries about
    /// `target_per_s` announcements a second ([`TARGET_ANNOUNCEMENTS_PER_S`] is the
    /// rule the node would ship; other targets exercise it at small sizes).
    Adaptive {
        /// Overlay-wide announcements per second.
        target_per_s: u64,
    },
}

impl HeartbeatRule {
    /// The fixed 30 s heartbeat (the node's rule up to 600 sessions).
    pub const FIXED: Self = Self::Fixed {
        interval_ms: HEARTBEAT_MS,
    };

    /// The adaptive rule as the node is built.
    pub const ADAPTIVE: Self = Self::Adaptive {
        target_per_s: TARGET_ANNOUNCEMENTS_PER_S,
    };

    /// The interval of a session holding `roster_len` sessions, ms.
    pub fn interval_ms(&self, roster_len: usize) -> u64 {
        match *self {
            Self::Fixed { interval_ms } => interval_ms.max(1),
            Self::Adaptive { target_per_s } => interval_for_rate(roster_len, target_per_s),
        }
    }
}

impl fmt::Display for HeartbeatRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fixed { interval_ms } => write!(f, "fixed {} s", interval_ms / SECOND_MS),
            Self::Adaptive { target_per_s } => write!(f, "adaptive {target_per_s}/s"),
        }
    }
}

/// The gossipsub settings that shape presence traffic: libp2p-gossipsub 0.50.1's
/// defaults (the version libp2p 0.57.1 pins) with what
/// `crates/interlink-net/src/behaviour.rs` changes (a 1 s heartbeat, a 64 KiB
/// frame limit; it was 9,280 bytes until this simulation showed IHAVEs dropped).
#[derive(Clone, Debug, PartialEq)]
pub struct Gossip {
    /// Target mesh degree (`mesh_n`).
    pub mesh_n: usize,
    /// Below this a heartbeat grafts up to `mesh_n` (`mesh_n_low`).
    pub mesh_n_low: usize,
    /// Above this a heartbeat prunes down to `mesh_n`, and inbound GRAFTs are refused
    /// (`mesh_n_high`).
    pub mesh_n_high: usize,
    /// Least number of non-mesh peers sent an IHAVE each heartbeat (`gossip_lazy`).
    pub gossip_lazy: usize,
    /// Share of the non-mesh peers sent an IHAVE, if more than `gossip_lazy`
    /// (`gossip_factor`).
    pub gossip_factor: f64,
    /// Heartbeat period, ms.
    pub heartbeat_ms: u64,
    /// Heartbeats of message ids an IHAVE advertises (`history_gossip`).
    pub history_gossip: u64,
    /// Most ids in one IHAVE (`max_control_messages_sent`, formerly
    /// `max_ihave_length`); a longer list is shuffled and cut.
    pub max_ihave_ids: usize,
    /// A publisher sends its own message to every connected subscriber, not only its
    /// mesh (`flood_publish`).
    pub flood_publish: bool,
    /// Largest RPC a receiver decodes (`max_transmit_size`, set by the node to
    /// `MAX_PRESENCE_MESSAGE_BYTES + 1024`); a larger one fails to decode, the
    /// receiver drops it and closes the stream. It binds IHAVEs, which are one RPC.
    pub max_rpc_bytes: usize,
}

impl Gossip {
    /// The settings of the node before protocol 8: libp2p's default `mesh_n_high`.
    pub fn v7() -> Self {
        Self {
            mesh_n_high: 12,
            ..Self::default()
        }
    }
}

impl Default for Gossip {
    fn default() -> Self {
        Self {
            mesh_n: 6,
            mesh_n_low: 5,
            // The node's `mesh_n_high` (libp2p's default is 12): a node receives a copy
            // of each message from every mesh peer, so its load follows its mesh size;
            // at 12 the busiest node of a 10,000-session overlay received 55 kB/s in
            // steady state, at 8 under 44 (issue 15).
            mesh_n_high: 8,
            gossip_lazy: 6,
            gossip_factor: 0.25,
            heartbeat_ms: SECOND_MS,
            history_gossip: 3,
            max_ihave_ids: 5_000,
            flood_publish: true,
            // interlink-net's MAX_GOSSIP_FRAME_BYTES (64 KiB since the simulation
            // showed 9,280 bytes silencing IHAVE past ~126 ids).
            max_rpc_bytes: 64 * 1024,
        }
    }
}

/// Bytes on the wire, as received (the counts are per copy received). `Default` is
/// protocol 8, [`Wire::v7`] protocol 7.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wire {
    /// An encoded announcement as a presence payload (a session with one or two
    /// addresses, a cwd, a git label and a short summary: 473 bytes measured on the
    /// v8 node; the v7 model used 450).
    pub announcement: u64,
    /// An encoded beacon as a presence payload (protocol 8, §4.9: 137 bytes).
    pub beacon: u64,
    /// What gossipsub adds to a published message: topic, protobuf and length
    /// framing, and in protocol 7 also the source, the seqno, its own 64-byte
    /// signature and the 36-byte key (v7: 100 bytes; v8, unsigned: 42).
    pub gossip_framing: u64,
    /// A gossipsub message id. v8: 16 bytes of SHA-256 of the payload. v7: the default
    /// id, the source PeerId in base58 (52 characters) followed by the decimal sequence
    /// number (19 digits: it starts at the Unix time in ns), 71 bytes.
    pub message_id: u64,
    /// Protobuf framing of one id in an IHAVE or IWANT.
    pub id_framing: u64,
    /// Framing of a control RPC (IHAVE, IWANT, GRAFT, PRUNE): length prefix, topic.
    pub control_framing: u64,
    /// One summary tag ([`crate::presence::sync::TAG_BYTES`]).
    pub tag: u64,
    /// A roster digest ([`crate::presence::sync::DIGEST_BYTES`], protocol 8).
    pub digest: u64,
    /// Fixed part of a roster request or response (request-response framing, CBOR
    /// headers).
    pub sync_framing: u64,
    /// CBOR framing of one announcement or beacon in a roster response.
    pub entry_framing: u64,
}

impl Default for Wire {
    fn default() -> Self {
        Self {
            announcement: 473,
            beacon: 137,
            gossip_framing: 42,
            message_id: crate::wire::GOSSIP_ID_BYTES as u64,
            id_framing: 2,
            control_framing: 48,
            tag: crate::presence::sync::TAG_BYTES as u64,
            digest: crate::presence::sync::DIGEST_BYTES as u64,
            sync_framing: 16,
            entry_framing: 4,
        }
    }
}

impl Wire {
    /// The sizes of protocol 7, as the model used them before protocol 8.
    pub fn v7() -> Self {
        Self {
            announcement: 450,
            gossip_framing: 100,
            message_id: 71,
            ..Self::default()
        }
    }

    /// A gossip copy of an announcement.
    pub fn gossip_message(&self) -> u64 {
        self.announcement + self.gossip_framing
    }

    /// A gossip copy of a beacon.
    pub fn gossip_beacon(&self) -> u64 {
        self.beacon + self.gossip_framing
    }

    /// An IHAVE or IWANT naming `ids` messages.
    pub fn control(&self, ids: u64) -> u64 {
        self.control_framing + ids * (self.message_id + self.id_framing)
    }

    /// SHA-256 blocks hashed for the content id of a `payload`-byte message: the
    /// 27-byte domain, the payload and at least 9 bytes of padding.
    pub fn id_blocks(&self, payload: u64) -> u64 {
        (27 + payload + 9).div_ceil(64)
    }
}

/// CPU costs of what a node does per received item, in nanoseconds, for the CPU
/// estimate. Defaults: Ed25519 from the estimate (35 µs; docs/BENCHMARKS.md
/// measured 41.7 µs for `verify` and 50.4 µs for `verify_strict` on this 2-vCPU
/// Xeon, so CPU figures here scale by up to 1.45 on it); a tag is SHA-256 of about
/// 90 bytes, two compression blocks; a decode is the protobuf frame plus the CBOR
/// announcement (the core bench's decode + verify of a 1 KiB envelope is 3.9 µs above
/// its verify alone); an id lookup is one hash-set probe of a message id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Costs {
    /// One Ed25519 signature check.
    pub ed25519_verify_ns: u64,
    /// One summary tag computed ([`crate::presence::sync::Tag::of`]).
    pub sha256_tag_ns: u64,
    /// One SHA-256 compression block (a tag is two): protocol 8 hashes every gossip
    /// copy received for its content id.
    pub sha256_block_ns: u64,
    /// Per tag of a roster digest ([`crate::presence::Roster::digest`]): sorting the
    /// tags (about 13 comparisons each at 10,000) and an eighth of a block of SHA-256.
    pub digest_tag_ns: u64,
    /// One message decoded (gossip frame, presence body, roster entry).
    pub decode_ns: u64,
    /// One message id of an IHAVE looked up in the duplicate cache.
    pub id_lookup_ns: u64,
}

impl Default for Costs {
    fn default() -> Self {
        Self {
            ed25519_verify_ns: 35_000,
            sha256_tag_ns: 300,
            sha256_block_ns: 150,
            digest_tag_ns: 60,
            decode_ns: 2_000,
            id_lookup_ns: 100,
        }
    }
}

/// Everything a run depends on, with the seed. `Default` is the node as built
/// (protocol 8, the adaptive heartbeat); [`Params::v7`] the node before protocol 8.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// The protocol version the nodes speak.
    pub protocol: Protocol,
    /// Full nodes, one session each.
    pub nodes: usize,
    /// Seeds the topology, latencies, start times, phases and every random choice.
    pub seed: u64,
    /// Peers each node dials (`max_dialed_peers`, 24).
    pub max_dialed: usize,
    /// Inbound connections a node accepts (`ESTABLISHED`, 256).
    pub max_inbound: usize,
    /// One-way link latency, sampled per link uniformly in this range, ms.
    pub latency_ms: (u64, u64),
    /// Round trips a connection takes to set up (TCP, Noise XX, multistream, the
    /// subscription exchange).
    pub connect_rtts: u64,
    /// Extra delay before a dial, uniform in `0..discovery_ms`: finding the peer by
    /// Kademlia (on start) or redialling it (after a partition).
    pub discovery_ms: u64,
    /// Time from receiving a message to forwarding it: gossipsub's signature check,
    /// the node's validation (decode, two Ed25519 checks) and the task hop back, µs.
    /// Copies that arrive meanwhile are not sent back to their senders.
    pub validation_us: u64,
    /// Gossipsub settings.
    pub gossip: Gossip,
    /// Wire sizes.
    pub wire: Wire,
    /// CPU cost constants.
    pub costs: Costs,
    /// The heartbeat rule.
    pub heartbeat: HeartbeatRule,
    /// Protocol 7: each re-announcement lands uniformly within ± half of this around
    /// its due time, ms. (Protocol 8's heartbeats come from the node's pacer on its
    /// 1 s tick, as the node's do.)
    pub jitter_ms: u64,
    /// Anti-entropy: each node fetches one connected peer's roster this often, ms
    /// (protocol 8: a digest request, and only once the roster stopped growing).
    pub anti_entropy_ms: u64,
    /// Protocol 8: while the roster is growing, anti-entropy is a full request this
    /// often instead, ms (the node's `ROSTER_SYNC_FAST`).
    pub fast_sync_ms: u64,
    /// Protocol 8: the roster is growing while a session new to it arrived within
    /// this long, and at start-up, ms (`ROSTER_SETTLE`).
    pub growing_ms: u64,
    /// Protocol 8: a digest request goes to a newly connected peer this long after
    /// the first full request, ms (`RECHECK_AFTER`).
    pub recheck_ms: u64,
    /// Protocol 8: most announcements and beacons one repair answer makes the
    /// requester publish again (`MAX_REPUBLISH`).
    pub max_republish: usize,
    /// Cold start: nodes start uniformly within this window, ms.
    pub start_spread_ms: u64,
    /// Partition heal: how long the two halves stay apart, ms.
    pub partition_ms: u64,
    /// Of the partition, how much (its end) is simulated message by message, ms.
    /// Before it, sessions re-announce but each half's rosters are brought up to date
    /// in bulk, as the steady state within a half does (nothing in it is measured, and
    /// at 10,000 nodes it would cost minutes). It must exceed the gossip history (3 s)
    /// and an anti-entropy round (10 s) for the heal to start from a realistic state;
    /// `partition_ms` or more simulates all of it.
    pub partition_full_ms: u64,
    /// Steady state: the measured window, ms.
    pub steady_ms: u64,
    /// Converged scenarios run this long before measuring (the mesh forms), ms.
    pub warmup_ms: u64,
    /// A convergence measurement gives up this long after it starts, ms.
    pub timeout_ms: u64,
    /// Cold start and heal measure their load until convergence and at least this
    /// long, ms: connections still being set up after convergence fetch rosters too.
    pub settle_ms: u64,
}

impl Default for Params {
    fn default() -> Self {
        // The node's timings.
        let pacer = PacerConfig::default();
        Self {
            protocol: Protocol::V8,
            nodes: 1_000,
            seed: 1,
            max_dialed: 24,
            max_inbound: 256,
            latency_ms: (1, 20),
            connect_rtts: 3,
            discovery_ms: SECOND_MS,
            validation_us: 200,
            gossip: Gossip::default(),
            wire: Wire::default(),
            costs: Costs::default(),
            heartbeat: HeartbeatRule::ADAPTIVE,
            jitter_ms: SECOND_MS,
            anti_entropy_ms: pacer.sync_interval_ms,
            fast_sync_ms: pacer.fast_sync_ms,
            growing_ms: pacer.settle_ms,
            recheck_ms: pacer.recheck_after_ms,
            max_republish: 32,
            start_spread_ms: 5 * SECOND_MS,
            partition_ms: 2 * MINUTE_MS,
            partition_full_ms: 10 * SECOND_MS,
            steady_ms: 5 * MINUTE_MS,
            warmup_ms: 5 * SECOND_MS,
            timeout_ms: 2 * MINUTE_MS,
            settle_ms: 10 * SECOND_MS,
        }
    }
}

impl Params {
    /// Protocol 8: the timings of each node's pacer, from these parameters (the
    /// defaults are the node's).
    pub fn pacer_config(&self) -> PacerConfig {
        let (heartbeat_ms, target_announcements_per_s) = match self.heartbeat {
            HeartbeatRule::Fixed { interval_ms } => (interval_ms.max(1), None),
            HeartbeatRule::Adaptive { target_per_s } => (HEARTBEAT_MS, Some(target_per_s)),
        };
        PacerConfig {
            sync_interval_ms: self.anti_entropy_ms,
            fast_sync_ms: self.fast_sync_ms,
            settle_ms: self.growing_ms,
            recheck_after_ms: self.recheck_ms,
            heartbeat_ms,
            target_announcements_per_s,
            ..PacerConfig::default()
        }
    }

    /// The node before protocol 8, as the model had it: the defaults with protocol 7
    /// and its wire sizes.
    pub fn v7() -> Self {
        Self {
            protocol: Protocol::V7,
            wire: Wire::v7(),
            gossip: Gossip::v7(),
            ..Self::default()
        }
    }

    /// Another protocol version, with its wire sizes and gossipsub settings.
    pub fn with_protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        (self.wire, self.gossip) = match protocol {
            Protocol::V7 => (Wire::v7(), Gossip::v7()),
            Protocol::V8 => (Wire::default(), Gossip::default()),
        };
        self
    }

    /// The defaults at `nodes` nodes.
    pub fn with_nodes(mut self, nodes: usize) -> Self {
        self.nodes = nodes;
        self
    }

    /// Another seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Another heartbeat rule.
    pub fn with_heartbeat(mut self, rule: HeartbeatRule) -> Self {
        self.heartbeat = rule;
        self
    }

    /// With another anti-entropy interval for a growing roster (`fast_sync_ms`).
    pub fn with_fast_sync_ms(mut self, ms: u64) -> Self {
        self.fast_sync_ms = ms;
        self
    }

    /// Another steady-state window, ms.
    pub fn with_steady_ms(mut self, ms: u64) -> Self {
        self.steady_ms = ms;
        self
    }

    /// Another partition length, ms.
    pub fn with_partition_ms(mut self, ms: u64) -> Self {
        self.partition_ms = ms;
        self
    }

    /// The parameters made safe to run: at least two nodes (and at most 65,535, the
    /// index width of the compact rosters), a non-empty latency range, mesh bounds in
    /// order, non-zero periods.
    pub(crate) fn normalised(&self) -> Self {
        let mut p = self.clone();
        p.nodes = p.nodes.clamp(2, usize::from(u16::MAX));
        p.latency_ms.0 = p.latency_ms.0.max(1);
        p.latency_ms.1 = p.latency_ms.1.max(p.latency_ms.0);
        let g = &mut p.gossip;
        g.mesh_n_low = g.mesh_n_low.max(1);
        g.mesh_n = g.mesh_n.max(g.mesh_n_low);
        g.mesh_n_high = g.mesh_n_high.max(g.mesh_n);
        g.heartbeat_ms = g.heartbeat_ms.max(1);
        g.history_gossip = g.history_gossip.max(1);
        p.anti_entropy_ms = p.anti_entropy_ms.max(g.heartbeat_ms);
        p.fast_sync_ms = p.fast_sync_ms.max(g.heartbeat_ms);
        p
    }
}
