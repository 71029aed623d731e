//! Closing a peer's relayed connections once a direct one is up.
//!
//! Two sessions behind NATs meet through a relay and punch through (DCUtR,
//! `node::hole_punch`); the relayed connections stay open beside the direct one unless
//! someone closes them. libp2p's request-response hands each request to the peer's
//! connections in turn (`request_id % connections`, request-response 0.30), a kept
//! live stream sits on whichever connection it was opened on (libp2p-stream picks one
//! at random), and gossipsub's one queue per peer is drained by whichever of the
//! peer's connections polls it first (gossipsub 0.50). Measured in the two-NAT lab,
//! all of 20 messages sent after the punch went through the relay: the kept stream
//! had been opened for the first message, on the circuit (issue 51; an outside run
//! saw about half). A relay limits circuits in time and bytes and sees who talks to
//! whom; once a direct connection is up, traffic belongs on it.
//!
//! So when a peer has a direct connection over which its identify came, its relayed
//! connections are closed after [`GRACE`], and so are (once it was reached through a
//! relay) its direct connections the peer's identify has not come over by then: a
//! punch makes several (each side dials,
//! on each relayed connection), and one whose handshake completed on this side only
//! (the last flight lost) takes streams that are never answered — with the relayed
//! connections gone, a kept live stream reopened on it timed out and the messages went
//! `queued` (seen in the lab; inferred from the timeouts). The identify is the sign the peer holds the
//! direct connection too: each side of a punched QUIC connection completes its
//! handshake on its own, and a peer whose side had not completed when its relayed
//! connection closed would have no connection left for its requests (they would fail
//! as unreachable and go to the mailbox, `queued` where `delivered` was due). The
//! grace lets what is in flight on the relayed connections finish; what is cut is
//! sent again on the direct connection (`SendFailure::ConnectionLost`, the peer
//! being still connected), and the node holds new live deliveries to the peer until
//! the swarm reports the relayed connections closed (`node::quic_upgrade`'s
//! `node::held_live`). A relayed connection opened later while the direct one is
//! confirmed (a fresh circuit for a punch again, the peer dialling a circuit address
//! it was given) is closed after the grace too. When the direct connection goes, the
//! relayed ones left stay: they are all there is.
//!
//! Only connections *to peers through* a relay are closed: this node's own connection
//! to a relay, which holds its reservation (its listening circuit), is direct and is
//! never fed in.
//!
//! The component is IO-free: the node task feeds it connection events with the time
//! ([`RetireCircuits::handle`]), asks when it next needs to run
//! ([`RetireCircuits::poll_timeout`]), runs it then ([`RetireCircuits::handle_timeout`])
//! and carries out its [`Output`]s.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    time::{Duration, Instant},
};

use libp2p::{PeerId, swarm::ConnectionId};
use tracing::{debug, info};

use super::Actor;

/// How long a peer's relayed connections stay open after a direct one is confirmed:
/// enough for a request on them to be answered (a round trip through the relay).
pub(crate) const GRACE: Duration = Duration::from_secs(1);

/// Most peers tracked. Each is one with connections (bounded by the swarm's limits
/// already); past it a new peer is not tracked and its relayed connections stay.
const MAX_PEERS: usize = 4096;

/// What the node task tells the component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Input {
    /// A connection to `peer` was established (not fed for relays themselves).
    Established {
        peer: PeerId,
        connection: ConnectionId,
        relayed: bool,
    },
    /// `peer`'s identify came over `connection`: the peer holds it.
    Identified {
        peer: PeerId,
        connection: ConnectionId,
    },
    /// `connection` to `peer` closed.
    Closed {
        peer: PeerId,
        connection: ConnectionId,
    },
}

/// What the component asks of the node task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Output {
    /// Close these relayed connections to `peer`: a direct one carries its traffic.
    Close {
        peer: PeerId,
        connections: Vec<ConnectionId>,
    },
}

/// One peer's connections, as far as this rule cares.
#[derive(Debug, Default)]
struct Peer {
    relayed: HashSet<ConnectionId>,
    direct: HashSet<ConnectionId>,
    /// Direct connections the peer's identify came over (a subset of `direct`).
    confirmed: HashSet<ConnectionId>,
    /// When each connection due to close closes, while a direct one is confirmed:
    /// the relayed ones, and direct ones the peer's identify has not come over.
    due: HashMap<ConnectionId, Instant>,
    /// The peer was reached through a relay: the direct connections are a punch's.
    punched: bool,
}

impl Peer {
    fn is_empty(&self) -> bool {
        self.relayed.is_empty() && self.direct.is_empty()
    }

    /// With a direct connection confirmed, each relayed or unconfirmed direct
    /// connection closes [`GRACE`] from now unless it has a deadline already.
    fn schedule(&mut self, now: Instant) {
        if self.confirmed.is_empty() {
            return;
        }
        // Unconfirmed direct connections only after a punch: elsewhere a second direct
        // connection is a move to QUIC (`quic_upgrade`), whose identify may take a
        // loaded machine longer than the grace.
        let unconfirmed = self
            .direct
            .difference(&self.confirmed)
            .filter(|_| self.punched);
        for id in self.relayed.iter().chain(unconfirmed) {
            self.due.entry(*id).or_insert(now + GRACE);
        }
    }
}

/// The peers whose relayed connections may close for a direct one.
#[derive(Debug, Default)]
pub(crate) struct RetireCircuits {
    peers: HashMap<PeerId, Peer>,
    /// Drained by the node task after every call, so at most one per peer.
    outputs: VecDeque<Output>,
    /// Relayed connections closed because a direct one took over (diagnostics).
    retired: u64,
}

impl RetireCircuits {
    /// Feeds one event at `now`.
    pub(crate) fn handle(&mut self, input: Input, now: Instant) {
        match input {
            Input::Established {
                peer,
                connection,
                relayed,
            } => {
                if !self.peers.contains_key(&peer) && self.peers.len() >= MAX_PEERS {
                    return;
                }
                let p = self.peers.entry(peer).or_default();
                if relayed {
                    p.relayed.insert(connection);
                    p.punched = true;
                } else {
                    p.direct.insert(connection);
                }
                p.schedule(now);
            }
            Input::Identified { peer, connection } => {
                let Some(p) = self.peers.get_mut(&peer) else {
                    return;
                };
                if p.direct.contains(&connection) {
                    p.confirmed.insert(connection);
                    p.due.remove(&connection);
                    p.schedule(now);
                }
            }
            Input::Closed { peer, connection } => {
                let Some(p) = self.peers.get_mut(&peer) else {
                    return;
                };
                p.relayed.remove(&connection);
                p.direct.remove(&connection);
                p.confirmed.remove(&connection);
                p.due.remove(&connection);
                if p.confirmed.is_empty() {
                    // No confirmed direct connection left: what is left is the way.
                    p.due.clear();
                }
                if p.is_empty() {
                    self.peers.remove(&peer);
                }
            }
        }
    }

    /// Runs what is due at `now`: connections whose grace ended are closed.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        for (peer, p) in &mut self.peers {
            if p.confirmed.is_empty() {
                continue;
            }
            let mut connections: Vec<ConnectionId> = p
                .due
                .iter()
                .filter(|(_, at)| **at <= now)
                .map(|(id, _)| *id)
                .collect();
            if connections.is_empty() {
                continue;
            }
            connections.sort_unstable();
            for id in &connections {
                p.due.remove(id);
                if p.relayed.remove(id) {
                    self.retired = self.retired.saturating_add(1);
                }
                // A direct one is forgotten here too: its close is on its way.
                p.direct.remove(id);
            }
            self.outputs.push_back(Output::Close {
                peer: *peer,
                connections,
            });
        }
    }

    /// The next thing for the node task to do.
    pub(crate) fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When [`RetireCircuits::handle_timeout`] has something to do next.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.peers
            .values()
            .filter(|p| !p.confirmed.is_empty())
            .flat_map(|p| p.due.values())
            .min()
            .copied()
    }

    /// Relayed connections closed for a direct one since start.
    pub(crate) fn retired(&self) -> u64 {
        self.retired
    }
}

impl Actor {
    /// A connection to `peer` opened (already in `peers`).
    pub(super) fn on_retire_connected(&mut self, peer: PeerId, connection: ConnectionId) {
        // A relay's own connection holds this node's reservation: never retired.
        if self.relays.is_relay(&peer) {
            return;
        }
        let Some(relayed) = self
            .peers
            .get(&peer)
            .and_then(|info| info.connections.get(&connection))
            .map(libp2p::core::ConnectedPoint::is_relayed)
        else {
            return;
        };
        let input = Input::Established {
            peer,
            connection,
            relayed,
        };
        self.retire.handle(input, Instant::now());
    }

    /// `peer`'s identify came over `connection`.
    pub(super) fn on_retire_identified(&mut self, peer: PeerId, connection: ConnectionId) {
        self.retire
            .handle(Input::Identified { peer, connection }, Instant::now());
    }

    /// `connection` to `peer` closed.
    pub(super) fn on_retire_closed(&mut self, peer: PeerId, connection: ConnectionId) {
        self.retire
            .handle(Input::Closed { peer, connection }, Instant::now());
    }

    /// Closes the relayed connections whose grace ended at `now`.
    pub(super) fn retire_circuits_due(&mut self, now: Instant) {
        self.retire.handle_timeout(now);
        while let Some(Output::Close { peer, connections }) = self.retire.poll_output() {
            let Some(info) = self.peers.get_mut(&peer) else {
                continue;
            };
            let mut closing = Vec::with_capacity(connections.len());
            let mut relayed = 0usize;
            for id in connections {
                // Out of the peer's connections at once: the diagnostics show the
                // direct route, and nothing here picks a closing connection.
                let Some(endpoint) = info.connections.remove(&id) else {
                    continue;
                };
                if self.swarm.close_connection(id) {
                    relayed += usize::from(endpoint.is_relayed());
                    closing.push(id);
                }
            }
            if closing.is_empty() {
                continue;
            }
            let unconfirmed = closing.len() - relayed;
            if relayed > 0 {
                info!(
                    %peer,
                    relayed,
                    unconfirmed,
                    "direct connection confirmed: closing the relayed ones"
                );
            } else {
                debug!(%peer, unconfirmed, "closing direct connections the peer never confirmed");
            }
            // Live deliveries wait for the swarm's report: until then request-response
            // may hand one to a closing connection.
            self.held_live.closing(peer, closing, now);
            if let Some(streams) = self.parts.delivery_mut().and_then(|d| d.streams()) {
                streams.reset(&peer);
            }
        }
    }
}

#[cfg(test)]
#[path = "retire_circuits_tests.rs"]
mod tests;
