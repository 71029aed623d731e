//! Envelopes: one message from a sender session to a recipient session.

use rand_core::CryptoRng;
use serde::{Deserialize, Serialize};

use super::{
    GroupTag, INVITE_SECRET_BYTES, MailboxPass, MsgId, SessionAddr, Signed, SignedBody, WireError,
    check_text, invalid, is_valid_name,
};
use crate::{
    identity::{IdentityKey, SealingKey, SealingSecret},
    limits::{
        MAX_BODY_BYTES, MAX_ENVELOPE_BYTES, MAX_RECEIPT_IDS, MAX_SEALED_BODY_BYTES,
        MAX_TASK_ID_BYTES,
    },
    seal::{self, NONCE_BYTES, SealError, Sealed, TAG_BYTES},
    session::SessionId,
    sign::Domain,
};

/// What an envelope is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvelopeKind {
    /// A message with a sealed text body.
    Message,
    /// A pairing request from a non-peer: no text, only a claimed name, and the
    /// sealed secret of an invite when the sender joins by one (version 9).
    Knock,
    /// Acceptance of a pairing request: no body.
    PairAccept,
    /// The sending session closed: no body.
    Goodbye,
    /// A read receipt: the recipient's agent acknowledged the message named by
    /// `in_reply_to`. No body; signed by the reader like every envelope, so it rides the
    /// live path and the mailbox like a message and its signer is verified.
    Read,
    /// A hand-over receipt: the recipient session handed the message named by
    /// `in_reply_to` to its agent host (a channel notification pushed, a Codex turn
    /// queued). No body, like [`EnvelopeKind::Read`].
    HostQueued,
    /// Hands a peer the sender's mailbox pass ([`Envelope::reply_pass`], required):
    /// sent once per run to each peer session the sender sees on the roster, so the
    /// peer's first message to a sleeping session of the sender is kept by holders
    /// among the admitted mail. No body; never shown to an agent.
    Pass,
}

impl EnvelopeKind {
    /// Whether this kind is a receipt for another message (`in_reply_to`).
    pub fn is_receipt(self) -> bool {
        matches!(self, EnvelopeKind::Read | EnvelopeKind::HostQueued)
    }
}

/// Where a task stands, as its sender reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Progress.
    Update,
    /// Blocked on the other side's answer.
    NeedsInput,
    /// Finished with a result.
    Result,
    /// Finished without success.
    Failed,
    /// Called off.
    Canceled,
}

/// A signed envelope body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// Protocol version.
    #[serde(deserialize_with = "crate::wire::decode_version")]
    pub v: u8,
    /// The sender identity (the signer).
    pub sender: IdentityKey,
    /// The sending session.
    pub sender_session: SessionId,
    /// The recipient identity.
    pub recipient: IdentityKey,
    /// The recipient session (whose mailbox and inbox it belongs to).
    pub recipient_session: SessionId,
    /// Random id; the unit of dedupe, receipts and acks.
    pub msg_id: MsgId,
    /// Milliseconds since the Unix epoch.
    pub ts: u64,
    /// What it is.
    pub kind: EnvelopeKind,
    /// Receipts only (`read`, `host_queued`): the message they are about. A message
    /// says what it answers inside its sealed body ([`Body::in_reply_to`]).
    pub in_reply_to: Option<MsgId>,
    /// Receipts only (version 10): the further messages the receipt is about, so one
    /// envelope answers a burst (at most [`MAX_RECEIPT_IDS`] in all, distinct). Left
    /// out of the encoding when empty.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "decode_also_about"
    )]
    pub also_about: Vec<MsgId>,
    /// Knock and pair-accept only: the name the sender suggests for itself.
    pub name: Option<String>,
    /// Message only: the sealed [`Body`] (its text, task and status, what it answers),
    /// which no holder of the envelope can read.
    pub sealed: Option<Sealed>,
    /// The recipient identity's pass admitting the sender into its mailboxes, if the
    /// sender has one: what lets a holder keep this envelope among the recipient's
    /// admitted mail ([`super::MailboxPass`]). Unchecked by the recipient itself.
    pub pass: Option<MailboxPass>,
    /// The sender identity's pass admitting the recipient into the sender's
    /// mailboxes, when the sender admits it: how a recipient gets what it needs to
    /// write back while the sender sleeps.
    pub reply_pass: Option<MailboxPass>,
}

/// Decodes `also_about`, refusing an empty array: the key is left out when empty
/// (PROTOCOL §4.3), so `also_about: []` is a second encoding of an envelope that has
/// one canonical form, and a receipt breaking the rules is malformed.
fn decode_also_about<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<MsgId>, D::Error> {
    let ids = Vec::<MsgId>::deserialize(d)?;
    if ids.is_empty() {
        return Err(serde::de::Error::custom(
            "also_about is present but empty (the key is left out when empty)",
        ));
    }
    Ok(ids)
}

/// What a message's sealed part holds: everything its recipient needs and no holder
/// does (PROTOCOL §4.3). CBOR map `{text, task_id, status, in_reply_to, group?}` in that
/// order, absent values as null except `group`, which is left out when absent (a
/// direct message encodes as it did before version 7).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Body {
    /// The text, UTF-8, non-empty.
    pub text: String,
    /// Task this message belongs to.
    pub task_id: Option<String>,
    /// Task status reported by the sender.
    pub status: Option<TaskStatus>,
    /// The message this one answers.
    pub in_reply_to: Option<MsgId>,
    /// The group the message was sent to, its other recipients and its thread
    /// (version 7); `None` for a direct message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupTag>,
}

impl Body {
    /// Just `text`.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            task_id: None,
            status: None,
            in_reply_to: None,
            group: None,
        }
    }

    /// Checks the fields a sender chose: the text is not empty, a task id is 1 to
    /// [`MAX_TASK_ID_BYTES`] bytes of one line, a group tag is within its bounds
    /// ([`GroupTag::check`]).
    pub fn check(&self) -> Result<(), WireError> {
        if self.text.is_empty() {
            return Err(invalid::<Envelope>("body.text", "is empty"));
        }
        if self.text.len() > MAX_BODY_BYTES {
            return Err(invalid::<Envelope>(
                "body.text",
                format!(
                    "is {} bytes; the limit is {MAX_BODY_BYTES}",
                    self.text.len()
                ),
            ));
        }
        if let Some(t) = &self.task_id {
            if t.is_empty() {
                return Err(invalid::<Envelope>("body.task_id", "is empty"));
            }
            check_text::<Envelope>("body.task_id", t, MAX_TASK_ID_BYTES, false)?;
        }
        if let Some(g) = &self.group {
            g.check()?;
        }
        Ok(())
    }

    fn encode(&self) -> Vec<u8> {
        super::encode(self)
    }

    fn decode(bytes: &[u8]) -> Result<Self, OpenError> {
        let body: Body =
            super::decode_cbor("sealed body", bytes).map_err(|_| OpenError::Malformed)?;
        body.check().map_err(|_| OpenError::Malformed)?;
        Ok(body)
    }
}

/// `msg_id (16) || sender (32) || recipient (32)`: what a sealed part is bound to.
pub(crate) fn seal_aad(msg_id: &MsgId, sender: &IdentityKey, recipient: &IdentityKey) -> [u8; 80] {
    let mut aad = [0u8; 80];
    aad[..16].copy_from_slice(msg_id.as_bytes());
    aad[16..48].copy_from_slice(sender.as_bytes());
    aad[48..].copy_from_slice(recipient.as_bytes());
    aad
}

/// Opening a message body failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpenError {
    /// Knocks, accepts and goodbyes carry no body.
    #[error("this envelope has no body")]
    NoBody,
    /// The body did not open.
    #[error(transparent)]
    Seal(#[from] SealError),
    /// The opened body is not a valid [`Body`].
    #[error("the opened body is not a valid sealed body (text, task id, status, reply)")]
    Malformed,
    /// The body's group tag does not fit its envelope.
    #[error("the group tag {0}")]
    Group(&'static str),
}

impl Envelope {
    /// The associated data binding a sealed body to this envelope:
    /// `msg_id (16) || sender (32) || recipient (32)`.
    pub fn seal_aad(&self) -> [u8; 80] {
        seal_aad(&self.msg_id, &self.sender, &self.recipient)
    }

    /// Seals an invite's one-time secret into this knock (see [`super::Invite`]): only
    /// the inviter can open it, and it is bound to this knock's id, sender and
    /// recipient like a message body.
    pub fn seal_invite(
        &mut self,
        secret: &[u8; INVITE_SECRET_BYTES],
        to: &SealingKey,
        rng: &mut impl CryptoRng,
    ) -> Result<(), SealError> {
        self.sealed = Some(seal::seal(secret, to, &self.seal_aad(), rng)?);
        Ok(())
    }

    /// Seals `body` to the recipient's sealing key into this envelope.
    pub fn seal_body(
        &mut self,
        body: &Body,
        to: &SealingKey,
        rng: &mut impl CryptoRng,
    ) -> Result<(), SealError> {
        self.sealed = Some(seal::seal(&body.encode(), to, &self.seal_aad(), rng)?);
        Ok(())
    }

    /// Seals `body` within a sender's context for the recipient's key (the same key
    /// every envelope sealed in it goes to).
    pub fn seal_body_in(
        &mut self,
        body: &Body,
        ctx: &seal::SealContext,
        rng: &mut impl CryptoRng,
    ) -> Result<(), SealError> {
        self.sealed = Some(ctx.seal(&body.encode(), &self.seal_aad(), rng)?);
        Ok(())
    }

    /// Seals a body of just `text` (see [`Envelope::seal_body`]).
    pub fn seal_text(
        &mut self,
        text: &str,
        to: &SealingKey,
        rng: &mut impl CryptoRng,
    ) -> Result<(), SealError> {
        self.seal_body(&Body::text(text), to, rng)
    }

    /// Opens the body with the recipient's sealing secret.
    pub fn open_body(&self, secret: &SealingSecret) -> Result<Body, OpenError> {
        let sealed = self.sealed.as_ref().ok_or(OpenError::NoBody)?;
        self.checked(Body::decode(&seal::open(
            sealed,
            secret,
            &self.seal_aad(),
        )?)?)
    }

    /// Opens the body with the context of its `enc` ([`Envelope::sealed_enc`]), set up
    /// once by the recipient for every body sealed in the same sender context.
    pub fn open_body_in(&self, ctx: &seal::OpenContext) -> Result<Body, OpenError> {
        let sealed = self.sealed.as_ref().ok_or(OpenError::NoBody)?;
        self.checked(Body::decode(&ctx.open(sealed, &self.seal_aad())?)?)
    }

    /// A group tag must fit the envelope it came in (PROTOCOL §4.3): it lists this
    /// copy's recipient session and not the sending session. Otherwise a peer could
    /// show the recipient a group it was never sent to, or a member list with the
    /// sender posing as another recipient.
    fn checked(&self, body: Body) -> Result<Body, OpenError> {
        if let Some(group) = &body.group {
            if !group.members.contains(&self.recipient_addr()) {
                return Err(OpenError::Group("does not list the recipient session"));
            }
            if group.members.contains(&self.sender_addr()) {
                return Err(OpenError::Group("lists the sending session"));
            }
        }
        Ok(body)
    }

    /// The text of the body (see [`Envelope::open_body`]).
    pub fn open_text(&self, secret: &SealingSecret) -> Result<String, OpenError> {
        self.open_body(secret).map(|b| b.text)
    }

    /// The sender context (`enc`) the body was sealed in, if there is a body.
    pub fn sealed_enc(&self) -> Option<[u8; 32]> {
        self.sealed.as_ref().map(|s| *s.enc)
    }

    /// The sending session's address.
    pub fn sender_addr(&self) -> SessionAddr {
        SessionAddr {
            key: self.sender,
            session: self.sender_session.clone(),
        }
    }

    /// Whether holders keep this envelope among its recipient's admitted mail: it is
    /// from the recipient identity itself (another of its sessions), or it carries a
    /// pass the recipient issued to the sender. Costs a signature check the first time
    /// a thread meets a pass ([`MailboxPass::admits`]).
    pub fn is_admitted(&self) -> bool {
        self.sender == self.recipient
            || self
                .pass
                .is_some_and(|p| p.admits(&self.recipient, &self.sender))
    }

    /// The recipient session's address.
    pub fn recipient_addr(&self) -> SessionAddr {
        SessionAddr {
            key: self.recipient,
            session: self.recipient_session.clone(),
        }
    }
}

impl SignedBody for Envelope {
    const KIND: &'static str = "envelope";
    const DOMAIN: Domain = Domain::Envelope;
    const MAX_BYTES: usize = MAX_ENVELOPE_BYTES;
    const ALLOWS_REPLY_TO: bool = true;

    fn signer(&self) -> &IdentityKey {
        &self.sender
    }
    fn version(&self) -> u8 {
        self.v
    }
    fn ts(&self) -> u64 {
        self.ts
    }

    fn check_fields(&self) -> Result<(), WireError> {
        match (&self.name, self.kind) {
            (Some(n), EnvelopeKind::Knock | EnvelopeKind::PairAccept) => {
                if !is_valid_name(n) {
                    return Err(invalid::<Self>(
                        "name",
                        "must be 1-32 characters from A-Z a-z 0-9 . _ -",
                    ));
                }
            }
            (Some(_), _) => return Err(invalid::<Self>("name", "is only for knocks and accepts")),
            (None, _) => {}
        }
        match (&self.sealed, self.kind) {
            (Some(s), EnvelopeKind::Message) => {
                if s.ct.len() > MAX_SEALED_BODY_BYTES + NONCE_BYTES + TAG_BYTES {
                    return Err(invalid::<Self>(
                        "sealed",
                        format!(
                            "body is {} bytes; the limit is {MAX_SEALED_BODY_BYTES}",
                            s.ct.len().saturating_sub(NONCE_BYTES + TAG_BYTES)
                        ),
                    ));
                }
                if s.ct.len() < NONCE_BYTES + TAG_BYTES {
                    return Err(invalid::<Self>(
                        "sealed",
                        "is shorter than its nonce and tag",
                    ));
                }
            }
            (None, EnvelopeKind::Message) => {
                return Err(invalid::<Self>("sealed", "is required on a message"));
            }
            (Some(s), EnvelopeKind::Knock) => {
                if s.ct.len() != NONCE_BYTES + INVITE_SECRET_BYTES + TAG_BYTES {
                    return Err(invalid::<Self>(
                        "sealed",
                        format!("on a knock is an invite secret of {INVITE_SECRET_BYTES} bytes"),
                    ));
                }
            }
            (Some(_), _) => {
                return Err(invalid::<Self>(
                    "sealed",
                    "must be absent: accepts, goodbyes and receipts carry no text",
                ));
            }
            (None, _) => {}
        }
        if self.kind == EnvelopeKind::Pass && self.reply_pass.is_none() {
            return Err(invalid::<Self>(
                "reply_pass",
                "is required on a pass (it is what the envelope hands over)",
            ));
        }
        match (self.in_reply_to, self.kind.is_receipt()) {
            (None, true) => {
                return Err(invalid::<Self>(
                    "in_reply_to",
                    "is required on a receipt (the message it is about)",
                ));
            }
            (Some(_), false) => {
                return Err(invalid::<Self>(
                    "in_reply_to",
                    "is only for receipts: a message says what it answers in its sealed body",
                ));
            }
            _ => {}
        }
        if !self.also_about.is_empty() {
            if !self.kind.is_receipt() {
                return Err(invalid::<Self>("also_about", "is only for receipts"));
            }
            if self.also_about.len() >= MAX_RECEIPT_IDS {
                return Err(invalid::<Self>(
                    "also_about",
                    format!(
                        "names {} messages; a receipt is about at most {MAX_RECEIPT_IDS}",
                        self.also_about.len() + 1
                    ),
                ));
            }
            let mut seen: std::collections::BTreeSet<MsgId> =
                self.in_reply_to.into_iter().collect();
            if !self.also_about.iter().all(|id| seen.insert(*id)) {
                return Err(invalid::<Self>(
                    "also_about",
                    "names a message twice (or the one in_reply_to names)",
                ));
            }
        }
        if self.sender == self.recipient && self.sender_session == self.recipient_session {
            return Err(invalid::<Self>(
                "recipient",
                "is the sending session itself",
            ));
        }
        Ok(())
    }
}

impl Signed<Envelope> {
    /// Attaches the unsigned reply-to hint.
    pub fn with_reply_to(mut self, addr: SessionAddr) -> Self {
        self.reply_to = Some(addr);
        self
    }

    /// The reply-to hint, only if its key is the signed sender's; otherwise the
    /// signed sender session. Replies are routed here.
    pub fn reply_address(&self) -> SessionAddr {
        match &self.reply_to {
            Some(r) if r.key == self.body.sender => r.clone(),
            _ => self.body.sender_addr(),
        }
    }
}
