//! Live deliveries held back while a peer's connections close under them, as an
//! IO-free component.
//!
//! When this node closes some of a peer's connections for a better one (its TCP ones
//! for QUIC: `node::quic_upgrade`; its relayed ones for a direct one:
//! `node::retire_circuits`), request-response still counts them among the peer's
//! connections until the swarm reports them closed, and would hand a new request to
//! one of them. So new live deliveries to the peer wait for that report, at most
//! [`CLOSE_WAIT`]. And when a live delivery was lost with its connection while the peer
//! stays connected (the peer closed that connection for a better one), what is sent
//! to the peer next waits until a close to it is reported, at most [`LOST_WAIT`]: sent
//! at once, it may land on the same dying connection and be lost again.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use interlink_core::wire::DeliverRequest;
use interlink_delivery::ReqId;
use libp2p::{PeerId, swarm::ConnectionId};
use tracing::debug;

/// How long live deliveries wait for closing connections' closes to be reported.
const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// How long a live delivery sent again after its connection was lost under it waits
/// for the swarm to report a close to the peer. Well under the live attempt's timeout
/// (1 s), which runs while it waits.
const LOST_WAIT: Duration = Duration::from_millis(300);
/// Most live deliveries held back for one peer (the engine keeps far fewer in flight);
/// past it they are sent at once.
const MAX_HELD_LIVE: usize = 64;

/// A held live delivery: the engine's id and the request.
pub(super) type Held = (ReqId, DeliverRequest);

/// A peer whose connections are closing, and what waits for them.
#[derive(Debug)]
struct Closing {
    /// The connections still to be reported closed (none: the first close releases).
    connections: Vec<ConnectionId>,
    deadline: Instant,
    held: Vec<Held>,
}

/// Bounded by the peers with closing connections (the swarm's connected peers).
#[derive(Debug, Default)]
pub(super) struct HeldLive {
    closing: HashMap<PeerId, Closing>,
}

impl HeldLive {
    /// `connections` to `peer` are closing for a better one: what is sent to the peer
    /// waits for their closes, at most [`CLOSE_WAIT`] from now (merged into what is
    /// closing already: what was held back stays held).
    pub(super) fn closing(&mut self, peer: PeerId, connections: Vec<ConnectionId>, now: Instant) {
        if connections.is_empty() {
            return;
        }
        let c = self.closing.entry(peer).or_insert_with(|| Closing {
            connections: Vec::new(),
            deadline: now + CLOSE_WAIT,
            held: Vec::new(),
        });
        c.connections.extend(connections);
        c.deadline = now + CLOSE_WAIT;
    }

    /// A live delivery to `peer` was lost with its connection while the peer stays
    /// connected: what follows waits for the first close reported, at most
    /// [`LOST_WAIT`].
    pub(super) fn lost_with_connection(&mut self, peer: PeerId, now: Instant) {
        if self.closing.contains_key(&peer) {
            return;
        }
        debug!(%peer, "a live delivery lost with its connection: what follows waits for the close");
        self.closing.insert(
            peer,
            Closing {
                connections: Vec::new(),
                deadline: now + LOST_WAIT,
                held: Vec::new(),
            },
        );
    }

    /// A live delivery to `peer`: held while its connections close; given back
    /// otherwise (send it now).
    pub(super) fn hold(&mut self, peer: PeerId, held: Held) -> Option<Held> {
        match self.closing.get_mut(&peer) {
            Some(c) if c.held.len() < MAX_HELD_LIVE => {
                c.held.push(held);
                None
            }
            _ => Some(held),
        }
    }

    /// A connection to `peer` closed: when it was the last closing one, what was held
    /// back is released.
    pub(super) fn closed(&mut self, peer: PeerId, connection: ConnectionId) -> Option<Vec<Held>> {
        let c = self.closing.get_mut(&peer)?;
        c.connections.retain(|id| *id != connection);
        if c.connections.is_empty() {
            self.release(&peer)
        } else {
            None
        }
    }

    /// Releases what is held for `peer` (it disconnected: request-response dials it
    /// again, or reports it unreachable).
    pub(super) fn release(&mut self, peer: &PeerId) -> Option<Vec<Held>> {
        self.closing.remove(peer).map(|c| c.held)
    }

    /// A peer whose wait is over at `now`, with what was held for it.
    pub(super) fn poll_due(&mut self, now: Instant) -> Option<(PeerId, Vec<Held>)> {
        let peer = *self
            .closing
            .iter()
            .find(|(_, c)| now >= c.deadline)
            .map(|(p, _)| p)?;
        self.release(&peer).map(|held| (peer, held))
    }

    /// When held deliveries are next due out whatever happens.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        self.closing.values().map(|c| c.deadline).min()
    }
}

#[cfg(test)]
#[path = "held_live_tests.rs"]
mod tests;
