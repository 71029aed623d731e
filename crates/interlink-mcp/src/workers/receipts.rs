//! Receipts to senders: when the agent acknowledges messages (`read`), or when a
//! message was handed to the agent host (`host_queued`: a channel push, a Codex turn).
//!
//! `acknowledge_messages` (and the channel, host-inbox and Codex workers) queue one
//! [`ReadReceipt`] per message on a bounded channel ([`crate::context::RECEIPT_QUEUE`]);
//! this worker gathers them for [`RECEIPT_LINGER`] and sends one `read` or `host_queued`
//! envelope per session and kind, about up to 64 of them (docs/PROTOCOL.md §4.3), to the
//! session the messages came from (their `reply_to`), so acknowledging never waits for
//! the network. Sending is best effort: a receipt for a
//! session no longer on the roster is dropped; one for a session that does not answer
//! waits in its mailbox like any envelope.

use std::{
    collections::{HashMap, HashSet},
    time::Duration,
};

use interlink_core::{
    MsgId,
    limits::MAX_RECEIPT_IDS,
    wire::{EnvelopeKind, SessionAddr},
};
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
        for msg in envelopes(batch.drain(..)) {
            // Not awaited inline: a receipt to a slow session must not hold up the rest.
            while in_flight.len() >= RECEIPTS_IN_FLIGHT {
                in_flight.join_next().await;
            }
            let handle = ready.handle.clone();
            in_flight.spawn(async move {
                let (to, first) = (msg.to.clone(), msg.in_reply_to);
                if let Err(e) = handle.send(msg).await {
                    debug!(%to, msg_id = ?first, "read receipt not sent: {e}");
                }
            });
        }
        while in_flight.try_join_next().is_some() {}
    }
}

/// One envelope per session and kind for the receipts gathered, each about at most
/// [`MAX_RECEIPT_IDS`] messages (protocol version 10): a burst of pushed or acknowledged
/// messages costs its sender one envelope to verify and store, not one per message.
/// The order of first appearance is kept, and an id listed twice is named once.
fn envelopes(receipts: impl Iterator<Item = ReadReceipt>) -> Vec<OutgoingMessage> {
    let mut out: Vec<OutgoingMessage> = Vec::new();
    let mut open: HashMap<(SessionAddr, EnvelopeKind), usize> = HashMap::new();
    let mut named: HashSet<(SessionAddr, EnvelopeKind, MsgId)> = HashSet::new();
    for r in receipts {
        if !named.insert((r.to.clone(), r.kind, r.msg_id)) {
            continue;
        }
        let key = (r.to.clone(), r.kind);
        if let Some(&i) = open.get(&key) {
            let msg = &mut out[i];
            if msg.also_about.len() + 1 < MAX_RECEIPT_IDS {
                msg.also_about.push(r.msg_id);
                continue;
            }
        }
        open.insert(key, out.len());
        out.push(OutgoingMessage {
            to: r.to,
            kind: r.kind,
            text: None,
            task_id: None,
            status: None,
            in_reply_to: Some(r.msg_id),
            also_about: Vec::new(),
            name: None,
            group: None,
            invite: None,
        });
    }
    out
}

#[cfg(test)]
#[path = "receipts_tests.rs"]
mod tests;
