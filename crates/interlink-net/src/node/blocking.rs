//! Shutting out a peer that breaks the mailbox stream bound.
//!
//! A connection with more mailbox requests waiting unread than
//! [`MAILBOX_UNREAD_PER_CONNECTION`](crate::behaviour::MAILBOX_UNREAD_PER_CONNECTION)
//! is closed (`crate::gated` hands the node a stand-in for the request it did not
//! read), and its peer is refused new connections for a while: resetting each extra
//! stream, or closing without a block, let a peer that retried at once cost this node
//! a stream negotiation or a handshake every few milliseconds (`hostile-load`).

use interlink_core::bounded::LruMap;
use libp2p::{PeerId, swarm::ConnectionId};
use tracing::debug;

use super::Actor;

/// Peers shut out, and the count of connections closed for it.
#[derive(Debug)]
pub(crate) struct Blocking {
    /// Blocked peers → until when, the one blocked longest ago first (every block lasts
    /// as long, so that is also the first due); at most `MAX_BLOCKED_PEERS`.
    blocked: LruMap<PeerId, std::time::Instant>,
    /// Connections closed for opening more mailbox streams at once than they may.
    closed: u64,
}

impl Blocking {
    /// Connections closed for breaking the mailbox stream bound.
    pub(super) fn closed(&self) -> u64 {
        self.closed
    }
}

impl Default for Blocking {
    fn default() -> Self {
        Self {
            blocked: LruMap::new(crate::behaviour::MAX_BLOCKED_PEERS),
            closed: 0,
        }
    }
}

impl Actor {
    /// Closes `connection` of `peer`, which opened more mailbox streams at once than
    /// it may, and blocks the peer for a while.
    pub(super) fn shut_out(&mut self, peer: PeerId, connection: ConnectionId) {
        self.mailbox.blocking.closed += 1;
        debug!(%peer, "too many mailbox streams at once; closing the connection");
        self.swarm.close_connection(connection);
        self.block_for_a_while(peer);
    }

    /// Refuses `peer`'s connections for [`OVERFLOW_BLOCK`](crate::behaviour::OVERFLOW_BLOCK)
    /// (blocking also closes the ones it has). An honest node never gets here: it keeps
    /// 2 mailbox requests in flight per peer (`node::mailbox_calls`).
    fn block_for_a_while(&mut self, peer: PeerId) {
        let until = std::time::Instant::now() + crate::behaviour::OVERFLOW_BLOCK;
        // Blocked again: the block starts over, at the back of the order.
        self.mailbox.blocking.blocked.remove(&peer);
        let (_, evicted) = self.mailbox.blocking.blocked.entry(peer, || until);
        if let Some((oldest, _)) = evicted {
            self.swarm.behaviour_mut().blocked.unblock_peer(oldest);
        }
        self.swarm.behaviour_mut().blocked.block_peer(peer);
    }

    /// Lifts the blocks that are due (on the tick).
    pub(super) fn lift_blocks(&mut self) {
        let now = std::time::Instant::now();
        while self
            .mailbox
            .blocking
            .blocked
            .oldest()
            .is_some_and(|(_, until)| *until <= now)
        {
            if let Some((peer, _)) = self.mailbox.blocking.blocked.pop_oldest() {
                self.swarm.behaviour_mut().blocked.unblock_peer(peer);
            }
        }
    }
}
