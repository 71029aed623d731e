//! Budgets for strangers' knocks, charged before a knock is verified.
//!
//! A knock is the one thing a stranger may send a session, and each one that is taken
//! costs the session a signature check, an HPKE open (when it carries an invite), a
//! write of the held knocks and the agent side's work on it. Fresh identities and
//! fresh transport keys are free, so the byte budget per peer (`node::budgets`) does
//! not bound that: 300 fresh identities each sent a knock within their byte budgets.
//! So a knock whose (still unverified) sender is neither this identity nor a peer is
//! charged here first, from the envelope's CBOR alone, and refused `over_budget`
//! (retryable) unverified when any of three token buckets is empty:
//!
//! - the remote peer's ([`PER_PEER`]): one connection knocking over and over;
//! - its source network's ([`PER_NETWORK`], an IPv4 address or IPv6 /64, as
//!   `budgets::source_network` finds it): fresh PeerIds from one host;
//! - the node's ([`OVERALL`]): everything else (many hosts, relayed circuits).
//!
//! A knock is charged one token in each, and only when all three have one, so a
//! source past its own budget does not spend the others' (one flooding host cannot
//! use up the node's budget with knocks that are refused anyway). The claim being
//! unverified does not matter: a forged knock costs its sender the same tokens, and
//! naming a peer as the sender only buys a signature check that fails (peers' mail is
//! bounded by the byte budget). IO-free: the caller passes the clock.

use std::net::IpAddr;

use interlink_core::bounded::{LruMap, Rate, TokenBucket};
use libp2p::PeerId;

/// Per remote peer: a few knocks (a sender retrying one), then one every 15 s.
pub(crate) const PER_PEER: Rate = Rate {
    burst: 4,
    per: 1,
    period_ms: 15_000,
};

/// Per source network: room for a few people on one host or behind one NAT knocking
/// at once, then one every 5 s however many PeerIds the network makes up.
pub(crate) const PER_NETWORK: Rate = Rate {
    burst: 16,
    per: 1,
    period_ms: 5_000,
};

/// Per node, all sources together: a burst, then 4 a second. Each knock taken costs
/// well under a millisecond (one signature check, at most one HPKE open, a held-knocks
/// write coalesced with others), so this bounds what strangers take of one core to a
/// fraction of a percent.
pub(crate) const OVERALL: Rate = Rate {
    burst: 32,
    per: 4,
    period_ms: 1_000,
};

/// Remote peers whose knock budgets are tracked at once; the longest-idle is
/// forgotten past this (it starts again with a full bucket: one burst more).
pub(crate) const MAX_TRACKED_KNOCKERS: usize = 4096;

/// Source networks whose knock budgets are tracked at once.
pub(crate) const MAX_TRACKED_KNOCK_NETWORKS: usize = 4096;

/// Which budget refused a knock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Over {
    Peer,
    Network,
    Node,
}

impl Over {
    /// The refusal's detail sentence.
    pub(crate) fn detail(self) -> &'static str {
        match self {
            Over::Peer => "this peer knocked more often than a session takes; knock again later",
            Over::Network => "too many knocks came from this peer's network; knock again later",
            Over::Node => "this session takes no more knocks for now; knock again later",
        }
    }
}

/// The knock budgets of one node.
#[derive(Debug)]
pub(crate) struct KnockBudgets {
    peers: LruMap<PeerId, TokenBucket>,
    networks: LruMap<IpAddr, TokenBucket>,
    overall: TokenBucket,
}

impl KnockBudgets {
    /// Full budgets at `now_ms`.
    pub(crate) fn new(now_ms: u64) -> Self {
        Self {
            peers: LruMap::new(MAX_TRACKED_KNOCKERS),
            networks: LruMap::new(MAX_TRACKED_KNOCK_NETWORKS),
            overall: TokenBucket::full(OVERALL, now_ms),
        }
    }

    /// Charges one knock from `peer` on `network` (none for an address without IP: a
    /// relayed circuit, the in-memory transport) at `now_ms`. `Err` names the budget
    /// that is spent; then nothing was charged.
    pub(crate) fn spend(
        &mut self,
        peer: PeerId,
        network: Option<IpAddr>,
        now_ms: u64,
    ) -> Result<(), Over> {
        self.overall.refill(OVERALL, now_ms);
        let (p, _) = self
            .peers
            .entry(peer, || TokenBucket::full(PER_PEER, now_ms));
        p.refill(PER_PEER, now_ms);
        if p.level() < 1 {
            return Err(Over::Peer);
        }
        if let Some(net) = network {
            let (n, _) = self
                .networks
                .entry(net, || TokenBucket::full(PER_NETWORK, now_ms));
            n.refill(PER_NETWORK, now_ms);
            if n.level() < 1 {
                return Err(Over::Network);
            }
        }
        if self.overall.level() < 1 {
            return Err(Over::Node);
        }
        // All three hold a token: take them.
        self.overall.charge(1);
        if let Some(p) = self.peers.get_mut(&peer) {
            p.charge(1);
        }
        if let Some(n) = network.and_then(|net| self.networks.get_mut(&net)) {
            n.charge(1);
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "knock_budget_tests.rs"]
mod tests;
