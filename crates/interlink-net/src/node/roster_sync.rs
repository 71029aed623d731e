//! The roster fetch (PROTOCOL.md §8.2): on every new connection a full request (the
//! summary of what this node holds, with the sessions it judges away marked), and for
//! anti-entropy a digest request first, followed by a full one only when the digests
//! differ. Each request's kind is remembered by its id, because a full answer can be
//! empty too.
//!
//! What anti-entropy brings is what gossip failed to deliver here, and most likely
//! elsewhere too (a message published before the mesh formed reaches only part of the
//! overlay, and gossipsub repairs only towards peers outside the mesh): the node
//! publishes it again, so the rest of the overlay has it within one gossip round
//! instead of one fetch per hop. Its message id is its content's, so nodes that have
//! it drop the copy unread.

use std::collections::HashMap;

use interlink_core::{
    presence::{
        pacer::{Ask, Input},
        sync::Summary,
    },
    wire::{Announcement, Beacon, PresenceMessage, RosterRequest, RosterResponse, Unverified},
};
use libp2p::{PeerId, request_response};
use tracing::debug;

use super::{Actor, exchange::Exchange};
use crate::Event;

/// Roster requests of this node in flight at once; past it a fetch is skipped (the
/// next anti-entropy round asks again). One per connection at most in practice.
pub(super) const MAX_ROSTER_REQUESTS: usize = 512;

/// Most announcements and beacons one anti-entropy answer makes this node publish
/// again (the rest are repaired by the next round).
const MAX_REPUBLISH: usize = 32;

/// This node's roster requests in flight, by request id.
#[derive(Debug, Default)]
pub(super) struct RosterAsks(HashMap<request_response::OutboundRequestId, Ask>);

impl Actor {
    /// Asks `peer` for what this node lacks: a full request carrying the summary of
    /// what it holds (PROTOCOL.md, "Roster fetch"). Sent on every new connection, and
    /// after a digest request found the rosters apart.
    pub(super) fn fetch_roster(&mut self, peer: PeerId, ask: Ask) {
        let request =
            RosterRequest::with_summary(&Summary::of(&self.presence.roster, self.now_ms()));
        self.ask_roster(peer, request, ask);
    }

    /// Anti-entropy with `peer`: a digest request, cheap when the rosters agree.
    pub(super) fn sync_roster(&mut self, peer: PeerId) {
        let request = RosterRequest::with_digest(self.presence.roster.digest());
        self.ask_roster(peer, request, Ask::Digest);
    }

    fn ask_roster(&mut self, peer: PeerId, request: RosterRequest, ask: Ask) {
        if self.presence.asks.0.len() >= MAX_ROSTER_REQUESTS {
            debug!(%peer, "roster fetch skipped: too many in flight");
            return;
        }
        self.presence.cost.roster_fetches += 1;
        let id = self
            .swarm
            .behaviour_mut()
            .roster
            .send_request(&peer, request);
        self.presence.asks.0.insert(id, ask);
    }

    pub(super) fn on_roster_fetch(
        &mut self,
        event: request_response::Event<RosterRequest, RosterResponse>,
    ) {
        let Some(exchange) = Exchange::of(event, "roster") else {
            return;
        };
        match exchange {
            Exchange::Asked {
                peer,
                request,
                channel,
                ..
            } => {
                let summary = request.have.len() + request.away.len();
                self.presence.cost.summary_bytes += summary as u64;
                // Only what the answer reads is charged: a summary refused by its
                // shape is answered empty unread (PROTOCOL §8.2, §8 "Budgets").
                let cost = super::budgets::roster_cost(&request);
                if !self.mailbox.budgets.spend(
                    peer,
                    super::budgets::Kind::Roster,
                    cost,
                    self.now_ms(),
                ) {
                    // Not answered: dropping the channel closes the stream, so the asker
                    // fails at once and asks again on its next tick (the protocol has
                    // no refusal; an empty answer would read as "you differ").
                    self.presence.cost.roster_over_budget += 1;
                    debug!(%peer, "roster request over budget; not answered");
                    drop(channel);
                    return;
                }
                // A refused request (a ragged or oversized summary, a bitmap that does
                // not fit it) gets an empty answer (PROTOCOL §8.2): the codec's size
                // limit already bounds what it can cost.
                let response = match self.presence.roster.answer(&request, self.now_ms()) {
                    Ok(answer) => RosterResponse::new(&answer),
                    Err(e) => {
                        debug!(%peer, %e, "roster request refused");
                        self.emit(Event::Rejected {
                            from: peer,
                            reason: e.to_string(),
                        });
                        RosterResponse::empty()
                    }
                };
                if self
                    .swarm
                    .behaviour_mut()
                    .roster
                    .send_response(channel, response)
                    .is_err()
                {
                    debug!(%peer, "roster response not sent: connection closed");
                }
            }
            // Peers that are not interlink nodes (or other networks) don't speak it.
            Exchange::Ended {
                id, result: Err(_), ..
            } => {
                self.presence.asks.0.remove(&id);
            }
            Exchange::Ended {
                peer,
                id,
                result: Ok(response),
            } => {
                let ask = self.presence.asks.0.remove(&id);
                if ask == Some(Ask::Digest) {
                    // The pacer follows a difference with the summary.
                    self.pace(Input::DigestAnswered {
                        peer,
                        same: response.same,
                    });
                }
                self.apply_roster_response(peer, response, ask == Some(Ask::Repair));
            }
        }
    }

    /// Applies what a roster fetch brought. The responder is not trusted: anything the
    /// roster does not already know is verified before it is applied, announcements
    /// first, then the beacons (whose signer is the identity of an announcement held).
    fn apply_roster_response(&mut self, peer: PeerId, response: RosterResponse, repair: bool) {
        let now = self.now_ms();
        let mut changed = Vec::new();
        let mut heard = Vec::new();
        self.presence.cost.roster_bytes += response
            .announcements
            .iter()
            .chain(&response.beacons)
            .map(|a| a.len() as u64)
            .sum::<u64>();
        let brought = response.announcements.len();
        for bytes in &response.announcements {
            // Several fetches in flight can bring the same announcement, and a responder
            // can send what we hold newer: neither costs a signature check.
            let result = Unverified::<Announcement>::decode(bytes)
                .map_err(|e| e.to_string())
                .and_then(|a| self.take_announcement(a, now));
            match result {
                Ok(Some((addr, upsert))) => changed.push((addr, upsert)),
                Ok(None) => {}
                Err(reason) => {
                    debug!(%peer, %reason, "roster entry rejected");
                    self.emit(Event::Rejected { from: peer, reason });
                }
            }
        }
        for bytes in &response.beacons {
            let result = Unverified::<Beacon>::decode(bytes)
                .map_err(|e| e.to_string())
                .and_then(|b| self.take_beacon(b, now));
            match result {
                Ok(Some(addr)) => heard.push(addr),
                Ok(None) => {}
                Err(reason) => {
                    debug!(%peer, %reason, "roster beacon rejected");
                    self.emit(Event::Rejected { from: peer, reason });
                }
            }
        }
        debug!(%peer, brought, new = changed.len(), beacons = heard.len(), held = self.presence.roster.len(), "roster fetch answered");
        for (addr, upsert) in &changed {
            self.learned(addr, *upsert);
        }
        for addr in &heard {
            self.beacon_heard(addr);
        }
        if repair {
            let again: Vec<Vec<u8>> = changed
                .iter()
                .map(|(addr, _)| addr)
                .filter_map(|addr| self.presence.roster.get(addr).cloned())
                .map(|a| PresenceMessage::Announcement(a).to_bytes())
                .chain(
                    heard
                        .iter()
                        .filter_map(|addr| self.presence.roster.held_beacon(addr).cloned())
                        .map(|b| PresenceMessage::Beacon(b).to_bytes()),
                )
                .take(MAX_REPUBLISH)
                .collect();
            self.presence.cost.republished += again.len() as u64;
            for bytes in again {
                // `Duplicate` when gossip brought it meanwhile: nothing to repair.
                let _ = self
                    .swarm
                    .behaviour_mut()
                    .gossipsub
                    .publish(self.presence.topic.clone(), bytes);
            }
        }
        if !changed.is_empty() {
            self.emit(Event::RosterChanged);
        }
    }
}
