//! What the relay shows about itself: counters and gauges for Prometheus, and the
//! identity the probe reports.
//!
//! [`Metrics`] is a cheap cloneable handle (an `Arc` of atomics): the swarm task, the
//! store's blocking workers and the HTTP server each hold a clone. Counters only ever
//! increase; gauges are set from the owner of the fact (the swarm for peers and
//! reservations, the store's [`Stats`] for mailboxes).

use std::sync::{Arc, PoisonError, RwLock, atomic::AtomicU64};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, info::Info},
    registry::Registry,
};
use serde::Serialize;

use crate::store::{PutOutcome, RejectReason, Stats};

/// The relay's version, as reported by `_build_info` and the probe.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The `server` field of the probe.
pub const SERVER_NAME: &str = "interlink-relay";
/// Most addresses the probe lists (the rest are left out).
pub const MAX_PROBE_ADDRS: usize = 32;
/// The content type of [`Metrics::render`]: the OpenMetrics text format, which
/// Prometheus reads.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The label of `rejects_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Reason {
    reason: &'static str,
}

type U64Gauge = Gauge<u64, AtomicU64>;

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// The relay's metrics and probe identity. Clone it freely.
#[derive(Clone, Debug)]
pub struct Metrics(Arc<Inner>);

struct Inner {
    registry: Registry,
    /// libp2p's own metrics, in a registry of their own: served after the relay's.
    swarm_registry: Registry,
    swarm: interlink_net::SwarmMetrics,
    connected_peers: U64Gauge,
    reservations: U64Gauge,
    mailboxes: U64Gauge,
    messages_held: U64Gauge,
    store_bytes: U64Gauge,
    puts: Counter,
    acks: Counter,
    fetches_refused: Counter,
    network_refused: Counter,
    rejects: Family<Reason, Counter>,
    sweeps: Counter,
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
        let mut registry = Registry::with_prefix("interlink_relay");
        let gauge = |registry: &mut Registry, name: &str, help: &str| {
            let g = U64Gauge::default();
            registry.register(name, help, g.clone());
            g
        };
        let counter = |registry: &mut Registry, name: &str, help: &str| {
            let c = Counter::default();
            registry.register(name, help, c.clone());
            c
        };
        let connected_peers = gauge(
            &mut registry,
            "connected_peers",
            "Peers currently connected",
        );
        let reservations = gauge(
            &mut registry,
            "reservations",
            "Circuit relay reservations currently held",
        );
        let mailboxes = gauge(&mut registry, "mailboxes", "Mailboxes held in the store");
        let messages_held = gauge(
            &mut registry,
            "messages_held",
            "Queued envelopes held, over all mailboxes",
        );
        let store_bytes = gauge(
            &mut registry,
            "store_bytes",
            "Bytes of mailbox records held",
        );
        let puts = counter(&mut registry, "puts", "Mailbox puts accepted and committed");
        let acks = counter(
            &mut registry,
            "acks",
            "New owner acks received in accepted puts",
        );
        let rejects = Family::<Reason, Counter>::default();
        // Every reason is shown from the start, at 0.
        for r in RejectReason::ALL {
            let _ = rejects.get_or_create(&Reason { reason: r.label() });
        }
        registry.register(
            "rejects",
            "Mailbox puts refused, by reason",
            rejects.clone(),
        );
        let fetches_refused = counter(
            &mut registry,
            "fetches_refused",
            "Mailbox fetches refused: not signed by the mailbox's owner for this relay, stale, \
             or over the peer's budget",
        );
        let network_refused = counter(
            &mut registry,
            "network_refused",
            "Mailbox copies refused unread: the store took all it takes from their source \
             network for now",
        );
        let sweeps = counter(
            &mut registry,
            "sweeps",
            "Sweeps of expired envelopes and acks run",
        );
        registry.register(
            "build",
            "The relay's version",
            Info::new(vec![("version".to_owned(), VERSION.to_owned())]),
        );
        // libp2p-metrics adds its own `libp2p_` prefix.
        let mut swarm_registry = Registry::with_prefix("interlink_relay");
        let swarm = interlink_net::SwarmMetrics(Arc::new(libp2p::metrics::Metrics::new(
            &mut swarm_registry,
        )));
        Self(Arc::new(Inner {
            registry,
            swarm_registry,
            swarm,
            connected_peers,
            reservations,
            mailboxes,
            messages_held,
            store_bytes,
            puts,
            acks,
            fetches_refused,
            network_refused,
            rejects,
            sweeps,
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
        self.0.connected_peers.set(n);
    }

    /// Sets the number of mailbox fetches refused since start (the node's count).
    pub fn set_fetches_refused(&self, n: u64) {
        catch_up(&self.0.fetches_refused, n);
    }

    /// Sets the count of holds refused for their source network's budget.
    pub fn set_network_refused(&self, n: u64) {
        catch_up(&self.0.network_refused, n);
    }

    /// Sets the number of circuit-relay reservations held.
    pub fn set_reservations(&self, n: u64) {
        self.0.reservations.set(n);
    }

    /// Sets the store gauges from its stats.
    pub fn set_store(&self, stats: Stats) {
        self.0.mailboxes.set(stats.mailboxes);
        self.0.messages_held.set(stats.envelopes);
        self.0.store_bytes.set(stats.bytes);
    }

    /// Counts an accepted put and the acks it brought.
    pub fn record_put(&self, outcome: &PutOutcome) {
        self.0.puts.inc();
        self.0.acks.inc_by(outcome.new_acks as u64);
    }

    /// Counts a refused put.
    pub fn record_reject(&self, reason: RejectReason) {
        self.0
            .rejects
            .get_or_create(&Reason {
                reason: reason.label(),
            })
            .inc();
    }

    /// Counts a sweep run.
    pub fn record_sweep(&self) {
        self.0.sweeps.inc();
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
        self.0
            .rejects
            .get_or_create(&Reason {
                reason: reason.label(),
            })
            .get()
    }

    /// libp2p's metrics, for the node to record its swarm's events into.
    pub fn swarm(&self) -> interlink_net::SwarmMetrics {
        self.0.swarm.clone()
    }

    /// The exposition in the OpenMetrics text format ([`CONTENT_TYPE`]): the relay's
    /// own families, then libp2p's (`interlink_relay_libp2p_…`).
    pub fn render(&self) -> String {
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        let mut out = String::with_capacity(8192);
        // Writing to a String cannot fail.
        let _ = encode_registry(&mut out, &self.0.registry);
        let _ = encode_registry(&mut out, &self.0.swarm_registry);
        let _ = encode_eof(&mut out);
        out
    }

    /// The relay's own families alone, as [`Metrics::render`] begins.
    #[cfg(test)]
    fn render_own(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.0.registry);
        out
    }
}

/// Moves a counter mirroring a count kept elsewhere up to `n` (it never goes down).
fn catch_up(counter: &Counter, n: u64) {
    let now = counter.get();
    if n > now {
        counter.inc_by(n - now);
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
