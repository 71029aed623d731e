//! Receipts for mail collected from a mailbox, from both sides (docs/PROTOCOL.md §8.6).
//!
//! A message delivered live is receipted in the delivery response. One the recipient
//! collects from its mailbox later (DHT fetch, relay fetch, a holder's push) has no
//! caller waiting, so after storing what it collected, the recipient signs one
//! `delivered` receipt per sending session ([`interlink_core::collected::plan`]) and
//! sends it on the receipt protocol. Best effort and never in collection's way: sending
//! is fire-and-forget, and a receipt that cannot go now — its sender is asleep, or it
//! restarted and this node has not seen its new announcement yet (a session waking up
//! often processes the old goodbye before the new announcement) — is kept, bounded and
//! for a limited time, until that session's node shows life. A sender that is gone for
//! good (a `send` command that exited) simply never learns it; its later `host_queued`
//! and `read` receipts still move the message on.
//!
use std::{
    collections::{HashMap, VecDeque},
    time::{Duration, Instant},
};

use interlink_core::{
    collected,
    wire::{
        Envelope, Receipt, ReceiptRequest, ReceiptResponse, Refusal, RefusalCode, SessionAddr,
        Signed, VERSION,
    },
};
use libp2p::{
    PeerId,
    request_response::{self, OutboundFailure},
};
use serde_bytes::ByteBuf;
use tracing::{debug, warn};

use super::Actor;
use crate::{Event, Role};

/// Receipt requests on their way at once; beyond it new receipts are kept until their
/// sender's next sign of life.
const MAX_RECEIPTS_IN_FLIGHT: usize = 64;
/// Receipts kept for senders not reachable now; beyond it the oldest is dropped.
const MAX_KEPT_RECEIPTS: usize = 256;
/// A kept receipt older than this is dropped rather than sent: by then its sender has
/// retried live (within its own 55 min window) or no longer waits for the answer.
const KEPT_RECEIPT_WINDOW: Duration = Duration::from_secs(3600);
/// Most requests sent with one receipt: a sender that keeps failing them is left alone.
const MAX_RECEIPT_ATTEMPTS: u8 = 3;

/// Receipts this node sends for mail it collected.
#[derive(Debug, Default)]
pub(crate) struct Receipting {
    in_flight: HashMap<request_response::OutboundRequestId, Unsent>,
    /// Receipts waiting for their sender's node to show life, oldest first.
    kept: VecDeque<Unsent>,
}

/// A signed receipt on its way to a sending session.
#[derive(Debug)]
struct Unsent {
    to: SessionAddr,
    wire: Vec<u8>,
    made: Instant,
    /// Requests sent with it so far.
    attempts: u8,
}

impl Unsent {
    fn expired(&self) -> bool {
        self.attempts >= MAX_RECEIPT_ATTEMPTS || self.made.elapsed() > KEPT_RECEIPT_WINDOW
    }
}

impl Receipting {
    fn keep(&mut self, unsent: Unsent) {
        if unsent.expired() {
            debug!(to = %unsent.to, "receipt for collected mail dropped: its sender never answered");
            return;
        }
        self.kept.retain(|u| !u.expired());
        if self.kept.len() >= MAX_KEPT_RECEIPTS
            && let Some(old) = self.kept.pop_front()
        {
            debug!(to = %old.to, "receipt for collected mail dropped: too many kept");
        }
        self.kept.push_back(unsent);
    }
}

impl Actor {
    /// Receipts envelopes just stored from our own mailbox to the sessions that sent
    /// them. Never fails and never waits: what cannot go now is kept or dropped.
    pub(super) fn receipt_collected(&mut self, stored: &[&Signed<Envelope>]) {
        let Role::Session(spec) = &self.role else {
            return;
        };
        let identity = spec.identity.clone();
        let me = SessionAddr {
            key: identity.public(),
            session: spec.session.clone(),
        };
        let planned = collected::plan(&me, stored.iter().map(|e| e.body()), crate::now_ms());
        for p in planned {
            let ids = p.receipt.msg_ids.len();
            let wire = match Signed::sign(p.receipt, &identity) {
                Ok(r) => r.to_bytes(),
                Err(e) => {
                    warn!("cannot sign a receipt for collected mail: {e}");
                    continue;
                }
            };
            debug!(to = %p.to, ids, "receipting collected mail");
            self.send_receipt(Unsent {
                to: p.to,
                wire,
                made: Instant::now(),
                attempts: 0,
            });
        }
    }

    /// The node of session `to`, from its announcement on the roster.
    fn peer_of(&self, to: &SessionAddr) -> Option<PeerId> {
        self.roster.get(to).and_then(|a| a.body().peer_id())
    }

    /// Sends a receipt to its session's node now, or keeps it for later: when the
    /// session is not on the roster (not announced again yet) or too many are on
    /// their way.
    fn send_receipt(&mut self, mut unsent: Unsent) {
        let peer = match self.peer_of(&unsent.to) {
            Some(peer) if self.receipting.in_flight.len() < MAX_RECEIPTS_IN_FLIGHT => peer,
            _ => {
                debug!(to = %unsent.to, "receipt for collected mail kept for later");
                self.receipting.keep(unsent);
                return;
            }
        };
        // Dial the addresses the session announces last (it may have restarted on new
        // ones since the connection we had).
        if let Some(ann) = self.roster.get(&unsent.to) {
            for addr in &ann.body().addrs {
                if let Ok(a) = addr.parse() {
                    self.swarm.add_peer_address(peer, a);
                }
            }
        }
        let request = ReceiptRequest {
            v: VERSION,
            receipt: ByteBuf::from(unsent.wire.clone()),
        };
        let id = self
            .swarm
            .behaviour_mut()
            .receipts
            .send_request(&peer, request);
        unsent.attempts += 1;
        self.receipting.in_flight.insert(id, unsent);
    }

    /// `peer` showed life (connected, announced, answered a ping): the receipts kept
    /// for the sessions it runs go out again.
    pub(super) fn resend_kept_receipts(&mut self, peer: PeerId) {
        if self.receipting.kept.is_empty() {
            return;
        }
        let kept = std::mem::take(&mut self.receipting.kept);
        let (due, rest): (VecDeque<Unsent>, VecDeque<Unsent>) = kept
            .into_iter()
            .filter(|u| !u.expired())
            .partition(|u| self.peer_of(&u.to) == Some(peer));
        self.receipting.kept = rest;
        for unsent in due {
            self.send_receipt(unsent);
        }
    }

    pub(super) fn on_receipt_protocol(
        &mut self,
        event: request_response::Event<ReceiptRequest, ReceiptResponse>,
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
                let refused = self.accept_receipt(&request).err().inspect(|reason| {
                    debug!(%peer, %reason, "receipt for collected mail refused");
                });
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
            request_response::Event::Message {
                peer,
                message:
                    request_response::Message::Response {
                        request_id,
                        response,
                    },
                ..
            } => {
                if let (Some(unsent), Some(reason)) = (
                    self.receipting.in_flight.remove(&request_id),
                    response.refused,
                ) {
                    debug!(%peer, to = %unsent.to, %reason, "our receipt for collected mail was refused");
                }
            }
            request_response::Event::OutboundFailure {
                peer,
                request_id,
                error,
                ..
            } => {
                let Some(unsent) = self.receipting.in_flight.remove(&request_id) else {
                    return;
                };
                debug!(%peer, to = %unsent.to, %error, "receipt for collected mail not delivered");
                // A node that does not speak the protocol never will; anything else
                // (no answer, no connection) may pass once the sender is back.
                if !matches!(error, OutboundFailure::UnsupportedProtocols) {
                    self.receipting.keep(unsent);
                }
            }
            request_response::Event::InboundFailure { peer, error, .. } => {
                debug!(%peer, %error, "inbound receipt failed");
            }
            request_response::Event::ResponseSent { .. } => {}
        }
    }

    /// A receipt for mail this session sent: verified, checked, and reported per id.
    fn accept_receipt(&mut self, request: &ReceiptRequest) -> Result<(), Refusal> {
        if request.v != VERSION {
            return Err(Refusal::new(
                RefusalCode::UnsupportedVersion,
                format!(
                    "receipt protocol version {}; this node speaks {VERSION}",
                    request.v
                ),
            ));
        }
        let Role::Session(spec) = &self.role else {
            return Err(Refusal::new(
                RefusalCode::NotASession,
                "this node is not a session",
            ));
        };
        let me = spec.identity.public();
        let receipt = Signed::<Receipt>::decode(&request.receipt).map_err(|e| Refusal::from(&e))?;
        let to = collected::check(receipt.body(), &me, crate::now_ms()).map_err(|e| {
            let code = match e {
                collected::CheckError::Time(_) => RefusalCode::Stale,
                _ => RefusalCode::WrongRecipient,
            };
            Refusal::new(code, e.to_string())
        })?;
        let ids = &receipt.body().msg_ids;
        debug!(from = %to, ids = ids.len(), "collected mail receipted");
        // Delivered: no need to retry these live any more.
        self.confirm_unconfirmed(&to, ids);
        for msg_id in ids {
            self.emit(Event::Receipted {
                msg_id: *msg_id,
                to: to.clone(),
            });
        }
        Ok(())
    }
}
