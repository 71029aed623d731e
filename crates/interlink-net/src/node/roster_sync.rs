//! The roster fetch (PROTOCOL.md §8.2) over request-response. What is asked,
//! answered and applied — and why anti-entropy's finds are published again — is the
//! presence node's (`interlink_core::presence::node`); this carries requests and
//! answers and charges their budgets. Each request's kind is remembered by its id,
//! because a full answer can be empty too.

use interlink_core::{
    presence::{node::Input, pacer::Ask},
    wire::{RosterRequest, RosterResponse},
};
use libp2p::{PeerId, request_response};
use tracing::debug;

use super::{Actor, exchange::Exchange};
use crate::Event;

/// Roster requests of this node in flight at once; past it a fetch is skipped (the
/// next anti-entropy round asks again). One per connection at most in practice.
pub(super) const MAX_ROSTER_REQUESTS: usize = 512;

impl Actor {
    /// Sends `peer` a roster request the presence node decided on.
    pub(super) fn ask_roster(&mut self, peer: PeerId, request: RosterRequest, ask: Ask) {
        if !self.presence.may_ask() {
            debug!(%peer, "roster fetch skipped: too many in flight");
            return;
        }
        let id = self
            .swarm
            .behaviour_mut()
            .roster
            .send_request(&peer, request);
        self.presence.asked(id, ask);
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
                self.presence.requested(&request);
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
                    self.presence.over_budget();
                    debug!(%peer, "roster request over budget; not answered");
                    drop(channel);
                    return;
                }
                // A refused request (a ragged or oversized summary, a bitmap that does
                // not fit it) gets an empty answer (PROTOCOL §8.2): the codec's size
                // limit already bounds what it can cost.
                let response = match self.presence.answer(&request, self.now_ms()) {
                    Ok(response) => response,
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
                self.presence.ask_failed(id);
            }
            Exchange::Ended {
                peer,
                id,
                result: Ok(response),
            } => {
                let ask = self.presence.ask_answered(id, &response);
                let brought = response.announcements.len();
                self.presence_input(Input::RosterAnswered {
                    peer,
                    ask,
                    response,
                });
                debug!(%peer, brought, held = self.presence.roster().len(), "roster fetch answered");
            }
        }
    }
}
