//! What a scenario measured, per node, and its table.

use std::fmt::{self, Write as _};

use super::{
    params::{Costs, HeartbeatRule, Wire},
    world::{US, World},
};
use crate::presence::{Config, Presence, heartbeat::live_window_ms};

/// What one node received and did, counted as it happens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Counters {
    /// Gossip copies of announcements received (duplicates included).
    pub(super) gossip_msgs: u64,
    /// Of which gossipsub had seen already.
    pub(super) dup_msgs: u64,
    /// Copies asked for by IWANT.
    pub(super) iwant_msgs: u64,
    /// IHAVE, IWANT, GRAFT and PRUNE received.
    pub(super) control_msgs: u64,
    pub(super) control_bytes: u64,
    /// IHAVEs over the RPC limit (dropped by the decoder).
    pub(super) ihave_dropped: u64,
    /// Roster requests and responses received.
    pub(super) sync_msgs: u64,
    pub(super) sync_bytes: u64,
    /// Announcements received in roster responses.
    pub(super) sync_entries: u64,
    /// Of which older than the version the requester's summary named.
    pub(super) sync_stale: u64,
    /// Ed25519 checks of announcements (two per announcement new to the roster).
    pub(super) ann_sigs: u64,
    /// Summary tags computed.
    pub(super) tags: u64,
    /// Messages decoded besides the gossip copies (each of which is one).
    pub(super) decodes: u64,
    /// IHAVE ids looked up.
    pub(super) id_lookups: u64,
}

impl Counters {
    fn since(&self, before: &Self) -> Self {
        Self {
            gossip_msgs: self.gossip_msgs - before.gossip_msgs,
            dup_msgs: self.dup_msgs - before.dup_msgs,
            iwant_msgs: self.iwant_msgs - before.iwant_msgs,
            control_msgs: self.control_msgs - before.control_msgs,
            control_bytes: self.control_bytes - before.control_bytes,
            ihave_dropped: self.ihave_dropped - before.ihave_dropped,
            sync_msgs: self.sync_msgs - before.sync_msgs,
            sync_bytes: self.sync_bytes - before.sync_bytes,
            sync_entries: self.sync_entries - before.sync_entries,
            sync_stale: self.sync_stale - before.sync_stale,
            ann_sigs: self.ann_sigs - before.ann_sigs,
            tags: self.tags - before.tags,
            decodes: self.decodes - before.decodes,
            id_lookups: self.id_lookups - before.id_lookups,
        }
    }

    /// Every gossip copy is decoded and its libp2p signature checked.
    fn cpu_ns(&self, k: &Costs) -> u64 {
        (self.gossip_msgs + self.ann_sigs) * k.ed25519_verify_ns
            + self.tags * k.sha256_tag_ns
            + (self.gossip_msgs + self.decodes) * k.decode_ns
            + self.id_lookups * k.id_lookup_ns
    }

    fn per_node(&self, k: &Costs, w: &Wire) -> PerNode {
        let gossip_bytes = self.gossip_msgs * w.gossip_message();
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
            gossip_sigs: self.gossip_msgs as f64,
            announcement_sigs: self.ann_sigs as f64,
            sig_checks: (self.gossip_msgs + self.ann_sigs) as f64,
            cpu_ms: self.cpu_ns(k) as f64 / 1e6,
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
    /// libp2p signature checks.
    pub gossip_sigs: f64,
    /// Announcement Ed25519 checks.
    pub announcement_sigs: f64,
    /// Both.
    pub sig_checks: f64,
    /// Estimated CPU time, ms, from [`Costs`].
    pub cpu_ms: f64,
}

impl PerNode {
    fn fields(&mut self) -> [&mut f64; 14] {
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

/// When the nodes reached the goal (every session's first version on a cold start,
/// every session's newest version after a heal), from the start of the measurement.
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
    /// The scenario.
    pub scenario: Scenario,
    /// Nodes (sessions).
    pub nodes: usize,
    /// The seed.
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
    /// Steady state: share of (node, session) pairs, sampled at the end, in which the
    /// node does not judge the (running) session live.
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
        let mut done: Vec<u64> = self
            .nodes
            .iter()
            .filter_map(|n| n.done_at)
            .map(|t| t.saturating_sub(from) / US)
            .collect();
        done.sort_unstable();
        let half = self.n / 2;
        Convergence {
            complete: done.len(),
            p50_ms: done.get(half).copied(),
            max_ms: (done.len() == self.n).then(|| done.last().copied().unwrap_or(0)),
            behind_at_start,
        }
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
        Report {
            scenario,
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
            announcements: self.msgs.iter().filter(|m| m.at >= start).count() as u64,
            not_live: if scenario == Scenario::SteadyState {
                self.not_live()
            } else {
                0.0
            },
            mean_degree: 2.0 * links_up as f64 / self.n as f64,
            mean_mesh: mesh as f64 / self.n as f64,
            events: self.events,
        }
    }
}

/// `1234567.8` as `1,234,568`.
fn grouped(x: f64) -> String {
    let digits = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn secs(ms: Option<u64>) -> String {
    ms.map_or_else(|| "—".into(), |ms| format!("{:.2} s", ms as f64 / 1000.0))
}

fn kb(bytes_per_s: f64) -> String {
    format!("{:.1}", bytes_per_s / 1000.0)
}

/// The reports side by side, one column each, as a Markdown table.
pub fn table(reports: &[Report]) -> String {
    type Row = (&'static str, fn(&Report) -> String);
    let rows: [Row; 20] = [
        ("heartbeat interval at full roster", |r| {
            format!("{} s", r.interval_ms / 1000)
        }),
        ("converged nodes", |r| match r.convergence {
            Some(c) => format!(
                "{} / {}",
                grouped(c.complete as f64),
                grouped(r.nodes as f64)
            ),
            None => "—".into(),
        }),
        ("convergence p50 / max", |r| match r.convergence {
            Some(c) => format!("{} / {}", secs(c.p50_ms), secs(c.max_ms)),
            None => "—".into(),
        }),
        ("sessions behind per node at the start", |r| {
            match r.convergence {
                Some(c) => grouped(c.behind_at_start),
                None => "—".into(),
            }
        }),
        ("measured window", |r| secs(Some(r.load.window_ms))),
        ("announcements published in it", |r| {
            grouped(r.announcements as f64)
        }),
        ("gossip copies received /s per node (mean / max)", |r| {
            let l = &r.load;
            format!(
                "{} / {}",
                grouped(l.per_s(l.mean.messages)),
                grouped(l.per_s(l.max.messages))
            )
        }),
        ("  duplicates / by IWANT (mean share)", |r| {
            let m = &r.load.mean;
            let share = |x: f64| 100.0 * x / m.messages.max(1.0);
            format!(
                "{:.0} % / {:.1} %",
                share(m.duplicates),
                share(m.iwant_messages)
            )
        }),
        ("kB/s received per node (mean / max)", |r| {
            let l = &r.load;
            format!(
                "{} / {}",
                kb(l.per_s(l.mean.bytes)),
                kb(l.per_s(l.max.bytes))
            )
        }),
        ("  gossip / control / roster sync (mean kB/s)", |r| {
            let l = &r.load;
            let m = &l.mean;
            format!(
                "{} / {} / {}",
                kb(l.per_s(m.gossip_bytes)),
                kb(l.per_s(m.control_bytes)),
                kb(l.per_s(m.sync_bytes))
            )
        }),
        ("MB received per node in the window (mean / max)", |r| {
            let l = &r.load;
            format!("{:.1} / {:.1}", l.mean.bytes / 1e6, l.max.bytes / 1e6)
        }),
        ("roster-sync entries per node (of which stale)", |r| {
            let m = &r.load.mean;
            format!("{} ({})", grouped(m.sync_entries), grouped(m.sync_stale))
        }),
        ("IHAVEs dropped over the RPC limit /s per node", |r| {
            let l = &r.load;
            format!("{:.1}", l.per_s(l.mean.ihave_dropped))
        }),
        ("signature checks /s per node (mean / max)", |r| {
            let l = &r.load;
            format!(
                "{} / {}",
                grouped(l.per_s(l.mean.sig_checks)),
                grouped(l.per_s(l.max.sig_checks))
            )
        }),
        ("  gossipsub / announcement (mean /s)", |r| {
            let l = &r.load;
            format!(
                "{} / {:.1}",
                grouped(l.per_s(l.mean.gossip_sigs)),
                l.per_s(l.mean.announcement_sigs)
            )
        }),
        ("CPU % of one core (mean / max)", |r| {
            let (mean, max) = r.load.cpu_pct();
            format!("{mean:.2} / {max:.2}")
        }),
        ("sessions not judged live at the end", |r| {
            if r.scenario == Scenario::SteadyState {
                format!("{:.3} %", 100.0 * r.not_live)
            } else {
                "—".into()
            }
        }),
        ("connections / mesh peers per node (mean)", |r| {
            format!("{:.1} / {:.1}", r.mean_degree, r.mean_mesh)
        }),
        ("seed", |r| r.seed.to_string()),
        ("events simulated", |r| grouped(r.events as f64)),
    ];
    let mut out = String::from("| |");
    for r in reports {
        let _ = write!(
            out,
            " {}, {} nodes, {} |",
            r.scenario,
            grouped(r.nodes as f64),
            r.heartbeat
        );
    }
    out.push_str("\n|---|");
    for _ in reports {
        out.push_str("---|");
    }
    out.push('\n');
    for (label, cell) in rows {
        let _ = write!(out, "| {label} |");
        for r in reports {
            let _ = write!(out, " {} |", cell(r));
        }
        out.push('\n');
    }
    out
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&table(std::slice::from_ref(self)))
    }
}
