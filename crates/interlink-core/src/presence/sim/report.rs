//! What a scenario measured, per node, and its table.

use std::fmt;

use super::{
    params::{Costs, HeartbeatRule, Protocol, Wire},
    world::{US, World},
};
use crate::presence::{Config, Presence, heartbeat::live_window_ms};

/// What one node received and did, counted as it happens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Counters {
    /// Gossip copies received (duplicates included).
    pub(super) gossip_msgs: u64,
    /// Of which beacons (protocol 8).
    pub(super) beacon_msgs: u64,
    /// Of which gossipsub had seen already.
    pub(super) dup_msgs: u64,
    /// Copies asked for by IWANT.
    pub(super) iwant_msgs: u64,
    /// IHAVE, IWANT, GRAFT and PRUNE received.
    pub(super) control_msgs: u64,
    pub(super) control_bytes: u64,
    /// IHAVEs over the RPC limit (dropped by the decoder).
    pub(super) ihave_dropped: u64,
    /// Roster requests and responses received (digest ones too).
    pub(super) sync_msgs: u64,
    pub(super) sync_bytes: u64,
    /// Announcements received in roster responses.
    pub(super) sync_entries: u64,
    /// Of which older than the version the requester's summary named.
    pub(super) sync_stale: u64,
    /// Beacons received in roster responses (protocol 8).
    pub(super) sync_beacons: u64,
    /// Digest requests sent (protocol 8), and of those, answered "differs".
    pub(super) digest_requests: u64,
    pub(super) digest_differs: u64,
    /// Messages this node published again after a repair fetch (protocol 8).
    pub(super) republished: u64,
    /// Gossipsub's signature checks (protocol 7: one per copy).
    pub(super) gossip_sigs: u64,
    /// Ed25519 checks of announcements (two per announcement new to the roster).
    pub(super) ann_sigs: u64,
    /// Ed25519 checks of beacons (one per beacon new to the roster).
    pub(super) beacon_sigs: u64,
    /// Summary tags computed.
    pub(super) tags: u64,
    /// Tags hashed into roster digests.
    pub(super) digest_tags: u64,
    /// SHA-256 blocks hashed for gossip content ids (protocol 8).
    pub(super) id_blocks: u64,
    /// Messages decoded besides the gossip copies (each of which is one).
    pub(super) decodes: u64,
    /// IHAVE ids looked up.
    pub(super) id_lookups: u64,
}

impl Counters {
    fn since(&self, before: &Self) -> Self {
        Self {
            gossip_msgs: self.gossip_msgs - before.gossip_msgs,
            beacon_msgs: self.beacon_msgs - before.beacon_msgs,
            dup_msgs: self.dup_msgs - before.dup_msgs,
            iwant_msgs: self.iwant_msgs - before.iwant_msgs,
            control_msgs: self.control_msgs - before.control_msgs,
            control_bytes: self.control_bytes - before.control_bytes,
            ihave_dropped: self.ihave_dropped - before.ihave_dropped,
            sync_msgs: self.sync_msgs - before.sync_msgs,
            sync_bytes: self.sync_bytes - before.sync_bytes,
            sync_entries: self.sync_entries - before.sync_entries,
            sync_stale: self.sync_stale - before.sync_stale,
            sync_beacons: self.sync_beacons - before.sync_beacons,
            digest_requests: self.digest_requests - before.digest_requests,
            digest_differs: self.digest_differs - before.digest_differs,
            republished: self.republished - before.republished,
            gossip_sigs: self.gossip_sigs - before.gossip_sigs,
            ann_sigs: self.ann_sigs - before.ann_sigs,
            beacon_sigs: self.beacon_sigs - before.beacon_sigs,
            tags: self.tags - before.tags,
            digest_tags: self.digest_tags - before.digest_tags,
            id_blocks: self.id_blocks - before.id_blocks,
            decodes: self.decodes - before.decodes,
            id_lookups: self.id_lookups - before.id_lookups,
        }
    }

    fn sig_checks(&self) -> u64 {
        self.gossip_sigs + self.ann_sigs + self.beacon_sigs
    }

    /// Every gossip copy is decoded (and in protocol 7 its libp2p signature checked,
    /// in protocol 8 hashed for its id).
    fn cpu_ns(&self, k: &Costs) -> u64 {
        self.sig_checks() * k.ed25519_verify_ns
            + self.tags * k.sha256_tag_ns
            + (self.gossip_msgs + self.decodes) * k.decode_ns
            + self.id_lookups * k.id_lookup_ns
            + self.digest_tags * k.digest_tag_ns
            + self.id_blocks * k.sha256_block_ns
    }

    fn per_node(&self, k: &Costs, w: &Wire) -> PerNode {
        let anns = self.gossip_msgs - self.beacon_msgs;
        let gossip_bytes = anns * w.gossip_message() + self.beacon_msgs * w.gossip_beacon();
        PerNode {
            messages: self.gossip_msgs as f64,
            duplicates: self.dup_msgs as f64,
            iwant_messages: self.iwant_msgs as f64,
            gossip_bytes: gossip_bytes as f64,
            control_bytes: self.control_bytes as f64,
            sync_bytes: self.sync_bytes as f64,
            bytes: (gossip_bytes + self.control_bytes + self.sync_bytes) as f64,
            ihave_dropped: self.ihave_dropped as f64,
            sync_entries: self.sync_entries as f64,
            sync_stale: self.sync_stale as f64,
            gossip_sigs: self.gossip_sigs as f64,
            announcement_sigs: self.ann_sigs as f64,
            sig_checks: self.sig_checks() as f64,
            cpu_ms: self.cpu_ns(k) as f64 / 1e6,
            beacon_messages: self.beacon_msgs as f64,
            sync_beacons: self.sync_beacons as f64,
            beacon_sigs: self.beacon_sigs as f64,
            digest_requests: self.digest_requests as f64,
            digest_differs: self.digest_differs as f64,
            republished: self.republished as f64,
        }
    }
}

/// One node's totals over a measured window (or, in [`Load::mean`] and
/// [`Load::max`], their mean and maximum over the nodes).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PerNode {
    /// Gossip copies received, duplicates included.
    pub messages: f64,
    /// Copies gossipsub had already seen.
    pub duplicates: f64,
    /// Copies asked for by IWANT.
    pub iwant_messages: f64,
    /// Bytes of gossip copies.
    pub gossip_bytes: f64,
    /// Bytes of IHAVE, IWANT, GRAFT, PRUNE.
    pub control_bytes: f64,
    /// Bytes of roster requests and responses.
    pub sync_bytes: f64,
    /// All bytes received.
    pub bytes: f64,
    /// IHAVEs dropped for exceeding the RPC limit.
    pub ihave_dropped: f64,
    /// Announcements received in roster responses.
    pub sync_entries: f64,
    /// Of which older than the requester's own version.
    pub sync_stale: f64,
    /// libp2p signature checks (protocol 7: one per copy; protocol 8: none).
    pub gossip_sigs: f64,
    /// Announcement Ed25519 checks.
    pub announcement_sigs: f64,
    /// All signature checks: gossipsub's, announcements', beacons'.
    pub sig_checks: f64,
    /// Estimated CPU time, ms, from [`Costs`].
    pub cpu_ms: f64,
    /// Of the gossip copies, beacons.
    pub beacon_messages: f64,
    /// Beacons received in roster responses.
    pub sync_beacons: f64,
    /// Beacon Ed25519 checks.
    pub beacon_sigs: f64,
    /// Digest requests sent.
    pub digest_requests: f64,
    /// Of which answered "differs" (a full request followed).
    pub digest_differs: f64,
    /// Messages published again after a repair fetch.
    pub republished: f64,
}

impl PerNode {
    fn fields(&mut self) -> [&mut f64; 20] {
        [
            &mut self.messages,
            &mut self.duplicates,
            &mut self.iwant_messages,
            &mut self.gossip_bytes,
            &mut self.control_bytes,
            &mut self.sync_bytes,
            &mut self.bytes,
            &mut self.ihave_dropped,
            &mut self.sync_entries,
            &mut self.sync_stale,
            &mut self.gossip_sigs,
            &mut self.announcement_sigs,
            &mut self.sig_checks,
            &mut self.cpu_ms,
            &mut self.beacon_messages,
            &mut self.sync_beacons,
            &mut self.beacon_sigs,
            &mut self.digest_requests,
            &mut self.digest_differs,
            &mut self.republished,
        ]
    }
}

/// What nodes received and spent over a measured window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Load {
    /// Length of the window, ms.
    pub window_ms: u64,
    /// Mean over the nodes.
    pub mean: PerNode,
    /// Maximum over the nodes, field by field.
    pub max: PerNode,
}

impl Load {
    /// `x` (a total over the window) per second.
    pub fn per_s(&self, x: f64) -> f64 {
        x * 1000.0 / self.window_ms.max(1) as f64
    }

    /// Mean and max CPU over the window, percent of one core.
    pub fn cpu_pct(&self) -> (f64, f64) {
        let pct = |ms: f64| ms * 100.0 / self.window_ms.max(1) as f64;
        (pct(self.mean.cpu_ms), pct(self.max.cpu_ms))
    }
}

/// When the nodes reached the goal (every session's first version on a cold start;
/// after a heal, protocol 7: every session's newest version, protocol 8: a sign of
/// every session that is live), from the start of the measurement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Convergence {
    /// Nodes that reached it.
    pub complete: usize,
    /// The median node, ms (`None` if fewer than half got there).
    pub p50_ms: Option<u64>,
    /// The last node, ms (`None` unless every node got there).
    pub max_ms: Option<u64>,
    /// Sessions each node was missing at the start, mean.
    pub behind_at_start: f64,
}

impl Convergence {
    /// From each node's time to get there, ms (`None`: it never did).
    pub(super) fn of(times: impl Iterator<Item = Option<u64>>, behind_at_start: f64) -> Self {
        let mut n = 0;
        let mut done: Vec<u64> = times.inspect(|_| n += 1).flatten().collect();
        done.sort_unstable();
        Self {
            complete: done.len(),
            p50_ms: done.get(n / 2).copied(),
            max_ms: (done.len() == n).then(|| done.last().copied().unwrap_or(0)),
            behind_at_start,
        }
    }
}

/// Which scenario a report is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Every node starts within the spread window.
    ColdStart,
    /// Two halves apart for the partition time, then reconnected.
    PartitionHeal,
    /// A converged overlay measured over the steady window.
    SteadyState,
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ColdStart => "cold start",
            Self::PartitionHeal => "partition heal",
            Self::SteadyState => "steady state",
        })
    }
}

/// The outcome of one scenario. Deterministic: the same parameters give an equal
/// report.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    #[allow(missing_docs)]
    pub scenario: Scenario,
    /// The protocol version.
    pub protocol: Protocol,
    /// Nodes (sessions).
    pub nodes: usize,
    #[allow(missing_docs)]
    pub seed: u64,
    /// The heartbeat rule.
    pub heartbeat: HeartbeatRule,
    /// The interval of a node holding every session, ms.
    pub interval_ms: u64,
    /// Cold start and heal: when nodes got there.
    pub convergence: Option<Convergence>,
    /// What the nodes received and spent over the measured window.
    pub load: Load,
    /// Announcements published in the window.
    pub announcements: u64,
    /// Beacons published in the window (protocol 8).
    pub beacons: u64,
    /// Share of (node, session) pairs, sampled at the end, in which the node does not
    /// judge the (running) session live.
    pub not_live: f64,
    /// Connections per node, mean, at the end.
    pub mean_degree: f64,
    /// Mesh peers per node, mean, at the end.
    pub mean_mesh: f64,
    /// Events processed in the whole run.
    pub events: u64,
}

impl World {
    /// The nodes' progress towards the goal, from `from` (µs).
    pub(super) fn convergence(&self, from: u64, behind_at_start: f64) -> Convergence {
        let done = self
            .nodes
            .iter()
            .map(|n| n.done_at.map(|t| t.saturating_sub(from) / US));
        Convergence::of(done, behind_at_start)
    }

    /// Sessions each node is behind the goal by, mean.
    pub(super) fn mean_behind(&self) -> f64 {
        self.nodes.iter().map(|n| n.behind as f64).sum::<f64>() / self.n as f64
    }

    /// Share of (node, session) pairs in which the node would not show the session
    /// live now, over up to 100 nodes spread over the index range.
    pub(super) fn not_live(&self) -> f64 {
        let step = (self.n / 100).max(1);
        let (mut pairs, mut not_live) = (0u64, 0u64);
        for v in (0..self.n).step_by(step) {
            for s in 0..self.n {
                pairs += 1;
                let version = self.roster[v * self.n + s];
                let live = version > 0 && {
                    let m = self.msgs[self.versions[s][usize::from(version) - 1] as usize];
                    let config = Config {
                        live_window_ms: live_window_ms(m.interval_ms),
                        ..Config::default()
                    };
                    config.presence(m.at / US, self.now / US) == Presence::Live
                };
                not_live += u64::from(!live);
            }
        }
        not_live as f64 / pairs.max(1) as f64
    }

    /// The report of a window that began at `start` (µs) with `before`.
    pub(super) fn report(
        &self,
        scenario: Scenario,
        before: &[Counters],
        start: u64,
        convergence: Option<Convergence>,
    ) -> Report {
        let window_ms = (self.now.saturating_sub(start) / US).max(1);
        let (mut mean, mut max) = (PerNode::default(), PerNode::default());
        for (now, then) in self.snapshot().iter().zip(before) {
            let mut one = now.since(then).per_node(&self.p.costs, &self.p.wire);
            for ((m, x), v) in mean
                .fields()
                .into_iter()
                .zip(max.fields())
                .zip(one.fields())
            {
                *m += *v;
                *x = x.max(*v);
            }
        }
        for m in mean.fields() {
            *m /= self.n as f64;
        }
        let links_up = self.links.iter().filter(|l| l.up).count();
        let mesh: usize = self.mesh.iter().map(Vec::len).sum();
        let published = self.msgs.iter().filter(|m| m.at >= start);
        let (all, beacons) = published.fold((0u64, 0u64), |(all, beacons), m| {
            (all + 1, beacons + u64::from(self.beacons && m.version > 1))
        });
        Report {
            scenario,
            protocol: self.p.protocol,
            nodes: self.n,
            seed: self.p.seed,
            heartbeat: self.p.heartbeat,
            interval_ms: self.p.heartbeat.interval_ms(self.n),
            convergence,
            load: Load {
                window_ms,
                mean,
                max,
            },
            announcements: all - beacons,
            beacons,
            not_live: self.not_live(),
            mean_degree: 2.0 * links_up as f64 / self.n as f64,
            mean_mesh: mesh as f64 / self.n as f64,
            events: self.events,
        }
    }
}
