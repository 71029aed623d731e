//! Live delivery, the recipient's side: verifying inbound envelopes, passing them
//! through the trust gate into the inbox (one fsync per request), and answering with
//! one signed receipt for everything stored.

use interlink_core::{
    MsgId,
    limits::{LIVE_FRESHNESS_MS, MAX_DELIVER_BATCH},
    trust::Decision,
    wire::{
        DeliverResponse, DeliverResult, Envelope, EnvelopeKind, Receipt, ReceiptState, Refusal,
        RefusalCode, SessionAddr, Signed, VERSION,
    },
};
use libp2p::PeerId;
use serde_bytes::ByteBuf;
use tracing::{debug, warn};

use super::Actor;
use crate::{
    Event, Role,
    inbox::{Appended, InboxEntry},
};

impl Actor {
    /// Verifies, gates, stores (one fsync for the batch) and receipts inbound envelopes.
    pub(super) fn accept_batch(&mut self, from: PeerId, wires: &[ByteBuf]) -> DeliverResponse {
        let refused = |reason: Refusal| DeliverResult {
            refused: Some(reason),
        };
        if wires.len() > MAX_DELIVER_BATCH {
            let reason = Refusal::new(
                RefusalCode::TooLarge,
                format!("more than {MAX_DELIVER_BATCH} envelopes in one request"),
            );
            return DeliverResponse {
                v: VERSION,
                receipt: None,
                results: wires.iter().map(|_| refused(reason.clone())).collect(),
            };
        }
        let mut sender = None;
        let envelopes: Vec<Result<Signed<Envelope>, Refusal>> = wires
            .iter()
            .map(|b| {
                let env = Signed::<Envelope>::decode(b).map_err(|e| Refusal::from(&e))?;
                // One receipt answers the request, for one sender.
                let first = *sender.get_or_insert(env.body().sender);
                if env.body().sender != first {
                    return Err(Refusal::new(
                        RefusalCode::MixedSenders,
                        "a delivery request carries one sender's messages",
                    ));
                }
                Ok(env)
            })
            .collect();
        let admitted: Vec<&Signed<Envelope>> =
            envelopes.iter().filter_map(|e| e.as_ref().ok()).collect();
        let mut stored = self
            .store_envelopes(&admitted, LIVE_FRESHNESS_MS)
            .into_iter();
        let mut ids = Vec::new();
        let mut results: Vec<DeliverResult> = envelopes
            .iter()
            .map(|env| {
                let outcome = match env {
                    Err(reason) => Err(reason.clone()),
                    Ok(env) => stored
                        .next()
                        .unwrap_or_else(|| {
                            Err(Refusal::new(RefusalCode::StoreFailed, "not processed"))
                        })
                        .map(|()| env.body().msg_id),
                };
                match outcome {
                    Ok(id) => {
                        ids.push(id);
                        DeliverResult { refused: None }
                    }
                    Err(reason) => {
                        debug!(%from, %reason, "delivery refused");
                        refused(reason)
                    }
                }
            })
            .collect();
        let receipt = match (sender, ids.is_empty()) {
            (Some(sender), false) => match self.receipt_for(sender, ids) {
                Ok(r) => Some(r),
                Err(reason) => {
                    // Stored but not receipted: the sender retries; the inbox dedupes.
                    warn!(%reason, "cannot sign a receipt");
                    for r in &mut results {
                        if r.refused.is_none() {
                            *r = refused(store_failed());
                        }
                    }
                    None
                }
            },
            _ => None,
        };
        DeliverResponse {
            v: VERSION,
            receipt,
            results,
        }
    }

    /// This session's signed receipt for the stored messages `ids` from `sender`.
    fn receipt_for(
        &self,
        sender: interlink_core::IdentityKey,
        msg_ids: Vec<MsgId>,
    ) -> Result<ByteBuf, String> {
        let Role::Session(spec) = &self.role else {
            return Err("this node is not a session".into());
        };
        let receipt = Receipt {
            v: VERSION,
            recipient: spec.identity.public(),
            recipient_session: spec.session.clone(),
            sender,
            msg_ids,
            state: ReceiptState::Delivered,
            ts: crate::now_ms(),
        };
        Signed::sign(receipt, &spec.identity)
            .map(|r| ByteBuf::from(r.to_bytes()))
            .map_err(|e| e.to_string())
    }

    /// Puts verified envelopes through the trust gate (with the path's freshness
    /// window) into the inbox, with one fsync for all. For each, `Ok` means it is
    /// durably there (now or before) or, for a knock, held for the operator.
    pub(super) fn store_envelopes(
        &mut self,
        envs: &[&Signed<Envelope>],
        window_ms: u64,
    ) -> Vec<Result<(), Refusal>> {
        let not_a_session = || Refusal::new(RefusalCode::NotASession, "this node is not a session");
        let Role::Session(spec) = &self.role else {
            return envs.iter().map(|_| Err(not_a_session())).collect();
        };
        let me = SessionAddr {
            key: spec.identity.public(),
            session: spec.session.clone(),
        };
        let open_contexts = &mut self.open_contexts;
        let (Some(gate), Some(inbox), Some(sealing)) = (
            self.gate.as_mut(),
            self.inbox.as_mut(),
            self.sealing.as_ref(),
        ) else {
            return envs
                .iter()
                .map(|_| {
                    Err(Refusal::new(
                        RefusalCode::NotASession,
                        "this session takes no messages",
                    ))
                })
                .collect();
        };
        let now = crate::now_ms();
        let mut results: Vec<Result<(), Refusal>> = Vec::with_capacity(envs.len());
        // Entries to write, with the index of their result.
        let mut to_write: Vec<(usize, interlink_core::MsgId, InboxEntry)> = Vec::new();
        // A held knock is mirrored to a bounded file for the agent side (never the
        // inbox: a stranger's knocks must not grow it).
        let mut held_knock = false;
        for (i, env) in envs.iter().enumerate() {
            let body = env.body();
            // A retry of something already stored is answered again, not refused as a
            // replay — but only the sender's own: ids are visible in the DHT, and
            // anyone else reusing one must go through the gate (a stranger is refused
            // as a stranger, not receipted for a message it never sent).
            if body.recipient == me.key
                && body.recipient_session == me.session
                && inbox.holds(&body.sender, &body.msg_id)
            {
                results.push(Ok(()));
                continue;
            }
            match gate.decide(env, &me, window_ms, now) {
                Decision::Deliver => {}
                Decision::HoldKnock(knock) => {
                    let _ = self.events.send(Event::Knock {
                        from: knock.sender,
                        session: knock.sender_session,
                    });
                    held_knock = true;
                    results.push(Ok(()));
                    continue;
                }
                Decision::Drop(reason) => {
                    results.push(Err(reason.refusal()));
                    continue;
                }
            }
            // Another sender's message with the same id is a different message: the
            // inbox keys by (sender, id) and stores both, so a peer copying a queued id
            // cannot suppress the genuine one.
            let text = match body.kind {
                EnvelopeKind::Message => match body
                    .sealed_enc()
                    .ok_or(interlink_core::wire::OpenError::NoBody)
                    .and_then(|enc| Ok(open_contexts.for_enc(enc, sealing)?))
                    .and_then(|ctx| body.open_text_in(ctx))
                {
                    Ok(t) => Some(t),
                    Err(e) => {
                        results.push(Err(Refusal::new(RefusalCode::Unopenable, e.to_string())));
                        continue;
                    }
                },
                _ => None,
            };
            to_write.push((i, body.msg_id, inbox_entry(env, text)));
            results.push(Ok(()));
        }
        if held_knock {
            self.save_held_knocks();
        }
        if to_write.is_empty() {
            return results;
        }
        let Some(inbox) = self.inbox.as_mut() else {
            return results;
        };
        match inbox.append_many(to_write.iter().map(|(_, id, e)| (*id, e))) {
            Ok(outcomes) => {
                // Only now, with the lines on disk, do these count as received: a
                // failed write leaves the sender's retry admissible.
                if let Some(gate) = self.gate.as_mut() {
                    for (i, id, _) in &to_write {
                        gate.record_delivered(&envs[*i].body().sender, id, now);
                    }
                }
                for ((i, id, _), outcome) in to_write.iter().zip(outcomes) {
                    if outcome == Appended::New {
                        let _ = self.events.send(Event::Delivered {
                            msg_id: *id,
                            from: envs[*i].body().sender,
                            kind: envs[*i].body().kind,
                        });
                    }
                }
            }
            Err(e) => {
                warn!("inbox write failed: {e}");
                for (i, _, _) in &to_write {
                    results[*i] = Err(store_failed());
                }
            }
        }
        results
    }
}

/// The refusal when this session's own inbox write failed: not the recipient's final
/// word (the sender keeps the message and sends it again; a mailbox drain does not ack
/// it), and nothing was recorded.
fn store_failed() -> Refusal {
    Refusal::new(
        RefusalCode::StoreFailed,
        "the recipient could not store the message; send it again later",
    )
}

fn inbox_entry(env: &Signed<Envelope>, text: Option<String>) -> InboxEntry {
    let b = env.body();
    InboxEntry {
        msg_id: b.msg_id.to_string(),
        sender: b.sender.to_hex(),
        sender_fingerprint: b.sender.fingerprint().to_string(),
        sender_session: b.sender_session.to_string(),
        reply_to: env.reply_address().to_string(),
        kind: b.kind,
        task_id: b.task_id.clone(),
        status: b.status,
        in_reply_to: b.in_reply_to.map(|m| m.to_string()),
        sent_at: b.ts,
        received_at: crate::now_ms(),
        text,
        name: b.name.clone(),
    }
}
