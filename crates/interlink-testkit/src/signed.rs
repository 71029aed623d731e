//! Signed objects as a real node makes them — envelopes, announcements, receipts,
//! acks — and the hostile variants a real node never makes: a wrong signer, a
//! backdated or future-dated timestamp, a copied message id, an oversized body, a
//! forged signature.

use interlink_core::{
    Identity, IdentityKey, MsgId, SealingKey, SessionId,
    limits::{MAX_BODY_BYTES, MAX_FUTURE_SKEW_MS},
    seal::Sealed,
    wire::{
        Ack, AckEntry, Announcement, DeliveryMode, Details, Envelope, EnvelopeKind, HostKind,
        MailboxPass, Receipt, ReceiptState, SealingBinding, SessionAddr, Signed, SignedBody,
        VERSION,
    },
};
use libp2p_identity::PeerId;
use rand_chacha::{ChaCha20Rng, rand_core::SeedableRng};
use serde_bytes::{ByteArray, ByteBuf};

use crate::ids::session;

/// A builder of one envelope: `message` from `sender#sender_session` to `to` with id
/// and timestamp given, no body until one is sealed or set. Copying another message's
/// id is [`EnvelopeBuilder::id`]; a backdated or future-dated one is
/// [`EnvelopeBuilder::ts`] with [`backdated`] or [`future_dated`].
#[derive(Debug, Clone)]
pub struct EnvelopeBuilder {
    env: Envelope,
}

/// An envelope from `sender#sender_session` to `to` with id `id` at `ts`.
pub fn envelope(
    sender: IdentityKey,
    sender_session: &SessionId,
    to: &SessionAddr,
    id: MsgId,
    ts: u64,
) -> EnvelopeBuilder {
    EnvelopeBuilder {
        env: Envelope {
            v: VERSION,
            sender,
            sender_session: sender_session.clone(),
            recipient: to.key,
            recipient_session: to.session.clone(),
            msg_id: id,
            ts,
            kind: EnvelopeKind::Message,
            in_reply_to: None,
            also_about: Vec::new(),
            name: None,
            sealed: None,
            pass: None,
            reply_pass: None,
        },
    }
}

impl EnvelopeBuilder {
    /// Its kind (default `Message`).
    pub fn kind(mut self, kind: EnvelopeKind) -> Self {
        self.env.kind = kind;
        self
    }

    /// Its message id (a copied id: another message's).
    pub fn id(mut self, id: MsgId) -> Self {
        self.env.msg_id = id;
        self
    }

    /// Its timestamp.
    pub fn ts(mut self, ts: u64) -> Self {
        self.env.ts = ts;
        self
    }

    /// The sender's display name.
    pub fn name(mut self, name: &str) -> Self {
        self.env.name = Some(name.into());
        self
    }

    /// `text` sealed to `to` (a session's sealing key is its identity's).
    pub fn sealed(
        mut self,
        text: &str,
        to: &SealingKey,
        rng: &mut impl rand_core::CryptoRng,
    ) -> Self {
        self.env
            .seal_text(text, to, rng)
            .expect("sealing test text");
        self
    }

    /// An opaque body (a well-formed sealed box nobody can open): cheap to make, for
    /// engine tests that never open it.
    pub fn opaque_body(mut self) -> Self {
        self.env.sealed = Some(Sealed {
            enc: ByteArray::new([7; 32]),
            ct: ByteBuf::from(vec![0; 64]),
        });
        self
    }

    /// With `owner`'s mailbox pass for the sender, as a paired sender sends (`owner`
    /// must be the recipient identity for holders to honour it).
    pub fn pass(mut self, owner: &Identity) -> Self {
        self.env.pass = Some(MailboxPass::issue(owner, &self.env.sender));
        self
    }

    /// With the sender's pass for the recipient (`sender` must be the sender).
    pub fn reply_pass(mut self, sender: &Identity) -> Self {
        self.env.reply_pass = Some(MailboxPass::issue(sender, &self.env.recipient));
        self
    }

    /// The unsigned body.
    pub fn body(self) -> Envelope {
        self.env
    }

    /// Signed by `signer` (who must be the sender: see [`wrong_signer`] otherwise).
    pub fn sign(self, signer: &Identity) -> Signed<Envelope> {
        sign(self.env, signer)
    }
}

/// `body` signed by `signer` (panics if `signer` is not the body's signer or a field
/// is invalid: test input).
pub fn sign<T: SignedBody>(body: T, signer: &Identity) -> Signed<T> {
    Signed::sign(body, signer).expect("signing a valid test object")
}

/// A signed `message` envelope from `from` (session `out`) to `to#to_session`, its
/// `text` sealed to the recipient with a generator seeded from `ts` and `id`, with
/// the passes both ways, as a real paired sender would make it.
pub fn message(
    from: &Identity,
    to: &Identity,
    to_session: &SessionId,
    id: MsgId,
    ts: u64,
    text: &str,
) -> Signed<Envelope> {
    let mut rng = ChaCha20Rng::seed_from_u64(ts ^ u64::from(id.as_bytes()[7]));
    envelope(
        from.public(),
        &session("out"),
        &to_addr(to.public(), to_session),
        id,
        ts,
    )
    .sealed(text, &to.sealing_secret().public(), &mut rng)
    .pass(to)
    .reply_pass(from)
    .sign(from)
}

/// A signed knock (no body: cheap to make) from `from` (session `out`, name `tester`)
/// to `to#to_session`.
pub fn knock(
    from: &Identity,
    to: &IdentityKey,
    to_session: &SessionId,
    id: MsgId,
    ts: u64,
) -> Signed<Envelope> {
    envelope(
        from.public(),
        &session("out"),
        &to_addr(*to, to_session),
        id,
        ts,
    )
    .kind(EnvelopeKind::Knock)
    .name("tester")
    .sign(from)
}

fn to_addr(key: IdentityKey, session: &SessionId) -> SessionAddr {
    SessionAddr {
        key,
        session: session.clone(),
    }
}

/// An ack signed by `signer` for its session `owner_session`, listing `(sender, id)`s.
pub fn ack(
    signer: &Identity,
    owner_session: &SessionId,
    entries: &[(IdentityKey, MsgId)],
    ts: u64,
) -> Signed<Ack> {
    sign(
        Ack {
            v: VERSION,
            owner: signer.public(),
            owner_session: owner_session.clone(),
            entries: entries.iter().map(|(s, id)| AckEntry(*s, *id)).collect(),
            ts,
        },
        signer,
    )
}

/// A receipt signed by `signer` for its session `recipient_session`, telling `sender`
/// that `msg_ids` reached `state`.
pub fn receipt(
    signer: &Identity,
    recipient_session: &SessionId,
    sender: IdentityKey,
    msg_ids: Vec<MsgId>,
    state: ReceiptState,
    ts: u64,
) -> Signed<Receipt> {
    sign(
        Receipt {
            v: VERSION,
            recipient: signer.public(),
            recipient_session: recipient_session.clone(),
            sender,
            msg_ids,
            state,
            ts,
            pass: Some(MailboxPass::issue(signer, &sender)),
        },
        signer,
    )
}

/// An announcement of `id#session` on `peer` at `ts` with sequence number `seq`, as a
/// hostile node crafts it (cwd `/evil`, summary `hostile`, no addresses).
pub fn announcement(
    id: &Identity,
    session_id: &str,
    peer: PeerId,
    ts: u64,
    seq: u64,
) -> Signed<Announcement> {
    sign(
        Announcement {
            v: VERSION,
            identity: id.public(),
            sealing: SealingBinding::new(id),
            session_id: session(session_id),
            peer_id: ByteBuf::from(peer.to_bytes()),
            addrs: vec![],
            details: Details {
                cwd: "/evil".into(),
                git_label: None,
                summary: "hostile".into(),
                host: HostKind::Other,
                delivery: DeliveryMode::Poll,
                project: None,
                claims: Vec::new(),
            }
            .seal(
                id,
                &session(session_id),
                &[],
                &mut rand_core::UnwrapErr(getrandom::SysRng),
            )
            .expect("details seal"),
            heartbeat_ms: interlink_core::limits::HEARTBEAT_MS,
            ts,
            seq,
        },
        id,
    )
}

/// A timestamp `by_ms` before `now`.
pub fn backdated(now: u64, by_ms: u64) -> u64 {
    now.saturating_sub(by_ms)
}

/// A timestamp beyond the future skew every receiver allows (a minute past it).
pub fn future_dated(now: u64) -> u64 {
    now + MAX_FUTURE_SKEW_MS + 60_000
}

/// A text one byte longer than a message body may be.
pub fn oversized_text() -> String {
    "x".repeat(MAX_BODY_BYTES + 1)
}

/// `wire` with one byte of its trailing signature `sig` flipped: a forged object.
pub fn forge(mut wire: Vec<u8>, sig: &[u8; 64]) -> Vec<u8> {
    if let Some(pos) = wire.windows(64).position(|w| w == sig) {
        wire[pos + 10] ^= 0x01;
    }
    wire
}

/// `wire`, signed by `signed_by`, rewritten to claim `claimed` as its signer: the
/// signature is then another identity's (a wrong signer).
pub fn wrong_signer(mut wire: Vec<u8>, signed_by: &IdentityKey, claimed: &IdentityKey) -> Vec<u8> {
    let (from, to) = (signed_by.as_bytes(), claimed.as_bytes());
    let mut i = 0;
    while i + 32 <= wire.len() {
        if &wire[i..i + 32] == from {
            wire[i..i + 32].copy_from_slice(to);
            i += 32;
        } else {
            i += 1;
        }
    }
    wire
}
