//! Live delivery, the sender's side (the recipient's is `node::inbound`).
//!
//! Each recipient session has a small ordered queue with at most one request in flight,
//! so one sender's messages reach an inbox in send order; what waits behind it travels
//! in the next request together, answered by one signed receipt that the sender checks
//! lists each message. A message with no answer goes to store-and-forward
//! (`node::queueing`).

use std::collections::{HashMap, VecDeque};

use interlink_core::{
    MsgId,
    limits::{MAX_DELIVER_BATCH, MAX_DELIVER_REQUEST_BYTES},
    wire::{
        DeliverRequest, DeliverResponse, Envelope, EnvelopeKind, Receipt, ReceiptState,
        SessionAddr, Signed, VERSION,
    },
};
use libp2p::{PeerId, request_response};
use serde_bytes::ByteBuf;
use tokio::sync::oneshot;
use tracing::debug;

use super::Actor;
use crate::{OutgoingMessage, Role, SendError, SendOutcome, Sent};

/// Most messages waiting for one recipient session behind the one in flight.
pub(crate) const OUTBOX_PER_RECIPIENT: usize = 256;

/// Most recipient sessions with queued messages at once.
pub(crate) const OUTBOX_RECIPIENTS: usize = 1024;

/// A message waiting to be sent.
#[derive(Debug)]
pub(crate) struct Queued {
    pub(super) envelope: Signed<Envelope>,
    /// Its wire encoding, made once when it was signed.
    pub(super) wire: Vec<u8>,
    /// The recipient's node; `None` for a session not on the roster (mailbox only).
    pub(super) peer: Option<PeerId>,
    /// The caller waiting for the outcome; `None` for a live retry of a message
    /// already queued in the mailbox (its caller was answered "queued").
    pub(super) reply: Option<oneshot::Sender<Result<SendOutcome, SendError>>>,
}

/// A live delivery request on its way.
#[derive(Debug)]
pub(crate) struct InFlight {
    to: SessionAddr,
    batch: Vec<Queued>,
    /// A request to a peer that is not connected waits for the dial (up to the
    /// transport's 10 s), which the live timeout must bound.
    sent_at: std::time::Instant,
}

/// Outbound state: per-recipient queues and the requests in flight.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    queues: HashMap<SessionAddr, VecDeque<Queued>>,
    in_flight: HashMap<request_response::OutboundRequestId, InFlight>,
}

impl Actor {
    /// Builds, seals and signs `msg`, then queues it for its recipient.
    pub(super) fn send_message(
        &mut self,
        msg: OutgoingMessage,
        reply: oneshot::Sender<Result<SendOutcome, SendError>>,
    ) {
        let result = self.build_envelope(&msg);
        let (envelope, peer) = match result {
            Ok(v) => v,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let to = msg.to;
        if msg.kind == EnvelopeKind::Knock {
            // Let the acceptance in when it comes (also after a restart).
            self.note_knock_sent(to.key);
        }
        let busy =
            self.outbox.queues.len() >= OUTBOX_RECIPIENTS && !self.outbox.queues.contains_key(&to);
        let waiting = self.outbox.queues.get(&to).map_or(0, VecDeque::len);
        if busy || waiting >= OUTBOX_PER_RECIPIENT {
            let _ = reply.send(Err(SendError::Busy));
            return;
        }
        let queued = Queued {
            wire: envelope.to_bytes(),
            envelope,
            peer,
            reply: Some(reply),
        };
        let Some(peer) = peer else {
            self.queue_in_mailbox(queued);
            return;
        };
        // Messages queued earlier for a recipient that answers again go first, so the
        // new one does not overtake them; if one of them can only travel through the
        // mailbox (no known node, too old for the live path), so does the new one.
        if self.has_unconfirmed(&to) {
            if !self.queueing.all_live_eligible(&to, crate::now_ms()) {
                self.queue_in_mailbox(queued);
                return;
            }
            if !self.mailboxes.is_unreachable(&peer) {
                self.retry_unconfirmed(&to);
            }
        }
        self.outbox_queue(&to).push_back(queued);
        self.kick(&to);
    }

    /// The queue of messages waiting for `to`.
    pub(super) fn outbox_queue(&mut self, to: &SessionAddr) -> &mut VecDeque<Queued> {
        self.outbox.queues.entry(to.clone()).or_default()
    }

    /// Sends what waits for `to` unless a request to it is in flight.
    pub(super) fn kick(&mut self, to: &SessionAddr) {
        if !self.outbox.in_flight.values().any(|f| &f.to == to) {
            self.send_next(to);
        }
    }

    /// Whether no message waits for or is on the live path.
    pub(super) fn outbox_idle(&self) -> bool {
        self.outbox.queues.is_empty() && self.outbox.in_flight.is_empty()
    }

    fn next_envelope_ts(&mut self) -> u64 {
        self.last_envelope_ts = crate::now_ms().max(self.last_envelope_ts + 1);
        self.last_envelope_ts
    }

    fn build_envelope(
        &mut self,
        msg: &OutgoingMessage,
    ) -> Result<(Signed<Envelope>, Option<PeerId>), SendError> {
        let ts = self.next_envelope_ts();
        let Role::Session(spec) = &self.role else {
            return Err(SendError::NotASession);
        };
        // A session on the roster is tried live; one that left it (closed, away past the
        // roster's retention, or never seen here) can still be queued for, sealed with
        // its identity's key from another announcement or the key pinned for it.
        let (sealing_key, peer) = match self.roster.get(&msg.to) {
            Some(ann) => {
                let peer = ann.body().peer_id();
                if let Some(peer) = peer {
                    for addr in &ann.body().addrs {
                        if let Ok(a) = addr.parse() {
                            self.swarm.add_peer_address(peer, a);
                        }
                    }
                }
                (ann.body().sealing.key, peer)
            }
            None => (
                self.roster
                    .sealing_key_of(&msg.to.key)
                    .or_else(|| self.pins.get(&msg.to.key))
                    .ok_or_else(|| SendError::NotOnRoster(msg.to.clone()))?,
                None,
            ),
        };
        let mut rng = rand_core::UnwrapErr(getrandom::SysRng);
        let mut env = Envelope {
            v: VERSION,
            sender: spec.identity.public(),
            sender_session: spec.session.clone(),
            recipient: msg.to.key,
            recipient_session: msg.to.session.clone(),
            msg_id: MsgId::random(&mut rng),
            ts,
            kind: msg.kind,
            task_id: msg.task_id.clone(),
            status: msg.status,
            in_reply_to: msg.in_reply_to,
            name: msg.name.clone(),
            sealed: None,
        };
        if let Some(text) = &msg.text {
            let ctx = self
                .seal_contexts
                .for_key(&sealing_key, &mut rng)
                .map_err(|e| SendError::Invalid(e.to_string()))?;
            env.seal_text_in(text, ctx, &mut rng)
                .map_err(|e| SendError::Invalid(e.to_string()))?;
        }
        let signed =
            Signed::sign(env, &spec.identity).map_err(|e| SendError::Invalid(e.to_string()))?;
        Ok((signed, peer))
    }

    fn send_next(&mut self, to: &SessionAddr) {
        // Messages for a recipient that just failed to answer (asleep or gone until it
        // shows life again) are queued at once instead of each paying a timeout.
        let mut batch: Vec<Queued> = Vec::new();
        let mut bytes = 0usize;
        while let Some(queued) = self.outbox.queues.get_mut(to).and_then(VecDeque::pop_front) {
            if queued
                .peer
                .is_none_or(|p| self.mailboxes.is_unreachable(&p))
            {
                self.queue_in_mailbox(queued);
                continue;
            }
            // Pack what is waiting into one request (one fsync at the recipient), in
            // order, within the batch bounds.
            let len = queued.wire.len();
            if !batch.is_empty()
                && (batch.len() >= MAX_DELIVER_BATCH || bytes + len > MAX_DELIVER_REQUEST_BYTES)
            {
                if let Some(q) = self.outbox.queues.get_mut(to) {
                    q.push_front(queued);
                }
                break;
            }
            bytes += len;
            batch.push(queued);
        }
        if self.outbox.queues.get(to).is_some_and(VecDeque::is_empty) {
            self.outbox.queues.remove(to);
        }
        if !batch.is_empty() {
            self.send_live(to, batch);
        }
    }

    fn send_live(&mut self, to: &SessionAddr, batch: Vec<Queued>) {
        // `send_next` only batches messages with a peer.
        let Some(peer) = batch[0].peer else {
            for q in batch {
                self.queue_in_mailbox(q);
            }
            return;
        };
        let request = DeliverRequest {
            v: VERSION,
            envelopes: batch
                .iter()
                .map(|q| ByteBuf::from(q.wire.clone()))
                .collect(),
        };
        let id = self
            .swarm
            .behaviour_mut()
            .deliver
            .send_request(&peer, request);
        self.outbox.in_flight.insert(
            id,
            InFlight {
                to: to.clone(),
                batch,
                sent_at: std::time::Instant::now(),
            },
        );
    }

    /// Settles an in-flight request: each message gets its own outcome.
    fn finish(
        &mut self,
        id: request_response::OutboundRequestId,
        result: Result<Vec<Result<Sent, SendError>>, SendError>,
    ) {
        let Some(InFlight { to, batch, .. }) = self.outbox.in_flight.remove(&id) else {
            return;
        };
        let mut results = match result {
            Ok(r) => r.into_iter().map(Some).collect::<Vec<_>>(),
            Err(e) => {
                let reason = e.to_string();
                batch
                    .iter()
                    .map(|_| Some(Err(SendError::Unreachable(reason.clone()))))
                    .collect()
            }
        };
        for (i, queued) in batch.into_iter().enumerate() {
            let result = results
                .get_mut(i)
                .and_then(Option::take)
                .unwrap_or_else(|| Err(SendError::BadReceipt("no result for this message".into())));
            let outcome = match result {
                Ok(sent) => Ok(sent),
                // No answer: store and forward. Refusals and bad receipts are final.
                Err(SendError::Unreachable(reason)) => {
                    debug!(%to, %reason, "live delivery failed; queueing in the mailbox");
                    if let Some(peer) = queued.peer {
                        self.mailboxes.mark_unreachable(peer);
                    }
                    self.queue_in_mailbox(queued);
                    continue;
                }
                // The recipient could not write its inbox: not its final word.
                Err(SendError::Refused(refusal)) if refusal.is_retryable() => {
                    self.queue_in_mailbox(queued);
                    continue;
                }
                Err(e) => Err(e),
            };
            match (queued.reply, outcome) {
                (Some(reply), outcome) => {
                    let _ = reply.send(outcome.map(|sent| SendOutcome::Delivered(Box::new(sent))));
                }
                (None, Ok(sent)) => self.on_retry_receipted(&to, sent.msg_id),
                (None, Err(e)) => self.on_retry_refused(&to, queued.envelope, queued.peer, &e),
            }
        }
        self.send_next(&to);
    }

    /// Gives up on live attempts older than the live timeout (still dialling): they are
    /// queued in the mailbox; a late answer is ignored (the inbox dedupes a late copy).
    pub(super) fn expire_live_attempts(&mut self, now: std::time::Instant) {
        let expired: Vec<_> = self
            .outbox
            .in_flight
            .iter()
            .filter(|(_, f)| {
                now.duration_since(f.sent_at) >= crate::behaviour::LIVE_ATTEMPT_TIMEOUT
            })
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            self.finish(id, Err(SendError::Unreachable("no answer in time".into())));
        }
    }

    pub(super) fn on_deliver(
        &mut self,
        event: request_response::Event<DeliverRequest, DeliverResponse>,
    ) {
        match event {
            request_response::Event::Message {
                peer,
                message:
                    request_response::Message::Request {
                        request, channel, ..
                    },
                ..
            } => {
                let response = self.accept_batch(peer, &request.envelopes);
                if self
                    .swarm
                    .behaviour_mut()
                    .deliver
                    .send_response(channel, response)
                    .is_err()
                {
                    debug!(%peer, "delivery response not sent: connection closed");
                }
            }
            request_response::Event::Message {
                message:
                    request_response::Message::Response {
                        request_id,
                        response,
                    },
                ..
            } => {
                let result = match self.outbox.in_flight.get(&request_id) {
                    Some(f) => Ok(check_response(&f.to, &f.batch, response)),
                    None => return,
                };
                self.finish(request_id, result);
            }
            request_response::Event::OutboundFailure {
                request_id, error, ..
            } => {
                self.finish(request_id, Err(SendError::Unreachable(error.to_string())));
            }
            request_response::Event::InboundFailure { peer, error, .. } => {
                debug!(%peer, %error, "inbound delivery failed");
            }
            request_response::Event::ResponseSent { .. } => {}
        }
    }
}

/// Checks a delivery response against the batch it answers: one result per message,
/// and every message not refused listed in the one verified receipt.
fn check_response(
    to: &SessionAddr,
    batch: &[Queued],
    response: DeliverResponse,
) -> Vec<Result<Sent, SendError>> {
    if response.results.len() != batch.len() {
        let reason = format!(
            "{} results for {} messages",
            response.results.len(),
            batch.len()
        );
        return batch
            .iter()
            .map(|_| Err(SendError::BadReceipt(reason.clone())))
            .collect();
    }
    let receipt = response.receipt.map(|bytes| {
        let receipt =
            Signed::<Receipt>::decode(&bytes).map_err(|e| SendError::BadReceipt(e.to_string()))?;
        let r = receipt.body();
        let sender = batch.first().map(|q| q.envelope.body().sender);
        if r.recipient != to.key
            || r.recipient_session != to.session
            || Some(r.sender) != sender
            || r.state != ReceiptState::Delivered
        {
            return Err(SendError::BadReceipt(
                "the receipt is not from this recipient session for this sender".into(),
            ));
        }
        Ok(receipt)
    });
    batch
        .iter()
        .zip(response.results)
        .map(|(q, result)| {
            if let Some(reason) = result.refused {
                return Err(SendError::Refused(reason));
            }
            let receipt = match &receipt {
                Some(Ok(r)) => r,
                Some(Err(e)) => return Err(SendError::BadReceipt(e.to_string())),
                None => return Err(SendError::BadReceipt("no receipt".into())),
            };
            let msg_id = q.envelope.body().msg_id;
            if !receipt.body().msg_ids.contains(&msg_id) {
                return Err(SendError::BadReceipt(
                    "the receipt does not list this message".into(),
                ));
            }
            Ok(Sent {
                msg_id,
                receipt: receipt.clone(),
            })
        })
        .collect()
}
