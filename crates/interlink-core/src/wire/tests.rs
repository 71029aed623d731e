//! Round trips, tamper detection and refusal of bad input for every wire type.

use proptest::prelude::*;
use rand_chacha::{ChaCha20Rng, rand_core::SeedableRng};
use serde_bytes::ByteBuf;

use super::*;
use crate::{Identity, limits};

const NOW: u64 = 1_790_000_000_000;

fn identity(n: u8) -> Identity {
    Identity::from_seed(&[n; 32])
}

fn sid(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

pub(crate) fn announcement(id: &Identity, session: &str, summary: &str) -> Announcement {
    let session = sid(session);
    let peer = id
        .transport_keypair(&session)
        .unwrap()
        .public()
        .to_peer_id();
    Announcement {
        v: VERSION,
        identity: id.public(),
        sealing: SealingBinding::new(id),
        session_id: session.clone(),
        peer_id: ByteBuf::from(peer.to_bytes()),
        addrs: vec!["/ip4/127.0.0.1/tcp/4001".into()],
        details: Details {
            cwd: "/home/u/repo".into(),
            git_label: Some("repo".into()),
            summary: summary.into(),
            host: HostKind::Claude,
            delivery: DeliveryMode::Inbox,
            project: None,
            claims: Vec::new(),
        }
        .seal(id, &session, &[], &mut ChaCha20Rng::seed_from_u64(7))
        .unwrap(),
        heartbeat_ms: crate::limits::HEARTBEAT_MS,
        ts: NOW,
        seq: 1,
    }
}

/// An unsealed message envelope from `from`'s session `s-a` to `to`'s `s-b`, at `NOW`.
pub(crate) fn bare_message(from: &Identity, to: &Identity, rng: &mut ChaCha20Rng) -> Envelope {
    Envelope {
        v: VERSION,
        sender: from.public(),
        sender_session: sid("s-a"),
        recipient: to.public(),
        recipient_session: sid("s-b"),
        msg_id: MsgId::random(rng),
        ts: NOW,
        kind: EnvelopeKind::Message,
        in_reply_to: None,
        also_about: Vec::new(),
        name: None,
        sealed: None,
        pass: None,
        reply_pass: None,
    }
}

fn message(from: &Identity, to: &Identity, text: &str, rng: &mut ChaCha20Rng) -> Envelope {
    let mut env = bare_message(from, to, rng);
    env.seal_text(text, &to.sealing_secret().public(), rng)
        .unwrap();
    env
}

#[test]
fn announcement_round_trip() {
    let a = identity(1);
    let signed = Signed::sign(announcement(&a, "s1", "working"), &a).unwrap();
    let back = Signed::<Announcement>::decode(&signed.to_bytes()).unwrap();
    assert_eq!(back, signed);
    assert_eq!(
        back.body().peer_id(),
        Some(
            a.transport_keypair(&sid("s1"))
                .unwrap()
                .public()
                .to_peer_id()
        )
    );
}

#[test]
fn envelope_round_trip_and_open() {
    let (a, b) = (identity(1), identity(2));
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let signed = Signed::sign(message(&a, &b, "hello", &mut rng), &a).unwrap();
    let back = Signed::<Envelope>::decode(&signed.to_bytes()).unwrap();
    assert_eq!(back.body().open_text(&b.sealing_secret()).unwrap(), "hello");
    assert_eq!(
        back.body().open_text(&identity(3).sealing_secret()),
        Err(OpenError::Seal(crate::seal::SealError::Open))
    );
}

#[test]
fn reply_to_honoured_only_for_the_signed_sender() {
    let (a, b) = (identity(1), identity(2));
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let signed = Signed::sign(message(&a, &b, "x", &mut rng), &a).unwrap();
    let own = SessionAddr {
        key: a.public(),
        session: sid("other-a"),
    };
    let foreign = SessionAddr {
        key: identity(3).public(),
        session: sid("evil"),
    };
    let hinted =
        Signed::<Envelope>::decode(&signed.clone().with_reply_to(own.clone()).to_bytes()).unwrap();
    assert_eq!(hinted.reply_address(), own);
    let forged = Signed::<Envelope>::decode(&signed.with_reply_to(foreign).to_bytes()).unwrap();
    assert_eq!(forged.reply_address(), forged.body().sender_addr());
}

#[test]
fn sealed_body_cannot_move_to_another_envelope() {
    let (a, b) = (identity(1), identity(2));
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let original = message(&a, &b, "secret", &mut rng);
    let mut stolen = original.clone();
    stolen.sender = identity(3).public();
    assert!(stolen.open_text(&b.sealing_secret()).is_err());
    let mut other_id = original;
    other_id.msg_id = MsgId::from_bytes([9; 16]);
    assert!(other_id.open_text(&b.sealing_secret()).is_err());
}

#[test]
fn receipt_ack_goodbye_round_trip() {
    let b = identity(2);
    let r = Signed::sign(
        Receipt {
            v: VERSION,
            recipient: b.public(),
            recipient_session: sid("s-b"),
            sender: identity(1).public(),
            msg_ids: vec![MsgId::from_bytes([1; 16]), MsgId::from_bytes([2; 16])],
            state: ReceiptState::Delivered,
            ts: NOW,
            pass: None,
        },
        &b,
    )
    .unwrap();
    assert_eq!(Signed::<Receipt>::decode(&r.to_bytes()).unwrap(), r);
    // A receipt lists 1 to a batch of distinct ids.
    for ids in [
        vec![],
        vec![MsgId::from_bytes([1; 16]), MsgId::from_bytes([1; 16])],
        (0..=limits::MAX_DELIVER_BATCH as u8)
            .map(|i| MsgId::from_bytes([i; 16]))
            .collect(),
    ] {
        let bad = Receipt {
            v: VERSION,
            recipient: b.public(),
            recipient_session: sid("s-b"),
            sender: identity(1).public(),
            msg_ids: ids,
            state: ReceiptState::Delivered,
            ts: NOW,
            pass: None,
        };
        assert!(Signed::sign(bad, &b).is_err());
    }
    let ack = Signed::sign(
        Ack {
            v: VERSION,
            owner: b.public(),
            owner_session: sid("s-b"),
            entries: vec![AckEntry(identity(1).public(), MsgId::from_bytes([1; 16]))],
            ts: NOW,
        },
        &b,
    )
    .unwrap();
    assert_eq!(Signed::<Ack>::decode(&ack.to_bytes()).unwrap(), ack);
    let bye = Signed::sign(
        Goodbye {
            v: VERSION,
            identity: b.public(),
            session_id: sid("s-b"),
            ts: NOW,
            seq: 9,
        },
        &b,
    )
    .unwrap();
    assert_eq!(Signed::<Goodbye>::decode(&bye.to_bytes()).unwrap(), bye);
}

#[test]
fn kinds_do_not_cross() {
    // A receipt's bytes must not verify as an ack or anything else.
    let b = identity(2);
    let bye = Signed::sign(
        Goodbye {
            v: VERSION,
            identity: b.public(),
            session_id: sid("s-b"),
            ts: NOW,
            seq: 9,
        },
        &b,
    )
    .unwrap();
    assert!(Signed::<Receipt>::decode(&bye.to_bytes()).is_err());
    assert!(Signed::<Announcement>::decode(&bye.to_bytes()).is_err());
}

#[test]
fn signing_with_the_wrong_identity_is_refused() {
    let a = identity(1);
    let err = Signed::sign(announcement(&a, "s1", ""), &identity(2)).unwrap_err();
    assert!(matches!(
        err,
        WireError::InvalidField {
            field: "signer",
            ..
        }
    ));
}

#[test]
fn forged_signature_rejected() {
    // Mallory copies Alice's announcement body, changes the summary, signs with her key
    // but leaves Alice as the identity.
    let (alice, mallory) = (identity(1), identity(4));
    let mut body = announcement(&alice, "s1", "forged");
    let bytes = encode(&body);
    let sig = mallory.sign(crate::sign::Domain::Announcement, &bytes);
    body.addrs.clear();
    let outer = Outer {
        body: ByteBuf::from(bytes),
        sig: serde_bytes::ByteArray::new(sig),
        reply_to: None,
    };
    let err = Signed::<Announcement>::decode(&encode(&outer)).unwrap_err();
    assert!(matches!(err, WireError::BadSignature { .. }), "{err}");
}

#[test]
fn oversized_and_malformed_rejected() {
    let big = vec![0u8; limits::MAX_ANNOUNCEMENT_BYTES + 1];
    assert!(matches!(
        Signed::<Announcement>::decode(&big),
        Err(WireError::Oversized { .. })
    ));
    assert!(matches!(
        Signed::<Announcement>::decode(&[]),
        Err(WireError::Malformed { .. })
    ));
    assert!(matches!(
        Signed::<Envelope>::decode(&[0xff, 0x00]),
        Err(WireError::Malformed { .. })
    ));
    let a = identity(1);
    let details = Details {
        cwd: "/".into(),
        git_label: None,
        summary: "x".repeat(limits::MAX_SUMMARY_BYTES + 1),
        host: HostKind::Other,
        delivery: DeliveryMode::Poll,
        project: None,
        claims: Vec::new(),
    };
    let err = details
        .seal(&a, &sid("s1"), &[], &mut ChaCha20Rng::seed_from_u64(1))
        .unwrap_err();
    assert!(err.to_string().contains("summary"), "{err}");
    let mut ann = announcement(&a, "s1", "");
    ann.details.readers = vec![ann.details.readers[0]; MAX_PRESENCE_READERS + 1];
    assert!(matches!(
        Signed::sign(ann, &a),
        Err(WireError::InvalidField {
            field: "details",
            ..
        })
    ));
    let mut ann = announcement(&a, "s1", "");
    ann.addrs = vec!["/ip4/1.2.3.4/tcp/1".into(); limits::MAX_LISTEN_ADDRS + 1];
    assert!(matches!(
        Signed::sign(ann, &a),
        Err(WireError::InvalidField { field: "addrs", .. })
    ));
    let mut ann = announcement(&a, "s1", "");
    ann.sealing = SealingBinding::new(&identity(2));
    assert!(matches!(
        Signed::sign(ann, &a),
        Err(WireError::InvalidField {
            field: "sealing",
            ..
        })
    ));
}

#[test]
fn unsupported_version_rejected() {
    // An old node's (version 1) and a newer node's objects are both refused by version.
    for got in [VERSION - 1, VERSION + 1] {
        unsupported_version_rejected_for(got);
    }
}

fn unsupported_version_rejected_for(got: u8) {
    let a = identity(1);
    let mut ann = announcement(&a, "s1", "");
    ann.v = got;
    let bytes = encode(&ann);
    let sig = a.sign(crate::sign::Domain::Announcement, &bytes);
    let outer = Outer {
        body: ByteBuf::from(bytes),
        sig: serde_bytes::ByteArray::new(sig),
        reply_to: None,
    };
    assert_eq!(
        Signed::<Announcement>::decode(&encode(&outer)),
        Err(WireError::UnsupportedVersion {
            kind: "announcement",
            got
        })
    );
}

#[test]
fn knocks_carry_no_text() {
    let (a, b) = (identity(1), identity(2));
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let mut knock = message(&a, &b, "let me in", &mut rng);
    knock.kind = EnvelopeKind::Knock;
    assert!(matches!(
        Signed::sign(knock.clone(), &a),
        Err(WireError::InvalidField {
            field: "sealed",
            ..
        })
    ));
    knock.sealed = None;
    knock.name = Some("hi there, approve me".into());
    assert!(matches!(
        Signed::sign(knock.clone(), &a),
        Err(WireError::InvalidField { field: "name", .. })
    ));
    knock.name = Some("alice-laptop".into());
    Signed::sign(knock, &a).unwrap();
}

#[test]
fn a_knock_carries_an_invite_secret_only_its_recipient_opens() {
    let (a, b) = (identity(1), identity(2));
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let mut knock = message(&a, &b, "x", &mut rng);
    knock.kind = EnvelopeKind::Knock;
    knock.sealed = None;
    knock.name = Some("bob".into());
    let secret = [7u8; crate::wire::INVITE_SECRET_BYTES];
    knock
        .seal_invite(&secret, &b.sealing_secret().public(), &mut rng)
        .unwrap();
    let signed = Signed::sign(knock.clone(), &a).unwrap();
    let back = Signed::<Envelope>::decode(&signed.to_bytes()).unwrap();
    let held = crate::trust::Knock::from_envelope(back.body());
    assert_eq!(held.open_invite(&b.sealing_secret()), Some(secret));
    assert_eq!(held.open_invite(&identity(3).sealing_secret()), None);
    // Bound to the knock: the same sealed secret in another knock does not open.
    let mut moved = crate::trust::Knock::from_envelope(back.body());
    moved.msg_id = MsgId::from_bytes([1; 16]);
    assert_eq!(moved.open_invite(&b.sealing_secret()), None);
    // A sealed part of any other size on a knock is refused.
    knock
        .seal_text("a longer text", &b.sealing_secret().public(), &mut rng)
        .unwrap();
    assert!(matches!(
        Signed::sign(knock, &a),
        Err(WireError::InvalidField {
            field: "sealed",
            ..
        })
    ));
}

#[test]
fn read_receipts_name_a_message_and_carry_no_text() {
    let (a, b) = (identity(1), identity(2));
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let mut read = message(&a, &b, "secret", &mut rng);
    read.kind = EnvelopeKind::Read;
    read.in_reply_to = Some(MsgId::from_bytes([7; 16]));
    assert!(matches!(
        Signed::sign(read.clone(), &a),
        Err(WireError::InvalidField {
            field: "sealed",
            ..
        })
    ));
    read.sealed = None;
    read.in_reply_to = None;
    assert!(matches!(
        Signed::sign(read.clone(), &a),
        Err(WireError::InvalidField {
            field: "in_reply_to",
            ..
        })
    ));
    read.in_reply_to = Some(MsgId::from_bytes([7; 16]));
    let signed = Signed::sign(read, &a).unwrap();
    let decoded = Signed::<Envelope>::decode(&signed.to_bytes()).unwrap();
    assert_eq!(decoded.body().kind, EnvelopeKind::Read);
}

#[test]
fn oversized_body_rejected() {
    let (a, b) = (identity(1), identity(2));
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    // A text over the limit is refused where the body is checked (sealing, opening)…
    assert!(
        Body::text("x".repeat(limits::MAX_BODY_BYTES + 1))
            .check()
            .is_err()
    );
    // …and a ciphertext longer than any valid body is refused on the envelope.
    let text = "x".repeat(limits::MAX_SEALED_BODY_BYTES + 1);
    let env = message(&a, &b, &text, &mut rng);
    assert!(matches!(
        Signed::sign(env, &a),
        Err(WireError::InvalidField {
            field: "sealed",
            ..
        })
    ));
    let ok = message(&a, &b, &"x".repeat(limits::MAX_BODY_BYTES), &mut rng);
    let signed = Signed::sign(ok, &a).unwrap();
    assert!(signed.to_bytes().len() <= limits::MAX_ENVELOPE_BYTES);
    Signed::<Envelope>::decode(&signed.to_bytes()).unwrap();
}

/// A `read` or `host_queued` envelope may be about up to 64 messages (version 10):
/// `also_about` beside `in_reply_to`, distinct, on receipts only; one about a single
/// message leaves the key out, as version 9 encoded it.
#[test]
fn a_receipt_envelope_is_about_at_most_64_distinct_messages() {
    let (a, b) = (identity(1), identity(2));
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let id = |n: u8| MsgId::from_bytes([n; 16]);
    let receipt = |more: Vec<MsgId>| {
        let mut env = message(&a, &b, "x", &mut rng.clone());
        env.kind = EnvelopeKind::HostQueued;
        env.sealed = None;
        env.in_reply_to = Some(id(0));
        env.also_about = more;
        env
    };
    let decode = |env: Envelope| -> Result<Signed<Envelope>, String> {
        let bytes = Signed::sign(env, &a).map_err(|e| e.to_string())?.to_bytes();
        Signed::<Envelope>::decode(&bytes).map_err(|e| e.to_string())
    };
    let one = Signed::sign(receipt(Vec::new()), &a).unwrap();
    assert!(
        !one.body_bytes().windows(10).any(|w| w == b"also_about"),
        "left out when empty"
    );
    let all: Vec<MsgId> = (1..64).map(id).collect();
    let back = decode(receipt(all.clone())).unwrap();
    assert_eq!(back.body().also_about, all);
    for (more, why) in [
        ((1..=64).map(id).collect::<Vec<_>>(), "65 messages"),
        (vec![id(1), id(1)], "one named twice"),
        (vec![id(0)], "in_reply_to named again"),
    ] {
        let err = Signed::sign(receipt(more), &a).err().map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains("also_about")),
            "{why}: {err:?}"
        );
    }
    let mut not_a_receipt = message(&a, &b, "x", &mut rng);
    not_a_receipt.also_about = vec![id(1)];
    let err = Signed::sign(not_a_receipt, &a).err().map(|e| e.to_string());
    assert!(
        err.as_deref()
            .is_some_and(|e| e.contains("only for receipts")),
        "{err:?}"
    );
}

/// `also_about` is left out when empty (PROTOCOL §4.3): an envelope whose CBOR
/// carries the key with an empty array is malformed, even correctly signed. The
/// bytes are built by hand, splicing the key into a genuine receipt's body, and the
/// same splice with one id decodes (so the refusal is the empty array's, not the
/// splice's).
#[test]
fn a_receipt_with_also_about_present_but_empty_is_malformed() {
    let (a, b) = (identity(1), identity(2));
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let mut env = bare_message(&a, &b, &mut rng);
    env.kind = EnvelopeKind::Read;
    env.in_reply_to = Some(MsgId::from_bytes([9; 16]));
    let genuine = Signed::sign(env, &a).unwrap();
    let body = genuine.body_bytes().to_vec();
    // 13 keys, no also_about: a map header of 0xa0 + 13.
    assert_eq!(body[0], 0xad);
    let name_key = b"\x64name";
    let at = body
        .windows(name_key.len())
        .position(|w| w == name_key)
        .unwrap();
    // Re-signs `value` spliced in as `also_about` before `name` (its place, §4.3).
    let spliced = |value: &[u8]| -> Vec<u8> {
        let mut body = body.clone();
        body[0] = 0xae; // 14 keys
        let mut key = vec![0x6a];
        key.extend_from_slice(b"also_about");
        key.extend_from_slice(value);
        body.splice(at..at, key);
        #[derive(serde::Serialize)]
        struct Outer {
            body: ByteBuf,
            sig: serde_bytes::ByteArray<64>,
        }
        encode(&Outer {
            sig: serde_bytes::ByteArray::new(a.sign(crate::sign::Domain::Envelope, &body)),
            body: ByteBuf::from(body),
        })
    };
    let mut one = vec![0x81, 0x50];
    one.extend_from_slice(&[7; 16]);
    let back = Signed::<Envelope>::decode(&spliced(&one)).unwrap();
    assert_eq!(back.body().also_about, vec![MsgId::from_bytes([7; 16])]);
    let err = Signed::<Envelope>::decode(&spliced(&[0x80])).unwrap_err();
    assert!(
        err.to_string().contains("also_about is present but empty"),
        "{err}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn envelope_round_trips(text in ".{1,300}", task in proptest::option::of("[a-z0-9-]{1,20}"), seed: u64) {
        let (a, b) = (identity(1), identity(2));
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut env = message(&a, &b, "x", &mut rng);
        let body = Body {
            text: text.clone(),
            task_id: task,
            status: Some(TaskStatus::NeedsInput),
            in_reply_to: Some(MsgId::from_bytes([9; 16])),
            group: None,
        };
        env.seal_body(&body, &b.sealing_secret().public(), &mut rng).unwrap();
        let signed = Signed::sign(env, &a).unwrap();
        let back = Signed::<Envelope>::decode(&signed.to_bytes()).unwrap();
        prop_assert_eq!(back.body().open_body(&b.sealing_secret()).unwrap(), body);
        prop_assert_eq!(back, signed);
    }

    #[test]
    fn any_bit_flip_in_signed_bytes_is_rejected(bit in 0usize..100_000, summary in "[ -~]{0,40}") {
        let a = identity(1);
        let signed = Signed::sign(announcement(&a, "s1", &summary), &a).unwrap();
        let mut body = signed.body_bytes().to_vec();
        let bit = bit % (body.len() * 8);
        body[bit / 8] ^= 1 << (bit % 8);
        let outer = Outer { body: ByteBuf::from(body), sig: serde_bytes::ByteArray::new(*signed.signature()), reply_to: None };
        prop_assert!(Signed::<Announcement>::decode(&encode(&outer)).is_err());
    }

    #[test]
    fn any_bit_flip_in_signature_is_rejected(bit in 0usize..512) {
        let (a, b) = (identity(1), identity(2));
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        let signed = Signed::sign(message(&a, &b, "hi", &mut rng), &a).unwrap();
        let mut sig = *signed.signature();
        sig[bit / 8] ^= 1 << (bit % 8);
        let outer = Outer { body: ByteBuf::from(signed.body_bytes().to_vec()), sig: serde_bytes::ByteArray::new(sig), reply_to: None };
        prop_assert!(Signed::<Envelope>::decode(&encode(&outer)).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = Signed::<Announcement>::decode(&bytes);
        let _ = Signed::<Envelope>::decode(&bytes);
        let _ = Signed::<Receipt>::decode(&bytes);
        let _ = Signed::<Ack>::decode(&bytes);
        let _ = Signed::<Goodbye>::decode(&bytes);
    }
}

/// What a holder sees of a message: no task id, status or reply in the signed bytes,
/// only inside the sealed body; a clear `in_reply_to` is refused on a message; a body
/// that opens but is not a valid body is refused as malformed.
#[test]
fn a_messages_task_status_and_reply_are_sealed() {
    let (a, b) = (identity(1), identity(2));
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let mut env = message(&a, &b, "x", &mut rng);
    let body = Body {
        text: "the plan".into(),
        task_id: Some("secret-merger-42".into()),
        status: Some(TaskStatus::Result),
        in_reply_to: Some(MsgId::from_bytes([5; 16])),
        group: None,
    };
    env.seal_body(&body, &b.sealing_secret().public(), &mut rng)
        .unwrap();
    let signed = Signed::sign(env.clone(), &a).unwrap();
    let wire = signed.to_bytes();
    assert!(!wire.windows(16).any(|w| w == b"secret-merger-42"));
    assert!(!wire.windows(16).any(|w| w == [5; 16]));
    assert_eq!(signed.body().open_body(&b.sealing_secret()).unwrap(), body);
    let mut clear = env.clone();
    clear.in_reply_to = Some(MsgId::from_bytes([5; 16]));
    assert!(matches!(
        Signed::sign(clear, &a),
        Err(WireError::InvalidField {
            field: "in_reply_to",
            ..
        })
    ));
    // Sealed bytes that are not a body (the version-2 bare text) do not open.
    let mut old = env;
    old.sealed = Some(
        crate::seal::seal(
            b"bare text",
            &b.sealing_secret().public(),
            &old.seal_aad(),
            &mut rng,
        )
        .unwrap(),
    );
    assert_eq!(
        old.open_body(&b.sealing_secret()),
        Err(OpenError::Malformed)
    );
}

/// PROTOCOL §1, "CBOR form": what the decoders refuse, and what they let through (a
/// signature covers the exact bytes, so no canonical form is needed to verify one; an
/// encoder must still emit the form of §1). Each case is a goodbye body signed as is.
#[test]
fn cbor_form_the_decoders_hold_to() {
    let id = Identity::from_seed(&[5; 32]);
    let key = id.public();
    // CBOR pieces.
    let text = |s: &str| {
        let mut v = vec![0x60 | u8::try_from(s.len()).unwrap()];
        v.extend_from_slice(s.as_bytes());
        v
    };
    let uint8 = |n: u64| {
        let mut v = vec![0x1b];
        v.extend_from_slice(&n.to_be_bytes());
        v
    };
    let ts: u64 = 1_790_000_000_000;
    let field_v = [text("v"), vec![VERSION]].concat();
    let field_id = [text("identity"), vec![0x58, 32], key.as_bytes().to_vec()].concat();
    let field_session = [text("session_id"), text("s")].concat();
    let field_ts = [text("ts"), uint8(ts)].concat();
    let field_seq = [text("seq"), vec![0x01]].concat();
    let map = |fields: &[&[u8]]| {
        let mut v = vec![0xa0 | u8::try_from(fields.len()).unwrap()];
        for f in fields {
            v.extend_from_slice(f);
        }
        v
    };
    let decode = |body: Vec<u8>| {
        let sig = id.sign(crate::sign::Domain::Goodbye, &body);
        let outer = [
            vec![0xa2],
            text("body"),
            vec![0x59],
            u16::try_from(body.len()).unwrap().to_be_bytes().to_vec(),
            body,
            text("sig"),
            vec![0x58, 64],
            sig.to_vec(),
        ]
        .concat();
        Signed::<Goodbye>::decode(&outer)
    };
    let canonical = map(&[&field_v, &field_id, &field_session, &field_ts, &field_seq]);
    let good = decode(canonical.clone()).expect("the form of §1");
    assert_eq!(good.body().ts, ts);
    // The implementation's own encoding of it is the same bytes.
    assert_eq!(super::encode(good.body()), canonical);

    // Refused: a float where an integer is required, an unknown key, a missing key,
    // a text where bytes are required.
    let float_ts = [text("ts"), vec![0xfb], (ts as f64).to_be_bytes().to_vec()].concat();
    let unknown = [text("extra"), vec![0x00]].concat();
    let id_as_text = [text("identity"), text(&key.to_hex()[..20])].concat();
    for (case, body) in [
        (
            "float ts",
            map(&[&field_v, &field_id, &field_session, &float_ts, &field_seq]),
        ),
        (
            "unknown key",
            map(&[
                &field_v,
                &field_id,
                &field_session,
                &field_ts,
                &field_seq,
                &unknown,
            ]),
        ),
        (
            "missing key",
            map(&[&field_v, &field_id, &field_session, &field_ts]),
        ),
        (
            "text for bytes",
            map(&[&field_v, &id_as_text, &field_session, &field_ts, &field_seq]),
        ),
    ] {
        assert!(decode(body).is_err(), "{case} was accepted");
    }

    // Let through (lenient, so never to be relied on by a sender): an integer not in
    // its shortest form, and keys in another order.
    let long_forms: [&[u8]; 4] = [
        &[0x18, VERSION],
        &[0x19, 0, VERSION],
        &[0x1a, 0, 0, 0, VERSION],
        &[0x1b, 0, 0, 0, 0, 0, 0, 0, VERSION],
    ];
    for form in long_forms {
        let long_v = [text("v"), form.to_vec()].concat();
        let long_seq = [text("seq"), form.to_vec()].concat();
        assert!(
            decode(map(&[
                &long_v,
                &field_id,
                &field_session,
                &field_ts,
                &long_seq
            ]))
            .is_ok(),
            "v and seq as {form:02x?} were refused"
        );
    }
    // A `v` past a byte is no version at all.
    let huge_v = [text("v"), vec![0x19, 1, VERSION]].concat();
    assert!(matches!(
        decode(map(&[
            &huge_v,
            &field_id,
            &field_session,
            &field_ts,
            &field_seq
        ])),
        Err(WireError::Malformed { .. })
    ));
    assert!(
        decode(map(&[
            &field_seq,
            &field_ts,
            &field_session,
            &field_id,
            &field_v
        ]))
        .is_ok()
    );
}

fn details(cwd: &str) -> Details {
    Details {
        cwd: cwd.into(),
        git_label: Some("acme-billing".into()),
        summary: "migrating the invoices table".into(),
        host: HostKind::Claude,
        delivery: DeliveryMode::Inbox,
        project: None,
        claims: Vec::new(),
    }
}

/// Every text field at its longest, and the most claims, each at its longest.
fn largest_details() -> Details {
    use crate::claims::{Claim, MAX_CLAIMS_PER_SESSION, MAX_PATTERN_BYTES, MAX_REASON_BYTES};
    Details {
        cwd: "c".repeat(limits::MAX_CWD_BYTES),
        git_label: Some("g".repeat(limits::MAX_GIT_LABEL_BYTES)),
        summary: "s".repeat(limits::MAX_SUMMARY_BYTES),
        host: HostKind::Claude,
        delivery: DeliveryMode::HostInbox,
        project: Some(serde_bytes::ByteArray::new([7; 16])),
        claims: vec![
            Claim {
                pattern: "p".repeat(MAX_PATTERN_BYTES),
                exclusive: true,
                reason: "r".repeat(MAX_REASON_BYTES),
                since: u64::MAX / 2,
                until: u64::MAX / 2 + crate::claims::MAX_CLAIM_LIFETIME_MS,
            };
            MAX_CLAIMS_PER_SESSION
        ],
    }
}

/// Details whose claims break a rule are refused when sealed (a claim without a
/// project, too many, a bad pattern, bad times); good ones open as sealed. (`open`
/// runs the same check, so a peer's bad claims leave its details unread.)
#[test]
fn details_with_bad_claims_are_refused() {
    use crate::claims::{Claim, MAX_CLAIMS_PER_SESSION};
    let alice = identity(1);
    let bob = identity(2);
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let claim = |pattern: &str| Claim {
        pattern: pattern.into(),
        exclusive: true,
        reason: String::new(),
        since: 1,
        until: 2,
    };
    let with = |project: bool, claims: Vec<Claim>| Details {
        project: project.then(|| serde_bytes::ByteArray::new([1; 16])),
        claims,
        ..details("/r")
    };
    for bad in [
        with(false, vec![claim("src")]),
        with(true, vec![claim("src"); MAX_CLAIMS_PER_SESSION + 1]),
        with(true, vec![claim("../etc")]),
        with(
            true,
            vec![Claim {
                until: 1,
                ..claim("src")
            }],
        ),
    ] {
        assert!(matches!(
            bad.seal(&alice, &sid("s1"), &[reader_of(&bob)], &mut rng),
            Err(DetailsError::Invalid(_))
        ));
    }
    let good = with(true, vec![claim("src/**")]);
    let sealed = good
        .seal(&alice, &sid("s1"), &[reader_of(&bob)], &mut rng)
        .unwrap();
    let wrap = |who: &Identity| {
        super::ReaderKey::agree(
            &who.sealing_secret(),
            &alice.sealing_secret().public(),
            &alice.public(),
            &who.public(),
        )
        .unwrap()
    };
    assert_eq!(
        sealed.open(&alice.public(), &sid("s1"), &wrap(&bob)),
        Some(good)
    );
}

fn reader_of(id: &Identity) -> (IdentityKey, SealingKey) {
    (id.public(), id.sealing_secret().public())
}

/// Presence details (version 13): the announcer's own identity and the readers it
/// names open them; a stranger, or a peer it no longer names, reads nothing.
#[test]
fn details_open_for_their_readers_only() {
    let (alice, bob, carol, mallory) = (identity(1), identity(2), identity(3), identity(4));
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let mut ann = announcement(&alice, "s1", "");
    ann.details = details("/home/alice/work/acme-billing")
        .seal(
            &alice,
            &sid("s1"),
            &[reader_of(&bob), reader_of(&carol)],
            &mut rng,
        )
        .unwrap();
    assert_eq!(ann.details.readers.len(), 3);
    let signed = Signed::sign(ann, &alice).unwrap();
    let got = Signed::<Announcement>::decode(&signed.to_bytes()).unwrap();
    for reader in [&alice, &bob, &carol] {
        let opened = DetailsReader::new(reader).open(got.body());
        assert_eq!(opened, Some(details("/home/alice/work/acme-billing")));
    }
    assert_eq!(DetailsReader::new(&mallory).open(got.body()), None);
    // The bytes a stranger sees do not contain the directory or the summary.
    let wire = signed.to_bytes();
    for secret in [&b"acme-billing"[..], b"invoices"] {
        assert!(!wire.windows(secret.len()).any(|w| w == secret));
    }

    // Carol removed: the next announcement is closed to her.
    let mut next = announcement(&alice, "s1", "");
    next.details = details("/home/alice/work/acme-billing")
        .seal(&alice, &sid("s1"), &[reader_of(&bob)], &mut rng)
        .unwrap();
    assert!(DetailsReader::new(&carol).open(&next).is_none());
    assert!(DetailsReader::new(&bob).open(&next).is_some());
}

#[test]
fn details_are_bound_to_their_announcement_and_refuse_tampering() {
    let (alice, bob) = (identity(1), identity(2));
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let sealed = details("/a")
        .seal(&alice, &sid("s1"), &[reader_of(&bob)], &mut rng)
        .unwrap();
    // Moved into another session's announcement of the same identity: unreadable.
    let mut other = announcement(&alice, "s2", "");
    other.details = sealed.clone();
    assert!(DetailsReader::new(&bob).open(&other).is_none());
    let mut same = announcement(&alice, "s1", "");
    same.details = sealed.clone();
    assert!(DetailsReader::new(&bob).open(&same).is_some());
    let last = same.details.ct.len() - 1;
    same.details.ct[last] ^= 1;
    assert!(DetailsReader::new(&bob).open(&same).is_none());
    // The wrap from Alice to Bob is not the one from Bob to Alice: two
    // announcements do not show that their announcers are paired.
    let from_bob = details("/b")
        .seal(&bob, &sid("s9"), &[reader_of(&alice)], &mut rng)
        .unwrap();
    let hints = |d: &SealedDetails| -> Vec<[u8; 4]> {
        d.readers
            .iter()
            .map(|e| e[..4].try_into().unwrap())
            .collect()
    };
    assert!(hints(&sealed).iter().all(|h| !hints(&from_bob).contains(h)));
}

#[test]
fn details_refuse_bad_readers_and_too_many() {
    let alice = identity(1);
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    // A low-order point gives an all-zero agreement anyone could compute.
    let zero = (identity(2).public(), SealingKey::from_bytes([0; 32]));
    assert_eq!(
        details("/").seal(&alice, &sid("s1"), &[zero], &mut rng),
        Err(DetailsError::BadReaderKey)
    );
    let many: Vec<_> = (0..MAX_PRESENCE_READERS as u8)
        .map(|n| reader_of(&identity(n.wrapping_add(10))))
        .collect();
    assert_eq!(
        details("/").seal(&alice, &sid("s1"), &many, &mut rng),
        Err(DetailsError::TooManyReaders(MAX_PRESENCE_READERS + 1))
    );
    let fits = &many[..MAX_PRESENCE_READERS - 1];
    let sealed = largest_details()
        .seal(&alice, &sid("s1"), fits, &mut rng)
        .unwrap();
    assert!(
        sealed.ct.len() <= super::MAX_DETAILS_CT_BYTES,
        "{}",
        sealed.ct.len()
    );
    let mut ann = announcement(&alice, "s1", "");
    ann.details = sealed;
    let bytes = Signed::sign(ann, &alice).unwrap().to_bytes();
    assert!(
        bytes.len() <= limits::MAX_ANNOUNCEMENT_BYTES,
        "{}",
        bytes.len()
    );
}

/// What sealing the details costs on the wire (docs/BENCHMARKS.md): each reader adds
/// 54 bytes (its 52-byte entry and the byte string's header).
#[test]
fn each_details_reader_costs_54_bytes() {
    let alice = identity(1);
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    let size = |readers: usize, rng: &mut ChaCha20Rng| {
        let others: Vec<_> = (0..readers as u8)
            .map(|n| reader_of(&identity(n + 10)))
            .collect();
        let mut ann = announcement(&alice, "s1", "");
        ann.details = details("/home/alice/work/acme-billing")
            .seal(&alice, &sid("s1"), &others, rng)
            .unwrap();
        Signed::sign(ann, &alice).unwrap().to_bytes().len()
    };
    let (alone, five, many) = (size(0, &mut rng), size(5, &mut rng), size(63, &mut rng));
    eprintln!("announcement bytes: own identity only {alone}, +5 peers {five}, +63 peers {many}");
    assert_eq!(five - alone, 5 * 54);
    // The array header grows by one byte past 23 entries.
    assert_eq!(many - alone, 63 * 54 + 1);
}
