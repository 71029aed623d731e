//! The delivery and receipt protocols on the wire: decoding and verifying what peers
//! send before the engine sees it, and encoding what the engine answers.
//!
//! The engine takes only verified envelopes of one sender. Everything a stranger can
//! get wrong on the wire — a version this node does not speak, too many envelopes, an
//! envelope that does not decode or verify, another sender's envelope in the request
//! — is refused here, per envelope, with its typed code; the engine's per-envelope
//! answers are spliced back in order.

use interlink_core::{
    collected,
    limits::MAX_DELIVER_BATCH,
    wire::{
        DeliverRequest, DeliverResponse, DeliverResult, Envelope, EnvelopeKind, Receipt,
        ReceiptRequest, ReceiptResponse, Refusal, RefusalCode, Signed, Unverified, VERSION,
    },
};
use interlink_delivery::{
    InboundId, Input, PeerRef, ReceiptId, Refusal as EngineRefusal, ReqId, Response, SendFailure,
};
use libp2p::{
    PeerId,
    request_response::{self, OutboundFailure},
};
use serde_bytes::ByteBuf;
use tracing::debug;

use super::{
    Actor,
    delivery::{Answer, Inbound},
    exchange::Exchange,
    live_stream::{LiveEvent, Lost, Streams},
};
use crate::Role;

/// How late a request of knocks refused by their knock budgets is answered.
pub(super) const KNOCK_TARPIT_DELAY: std::time::Duration = std::time::Duration::from_secs(2);
/// Most late knock refusals waiting at once (each holds a response channel and its
/// refusals, a few hundred bytes).
pub(super) const MAX_KNOCK_TARPIT: usize = 1024;

impl Actor {
    pub(super) fn on_deliver(
        &mut self,
        event: request_response::Event<DeliverRequest, DeliverResponse>,
    ) {
        let Some(exchange) = Exchange::of(event, "deliver") else {
            return;
        };
        let (peer, id, result) = match exchange {
            Exchange::Asked {
                peer,
                request,
                channel,
                ..
            } => return self.on_deliver_request(peer, request, Answer::Request(channel)),
            Exchange::Ended { peer, id, result } => (peer, id, result),
        };
        let req = self.parts.delivery_mut().and_then(|d| d.live_answered(&id));
        let result = result.map_err(|error| self.live_failure_from(peer, &error));
        self.on_live_answer(peer, req, result);
    }

    /// What a live request's failure tells the engine, whichever way it went.
    fn live_failure_from(&self, peer: PeerId, error: &OutboundFailure) -> SendFailure {
        debug!(%peer, %error, connected = self.swarm.is_connected(&peer), "live request failed");
        match error {
            // Lost with its connection while the peer is still connected by another
            // (the peer closed its TCP one for QUIC under this request, say): not a
            // sign the peer is gone; the engine sends it again on what is left.
            OutboundFailure::ConnectionClosed if self.swarm.is_connected(&peer) => {
                SendFailure::ConnectionLost
            }
            error => Actor::live_failure(error),
        }
    }

    /// The answer to a live request, from either way it went (`req`: the engine's id,
    /// none for a request the engine did not make).
    fn on_live_answer(
        &mut self,
        peer: PeerId,
        req: Option<ReqId>,
        result: Result<DeliverResponse, SendFailure>,
    ) {
        if let Err(failure) = &result {
            debug!(%peer, ?failure, "live delivery failed");
        }
        if matches!(result, Err(SendFailure::ConnectionLost)) {
            // The engine sends it again at once: not on the connection that is going.
            self.hold_until_a_close(peer, std::time::Instant::now());
        }
        // An undecodable or forged receipt proves nothing: without it the engine
        // treats every "held" as unproven and tries again.
        let result = result.map(|response| {
            let receipt = response
                .receipt
                .and_then(|b| Signed::<Receipt>::decode(&b).ok());
            (receipt, response.results)
        });
        // Also for requests the engine did not make (a pass offer).
        if let Ok((Some(r), _)) = &result {
            self.learn_receipt_pass(r);
        }
        let Some(req) = req else {
            return;
        };
        debug!(
            req = req.0,
            result = ?result.as_ref().map(|(_, results)| results.len()),
            "live answer"
        );
        // Before the engine sends what waited behind this answer: TCP may be retired now.
        self.on_upgrade_answered(peer);
        let result = result.map(|(receipt, results)| Response {
            receipt,
            results: results
                .iter()
                .map(|r| r.refused.as_ref().map(|x| EngineRefusal::from_code(x.code)))
                .collect(),
        });
        self.drive(Input::DeliverResponse { req, result });
    }

    /// Starts the kept live-delivery streams of a session (unless the config turns
    /// them off): inbound ones are served when it has an inbox.
    pub(super) fn start_live_streams(&mut self) {
        if !self.config.live_streams {
            return;
        }
        let Ok(protocol) =
            libp2p::StreamProtocol::try_from_owned(self.config.network.deliver_stream_protocol())
        else {
            return;
        };
        let control = self.swarm.behaviour().streams.new_control();
        if let Some(d) = self.parts.delivery_mut() {
            let accept = d.has_store();
            d.keep_streams(Streams::new(control, protocol, accept));
        }
    }

    /// What a kept stream's task reports.
    pub(super) fn on_live_stream(&mut self, event: LiveEvent) {
        match event {
            LiveEvent::Request {
                peer,
                request,
                answer,
            } => self.on_deliver_request(peer, request, Answer::Stream(answer)),
            LiveEvent::Answered { peer, id, result } => {
                let req = self
                    .parts
                    .delivery_mut()
                    .and_then(|d| d.streamed_answered(id))
                    .map(|(_, req)| req);
                let result = result.map_err(|lost| {
                    self.live_failure_from(
                        peer,
                        &match lost {
                            Lost::Timeout => OutboundFailure::Timeout,
                            Lost::Stream => OutboundFailure::ConnectionClosed,
                        },
                    )
                });
                self.on_live_answer(peer, req, result);
            }
            LiveEvent::Unsent {
                peer,
                requests,
                declined,
            } => {
                if declined
                    && let Some(streams) = self.parts.delivery_mut().and_then(|d| d.streams())
                {
                    streams.note_declined(peer);
                }
                for (id, request) in requests {
                    let req = self
                        .parts
                        .delivery_mut()
                        .and_then(|d| d.streamed_answered(id));
                    if let Some((_, req)) = req {
                        self.send_live_as_request(peer, req, request);
                    }
                }
            }
        }
    }

    fn on_deliver_request(&mut self, peer: PeerId, request: DeliverRequest, channel: Answer) {
        let n = request.envelopes.len();
        if n == 0 {
            // A request carries 1 to 64 envelopes (PROTOCOL §8.3); one with none has no
            // result to answer with, so its stream is closed unanswered, like a request
            // that does not decode.
            debug!(%peer, "delivery request without envelopes: closed unanswered");
            drop(channel);
            return;
        }
        let all = |code: RefusalCode, detail: String| vec![Some(Refusal::new(code, detail)); n];
        // Charged before anything is decoded: verifying is what the budget protects.
        let bytes: usize = request.envelopes.iter().map(|e| e.len()).sum();
        let within =
            self.mailbox
                .budgets
                .spend(peer, super::budgets::Kind::Deliver, bytes, self.now_ms());
        let pre = if !within {
            all(
                RefusalCode::OverBudget,
                "this peer sent more than its budget allows; send it again later".into(),
            )
        } else if !self
            .parts
            .delivery()
            .is_some_and(super::delivery::Delivery::has_store)
        {
            all(
                RefusalCode::NotASession,
                "this node takes no messages".into(),
            )
        } else if request.v != VERSION {
            all(
                RefusalCode::UnsupportedVersion,
                format!(
                    "delivery protocol version {}; this node speaks {VERSION}",
                    request.v
                ),
            )
        } else if n > MAX_DELIVER_BATCH {
            all(
                RefusalCode::TooLarge,
                format!("more than {MAX_DELIVER_BATCH} envelopes in one request"),
            )
        } else {
            Vec::new()
        };
        if !pre.is_empty() {
            self.send_deliver_response(channel, pre, Vec::new(), None);
            return;
        }
        // One receipt answers the request, for one sender.
        let mut sender = None;
        let mut pre = Vec::with_capacity(n);
        let mut envelopes: Vec<Signed<Envelope>> = Vec::with_capacity(n);
        let network = self.source_network(&peer);
        let me = match &self.role {
            Role::Session(spec) => Some(spec.identity.public()),
            _ => None,
        };
        let now = self.now_ms();
        // Envelopes refused by a knock budget: a request of nothing else is answered late.
        let mut knocks_over = 0usize;
        for bytes in &request.envelopes {
            // Decoded (CBOR only) before it is verified: a stranger's knock is charged
            // its knock budgets first, and one past them is refused unverified.
            let checked = Unverified::<Envelope>::decode(bytes).map(|env| {
                let claimed = env.claimed();
                let charged = match (claimed.kind, &me, self.parts.delivery_mut()) {
                    (EnvelopeKind::Knock, Some(me), Some(d)) => {
                        d.charge_knock(me, &claimed.sender, peer, network, now)
                    }
                    _ => Ok(()),
                };
                charged.map(|()| env.verify())
            });
            let checked = match checked {
                Ok(Ok(verified)) => verified,
                Ok(Err(over)) => {
                    debug!(%peer, ?over, "a stranger's knock past its budget: refused unverified");
                    pre.push(Some(Refusal::new(RefusalCode::OverBudget, over.detail())));
                    knocks_over += 1;
                    continue;
                }
                Err(e) => Err(e),
            };
            match checked {
                Err(e) => pre.push(Some(Refusal::from(&e))),
                Ok(env) if *sender.get_or_insert(env.body().sender) != env.body().sender => {
                    pre.push(Some(Refusal::new(
                        RefusalCode::MixedSenders,
                        "a delivery request carries one sender's messages",
                    )));
                }
                Ok(env) => {
                    pre.push(None);
                    envelopes.push(env);
                }
            }
        }
        if knocks_over == n {
            self.answer_knocks_late(channel, pre);
            return;
        }
        let from = self.parts.delivery_mut().and_then(|d| d.peer_ref(peer));
        let (Some(from), false) = (from, envelopes.is_empty()) else {
            let pre = pre
                .into_iter()
                .map(|p| {
                    p.or_else(|| Some(Refusal::new(RefusalCode::OverBudget, "too many peers")))
                })
                .collect();
            self.send_deliver_response(channel, pre, Vec::new(), None);
            return;
        };
        self.learn_reply_passes(&envelopes);
        let Some(d) = self.parts.delivery_mut() else {
            return;
        };
        let req = d.track_inbound(Inbound { channel, pre });
        self.drive(Input::DeliverRequest {
            from,
            req,
            envelopes,
        });
    }

    /// Answers a request of knocks all refused by their knock budgets only after
    /// [`KNOCK_TARPIT_DELAY`] (at most [`MAX_KNOCK_TARPIT`] waiting; past it at once).
    /// A refusal is cheap, but answered at once it lets the knocker send the next at
    /// once: a few swarms kept this node's one thread answering 10,000 knocks a second,
    /// and its peers' messages waited behind them. Answered late, each request a
    /// knocker keeps in flight costs it the delay, and a connection has at most
    /// [`crate::behaviour::DELIVER_STREAMS_PER_CONNECTION`] in flight.
    fn answer_knocks_late(&mut self, channel: Answer, pre: Vec<Option<Refusal>>) {
        let Some(d) = self.parts.delivery_mut() else {
            return;
        };
        if let Err((channel, pre)) = d.answer_knocks_late((channel, pre), std::time::Instant::now())
        {
            self.send_deliver_response(channel, pre, Vec::new(), None);
        }
    }

    /// Sends the late knock refusals that are due (on the housekeeping tick, so 2–3 s
    /// after the request).
    pub(super) fn flush_knock_tarpit(&mut self, now: std::time::Instant) {
        while let Some((channel, pre)) = self.parts.delivery_mut().and_then(|d| d.knocks_due(now)) {
            self.send_deliver_response(channel, pre, Vec::new(), None);
        }
    }

    /// The engine's answer to an inbound delivery request.
    pub(super) fn respond_live(&mut self, req: InboundId, response: Response) {
        let Some(Inbound { channel, pre }) =
            self.parts.delivery_mut().and_then(|d| d.take_inbound(&req))
        else {
            return;
        };
        let receipt = response.receipt.map(|r| ByteBuf::from(r.to_bytes()));
        self.send_deliver_response(channel, pre, response.results, receipt);
    }

    fn send_deliver_response(
        &mut self,
        channel: Answer,
        pre: Vec<Option<Refusal>>,
        engine: Vec<Option<EngineRefusal>>,
        receipt: Option<ByteBuf>,
    ) {
        let mut engine = engine.into_iter();
        let results = pre
            .into_iter()
            .map(|p| DeliverResult {
                refused: match p {
                    Some(r) => Some(r),
                    None => match engine.next() {
                        Some(None) => None,
                        Some(Some(r)) => Some(r.to_wire()),
                        None => Some(EngineRefusal::StoreFailed.to_wire()),
                    },
                },
            })
            .collect();
        let response = DeliverResponse {
            v: VERSION,
            receipt,
            results,
        };
        let sent = match channel {
            Answer::Request(channel) => self
                .swarm
                .behaviour_mut()
                .deliver
                .send_response(channel, response)
                .is_ok(),
            Answer::Stream(answer) => answer.send(response).is_ok(),
        };
        if !sent {
            debug!("delivery response not sent: its stream is gone");
        }
    }

    /// Sends one live delivery request the engine asked for.
    pub(super) fn send_live(&mut self, req: ReqId, peer: PeerRef, envelopes: &[Signed<Envelope>]) {
        let Some(peer_id) = self.parts.delivery().and_then(|d| d.peer_id(peer)) else {
            self.feed(Input::DeliverResponse {
                req,
                result: Err(SendFailure::Unreachable),
            });
            return;
        };
        let request = DeliverRequest {
            v: VERSION,
            envelopes: envelopes
                .iter()
                .map(|e| ByteBuf::from(e.to_bytes()))
                .collect(),
        };
        if let Some((req, request)) = self.hold_live(peer_id, req, request) {
            self.send_live_request(peer_id, req, request);
        }
    }

    /// Sends a live request on the peer's kept stream, or as a request where that
    /// cannot carry it.
    pub(super) fn send_live_request(&mut self, peer: PeerId, req: ReqId, request: DeliverRequest) {
        let Some(d) = self.parts.delivery_mut() else {
            return;
        };
        if let Err(request) = d.send_streamed(peer, req, request) {
            self.send_live_as_request(peer, req, request);
        }
    }

    fn send_live_as_request(&mut self, peer: PeerId, req: ReqId, request: DeliverRequest) {
        let id = self
            .swarm
            .behaviour_mut()
            .deliver
            .send_request(&peer, request);
        if let Some(d) = self.parts.delivery_mut() {
            d.live_sent(id, req);
        }
    }

    /// Sends a collected-mail receipt the engine made (PROTOCOL §8.6).
    pub(super) fn send_collected_receipt(
        &mut self,
        id: ReceiptId,
        peer: PeerRef,
        receipt: &Signed<Receipt>,
    ) {
        let Some(peer_id) = self.parts.delivery().and_then(|d| d.peer_id(peer)) else {
            self.feed(Input::ReceiptSent {
                id,
                result: Err(SendFailure::Unreachable),
            });
            return;
        };
        let request = ReceiptRequest {
            v: VERSION,
            receipt: ByteBuf::from(receipt.to_bytes()),
        };
        let rid = self
            .swarm
            .behaviour_mut()
            .receipts
            .send_request(&peer_id, request);
        if let Some(d) = self.parts.delivery_mut() {
            d.receipt_sent(rid, id);
        }
    }

    pub(super) fn on_receipt_protocol(
        &mut self,
        event: request_response::Event<ReceiptRequest, ReceiptResponse>,
    ) {
        let Some(exchange) = Exchange::of(event, "receipts") else {
            return;
        };
        match exchange {
            Exchange::Asked {
                peer,
                request,
                channel,
                ..
            } => {
                let refused = match self.accept_receipt(&request) {
                    Ok(receipt) => {
                        self.learn_receipt_pass(&receipt);
                        self.drive(Input::ReceiptCollected { receipt });
                        None
                    }
                    Err(reason) => {
                        debug!(%peer, %reason, "receipt for collected mail refused");
                        Some(reason)
                    }
                };
                let response = ReceiptResponse {
                    v: VERSION,
                    refused,
                };
                if self
                    .swarm
                    .behaviour_mut()
                    .receipts
                    .send_response(channel, response)
                    .is_err()
                {
                    debug!(%peer, "receipt response not sent: connection closed");
                }
            }
            Exchange::Ended { peer, id, result } => {
                let Some(receipt) = self
                    .parts
                    .delivery_mut()
                    .and_then(|d| d.receipt_answered(&id))
                else {
                    return;
                };
                let result = match result {
                    Ok(response) => {
                        if let Some(reason) = response.refused {
                            // Its sender will not take it later either.
                            debug!(%peer, %reason, "our receipt for collected mail was refused");
                        }
                        Ok(())
                    }
                    // A node that does not speak the protocol never will.
                    Err(OutboundFailure::UnsupportedProtocols) => Ok(()),
                    Err(error) => Err(Actor::live_failure(&error)),
                };
                self.drive(Input::ReceiptSent {
                    id: receipt,
                    result,
                });
            }
        }
    }

    /// A receipt for mail this session sent, decoded, verified and checked (the
    /// engine settles only its own messages to the signing session).
    fn accept_receipt(&self, request: &ReceiptRequest) -> Result<Signed<Receipt>, Refusal> {
        if request.v != VERSION {
            return Err(Refusal::new(
                RefusalCode::UnsupportedVersion,
                format!(
                    "receipt protocol version {}; this node speaks {VERSION}",
                    request.v
                ),
            ));
        }
        let (Role::Session(spec), Some(_)) = (&self.role, self.parts.delivery()) else {
            return Err(Refusal::new(
                RefusalCode::NotASession,
                "this node is not a session",
            ));
        };
        let receipt = Signed::<Receipt>::decode(&request.receipt).map_err(|e| Refusal::from(&e))?;
        collected::check(receipt.body(), &spec.identity.public(), self.now_ms()).map_err(|e| {
            let code = match e {
                collected::CheckError::Time(_) => RefusalCode::Stale,
                _ => RefusalCode::WrongRecipient,
            };
            Refusal::new(code, e.to_string())
        })?;
        Ok(receipt)
    }
}
