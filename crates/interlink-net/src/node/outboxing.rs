//! The node's side of the durable outbox (`crate::outbox`): what is answered `queued`
//! is on disk first; what the outbox kept across a restart is published to the
//! recipients' mailboxes again and retried live once their node is known; receipts,
//! final refusals and the end of the retention take messages out.

use std::collections::HashMap;

use interlink_core::{
    MsgId,
    wire::{Envelope, RefusalCode, SessionAddr, Signed},
};
use libp2p::PeerId;
use tracing::{debug, info, warn};

use super::{Actor, delivery::Queued, mailbox::key_of};
use crate::{Event, SendError, outbox::OutboxError};

impl Actor {
    /// Commits newly queued messages to the outbox (one transaction). A node without
    /// an outbox (observers, relays) keeps nothing and claims nothing more than before.
    pub(super) fn persist_queued(&mut self, batch: &[Queued]) -> Result<(), OutboxError> {
        let Some(outbox) = self.durable.as_mut() else {
            return Ok(());
        };
        let fresh: Vec<&Signed<Envelope>> = batch
            .iter()
            .filter(|q| q.reply.is_some())
            .map(|q| &q.envelope)
            .collect();
        outbox.put(&fresh)
    }

    /// Takes delivered (or finally refused, or expired) messages out of the outbox.
    pub(super) fn forget_sent(&mut self, ids: &[MsgId]) {
        if let Some(outbox) = self.durable.as_mut()
            && let Err(e) = outbox.remove(ids)
        {
            // Left in the outbox: retried again later, and the recipient's inbox dedupes.
            warn!("removing delivered messages from the outbox: {e}");
        }
    }

    /// At start: what the outbox kept goes back on the unconfirmed list (its node is
    /// learned from the recipient's next announcement) and into the recipients'
    /// mailboxes, held here at once and published to peers when the first connects.
    pub(super) fn restore_outbox(&mut self) {
        let Some(outbox) = self.durable.as_mut() else {
            return;
        };
        let kept = match outbox.load(crate::now_ms()) {
            Ok(k) => k,
            Err(e) => {
                warn!("reading the outbox: {e}");
                return;
            }
        };
        if kept.is_empty() {
            return;
        }
        info!(
            messages = kept.len(),
            "outbox: messages still waiting for their recipients"
        );
        // Envelope timestamps stay increasing across the restart, whatever the clock.
        if let Some(last) = kept.iter().map(|e| e.body().ts).max() {
            self.last_envelope_ts = self.last_envelope_ts.max(last);
        }
        for envelope in kept {
            let to = envelope.body().recipient_addr();
            let peer = self.roster.get(&to).and_then(|a| a.body().peer_id());
            self.queueing.keep_unconfirmed(Queued {
                wire: envelope.to_bytes(),
                envelope,
                peer,
                reply: None,
            });
        }
        self.republish_outbox();
    }

    /// Publishes every recipient's mailbox with all the messages this session still
    /// has for it: after a restart (the DHT copies may have died with this process),
    /// when the first peer connects, and now and then.
    pub(super) fn republish_outbox(&mut self) {
        let cfg = interlink_core::mailbox::Config::default();
        let now = crate::now_ms();
        let mut copies: HashMap<SessionAddr, interlink_core::mailbox::Mailbox> = HashMap::new();
        let targets: Vec<(SessionAddr, Vec<Signed<Envelope>>)> = self
            .queueing
            .unconfirmed
            .iter()
            .map(|(to, list)| {
                (
                    to.clone(),
                    list.iter().map(|q| q.envelope.clone()).collect(),
                )
            })
            .collect();
        for (to, envelopes) in targets {
            let copy = copies.entry(to.clone()).or_insert_with(|| {
                self.held_mailbox(&key_of(&to)).cloned().unwrap_or_else(|| {
                    interlink_core::mailbox::Mailbox::new(to.key, to.session.clone())
                })
            });
            for env in envelopes {
                // An acked or expired one is refused by the copy; it is settled below.
                let _ = copy.insert(env, now, &cfg);
            }
        }
        for (_, copy) in copies {
            let _ = self.publish_mailbox(copy);
        }
    }

    /// `addr` announced itself with `peer`: messages restored from the outbox for it
    /// learn their node, and go live if the whole list can.
    pub(super) fn route_restored(&mut self, addr: &SessionAddr, peer: PeerId) {
        let Some(list) = self.queueing.unconfirmed.get_mut(addr) else {
            return;
        };
        let mut changed = false;
        for q in list.iter_mut() {
            if q.peer != Some(peer) {
                q.peer = Some(peer);
                changed = true;
            }
        }
        if changed && !self.mailboxes.is_unreachable(&peer) {
            self.retry_unconfirmed(addr);
        }
    }

    /// A live retry of a queued message was refused. Still retryable, or only too old
    /// for the live path: the mailbox has it and the recipient collects it from there.
    /// Otherwise the recipient's word is final and the message leaves the outbox.
    pub(super) fn on_retry_refused(
        &mut self,
        to: &SessionAddr,
        envelope: Signed<Envelope>,
        peer: Option<PeerId>,
        error: &SendError,
    ) {
        let msg_id = envelope.body().msg_id;
        match error {
            SendError::Refused(r)
                if !r.is_retryable()
                    && !matches!(r.code, RefusalCode::Stale | RefusalCode::FutureDated) =>
            {
                info!(%to, %msg_id, code = ?r.code, "queued message refused for good");
                self.forget_sent(&[msg_id]);
                self.emit(Event::NotKept {
                    msg_id,
                    to: to.clone(),
                    reason: r.to_string(),
                });
            }
            other => {
                debug!(%to, %msg_id, %other, "live retry of a queued message failed; kept");
                self.queueing.keep_unconfirmed(Queued {
                    wire: envelope.to_bytes(),
                    envelope,
                    peer,
                    reply: None,
                });
            }
        }
    }

    /// Drops the messages past the mailbox retention: no holder keeps them any more and
    /// no recipient would take them. The sender is told ([`Event::NotKept`]).
    pub(super) fn sweep_outbox(&mut self) {
        let now = crate::now_ms();
        let mut expired: Vec<(SessionAddr, MsgId)> = Vec::new();
        for (to, list) in &self.queueing.unconfirmed {
            for q in list {
                if crate::outbox::expired(&q.envelope, now) {
                    expired.push((to.clone(), q.envelope.body().msg_id));
                }
            }
        }
        for (to, msg_id) in expired {
            self.queueing.confirm(&to, &[msg_id]);
            self.forget_sent(&[msg_id]);
            self.emit(Event::NotKept {
                msg_id,
                to,
                reason: "not collected within the mailbox retention (7 days)".into(),
            });
        }
    }
}
