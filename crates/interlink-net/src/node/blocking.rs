//! Shutting out a peer that breaks the mailbox stream bound.
//!
//! A connection with more mailbox requests waiting unread than
//! [`MAILBOX_UNREAD_PER_CONNECTION`](crate::behaviour::MAILBOX_UNREAD_PER_CONNECTION)
//! is closed (`crate::gated` hands the node a stand-in for the request it did not
//! read), and its peer is refused new connections for a while: resetting each extra
//! stream, or closing without a block, let a peer that retried at once cost this node
//! a stream negotiation or a handshake every few milliseconds (`hostile-load`).

use std::collections::HashMap;

use libp2p::{PeerId, swarm::ConnectionId};
use tracing::debug;

use super::Actor;

/// Peers shut out, and the count of connections closed for it.
#[derive(Debug, Default)]
pub(crate) struct Blocking {
    /// Blocked peers → until when (at most `MAX_BLOCKED_PEERS`).
    blocked: HashMap<PeerId, std::time::Instant>,
    /// Connections closed for opening more mailbox streams at once than they may.
    pub(crate) closed: u64,
}

impl Actor {
    /// Closes `connection` of `peer`, which opened more mailbox streams at once than
    /// it may, and blocks the peer for a while.
    pub(super) fn shut_out(&mut self, peer: PeerId, connection: ConnectionId) {
        self.blocking.closed += 1;
        debug!(%peer, "too many mailbox streams at once; closing the connection");
        self.swarm.close_connection(connection);
        self.block_for_a_while(peer);
    }

    /// Refuses `peer`'s connections for [`OVERFLOW_BLOCK`](crate::behaviour::OVERFLOW_BLOCK)
    /// (blocking also closes the ones it has). An honest node never gets here: it keeps
    /// 2 mailbox requests in flight per peer (`node::mailbox_calls`).
    fn block_for_a_while(&mut self, peer: PeerId) {
        use crate::behaviour::{MAX_BLOCKED_PEERS, OVERFLOW_BLOCK};
        let now = std::time::Instant::now();
        if self.blocking.blocked.len() >= MAX_BLOCKED_PEERS
            && let Some((&oldest, _)) = self.blocking.blocked.iter().min_by_key(|(_, at)| **at)
        {
            self.blocking.blocked.remove(&oldest);
            self.swarm.behaviour_mut().blocked.unblock_peer(oldest);
        }
        self.blocking.blocked.insert(peer, now + OVERFLOW_BLOCK);
        self.swarm.behaviour_mut().blocked.block_peer(peer);
    }

    /// Lifts the blocks that are due (on the tick).
    pub(super) fn lift_blocks(&mut self) {
        let now = std::time::Instant::now();
        let due: Vec<PeerId> = self
            .blocking
            .blocked
            .iter()
            .filter(|(_, until)| **until <= now)
            .map(|(p, _)| *p)
            .collect();
        for peer in due {
            self.blocking.blocked.remove(&peer);
            self.swarm.behaviour_mut().blocked.unblock_peer(peer);
        }
    }
}
