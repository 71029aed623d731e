//! Mailbox records: normalised as an honest sender puts them, or raw — listing exactly
//! the wire entries given, the way to make records the core would refuse to encode
//! (forged, misaddressed, oversized, malformed).

use interlink_core::{
    IdentityKey, SessionId,
    mailbox::{self, Mailbox},
    wire::{Ack, Envelope, Signed},
};
use serde::Serialize;
use serde_bytes::ByteBuf;

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

/// A mailbox record as it goes on the wire, built by hand.
#[derive(Serialize)]
struct RawRecord<'a> {
    v: u8,
    owner: &'a IdentityKey,
    session: &'a SessionId,
    envelopes: Vec<ByteBuf>,
    acks: Vec<ByteBuf>,
}

/// A record of `owner#session` listing exactly the given wire entries, unchecked.
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
    cbor4ii::serde::to_vec(Vec::new(), &raw).expect("encoding to a Vec cannot fail")
}
