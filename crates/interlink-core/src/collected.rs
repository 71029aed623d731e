//! Receipts for mail a session collected from its mailbox.
//!
//! A message delivered live is receipted in the delivery response (docs/PROTOCOL.md
//! §8.3). A message the recipient collects later — from the DHT, from a relay, or from
//! a holder that pushed its copy — has nobody waiting for an answer, so its sender
//! would never learn that it reached the recipient's inbox. After storing what it
//! collected, the recipient therefore sends each sending session one signed
//! `delivered` [`Receipt`] for its messages, best effort, on the receipt protocol
//! (§8.6). This module holds the two decisions of that exchange, free of IO:
//! [`plan`] (which receipts the collector makes, for whom) and [`check`] (whether a
//! sender takes one it received).

use std::collections::BTreeMap;

use crate::{
    identity::IdentityKey,
    limits::{MAX_DELIVER_BATCH, RECEIPT_FRESHNESS_MS},
    replay::{TimeError, check_time},
    wire::{Envelope, EnvelopeKind, MsgId, Receipt, ReceiptState, SessionAddr, VERSION},
};

/// Most message ids one receipt lists (a receipt's own bound); a sending session with
/// more collected messages gets several receipts.
pub const MAX_IDS_PER_RECEIPT: usize = MAX_DELIVER_BATCH;

/// A receipt to sign and send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    /// The sending session the receipt goes to.
    pub to: SessionAddr,
    /// The unsigned receipt (signer: the collecting identity).
    pub receipt: Receipt,
}

/// The receipts a session (`me`) makes for the envelopes it has just stored from its
/// mailbox: one per sending session and [`MAX_IDS_PER_RECEIPT`] ids, in the order the
/// sessions and their messages first appear, each id once.
///
/// Only `message` envelopes are receipted: the sender's agent side follows messages,
/// and the other kinds (read and hand-over receipts, goodbyes, pair acceptances, a
/// knock held for the operator) are not tracked by anyone. Envelopes not addressed to
/// `me`, and any from `me` itself, are skipped.
pub fn plan<'a>(
    me: &SessionAddr,
    stored: impl IntoIterator<Item = &'a Envelope>,
    now: u64,
) -> Vec<Planned> {
    // Sending session → its ids, with the position it first appeared at (so the result
    // does not depend on map order).
    let mut groups: BTreeMap<SessionAddr, (usize, Vec<MsgId>)> = BTreeMap::new();
    for (i, env) in stored.into_iter().enumerate() {
        if env.kind != EnvelopeKind::Message || env.recipient_addr() != *me {
            continue;
        }
        let from = env.sender_addr();
        if from == *me {
            continue;
        }
        let (_, ids) = groups.entry(from).or_insert_with(|| (i, Vec::new()));
        if !ids.contains(&env.msg_id) {
            ids.push(env.msg_id);
        }
    }
    let mut groups: Vec<(SessionAddr, (usize, Vec<MsgId>))> = groups.into_iter().collect();
    groups.sort_by_key(|(_, (first, _))| *first);
    let mut out = Vec::new();
    for (to, (_, ids)) in groups {
        for chunk in ids.chunks(MAX_IDS_PER_RECEIPT) {
            out.push(Planned {
                to: to.clone(),
                receipt: Receipt {
                    v: VERSION,
                    recipient: me.key,
                    recipient_session: me.session.clone(),
                    sender: to.key,
                    msg_ids: chunk.to_vec(),
                    state: ReceiptState::Delivered,
                    ts: now,
                    pass: None,
                },
            });
        }
    }
    out
}

/// Why a sender refused a receipt for collected mail.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum CheckError {
    /// It receipts another identity's messages.
    #[error("the receipt is for another sender")]
    NotForUs,
    /// It attests something other than `delivered`.
    #[error("the receipt does not say delivered")]
    NotDelivered,
    /// Its timestamp is outside the receipt window.
    #[error("receipt time: {0}")]
    Time(#[from] TimeError),
}

/// Checks a receipt (its signature already verified by [`crate::wire::Signed::decode`])
/// that arrived for this identity (`me`): it must be for `me`, say `delivered`, and be
/// neither future-dated nor older than [`RECEIPT_FRESHNESS_MS`]. Returns the recipient
/// session it speaks for — the signer's identity and session — which the caller
/// matches against where each listed message went: a receipt proves only that its
/// signer holds those ids, so it counts only for messages sent to that session.
pub fn check(receipt: &Receipt, me: &IdentityKey, now: u64) -> Result<SessionAddr, CheckError> {
    if receipt.sender != *me {
        return Err(CheckError::NotForUs);
    }
    if receipt.state != ReceiptState::Delivered {
        return Err(CheckError::NotDelivered);
    }
    check_time(receipt.ts, now, RECEIPT_FRESHNESS_MS)?;
    Ok(SessionAddr {
        key: receipt.recipient,
        session: receipt.recipient_session.clone(),
    })
}

#[cfg(test)]
#[path = "collected_tests.rs"]
mod tests;
