//! Live delivery: sending envelopes to a session's node and receipting inbound ones.
//!
//! Outbound, each recipient session has a small ordered queue with at most one request
//! in flight, so one sender's messages reach an inbox in send order. Inbound, an
//! envelope is verified, passed through the trust gate, written durably to the inbox,
//! and only then answered with a signed receipt. A message already in the inbox (a
//! retry after a lost receipt) is receipted again without a second copy.

use std::collections::{HashMap, VecDeque};

use interlink_core::{
    MsgId,
    limits::LIVE_FRESHNESS_MS,
    trust::Decision,
    wire::{
        DeliverRequest, DeliverResponse, Envelope, EnvelopeKind, Receipt, ReceiptState,
        SessionAddr, Signed, VERSION,
    },
};
use libp2p::{PeerId, request_response};
use serde_bytes::ByteBuf;
use tokio::sync::oneshot;
use tracing::{debug, warn};

use super::Actor;
use crate::{
    Event, OutgoingMessage, Role, SendError, SendOutcome, Sent,
    inbox::{Appended, InboxEntry},
};

/// Most messages waiting for one recipient session behind the one in flight.
pub(crate) const OUTBOX_PER_RECIPIENT: usize = 256;
/// Most recipient sessions with queued messages at once.
pub(crate) const OUTBOX_RECIPIENTS: usize = 1024;

/// A message waiting to be sent.
#[derive(Debug)]
pub(crate) struct Queued {
    envelope: Signed<Envelope>,
    peer: PeerId,
    reply: oneshot::Sender<Result<SendOutcome, SendError>>,
}

/// Outbound state: per-recipient queues and the requests in flight.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    queues: HashMap<SessionAddr, VecDeque<Queued>>,
    in_flight: HashMap<request_response::OutboundRequestId, (SessionAddr, Queued)>,
    /// When each in-flight request was sent: a request to a peer that is not connected
    /// waits for the dial (up to the transport's 10 s), which the live timeout must bound.
    sent_at: HashMap<request_response::OutboundRequestId, std::time::Instant>,
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
        let busy =
            self.outbox.queues.len() >= OUTBOX_RECIPIENTS && !self.outbox.queues.contains_key(&to);
        let queue = self.outbox.queues.entry(to.clone()).or_default();
        if busy || queue.len() >= OUTBOX_PER_RECIPIENT {
            let _ = reply.send(Err(SendError::Busy));
            return;
        }
        queue.push_back(Queued {
            envelope,
            peer,
            reply,
        });
        if !self.outbox.in_flight.values().any(|(addr, _)| addr == &to) {
            self.send_next(&to);
        }
    }

    fn next_envelope_ts(&mut self) -> u64 {
        self.last_envelope_ts = crate::now_ms().max(self.last_envelope_ts + 1);
        self.last_envelope_ts
    }

    fn build_envelope(
        &mut self,
        msg: &OutgoingMessage,
    ) -> Result<(Signed<Envelope>, PeerId), SendError> {
        let ts = self.next_envelope_ts();
        let Role::Session(spec) = &self.role else {
            return Err(SendError::NotASession);
        };
        let ann = self
            .roster
            .get(&msg.to)
            .ok_or_else(|| SendError::NotOnRoster(msg.to.clone()))?;
        let peer = ann
            .body()
            .peer_id()
            .ok_or_else(|| SendError::NotOnRoster(msg.to.clone()))?;
        for addr in &ann.body().addrs {
            if let Ok(a) = addr.parse() {
                self.swarm.add_peer_address(peer, a);
            }
        }
        let sealing_key = ann.body().sealing.key;
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
            env.seal_text(text, &sealing_key, &mut rng)
                .map_err(|e| SendError::Invalid(e.to_string()))?;
        }
        let signed =
            Signed::sign(env, &spec.identity).map_err(|e| SendError::Invalid(e.to_string()))?;
        Ok((signed, peer))
    }

    fn send_next(&mut self, to: &SessionAddr) {
        loop {
            let Some(queued) = self.outbox.queues.get_mut(to).and_then(VecDeque::pop_front) else {
                self.outbox.queues.remove(to);
                return;
            };
            // A recipient that just failed to answer is asleep or gone until it shows
            // life again: queue at once instead of paying a timeout per message.
            if self.mailboxes.is_unreachable(&queued.peer) {
                let outcome = self.queue_in_mailbox(&queued.envelope);
                let _ = queued.reply.send(outcome);
                continue;
            }
            self.send_live(to, queued);
            return;
        }
    }

    fn send_live(&mut self, to: &SessionAddr, queued: Queued) {
        let request = DeliverRequest {
            v: VERSION,
            envelope: ByteBuf::from(queued.envelope.to_bytes()),
        };
        let id = self
            .swarm
            .behaviour_mut()
            .deliver
            .send_request(&queued.peer, request);
        self.outbox.in_flight.insert(id, (to.clone(), queued));
        self.outbox.sent_at.insert(id, std::time::Instant::now());
    }

    fn finish(&mut self, id: request_response::OutboundRequestId, result: Result<Sent, SendError>) {
        self.outbox.sent_at.remove(&id);
        if let Some((to, queued)) = self.outbox.in_flight.remove(&id) {
            let outcome = match result {
                Ok(sent) => Ok(SendOutcome::Delivered(Box::new(sent))),
                // No answer: store and forward. Refusals and bad receipts are final.
                Err(SendError::Unreachable(reason)) => {
                    debug!(%to, %reason, "live delivery failed; queueing in the mailbox");
                    self.mailboxes.mark_unreachable(queued.peer);
                    self.queue_in_mailbox(&queued.envelope)
                }
                Err(e) => Err(e),
            };
            let _ = queued.reply.send(outcome);
            self.send_next(&to);
        }
    }

    /// Gives up on live attempts older than the live timeout (still dialling): they are
    /// queued in the mailbox; a late answer is ignored (the inbox dedupes a late copy).
    pub(super) fn expire_live_attempts(&mut self, now: std::time::Instant) {
        let expired: Vec<_> = self
            .outbox
            .sent_at
            .iter()
            .filter(|(_, t)| now.duration_since(**t) >= crate::behaviour::LIVE_ATTEMPT_TIMEOUT)
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
                let response = self.accept_envelope(peer, &request.envelope);
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
                    Some((to, queued)) => check_response(to, &queued.envelope, response),
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

    /// Verifies, gates, stores and receipts one inbound envelope.
    fn accept_envelope(&mut self, from: PeerId, bytes: &[u8]) -> DeliverResponse {
        let refuse = |reason: String| DeliverResponse {
            v: VERSION,
            receipt: None,
            refused: Some(reason),
        };
        let env = match Signed::<Envelope>::decode(bytes) {
            Ok(env) => env,
            Err(e) => return refuse(e.to_string()),
        };
        if let Err(reason) = self.store_envelope(&env, LIVE_FRESHNESS_MS) {
            debug!(%from, %reason, "delivery refused");
            return refuse(reason);
        }
        let Role::Session(spec) = &self.role else {
            return refuse("this node is not a session".into());
        };
        let body = env.body();
        let receipt = Receipt {
            v: VERSION,
            recipient: spec.identity.public(),
            recipient_session: spec.session.clone(),
            sender: body.sender,
            msg_id: body.msg_id,
            state: ReceiptState::Delivered,
            ts: crate::now_ms(),
        };
        match Signed::sign(receipt, &spec.identity) {
            Ok(r) => DeliverResponse {
                v: VERSION,
                receipt: Some(ByteBuf::from(r.to_bytes())),
                refused: None,
            },
            Err(e) => refuse(e.to_string()),
        }
    }

    /// Puts a verified envelope through the trust gate (with the path's freshness
    /// window) into the inbox. `Ok` means it is durably there (now or before) or, for a
    /// knock, held for the operator.
    pub(super) fn store_envelope(
        &mut self,
        env: &Signed<Envelope>,
        window_ms: u64,
    ) -> Result<(), String> {
        let Role::Session(spec) = &self.role else {
            return Err("this node is not a session".into());
        };
        let me = SessionAddr {
            key: spec.identity.public(),
            session: spec.session.clone(),
        };
        let (Some(gate), Some(inbox), Some(sealing)) = (
            self.gate.as_mut(),
            self.inbox.as_mut(),
            self.sealing.as_ref(),
        ) else {
            return Err("this session takes no messages".into());
        };
        let body = env.body();
        // A retry of something already stored is answered again, not refused as a replay.
        if body.recipient == me.key
            && body.recipient_session == me.session
            && inbox.contains(&body.msg_id)
        {
            return Ok(());
        }
        match gate.decide(env, &me, window_ms, crate::now_ms()) {
            Decision::Deliver => {}
            Decision::HoldKnock(knock) => {
                let _ = self.events.send(Event::Knock {
                    from: knock.sender,
                    session: knock.sender_session,
                });
                return Ok(());
            }
            Decision::Drop(reason) => return Err(reason.to_string()),
        }
        let text = match body.kind {
            EnvelopeKind::Message => Some(body.open_text(sealing).map_err(|e| e.to_string())?),
            _ => None,
        };
        match inbox.append(body.msg_id, &inbox_entry(env, text)) {
            Ok(Appended::New) => {
                let _ = self.events.send(Event::Delivered {
                    msg_id: body.msg_id,
                    from: body.sender,
                });
                Ok(())
            }
            Ok(Appended::Duplicate) => Ok(()),
            Err(e) => {
                warn!("inbox write failed: {e}");
                Err("the recipient could not store the message".into())
            }
        }
    }
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
    }
}

/// Checks a delivery response against the envelope it answers.
fn check_response(
    to: &SessionAddr,
    sent: &Signed<Envelope>,
    response: DeliverResponse,
) -> Result<Sent, SendError> {
    if let Some(reason) = response.refused {
        return Err(SendError::Refused(reason));
    }
    let bytes = response
        .receipt
        .ok_or_else(|| SendError::BadReceipt("no receipt".into()))?;
    let receipt =
        Signed::<Receipt>::decode(&bytes).map_err(|e| SendError::BadReceipt(e.to_string()))?;
    let r = receipt.body();
    let s = sent.body();
    if r.recipient != to.key
        || r.recipient_session != to.session
        || r.msg_id != s.msg_id
        || r.sender != s.sender
        || r.state != ReceiptState::Delivered
    {
        return Err(SendError::BadReceipt(
            "the receipt is not for this message".into(),
        ));
    }
    Ok(Sent {
        msg_id: s.msg_id,
        receipt,
    })
}
