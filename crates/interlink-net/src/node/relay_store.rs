//! A relay's durable mailbox store, off the task that owns the Swarm.
//!
//! A relay answers a `hold` only after the store verified,
//! merged and committed the copy (`crate::durable`). The commit waits for the disk, and
//! verifying a full mailbox checks up to 256 signatures; on the network task either
//! would stall every connection of the relay. So one thread makes the calls, in order,
//! and the node answers the peer when the thread reports back. Requests that do not fit
//! in the bounded queue are refused `over_budget` at once (the peer sends again later).

use std::sync::Arc;

use libp2p::{PeerId, request_response::ResponseChannel};

use super::worker::Worker;
use crate::{DurableMailboxes, Refusal};

/// Holds waiting for the store thread; beyond it a hold is refused `over_budget`.
pub(crate) const RELAY_STORE_QUEUE: usize = 256;

/// Who is waiting for a hold: the peer whose mailbox-protocol `hold` is answered on
/// this channel.
#[derive(Debug)]
pub(crate) struct HoldFrom(
    pub(crate) PeerId,
    pub(crate) ResponseChannel<interlink_core::wire::MailboxResponse>,
);

/// One hold for the store thread.
#[derive(Debug)]
pub(crate) struct Hold {
    pub(crate) token: u64,
    pub(crate) key: [u8; 32],
    pub(crate) record: Vec<u8>,
}

/// What the store thread did with a hold: the merged copy, or why not.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) token: u64,
    pub(crate) key: [u8; 32],
    pub(crate) result: Result<crate::durable::HeldCopy, Refusal>,
}

/// The node's end of the relay store thread.
pub(crate) type RelayStore = Worker<Hold, Held>;

/// Starts the relay store thread over `store`.
pub(crate) fn spawn(
    store: Arc<dyn DurableMailboxes>,
    clock: crate::Clock,
) -> std::io::Result<RelayStore> {
    Worker::spawn(
        "interlink-relay-store",
        RELAY_STORE_QUEUE,
        move |hold: Hold| {
            let result = store.hold(&hold.key, &hold.record, clock.now_ms());
            Held {
                token: hold.token,
                key: hold.key,
                result,
            }
        },
    )
}
