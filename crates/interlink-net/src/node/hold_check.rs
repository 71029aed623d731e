//! Verifying mailbox copies handed to a session, off the task that owns the Swarm.
//!
//! A `hold` makes the holder check every signature in the copy: up to a few hundred
//! Ed25519 verifications for a full mailbox. On the task that owns the Swarm that work
//! delays everything else the node does — a paired peer's live delivery waits behind
//! a stranger's copy (issue 13, item 2). So one thread decodes and verifies, and the
//! node merges, stores and answers when it reports back; the merge of two verified
//! copies needs no signature checks but the (memoised) passes. The queue is small on
//! purpose: a copy that does not fit is refused `over_budget` at once (retryable), so
//! a flood costs the thread's time, not the node's memory. Relays check copies on
//! their store thread instead (`node::relay_store`).

use interlink_core::{
    mailbox::{self, HandedCopyError, Mailbox},
    wire::{Refusal, RefusalCode},
};
use libp2p::kad::RecordKey;

use super::worker::Worker;

/// Copies waiting for the checker thread (and answers waiting for the node); beyond it
/// a `hold` is refused `over_budget`. As many as requests are read at once
/// (`crate::gated`): each holds up to a 4 MiB record, so this bounds their memory too.
pub(crate) const HOLD_CHECK_QUEUE: usize = 4;

/// One copy for the checker thread.
#[derive(Debug)]
pub(crate) struct Check {
    pub(crate) token: u64,
    pub(crate) key: RecordKey,
    pub(crate) record: Vec<u8>,
}

/// A checked copy: decoded with every entry verified, or why not.
#[derive(Debug)]
pub(crate) struct Checked {
    pub(crate) token: u64,
    pub(crate) key: RecordKey,
    pub(crate) result: Result<Mailbox, Refusal>,
}

/// The node's end of the checker thread.
pub(crate) type HoldChecker = Worker<Check, Checked>;

/// Starts the checker thread.
pub(crate) fn spawn(clock: crate::Clock) -> std::io::Result<HoldChecker> {
    Worker::spawn("interlink-hold-check", HOLD_CHECK_QUEUE, move |c: Check| {
        Checked {
            token: c.token,
            result: check(&c.key, &c.record, clock.now_ms()),
            key: c.key,
        }
    })
}

/// Decodes and verifies a copy handed to this node: a holder refuses a copy with any
/// invalid entry (PROTOCOL §7.2), and one stored under another mailbox's key.
pub(crate) fn check(key: &RecordKey, record: &[u8], now: u64) -> Result<Mailbox, Refusal> {
    let cfg = mailbox::Config::default();
    Mailbox::decode_handed(record, key.as_ref(), now, &cfg).map_err(|e| match e {
        HandedCopyError::Record(e) => e.refusal(),
        HandedCopyError::InvalidEntries { count, first } => Refusal::new(
            first.reason.refusal().code,
            format!("{count} invalid entries, first: {first}"),
        ),
        HandedCopyError::WrongKey { .. } => Refusal::new(
            RefusalCode::WrongMailbox,
            "record key does not match the mailbox",
        ),
    })
}
