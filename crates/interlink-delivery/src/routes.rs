//! Which node each session is on, and which nodes failed to answer (soft state).

use std::collections::{BTreeMap, BTreeSet};

use interlink_core::wire::SessionAddr;

use crate::{config::ROUTES_CAPACITY, types::PeerRef};

/// Session → node, and the nodes that are believed unreachable until they show life.
#[derive(Debug, Default)]
pub(crate) struct Routes {
    map: BTreeMap<SessionAddr, PeerRef>,
    // Only nodes that are some session's route are marked, so this is bounded by `map`.
    unreachable: BTreeSet<PeerRef>,
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
            if self.unreachable.contains(&d) && !self.map.values().any(|p| *p == d) {
                self.unreachable.remove(&d);
            }
        }
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
