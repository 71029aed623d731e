//! A relay's durable mailbox store, off the task that owns the Swarm.
//!
//! A relay answers a `hold` only after the store verified,
//! merged and committed the copy (`crate::durable`). The commit waits for the disk, and
//! verifying a full mailbox checks up to 256 signatures; on the network task either
//! would stall every connection of the relay. So one thread makes the calls, in order,
//! and the node answers the peer when the thread reports back. Requests that do not fit
//! in the bounded queue are refused `over_budget` at once (the peer sends again later).

use std::{
    sync::Arc,
    thread::{self, JoinHandle},
};

use libp2p::{PeerId, request_response::ResponseChannel};
use tokio::sync::mpsc;

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
#[derive(Debug)]
pub(crate) struct RelayStore {
    pub(crate) done: mpsc::Receiver<Held>,
    ops: Option<mpsc::Sender<Hold>>,
    thread: Option<JoinHandle<()>>,
}

impl RelayStore {
    /// Starts the thread over `store`.
    pub(crate) fn spawn(store: Arc<dyn DurableMailboxes>) -> std::io::Result<Self> {
        let (ops, mut rx) = mpsc::channel::<Hold>(RELAY_STORE_QUEUE);
        let (tx, done) = mpsc::channel(RELAY_STORE_QUEUE);
        let thread = thread::Builder::new()
            .name("interlink-relay-store".into())
            .spawn(move || {
                while let Some(hold) = rx.blocking_recv() {
                    let result = store.hold(&hold.key, &hold.record, crate::now_ms());
                    let held = Held {
                        token: hold.token,
                        key: hold.key,
                        result,
                    };
                    if tx.blocking_send(held).is_err() {
                        return; // the node is gone
                    }
                }
            })?;
        Ok(Self {
            done,
            ops: Some(ops),
            thread: Some(thread),
        })
    }

    /// Queues a hold; gives it back if the queue is full.
    pub(crate) fn send(&self, hold: Hold) -> Result<(), Hold> {
        let Some(ops) = &self.ops else {
            return Err(hold);
        };
        ops.try_send(hold).map_err(|e| match e {
            mpsc::error::TrySendError::Full(h) | mpsc::error::TrySendError::Closed(h) => h,
        })
    }
}

impl Drop for RelayStore {
    fn drop(&mut self) {
        // No more answers are read: the thread's next send fails and it ends; closing
        // the queue ends it once idle. Waiting for it closes the store before whoever
        // dropped the node opens it again.
        self.done.close();
        self.ops = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
