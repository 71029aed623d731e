//! Per-remote-peer byte budgets for what others make this node verify, merge or store.
//!
//! Every inbound mailbox copy (a `hold`), every mailbox fetch and every live delivery
//! request costs signature checks, a merge, memory or bandwidth, paid by this node for
//! someone else. A
//! token bucket per peer and per kind bounds that cost: a peer may send a burst, then
//! only the refill rate. Beyond it the input is refused `over_budget` (retryable: an
//! honest sender sends again later, and its own outbox keeps the message meanwhile)
//! before anything is decoded. Buckets are soft state; at most [`MAX_TRACKED_PEERS`]
//! are kept, and when full the longest-idle one is forgotten (a forgotten peer starts
//! again with a full bucket, which costs at most one burst).

use interlink_core::bounded::{LruMap, Rate, TokenBucket};
use libp2p::PeerId;

/// Peers whose budgets are tracked at once.
pub(crate) const MAX_TRACKED_PEERS: usize = 4096;

/// What a budget is spent on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// Mailbox copies to hold (`hold` requests).
    Hold,
    /// Live delivery requests.
    Deliver,
    /// Fetches of a mailbox copy (the request's signature check and the copy sent).
    Fetch,
    /// Roster requests: each is answered from the whole roster (a digest compared, a
    /// summary matched, announcements and beacons encoded).
    Roster,
}

/// What a roster request costs besides its summary's bytes: the answer's work, about a
/// full response's worth of encoding.
pub(crate) const ROSTER_REQUEST_COST: usize = 2048;

/// The roster burst: exactly the largest request PROTOCOL §8.2 allows (16,384 tags and
/// their bitmap, plus the fixed cost), so a fresh peer's biggest summary is answered.
/// A smaller burst left a large roster's full request unanswered for ever, however
/// long its asker waited (a bucket never holds more than its burst).
pub(crate) const ROSTER_BURST: usize = ROSTER_REQUEST_COST
    + interlink_core::presence::sync::MAX_SUMMARY_BYTES
    + interlink_core::presence::sync::MAX_AWAY_BYTES;

/// What answering `request` is charged: the fixed cost, plus the summary and bitmap
/// bytes the answer reads. A request refused by its shape (an oversized or ragged
/// summary, a misfit bitmap) is answered empty before any tag is read, so it costs
/// only the fixed part.
pub(crate) fn roster_cost(request: &interlink_core::wire::RosterRequest) -> usize {
    ROSTER_REQUEST_COST + interlink_core::presence::sync::summary_bytes_read(request)
}

impl Kind {
    /// (burst bytes, refill bytes per second) for a session node.
    fn session_rates(self) -> (u64, u64) {
        match self {
            // A full mailbox record is 4 MiB at most; a sender republishing a few
            // recipients' copies fits the burst.
            Kind::Hold => (16 << 20, 2 << 20),
            // 64 envelopes of 64 KiB per request, several requests in a burst.
            Kind::Deliver => (32 << 20, 8 << 20),
            // An owner fetches each holder's copy (at most about 2.6 MiB) every few
            // seconds at most; 4 KiB per request bounds the signature checks to a few
            // hundred a second.
            Kind::Fetch => (8 << 20, 1 << 20),
            // A peer's pacer asks for a digest about once a heartbeat and for a
            // summary or a repair after a difference: a few a second at most. The
            // largest request in a burst (or 66 digest requests), then 32 digest
            // requests a second.
            Kind::Roster => (ROSTER_BURST as u64, 32 * ROSTER_REQUEST_COST as u64),
        }
    }
}

/// The budgets of every tracked peer.
#[derive(Debug)]
pub(crate) struct Budgets {
    buckets: LruMap<(PeerId, Kind), TokenBucket>,
    /// Relays serve many more holders' worth of mail: their rates are multiplied.
    factor: u64,
}

impl Budgets {
    /// Budgets at the session rates times `factor`.
    pub(crate) fn new(factor: u64) -> Self {
        Self {
            buckets: LruMap::new(MAX_TRACKED_PEERS),
            factor: factor.max(1),
        }
    }

    /// Spends `bytes` of `peer`'s `kind` budget at `now_ms`; `false` (nothing spent) if
    /// the budget does not cover them.
    pub(crate) fn spend(&mut self, peer: PeerId, kind: Kind, bytes: usize, now_ms: u64) -> bool {
        let (burst, per_second) = kind.session_rates();
        let rate = Rate {
            burst: burst * self.factor,
            per: per_second * self.factor,
            period_ms: 1000,
        };
        // A forgotten peer starts again with a full bucket: at most one burst more.
        let (bucket, _) = self
            .buckets
            .entry((peer, kind), || TokenBucket::full(rate, now_ms));
        bucket.refill(rate, now_ms);
        bucket.try_take(u64::try_from(bytes).unwrap_or(u64::MAX))
    }
}

/// Networks whose store-growth budgets a relay tracks at once.
pub(crate) const MAX_TRACKED_NETWORKS: usize = 4096;
use crate::behaviour::NETWORK_GROWTH_PER_HOUR;

/// The network a connection comes from, for budgets no number of fresh identities
/// multiplies: an IPv4 address, or an IPv6 /64 (what one host or site is usually
/// given). `None` for an address without IP (a relayed circuit is counted at the relay
/// that carried it; the in-memory test transport).
pub(crate) fn source_network(addr: &libp2p::Multiaddr) -> Option<std::net::IpAddr> {
    use libp2p::multiaddr::Protocol;
    if addr.iter().any(|p| matches!(p, Protocol::P2pCircuit)) {
        return None;
    }
    addr.iter().find_map(|p| match p {
        Protocol::Ip4(ip) => Some(std::net::IpAddr::V4(ip)),
        Protocol::Ip6(ip) => {
            let s = ip.segments();
            Some(std::net::IpAddr::V6(std::net::Ipv6Addr::new(
                s[0], s[1], s[2], s[3], 0, 0, 0, 0,
            )))
        }
        _ => None,
    })
}

/// A relay's store-growth budget per source network: what the mail handed over from
/// one network may add to the store (PROTOCOL §8.5). A network with no budget left is
/// refused `over_budget` before its copy is read into the store; a hold is charged
/// what it made the store grow by, once committed (so republished copies, acks and
/// mail the store already had cost nothing).
/// A network's growth budget is a [`TokenBucket`] of bytes left, in debt after a hold
/// grew the store by more than was left (the debt is refilled before the next hold is
/// let in).
#[derive(Debug)]
pub(crate) struct NetworkBudgets {
    buckets: LruMap<std::net::IpAddr, TokenBucket>,
    /// What a network may add at once (`Config::network_growth_burst`).
    burst: u64,
}

impl NetworkBudgets {
    /// Budgets of `burst` bytes each, refilled at [`NETWORK_GROWTH_PER_HOUR`].
    pub(crate) fn new(burst: u64) -> Self {
        Self {
            buckets: LruMap::new(MAX_TRACKED_NETWORKS),
            burst,
        }
    }

    fn refilled(&mut self, net: std::net::IpAddr, now_ms: u64) -> &mut TokenBucket {
        let rate = Rate {
            burst: self.burst,
            per: NETWORK_GROWTH_PER_HOUR,
            period_ms: 3_600_000,
        };
        let (b, _) = self.buckets.entry(net, || TokenBucket::full(rate, now_ms));
        b.refill(rate, now_ms);
        b
    }

    /// Whether `net` may still add to the store.
    pub(crate) fn has_room(&mut self, net: std::net::IpAddr, now_ms: u64) -> bool {
        self.refilled(net, now_ms).level() > 0
    }

    /// Charges `net` the `bytes` a hold of its made the store grow by.
    pub(crate) fn charge(&mut self, net: std::net::IpAddr, bytes: u64, now_ms: u64) {
        self.refilled(net, now_ms).charge(bytes);
    }
}

#[cfg(test)]
#[path = "budgets_tests.rs"]
mod tests;
