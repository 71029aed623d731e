//! Builders for tests and benchmarks (feature `test-utils`): signed envelopes and acks
//! made with the core, and mailbox records, including hostile ones the core would
//! never encode (forged, misaddressed, oversized).

use interlink_core::{
    Identity, IdentityKey, MsgId, SessionId,
    mailbox::{self, Mailbox},
    wire::{Ack, AckEntry, Envelope, EnvelopeKind, Signed, VERSION},
};
use rand_chacha::{ChaCha20Rng, rand_core::SeedableRng};
use serde::Serialize;
use serde_bytes::ByteBuf;

/// A deterministic identity numbered `n`.
pub fn identity(n: u64) -> Identity {
    let mut seed = [0x5a; 32];
    seed[..8].copy_from_slice(&n.to_be_bytes());
    Identity::from_seed(&seed)
}

/// A session id (panics on an invalid one: test input).
pub fn session(s: &str) -> SessionId {
    #[allow(clippy::expect_used)]
    SessionId::new(s).expect("valid test session id")
}

/// A deterministic message id numbered `n`.
pub fn msg_id(n: u64) -> MsgId {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&n.to_be_bytes());
    MsgId::from_bytes(b)
}

/// A signed `message` envelope from `from` (session `out`) to `to#to_session`, its
/// `text` sealed to the recipient, as a real sender would make it.
pub fn message(
    from: &Identity,
    to: &Identity,
    to_session: &SessionId,
    id: MsgId,
    ts: u64,
    text: &str,
) -> Signed<Envelope> {
    let mut env = envelope_body(from, to.public(), to_session, id, ts, EnvelopeKind::Message);
    let mut rng = ChaCha20Rng::seed_from_u64(ts ^ u64::from(id.as_bytes()[7]));
    #[allow(clippy::expect_used)]
    env.seal_text(text, &to.sealing_secret().public(), &mut rng)
        .expect("sealing test text");
    #[allow(clippy::expect_used)]
    Signed::sign(env, from).expect("signing a valid test envelope")
}

/// A signed knock (no body: cheap to make) from `from` to `to#to_session`.
pub fn knock(
    from: &Identity,
    to: &IdentityKey,
    to_session: &SessionId,
    id: MsgId,
    ts: u64,
) -> Signed<Envelope> {
    let mut env = envelope_body(from, *to, to_session, id, ts, EnvelopeKind::Knock);
    env.name = Some("tester".into());
    #[allow(clippy::expect_used)]
    Signed::sign(env, from).expect("signing a valid test knock")
}

fn envelope_body(
    from: &Identity,
    to: IdentityKey,
    to_session: &SessionId,
    id: MsgId,
    ts: u64,
    kind: EnvelopeKind,
) -> Envelope {
    Envelope {
        v: VERSION,
        sender: from.public(),
        sender_session: session("out"),
        recipient: to,
        recipient_session: to_session.clone(),
        msg_id: id,
        ts,
        kind,
        task_id: None,
        status: None,
        in_reply_to: None,
        name: None,
        sealed: None,
    }
}

/// An ack signed by `signer` for its session `owner_session`, listing `(sender, id)`s.
pub fn ack(
    signer: &Identity,
    owner_session: &SessionId,
    entries: &[(IdentityKey, MsgId)],
    ts: u64,
) -> Signed<Ack> {
    let body = Ack {
        v: VERSION,
        owner: signer.public(),
        owner_session: owner_session.clone(),
        entries: entries.iter().map(|(s, id)| AckEntry(*s, *id)).collect(),
        ts,
    };
    #[allow(clippy::expect_used)]
    Signed::sign(body, signer).expect("signing a valid test ack")
}

/// The encoded record of `owner#session` holding `envelopes` and `acks`, normalised
/// at `now` under the default caps (as an honest sender would put it), with its key.
pub fn record(
    owner: &IdentityKey,
    session: &SessionId,
    envelopes: &[Signed<Envelope>],
    acks: &[Signed<Ack>],
    now: u64,
) -> ([u8; 32], Vec<u8>) {
    let cfg = mailbox::Config::default();
    let mut mb = Mailbox::new(*owner, session.clone());
    for a in acks {
        let _ = mb.apply_ack(a.clone(), now, &cfg);
    }
    for e in envelopes {
        let _ = mb.insert(e.clone(), now, &cfg);
    }
    (mb.record_key(), mb.encode())
}

#[derive(Serialize)]
struct RawRecord<'a> {
    v: u8,
    owner: &'a IdentityKey,
    session: &'a SessionId,
    envelopes: Vec<ByteBuf>,
    acks: Vec<ByteBuf>,
}

/// A record of `owner#session` listing exactly the given wire entries, unchecked: the
/// way to make records the core would refuse to encode.
pub fn raw_record(
    owner: &IdentityKey,
    session: &SessionId,
    envelopes: Vec<Vec<u8>>,
    acks: Vec<Vec<u8>>,
) -> Vec<u8> {
    let raw = RawRecord {
        v: mailbox::RECORD_VERSION,
        owner,
        session,
        envelopes: envelopes.into_iter().map(ByteBuf::from).collect(),
        acks: acks.into_iter().map(ByteBuf::from).collect(),
    };
    #[allow(clippy::expect_used)]
    cbor4ii::serde::to_vec(Vec::new(), &raw).expect("encoding to a Vec cannot fail")
}

/// `wire` with one byte of its trailing signature flipped: a forged entry.
pub fn forge(mut wire: Vec<u8>, sig: &[u8; 64]) -> Vec<u8> {
    if let Some(pos) = wire.windows(64).position(|w| w == sig) {
        wire[pos + 10] ^= 0x01;
    }
    wire
}
