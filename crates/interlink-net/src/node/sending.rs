//! Building what a session sends: the envelope, sealed to the recipient identity and
//! signed, handed to the delivery engine with the recipient's node if it is known.

use interlink_core::{
    MsgId,
    wire::{Body, Envelope, EnvelopeKind, SessionAddr, Signed, VERSION},
};
use interlink_delivery::Input;
use libp2p::PeerId;
use tokio::sync::oneshot;

use super::Actor;
use crate::{OutgoingMessage, Role, SendError, SendOutcome};

impl Actor {
    /// Builds, seals and signs `msg` and gives it to the engine; `reply` is answered
    /// when the engine can say truthfully what became of it.
    pub(super) fn send_message(
        &mut self,
        msg: OutgoingMessage,
        reply: oneshot::Sender<Result<SendOutcome, SendError>>,
    ) {
        if self.parts.delivery().is_none() {
            let _ = reply.send(Err(SendError::NotASession));
            return;
        }
        let (envelope, peer) = match self.build_envelope(&msg) {
            Ok(v) => v,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        if msg.kind == EnvelopeKind::Knock {
            // Let the acceptance in when it comes (also after a restart).
            self.note_knock_sent(msg.to.key);
        }
        let Some(d) = self.parts.delivery_mut() else {
            return;
        };
        let route = peer.and_then(|p| d.peer_ref(p));
        let caller = d.call(envelope.body().msg_id, reply);
        self.drive(Input::Send {
            caller,
            envelope,
            route,
        });
    }

    pub(super) fn build_envelope(
        &mut self,
        msg: &OutgoingMessage,
    ) -> Result<(Signed<Envelope>, Option<PeerId>), SendError> {
        // A session on the roster is tried live; one that left it (closed, away past the
        // roster's retention, or never seen here) can still be queued for, sealed with
        // its identity's key from another announcement or the key pinned for it.
        //
        // A pair acceptance seals nothing, so it needs no key: it can be queued for a
        // requester that left before the answer came (a shell's `pair request` that
        // stopped waiting collects it on its next run).
        let needs_key = msg.text.is_some() || msg.invite.is_some();
        let (sealing_key, peer) = match self.presence.roster().get(&msg.to) {
            Some(ann) => (Some(ann.body().sealing.key), ann.body().peer_id()),
            None => {
                let known = self
                    .presence
                    .roster()
                    .sealing_key_of(&msg.to.key)
                    .or_else(|| self.keys.pinned(&msg.to.key));
                if known.is_none() && (needs_key || msg.kind != EnvelopeKind::PairAccept) {
                    return Err(SendError::NotOnRoster(msg.to.clone()));
                }
                (known, None)
            }
        };
        let sealing_key = || sealing_key.ok_or_else(|| SendError::NotOnRoster(msg.to.clone()));
        let now = self.now_ms();
        let ts = match self.parts.delivery_mut() {
            Some(d) => d.next_ts(now),
            None => return Err(SendError::NotASession),
        };
        let (pass, reply_pass) = self.passes_for(&msg.to.key);
        let Role::Session(spec) = &self.role else {
            return Err(SendError::NotASession);
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
            // Only a receipt names its message in the clear; a message says what it
            // answers, its task and status inside the sealed body.
            in_reply_to: msg.in_reply_to.filter(|_| msg.kind.is_receipt()),
            also_about: if msg.kind.is_receipt() {
                msg.also_about.clone()
            } else {
                Vec::new()
            },
            name: msg.name.clone(),
            sealed: None,
            pass,
            reply_pass,
        };
        if let (EnvelopeKind::Knock, Some(secret)) = (msg.kind, &msg.invite) {
            env.seal_invite(secret, &sealing_key()?, &mut rng)
                .map_err(|e| SendError::Invalid(e.to_string()))?;
        }
        if let Some(text) = &msg.text {
            let body = Body {
                text: text.clone(),
                task_id: msg.task_id.clone(),
                status: msg.status,
                in_reply_to: msg.in_reply_to,
                group: msg.group.clone(),
            };
            body.check()
                .map_err(|e| SendError::Invalid(e.to_string()))?;
            let ctx = self
                .keys
                .seal_context(&sealing_key()?, &mut rng)
                .map_err(|e| SendError::Invalid(e.to_string()))?;
            env.seal_body_in(&body, ctx, &mut rng)
                .map_err(|e| SendError::Invalid(e.to_string()))?;
        }
        let signed =
            Signed::sign(env, &spec.identity).map_err(|e| SendError::Invalid(e.to_string()))?;
        // A sender session is collected by nobody: a reply to its message, or the read
        // receipt, would wait in a mailbox forever. The hint sends them to the session
        // of ours it names; a receipt needs none (it goes back to the sender's node).
        let signed = match &spec.visibility {
            crate::Visibility::Sender {
                reply_to: Some(session),
            } if msg.kind == EnvelopeKind::Message => signed.with_reply_to(SessionAddr {
                key: spec.identity.public(),
                session: session.clone(),
            }),
            _ => signed,
        };
        Ok((signed, peer))
    }
}
