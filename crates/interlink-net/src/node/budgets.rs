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

use std::collections::HashMap;

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
        }
    }
}

#[derive(Debug)]
struct Bucket {
    tokens: u64,
    at_ms: u64,
}

/// The budgets of every tracked peer.
#[derive(Debug)]
pub(crate) struct Budgets {
    buckets: HashMap<(PeerId, Kind), Bucket>,
    /// Relays serve many more holders' worth of mail: their rates are multiplied.
    factor: u64,
}

impl Budgets {
    /// Budgets at the session rates times `factor`.
    pub(crate) fn new(factor: u64) -> Self {
        Self {
            buckets: HashMap::new(),
            factor: factor.max(1),
        }
    }

    /// Spends `bytes` of `peer`'s `kind` budget at `now_ms`; `false` (nothing spent) if
    /// the budget does not cover them.
    pub(crate) fn spend(&mut self, peer: PeerId, kind: Kind, bytes: usize, now_ms: u64) -> bool {
        let (burst, rate) = kind.session_rates();
        let (burst, rate) = (burst * self.factor, rate * self.factor);
        if !self.buckets.contains_key(&(peer, kind))
            && self.buckets.len() >= MAX_TRACKED_PEERS
            && let Some(idle) = self
                .buckets
                .iter()
                .min_by_key(|(_, b)| b.at_ms)
                .map(|(k, _)| *k)
        {
            self.buckets.remove(&idle);
        }
        let bucket = self.buckets.entry((peer, kind)).or_insert(Bucket {
            tokens: burst,
            at_ms: now_ms,
        });
        let elapsed = now_ms.saturating_sub(bucket.at_ms);
        bucket.tokens = burst.min(
            bucket
                .tokens
                .saturating_add(elapsed.saturating_mul(rate) / 1000),
        );
        bucket.at_ms = bucket.at_ms.max(now_ms);
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        if bytes > bucket.tokens {
            return false;
        }
        bucket.tokens -= bytes;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_only_the_refill_rate_per_peer_and_kind() {
        let mut b = Budgets::new(1);
        let (p, q) = (PeerId::random(), PeerId::random());
        let (burst, rate) = Kind::Hold.session_rates();
        let mb = 1 << 20;
        let mut spent = 0;
        while b.spend(p, Kind::Hold, mb, 0) {
            spent += mb as u64;
        }
        assert_eq!(spent, burst);
        // Another peer and another kind are untouched.
        assert!(b.spend(q, Kind::Hold, mb, 0));
        assert!(b.spend(p, Kind::Deliver, mb, 0));
        // One second refills `rate`.
        assert!(b.spend(p, Kind::Hold, usize::try_from(rate).unwrap(), 1000));
        assert!(!b.spend(p, Kind::Hold, 1, 1000));
        // The bucket never holds more than the burst.
        assert!(!b.spend(
            p,
            Kind::Hold,
            usize::try_from(burst + 1).unwrap(),
            10_000_000
        ));
    }

    #[test]
    fn tracked_peers_are_bounded() {
        let mut b = Budgets::new(1);
        for i in 0..(MAX_TRACKED_PEERS as u64 + 10) {
            b.spend(PeerId::random(), Kind::Hold, 1, i);
        }
        assert!(b.buckets.len() <= MAX_TRACKED_PEERS);
    }
}
