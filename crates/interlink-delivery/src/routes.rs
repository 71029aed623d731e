//! Which node each session is on, and which nodes failed to answer (soft state).

use std::collections::{BTreeMap, BTreeSet};

use interlink_core::{limits::MAX_DELIVER_BATCH, wire::SessionAddr};

use crate::{config::ROUTES_CAPACITY, types::PeerRef};

/// The longest a live attempt may wait for its answer, however slow the link measured.
pub(crate) const LIVE_TIMEOUT_CAP_MS: u64 = 8_000;
/// How long a live attempt to a node the shell is connected to is waited for, from
/// when it was sent, before it is given up whatever the connection says (a peer
/// whose process is stopped keeps its connections until its pings fail).
pub const LIVE_PATIENCE_MS: u64 = LIVE_TIMEOUT_CAP_MS;
/// Most nodes remembered as connected.
const CONNECTED_CAPACITY: usize = crate::config::ROUTES_CAPACITY;
/// Clock granularity added to the variance term (RFC 6298's G).
const GRANULARITY_MS: u64 = 10;

/// A node's measured answer time (RFC 6298: smoothed round trip and its variation),
/// how many live attempts in a row ran out since the last answer, and how many
/// envelopes the next live request to it may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rtt {
    srtt: u64,
    rttvar: u64,
    timeouts: u32,
    /// Envelopes per request: one after an attempt ran out, doubled by each answer, up
    /// to [`MAX_DELIVER_BATCH`] — TCP's restart after a timeout (RFC 5681 §3.1). A
    /// backlog that piled up behind a slow attempt otherwise went as one request of up
    /// to 1 MiB, which on a slow link (1 Mbit/s) ran out on every attempt.
    batch: usize,
}

impl Default for Rtt {
    fn default() -> Self {
        Self {
            srtt: 0,
            rttvar: 0,
            timeouts: 0,
            batch: MAX_DELIVER_BATCH,
        }
    }
}

impl Rtt {
    fn sample(&mut self, ms: u64) {
        self.batch = self.batch.saturating_mul(2).min(MAX_DELIVER_BATCH);
        if self.srtt == 0 {
            self.srtt = ms.max(1);
            self.rttvar = ms / 2;
        } else {
            self.rttvar = (3 * self.rttvar + self.srtt.abs_diff(ms)) / 4;
            self.srtt = (7 * self.srtt + ms) / 8;
        }
        self.timeouts = 0;
    }

    /// The live window: the measured answer time with its variation, never under
    /// `floor`, doubled for each attempt in a row that ran out (Karn: a timed-out
    /// attempt gives no sample), at most [`LIVE_TIMEOUT_CAP_MS`].
    fn timeout(self, floor: u64) -> u64 {
        let rto = if self.srtt == 0 {
            floor
        } else {
            (self.srtt + (4 * self.rttvar).max(GRANULARITY_MS)).max(floor)
        };
        rto.saturating_mul(1 << self.timeouts.min(4))
            .min(LIVE_TIMEOUT_CAP_MS.max(floor))
    }
}

/// Session → node, the nodes that are believed unreachable until they show life, and
/// each node's answer time.
#[derive(Debug, Default)]
pub(crate) struct Routes {
    map: BTreeMap<SessionAddr, PeerRef>,
    // Only nodes that are some session's route are marked, so this is bounded by `map`.
    unreachable: BTreeSet<PeerRef>,
    // Likewise only for nodes that are some session's route.
    rtt: BTreeMap<PeerRef, Rtt>,
    /// Nodes the shell has a connection to (at most [`CONNECTED_CAPACITY`]; past it a
    /// node counts as unconnected, which only means its attempts end at their window).
    connected: BTreeSet<PeerRef>,
}

impl Routes {
    /// The node of `session`, if known.
    pub(crate) fn get(&self, session: &SessionAddr) -> Option<PeerRef> {
        self.map.get(session).copied()
    }

    /// The node of `session` if it is known and not marked unreachable.
    pub(crate) fn reachable(&self, session: &SessionAddr) -> Option<PeerRef> {
        self.get(session).filter(|p| !self.unreachable.contains(p))
    }

    /// Records (or forgets) the node of `session`. When full, an arbitrary other route
    /// is forgotten: losing a route only delays delivery to the mailbox path.
    pub(crate) fn set(&mut self, session: SessionAddr, peer: Option<PeerRef>) {
        // The nodes that may have lost their last route here: the session's previous
        // one, and the evicted route's. Only they can leave `unreachable` (checking
        // every route on each call made learning a roster of N sessions cost N²).
        let mut dropped: [Option<PeerRef>; 2] = [None, None];
        match peer {
            Some(p) => {
                if !self.map.contains_key(&session) && self.map.len() >= ROUTES_CAPACITY {
                    let victim = self.map.keys().next().cloned();
                    if let Some(v) = victim {
                        dropped[1] = self.map.remove(&v);
                    }
                }
                dropped[0] = self.map.insert(session, p);
            }
            None => {
                dropped[0] = self.map.remove(&session);
            }
        }
        for d in dropped.into_iter().flatten() {
            if !self.map.values().any(|p| *p == d) {
                self.unreachable.remove(&d);
                self.rtt.remove(&d);
            }
        }
    }

    /// The shell has a connection to `peer`, or none left.
    pub(crate) fn set_connected(&mut self, peer: PeerRef, connected: bool) {
        if !connected {
            self.connected.remove(&peer);
        } else if self.connected.len() < CONNECTED_CAPACITY {
            self.connected.insert(peer);
        }
    }

    /// Whether the shell has a connection to `peer`.
    pub(crate) fn is_connected(&self, peer: PeerRef) -> bool {
        self.connected.contains(&peer)
    }

    /// The node showed life.
    pub(crate) fn alive(&mut self, peer: PeerRef) {
        self.unreachable.remove(&peer);
    }

    /// The node failed to answer.
    pub(crate) fn failed(&mut self, peer: PeerRef) {
        if self.map.values().any(|p| *p == peer) {
            self.unreachable.insert(peer);
        }
    }

    /// The node answered a live attempt `ms` after it was sent.
    pub(crate) fn answered_in(&mut self, peer: PeerRef, ms: u64) {
        if self.map.values().any(|p| *p == peer) {
            self.rtt.entry(peer).or_default().sample(ms);
        }
    }

    /// A live attempt to the node ran out: the next one waits longer.
    pub(crate) fn timed_out(&mut self, peer: PeerRef) {
        if self.map.values().any(|p| *p == peer) {
            let r = self.rtt.entry(peer).or_default();
            r.timeouts = r.timeouts.saturating_add(1);
            r.batch = 1;
        }
    }

    /// How many envelopes the next live request to `peer` may carry.
    pub(crate) fn batch_limit(&self, peer: PeerRef) -> usize {
        self.rtt
            .get(&peer)
            .map_or(MAX_DELIVER_BATCH, |r| r.batch.clamp(1, MAX_DELIVER_BATCH))
    }

    /// How long a live attempt to `peer` waits for its answer: what its answers took
    /// so far (never under `floor`, the configured window).
    pub(crate) fn live_timeout(&self, peer: PeerRef, floor: u64) -> u64 {
        self.rtt
            .get(&peer)
            .copied()
            .unwrap_or_default()
            .timeout(floor)
    }

    /// The sessions on `peer`.
    pub(crate) fn sessions_of(&self, peer: PeerRef) -> Vec<SessionAddr> {
        let v: Vec<SessionAddr> = self
            .map
            .iter()
            .filter(|(_, p)| **p == peer)
            .map(|(s, _)| s.clone())
            .collect();
        // Already in order (a BTreeMap), so a seeded run replays exactly.
        v
    }

    /// Number of routes held.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
#[path = "routes_tests.rs"]
mod tests;
