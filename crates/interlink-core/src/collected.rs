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
mod tests {
    use super::*;
    use crate::{Identity, SessionId, limits::MAX_FUTURE_SKEW_MS, wire::Signed};

    const NOW: u64 = 1_790_000_000_000;

    fn addr(id: &Identity, session: &str) -> SessionAddr {
        SessionAddr {
            key: id.public(),
            session: SessionId::new(session).unwrap(),
        }
    }

    fn env(from: &SessionAddr, to: &SessionAddr, id: u8, kind: EnvelopeKind) -> Envelope {
        Envelope {
            v: VERSION,
            sender: from.key,
            sender_session: from.session.clone(),
            recipient: to.key,
            recipient_session: to.session.clone(),
            msg_id: MsgId::from_bytes([id; 16]),
            ts: NOW,
            kind,
            in_reply_to: kind.is_receipt().then(|| MsgId::from_bytes([0; 16])),
            also_about: Vec::new(),
            name: None,
            sealed: None,
            pass: None,
            reply_pass: None,
        }
    }

    #[test]
    fn one_receipt_per_sending_session_and_batch_messages_only() {
        let (a, b, c) = (
            Identity::from_seed(&[1; 32]),
            Identity::from_seed(&[2; 32]),
            Identity::from_seed(&[3; 32]),
        );
        let me = addr(&b, "b-1");
        let (a1, a2, c1) = (addr(&a, "a-1"), addr(&a, "a-2"), addr(&c, "c-1"));
        let mut stored = vec![
            env(&c1, &me, 1, EnvelopeKind::Message),
            env(&a1, &me, 2, EnvelopeKind::Message),
            env(&a2, &me, 3, EnvelopeKind::Message),
            env(&a1, &me, 4, EnvelopeKind::Message),
            // Not receipted: other kinds, a repeat, someone else's mail, our own.
            env(&a1, &me, 5, EnvelopeKind::Read),
            env(&a1, &me, 6, EnvelopeKind::Goodbye),
            env(&a1, &me, 2, EnvelopeKind::Message),
            env(&a1, &addr(&b, "b-2"), 7, EnvelopeKind::Message),
            env(&addr(&b, "b-2"), &addr(&b, "b-1"), 8, EnvelopeKind::Message),
        ];
        // Our own session as sender (refused by the gate anyway) is never receipted.
        stored.push(env(&me, &me, 9, EnvelopeKind::Message));
        let planned = plan(&me, &stored, NOW);
        let got: Vec<(SessionAddr, Vec<u8>)> = planned
            .iter()
            .map(|p| {
                (
                    p.to.clone(),
                    p.receipt.msg_ids.iter().map(|m| m.as_bytes()[0]).collect(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (c1, vec![1]),
                (a1.clone(), vec![2, 4]),
                (a2, vec![3]),
                (addr(&b, "b-2"), vec![8]),
            ]
        );
        for p in &planned {
            let r = &p.receipt;
            assert_eq!((r.recipient, &r.recipient_session), (me.key, &me.session));
            assert_eq!(r.sender, p.to.key);
            assert_eq!((r.state, r.ts), (ReceiptState::Delivered, NOW));
            // Every planned receipt is signable as it stands.
            assert!(Signed::sign(r.clone(), &b).is_ok());
        }

        // More than a receipt holds: split, in order.
        let many: Vec<Envelope> = (0..=MAX_IDS_PER_RECEIPT as u8)
            .map(|i| env(&a1, &me, i, EnvelopeKind::Message))
            .collect();
        let planned = plan(&me, &many, NOW);
        assert_eq!(planned.len(), 2);
        assert_eq!(planned[0].receipt.msg_ids.len(), MAX_IDS_PER_RECEIPT);
        assert_eq!(
            planned[1].receipt.msg_ids,
            vec![MsgId::from_bytes([MAX_IDS_PER_RECEIPT as u8; 16])]
        );
        assert!(plan(&me, &[], NOW).is_empty());
    }

    #[test]
    fn a_sender_takes_only_fresh_delivered_receipts_for_itself() {
        let (a, b) = (Identity::from_seed(&[1; 32]), Identity::from_seed(&[2; 32]));
        let me = addr(&b, "b-1");
        let stored = [env(&addr(&a, "a-1"), &me, 1, EnvelopeKind::Message)];
        let receipt = plan(&me, &stored, NOW).remove(0).receipt;
        assert_eq!(check(&receipt, &a.public(), NOW), Ok(me.clone()));
        assert_eq!(check(&receipt, &b.public(), NOW), Err(CheckError::NotForUs));
        let read = Receipt {
            state: ReceiptState::Read,
            ..receipt.clone()
        };
        assert_eq!(
            check(&read, &a.public(), NOW),
            Err(CheckError::NotDelivered)
        );
        let future = NOW - MAX_FUTURE_SKEW_MS - 1;
        assert!(matches!(
            check(&receipt, &a.public(), future),
            Err(CheckError::Time(TimeError::FutureDated { .. }))
        ));
        let late = NOW + RECEIPT_FRESHNESS_MS + 1;
        assert!(matches!(
            check(&receipt, &a.public(), late),
            Err(CheckError::Time(TimeError::Stale { .. }))
        ));
    }
}
