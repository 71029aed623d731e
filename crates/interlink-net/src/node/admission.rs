//! Mailbox passes in the node (PROTOCOL §4.7): which it puts on what it sends, and
//! which it keeps from what it receives.
//!
//! On every envelope a session sends, `pass` is the recipient's pass for this user, if
//! a peer handed one over, and `reply_pass` this user's own pass for the recipient, if
//! the recipient is a peer (the engine puts one on every receipt). Passes are learned
//! from what peers sign: the `pass` of a receipt for this user's mail and the
//! `reply_pass` of a peer's envelope (or of the acceptance of a knock this session
//! sent). A stranger's pass is never kept: it would take a slot of the bounded file.

use interlink_core::{
    IdentityKey,
    wire::{
        DeliverRequest, Envelope, EnvelopeKind, MailboxPass, Receipt, SessionAddr, Signed, VERSION,
    },
};
use serde_bytes::ByteBuf;

use super::Actor;
use crate::{OutgoingMessage, Role};

/// Most peer sessions remembered as offered a pass this run.
pub(super) const MAX_PASSES_OFFERED: usize = interlink_core::limits::MAX_PEERS;

impl Actor {
    /// The passes for an envelope to `to`: (the recipient's pass for this user, this
    /// user's pass for the recipient).
    pub(super) fn passes_for(
        &mut self,
        to: &IdentityKey,
    ) -> (Option<MailboxPass>, Option<MailboxPass>) {
        let Role::Session(spec) = &self.role else {
            return (None, None);
        };
        if *to == spec.identity.public() {
            // This user's own sessions need none.
            return (None, None);
        }
        let pass = self.parts.passes().and_then(|p| p.get(to));
        let reply = self
            .is_peer(to)
            .then(|| self.keys.issued().get(&spec.identity, to));
        (pass, reply)
    }

    /// Keeps `owner`'s pass for this user if `owner` is a peer, or an identity this
    /// session knocked (its acceptance carries the pass).
    pub(super) fn learn_pass(&mut self, owner: IdentityKey, pass: MailboxPass) {
        // Every receipt and peer envelope carries a pass, almost always one already
        // kept: answer that before anything else.
        if self
            .parts
            .passes()
            .is_some_and(|p| p.get(&owner) == Some(pass))
        {
            return;
        }
        let knocked = self.parts.delivery().is_some_and(|d| {
            d.engine()
                .gate()
                .pending_pair_requests()
                .any(|k| *k == owner)
        });
        if !(self.is_peer(&owner) || knocked) {
            return;
        }
        if let Some(p) = self.parts.passes_mut() {
            p.learn(owner, pass);
        }
    }

    /// Learns the reply passes of envelopes addressed to this user.
    pub(super) fn learn_reply_passes<'a>(
        &mut self,
        envelopes: impl IntoIterator<Item = &'a Signed<Envelope>>,
    ) {
        let Some(me) = self.own_addr().map(|a| a.key) else {
            return;
        };
        let found: Vec<(IdentityKey, MailboxPass)> = envelopes
            .into_iter()
            .map(Signed::body)
            .filter(|b| b.recipient == me && b.sender != me)
            .filter_map(|b| b.reply_pass.map(|p| (b.sender, p)))
            .collect();
        for (owner, pass) in found {
            self.learn_pass(owner, pass);
        }
    }

    /// Learns the pass of a verified receipt for this user's mail.
    pub(super) fn learn_receipt_pass(&mut self, receipt: &Signed<Receipt>) {
        let b = receipt.body();
        if Some(b.sender) == self.own_addr().map(|a| a.key)
            && let Some(pass) = b.pass
        {
            self.learn_pass(b.recipient, pass);
        }
    }

    /// Hands `to`'s identity this user's pass, once per run and peer session (PROTOCOL
    /// §4.3): a peer's session just appeared on the roster, and the peer may not hold
    /// the pass yet (paired by hand, never answered). Per session, not per identity: a
    /// peer's short-lived `send` session refuses it (it takes no messages), and its
    /// long-lived sessions must still get theirs. Live only, outside the engine: a pass envelope
    /// is never queued, so it takes no room in an outbox or a mailbox; one that does not
    /// arrive is offered again next run, and any receipt or message hands the pass over
    /// too. The peer's receipt brings its own pass back ([`Actor::learn_receipt_pass`]).
    pub(super) fn offer_pass(&mut self, to: &SessionAddr) {
        let Some(me) = self.own_addr() else {
            return;
        };
        if to.key == me.key || !self.is_peer(&to.key) || self.keys.was_offered(to) {
            return;
        }
        let msg = OutgoingMessage {
            to: to.clone(),
            kind: EnvelopeKind::Pass,
            text: None,
            task_id: None,
            status: None,
            in_reply_to: None,
            also_about: Vec::new(),
            name: None,
            group: None,
            invite: None,
        };
        let Ok((envelope, Some(peer))) = self.build_envelope(&msg) else {
            return;
        };
        self.keys.offered(to);
        let request = DeliverRequest {
            v: VERSION,
            envelopes: vec![ByteBuf::from(envelope.to_bytes())],
        };
        // Its response is not awaited by anyone: only the receipt's pass is taken.
        self.swarm
            .behaviour_mut()
            .deliver
            .send_request(&peer, request);
    }

    /// Offers this user's pass to every session of a peer on the roster that was not
    /// offered one yet this run: after the policy changed (pairing while both are
    /// online).
    pub(super) fn offer_pass_to_roster_peers(&mut self) {
        let sessions: Vec<SessionAddr> = self
            .presence
            .roster()
            .announcements()
            .map(|a| SessionAddr {
                key: a.body().identity,
                session: a.body().session_id.clone(),
            })
            .filter(|addr| self.is_peer(&addr.key))
            .collect();
        // `offer_pass` skips the sessions offered one already.
        for addr in &sessions {
            self.offer_pass(addr);
        }
    }

    pub(super) fn is_peer(&self, key: &IdentityKey) -> bool {
        self.parts
            .delivery()
            .is_some_and(|d| d.engine().gate().policy().contains(key))
    }
}
