//! Receipts to senders: when the agent acknowledges messages (`read`), or when a
//! message was handed to the agent host (`host_queued`: a channel push, a Codex turn).
//!
//! `acknowledge_messages` queues one [`ReadReceipt`] per newly consumed message on a
//! bounded channel ([`crate::context::RECEIPT_QUEUE`]); this worker sends each as a `read` envelope
//! (docs/PROTOCOL.md §4.3) to the session the message came from (its `reply_to`), so
//! acknowledging never waits for the network. Sending is best effort: a receipt for a
//! session no longer on the roster is dropped; one for a session that does not answer
//! waits in its mailbox like any envelope.

use std::time::Duration;

use interlink_net::OutgoingMessage;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::context::{NodeStatus, ReadReceipt, wait_ready};

/// Most read receipts on their way at once (each waits for its recipient's answer or
/// its move to the mailbox).
pub(crate) const RECEIPTS_IN_FLIGHT: usize = 32;

/// How long the worker gathers receipts before sending them: under load, the receipts
/// for many messages then leave together (the node packs what waits for one session
/// into one request), instead of one round trip per message competing with the
/// messages themselves.
pub(crate) const RECEIPT_LINGER: Duration = Duration::from_millis(10);
/// Most receipts gathered into one round.
pub(crate) const RECEIPT_BATCH: usize = 64;

/// Sends queued read receipts through the node `node` follows until `cancel` fires or
/// the channel closes. It needs nothing else of the session.
pub(crate) async fn run(
    node: watch::Receiver<NodeStatus>,
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
        let ready = match wait_ready(&node).await {
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
                group: None,
                invite: None,
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
