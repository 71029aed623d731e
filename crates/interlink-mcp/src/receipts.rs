//! Receipts to senders: when the agent acknowledges messages (`read`), or when a
//! message was handed to the agent host (`host_queued`: a channel push, a Codex turn).
//!
//! `acknowledge_messages` queues one [`ReadReceipt`] per newly consumed message on a
//! bounded channel ([`RECEIPT_QUEUE`]); this worker sends each as a `read` envelope
//! (docs/PROTOCOL.md §4.3) to the session the message came from (its `reply_to`), so
//! acknowledging never waits for the network. Sending is best effort: a receipt for a
//! session no longer on the roster is dropped; one for a session that does not answer
//! waits in its mailbox like any envelope.

use std::{sync::Arc, time::Duration};

use interlink_core::{
    MsgId,
    wire::{EnvelopeKind, SessionAddr},
};
use interlink_net::{OutgoingMessage, inbox::InboxEntry};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::server::{Context, reply_route};

/// Most read receipts waiting to be sent; beyond it new ones are dropped (and logged).
pub const RECEIPT_QUEUE: usize = 1024;
/// Most read receipts on their way at once (each waits for its recipient's answer or
/// its move to the mailbox).
pub const RECEIPTS_IN_FLIGHT: usize = 32;

/// A receipt to send: `read`, or `host_queued` (handed to the agent host).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadReceipt {
    /// The session the message came from.
    pub to: SessionAddr,
    /// The message.
    pub msg_id: MsgId,
    /// [`EnvelopeKind::Read`] or [`EnvelopeKind::HostQueued`].
    pub kind: EnvelopeKind,
}

impl ReadReceipt {
    /// The read receipt for an inbox message, if its reply route is valid.
    pub fn for_entry(e: &InboxEntry) -> Option<Self> {
        Self::of_kind(e, EnvelopeKind::Read)
    }

    /// The hand-over receipt for an inbox message.
    pub fn host_queued(e: &InboxEntry) -> Option<Self> {
        Self::of_kind(e, EnvelopeKind::HostQueued)
    }

    fn of_kind(e: &InboxEntry, kind: EnvelopeKind) -> Option<Self> {
        let (key, session) = reply_route(e)?;
        Some(Self {
            to: SessionAddr { key, session },
            msg_id: e.msg_id.parse().ok()?,
            kind,
        })
    }
}

/// The read receipts for the messages among `unread` whose ids were just acknowledged:
/// one per message, so when two senders used one id, each gets its own.
pub fn read_receipts_for(
    unread: &[InboxEntry],
    consumed: &[(interlink_core::IdentityKey, MsgId)],
) -> Vec<ReadReceipt> {
    let consumed: Vec<(String, String)> = consumed
        .iter()
        .map(|(s, id)| (s.to_hex(), id.to_string()))
        .collect();
    unread
        .iter()
        .filter(|e| {
            consumed
                .iter()
                .any(|(s, id)| *s == e.sender && *id == e.msg_id)
        })
        .filter_map(ReadReceipt::for_entry)
        .collect()
}

impl Context {
    /// Queues read receipts without waiting.
    pub(crate) fn queue_read_receipts(&self, receipts: impl IntoIterator<Item = ReadReceipt>) {
        for r in receipts {
            if self.receipts.try_send(r).is_err() {
                warn!("read receipt dropped: {RECEIPT_QUEUE} already waiting");
            }
        }
    }
}

/// How long the worker gathers receipts before sending them: under load, the receipts
/// for many messages then leave together (the node packs what waits for one session
/// into one request), instead of one round trip per message competing with the
/// messages themselves.
pub const RECEIPT_LINGER: Duration = Duration::from_millis(10);
/// Most receipts gathered into one round.
pub const RECEIPT_BATCH: usize = 64;

/// Sends queued read receipts until `cancel` fires or the channel closes.
pub async fn run(
    ctx: Arc<Context>,
    mut rx: mpsc::Receiver<ReadReceipt>,
    cancel: CancellationToken,
) {
    let mut in_flight = tokio::task::JoinSet::new();
    let mut batch = Vec::with_capacity(RECEIPT_BATCH);
    loop {
        let first = tokio::select! {
            () = cancel.cancelled() => return,
            r = rx.recv() => match r { Some(r) => r, None => return },
        };
        batch.push(first);
        let linger = tokio::time::sleep(RECEIPT_LINGER);
        tokio::pin!(linger);
        while batch.len() < RECEIPT_BATCH {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = &mut linger => break,
                r = rx.recv() => match r { Some(r) => batch.push(r), None => break },
            }
        }
        let ready = match ctx.ready().await {
            Ok(r) => r,
            Err(e) => {
                debug!("{} read receipts not sent: {}", batch.len(), e.0);
                batch.clear();
                continue;
            }
        };
        for r in batch.drain(..) {
            let msg = OutgoingMessage {
                to: r.to.clone(),
                kind: r.kind,
                text: None,
                task_id: None,
                status: None,
                in_reply_to: Some(r.msg_id),
                name: None,
            };
            // Not awaited inline: a receipt to a slow session must not hold up the rest.
            while in_flight.len() >= RECEIPTS_IN_FLIGHT {
                in_flight.join_next().await;
            }
            let handle = ready.handle.clone();
            in_flight.spawn(async move {
                if let Err(e) = handle.send(msg).await {
                    debug!(to = %r.to, msg_id = %r.msg_id, "read receipt not sent: {e}");
                }
            });
        }
        while in_flight.try_join_next().is_some() {}
    }
}
