//! What the relay shows about itself: counters and gauges for Prometheus, and the
//! identity the probe reports.
//!
//! [`Metrics`] is a cheap cloneable handle (an `Arc` of atomics): the swarm task, the
//! store's blocking workers and the HTTP server each hold a clone. Counters only ever
//! increase; gauges are set from the owner of the fact (the swarm for peers and
//! reservations, the store's [`Stats`] for mailboxes).

use std::{
    fmt::Write as _,
    sync::{
        Arc, PoisonError, RwLock,
        atomic::{AtomicU64, Ordering},
    },
};

use serde::Serialize;

use crate::store::{PutOutcome, RejectReason, Stats};

/// The relay's version, as reported by `_build_info` and the probe.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The `server` field of the probe.
pub const SERVER_NAME: &str = "interlink-relay";
/// Most addresses the probe lists (the rest are left out).
pub const MAX_PROBE_ADDRS: usize = 32;

const REASONS: usize = RejectReason::ALL.len();

/// The relay's metrics and probe identity. Clone it freely.
#[derive(Clone, Debug)]
pub struct Metrics(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    connected_peers: AtomicU64,
    reservations: AtomicU64,
    mailboxes: AtomicU64,
    messages_held: AtomicU64,
    store_bytes: AtomicU64,
    puts: AtomicU64,
    acks: AtomicU64,
    fetches_refused: AtomicU64,
    network_refused: AtomicU64,
    rejects: [AtomicU64; REASONS],
    sweeps: AtomicU64,
    probe: RwLock<Probe>,
}

/// The body of `GET /probe`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Probe {
    /// Always [`SERVER_NAME`]: tells a relay from a session.
    pub server: String,
    /// The relay's version.
    pub version: String,
    /// The relay's PeerId (base58).
    pub peer_id: String,
    /// Its dialable addresses, each ending in `/p2p/<peer_id>`.
    pub addrs: Vec<String>,
    /// The overlay network it serves.
    pub network: String,
}

impl Metrics {
    /// Metrics of the relay `peer_id` serving `network`, every value zero.
    pub fn new(peer_id: impl Into<String>, network: impl Into<String>) -> Self {
        Self(Arc::new(Inner {
            connected_peers: AtomicU64::new(0),
            reservations: AtomicU64::new(0),
            mailboxes: AtomicU64::new(0),
            messages_held: AtomicU64::new(0),
            store_bytes: AtomicU64::new(0),
            puts: AtomicU64::new(0),
            acks: AtomicU64::new(0),
            fetches_refused: AtomicU64::new(0),
            network_refused: AtomicU64::new(0),
            rejects: std::array::from_fn(|_| AtomicU64::new(0)),
            sweeps: AtomicU64::new(0),
            probe: RwLock::new(Probe {
                server: SERVER_NAME.into(),
                version: VERSION.into(),
                peer_id: peer_id.into(),
                addrs: Vec::new(),
                network: network.into(),
            }),
        }))
    }

    /// Sets the number of connected peers.
    pub fn set_connected_peers(&self, n: u64) {
        self.0.connected_peers.store(n, Ordering::Relaxed);
    }

    /// Sets the number of mailbox fetches refused since start (the node's count).
    pub fn set_fetches_refused(&self, n: u64) {
        self.0.fetches_refused.store(n, Ordering::Relaxed);
    }

    /// Sets the count of holds refused for their source network's budget.
    pub fn set_network_refused(&self, n: u64) {
        self.0.network_refused.store(n, Ordering::Relaxed);
    }

    /// Sets the number of circuit-relay reservations held.
    pub fn set_reservations(&self, n: u64) {
        self.0.reservations.store(n, Ordering::Relaxed);
    }

    /// Sets the store gauges from its stats.
    pub fn set_store(&self, stats: Stats) {
        self.0.mailboxes.store(stats.mailboxes, Ordering::Relaxed);
        self.0
            .messages_held
            .store(stats.envelopes, Ordering::Relaxed);
        self.0.store_bytes.store(stats.bytes, Ordering::Relaxed);
    }

    /// Counts an accepted put and the acks it brought.
    pub fn record_put(&self, outcome: &PutOutcome) {
        self.0.puts.fetch_add(1, Ordering::Relaxed);
        self.0
            .acks
            .fetch_add(outcome.new_acks as u64, Ordering::Relaxed);
    }

    /// Counts a refused put.
    pub fn record_reject(&self, reason: RejectReason) {
        self.0.rejects[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a sweep run.
    pub fn record_sweep(&self) {
        self.0.sweeps.fetch_add(1, Ordering::Relaxed);
    }

    /// Replaces the addresses the probe lists (at most [`MAX_PROBE_ADDRS`]).
    pub fn set_addrs(&self, addrs: impl IntoIterator<Item = String>) {
        let addrs: Vec<String> = addrs.into_iter().take(MAX_PROBE_ADDRS).collect();
        // Nothing can panic while this lock is held; a poisoned lock still holds a
        // whole value.
        let mut probe = self.0.probe.write().unwrap_or_else(PoisonError::into_inner);
        probe.addrs = addrs;
    }

    /// The probe body.
    pub fn probe(&self) -> Probe {
        self.0
            .probe
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many puts were refused for `reason`.
    pub fn rejects(&self, reason: RejectReason) -> u64 {
        self.0.rejects[reason.index()].load(Ordering::Relaxed)
    }

    /// The Prometheus text exposition (format 0.0.4).
    pub fn render(&self) -> String {
        let m = &self.0;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut out = String::with_capacity(2048);
        let mut family = |name: &str, kind: &str, help: &str, samples: &[(String, u64)]| {
            // Writing to a String cannot fail.
            let _ = writeln!(out, "# HELP interlink_relay_{name} {help}");
            let _ = writeln!(out, "# TYPE interlink_relay_{name} {kind}");
            for (labels, value) in samples {
                let _ = writeln!(out, "interlink_relay_{name}{labels} {value}");
            }
        };
        let plain = |v: u64| [(String::new(), v)];
        family(
            "connected_peers",
            "gauge",
            "Peers currently connected.",
            &plain(load(&m.connected_peers)),
        );
        family(
            "reservations",
            "gauge",
            "Circuit relay reservations currently held.",
            &plain(load(&m.reservations)),
        );
        family(
            "mailboxes",
            "gauge",
            "Mailboxes held in the store.",
            &plain(load(&m.mailboxes)),
        );
        family(
            "messages_held",
            "gauge",
            "Queued envelopes held, over all mailboxes.",
            &plain(load(&m.messages_held)),
        );
        family(
            "store_bytes",
            "gauge",
            "Bytes of mailbox records held.",
            &plain(load(&m.store_bytes)),
        );
        family(
            "puts_total",
            "counter",
            "Mailbox puts accepted and committed.",
            &plain(load(&m.puts)),
        );
        family(
            "acks_total",
            "counter",
            "New owner acks received in accepted puts.",
            &plain(load(&m.acks)),
        );
        let rejects: Vec<(String, u64)> = RejectReason::ALL
            .iter()
            .map(|r| {
                (
                    format!("{{reason=\"{}\"}}", r.label()),
                    load(&m.rejects[r.index()]),
                )
            })
            .collect();
        family(
            "rejects_total",
            "counter",
            "Mailbox puts refused, by reason.",
            &rejects,
        );
        family(
            "fetches_refused_total",
            "counter",
            "Mailbox fetches refused: not signed by the mailbox's owner for this relay, stale, or over the peer's budget.",
            &plain(load(&m.fetches_refused)),
        );
        family(
            "network_refused_total",
            "counter",
            "Mailbox copies refused unread: the store took all it takes from their source network for now.",
            &plain(load(&m.network_refused)),
        );
        family(
            "sweeps_total",
            "counter",
            "Sweeps of expired envelopes and acks run.",
            &plain(load(&m.sweeps)),
        );
        family(
            "build_info",
            "gauge",
            "The relay's version; always 1.",
            &[(format!("{{version=\"{VERSION}\"}}"), 1)],
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family_and_counts() {
        let m = Metrics::new("12D3KooWtest", "default");
        m.set_connected_peers(3);
        m.set_store(Stats {
            mailboxes: 2,
            envelopes: 5,
            bytes: 900,
        });
        m.record_put(&PutOutcome {
            new_acks: 2,
            ..PutOutcome::default()
        });
        m.record_reject(RejectReason::InvalidEntry);
        m.record_reject(RejectReason::InvalidEntry);
        m.record_sweep();
        let text = m.clone().render();
        for line in [
            "interlink_relay_connected_peers 3",
            "interlink_relay_reservations 0",
            "interlink_relay_mailboxes 2",
            "interlink_relay_messages_held 5",
            "interlink_relay_store_bytes 900",
            "interlink_relay_puts_total 1",
            "interlink_relay_acks_total 2",
            "interlink_relay_rejects_total{reason=\"invalid_entry\"} 2",
            "interlink_relay_rejects_total{reason=\"store_full_bytes\"} 0",
            "interlink_relay_sweeps_total 1",
            "# TYPE interlink_relay_rejects_total counter",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert!(text.contains(&format!(
            "interlink_relay_build_info{{version=\"{VERSION}\"}} 1"
        )));
        assert!(text.ends_with('\n'));
        assert_eq!(m.rejects(RejectReason::InvalidEntry), 2);
    }

    #[test]
    fn the_documented_metrics_are_what_a_fresh_relay_serves() {
        // docs/RELAY.md shows the whole /metrics page of a fresh relay (after its first
        // sweep); a family or reason added without the doc fails here.
        let doc = include_str!("../../docs/RELAY.md");
        let start = doc
            .find("exactly as\nserved by a fresh relay:\n\n```text\n")
            .expect("the metrics block in docs/RELAY.md");
        let block = &doc[start..];
        let block = &block[block.find("```text\n").unwrap_or(0) + 8..];
        let block = &block[..block.find("```").unwrap_or(block.len())];
        let m = Metrics::new("12D3KooWtest", "default");
        m.record_sweep();
        let served = m.render().replace(VERSION, "0.1.0");
        assert_eq!(
            block, served,
            "docs/RELAY.md's metrics block should read:\n{served}"
        );
    }

    #[test]
    fn probe_lists_bounded_addrs() {
        let m = Metrics::new("12D3KooWtest", "lab");
        m.set_addrs((0..100).map(|i| format!("/ip4/10.0.0.{i}/tcp/4001")));
        let p = m.probe();
        assert_eq!(p.addrs.len(), MAX_PROBE_ADDRS);
        assert_eq!(
            (p.server.as_str(), p.network.as_str()),
            (SERVER_NAME, "lab")
        );
    }
}
