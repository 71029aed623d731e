use std::sync::OnceLock;

use proptest::prelude::*;
use rand_chacha::{ChaCha20Rng, rand_core::SeedableRng};
use serde_bytes::ByteArray;

use super::*;
use crate::{Identity, limits::MINUTE_MS, sign::Domain, wire::EnvelopeKind};

const T0: u64 = 1_700_000_000_000;
const NOW: u64 = T0 + 100_000;

fn ident(n: u8) -> Identity {
    Identity::from_seed(&[n; 32])
}

fn sid(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

fn owner() -> Identity {
    ident(1)
}

fn inbox() -> SessionId {
    sid("inbox")
}

fn mid(n: u32) -> MsgId {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(&n.to_be_bytes());
    MsgId::from_bytes(b)
}

/// A signed envelope to `to#session` carrying `to`'s pass for `from` (admitted): a
/// message with `text_len` bytes of text, or a knock (no body, so cheap to make) when
/// `text_len` is `None`.
fn envelope_to(
    from: &Identity,
    to: &Identity,
    session: &SessionId,
    id: MsgId,
    ts: u64,
    text_len: Option<usize>,
) -> Signed<Envelope> {
    envelope_classed(from, to, session, id, ts, text_len, true)
}

/// [`envelope_to`] with or without the pass.
fn envelope_classed(
    from: &Identity,
    to: &Identity,
    session: &SessionId,
    id: MsgId,
    ts: u64,
    text_len: Option<usize>,
    with_pass: bool,
) -> Signed<Envelope> {
    let kind = if text_len.is_some() {
        EnvelopeKind::Message
    } else {
        EnvelopeKind::Knock
    };
    let mut env = Envelope {
        v: wire::VERSION,
        sender: from.public(),
        sender_session: sid("out"),
        recipient: to.public(),
        recipient_session: session.clone(),
        msg_id: id,
        ts,
        kind,
        in_reply_to: None,
        also_about: Vec::new(),
        name: None,
        sealed: None,
        pass: with_pass.then(|| wire::MailboxPass::issue(to, &from.public())),
        reply_pass: None,
    };
    if let Some(len) = text_len {
        let mut rng = ChaCha20Rng::seed_from_u64(ts ^ u64::from(id.as_bytes()[3]));
        env.seal_text(&"x".repeat(len), &to.sealing_secret().public(), &mut rng)
            .unwrap();
    }
    Signed::sign(env, from).unwrap()
}

fn env(from: u8, id: u32, ts: u64, text_len: Option<usize>) -> Signed<Envelope> {
    envelope_to(&ident(from), &owner(), &inbox(), mid(id), ts, text_len)
}

/// [`env`] without a pass: a stranger's.
fn stranger_env(from: u8, id: u32, ts: u64, text_len: Option<usize>) -> Signed<Envelope> {
    envelope_classed(
        &ident(from),
        &owner(),
        &inbox(),
        mid(id),
        ts,
        text_len,
        false,
    )
}

/// An ack signed by `signer` of sender 2's messages `ids`.
fn ack_by(signer: &Identity, session: &SessionId, ids: &[MsgId], ts: u64) -> Signed<Ack> {
    let sender = ident(2).public();
    let entries: Vec<_> = ids.iter().map(|id| (sender, *id)).collect();
    ack_entries_by(signer, session, &entries, ts)
}

fn ack_entries_by(
    signer: &Identity,
    session: &SessionId,
    entries: &[(IdentityKey, MsgId)],
    ts: u64,
) -> Signed<Ack> {
    let body = Ack {
        v: wire::VERSION,
        owner: signer.public(),
        owner_session: session.clone(),
        entries: entries.iter().map(|(s, id)| AckEntry(*s, *id)).collect(),
        ts,
    };
    Signed::sign(body, signer).unwrap()
}

/// The owner's ack of sender 2's messages `ids`.
fn ack(ids: &[u32], ts: u64) -> Signed<Ack> {
    let ids: Vec<_> = ids.iter().map(|n| mid(*n)).collect();
    ack_by(&owner(), &inbox(), &ids, ts)
}

/// The owner's ack of `(sender, id)` pairs.
fn ack_of(entries: &[(u8, u32)], ts: u64) -> Signed<Ack> {
    let entries: Vec<_> = entries
        .iter()
        .map(|(s, n)| (ident(*s).public(), mid(*n)))
        .collect();
    ack_entries_by(&owner(), &inbox(), &entries, ts)
}

fn empty() -> Mailbox {
    Mailbox::new(owner().public(), inbox())
}

fn ids(m: &Mailbox) -> Vec<MsgId> {
    m.pending().map(|e| e.body().msg_id).collect()
}

fn merged(a: &Mailbox, b: &Mailbox, cfg: &Config) -> Mailbox {
    let mut m = a.clone();
    m.merge(b, NOW, cfg).unwrap();
    m
}

/// Every bound holds and nothing acked is pending.
/// One class's (envelopes, bytes) in all, and per sender.
type ClassCount = (usize, usize, HashMap<IdentityKey, (usize, usize)>);

fn assert_within(m: &Mailbox, cfg: &Config) {
    assert!(m.len() <= cfg.max_held_envelopes(), "{} envelopes", m.len());
    assert!(m.acks().len() <= cfg.max_acks);
    // Per class: (envelopes, bytes) in all and per sender.
    let mut classes: [ClassCount; 2] = Default::default();
    let acked = m.acked();
    for e in m.pending() {
        let size = e.to_bytes().len();
        let class = &mut classes[usize::from(e.body().is_admitted())];
        class.0 += 1;
        class.1 += size;
        let s = class.2.entry(e.body().sender).or_default();
        s.0 += 1;
        s.1 += size;
        assert!(!acked.contains(&AckEntry(e.body().sender, e.body().msg_id)));
        if !e.body().is_admitted() {
            assert!(
                size <= cfg.stranger_envelope_max_bytes,
                "stranger's {size} bytes"
            );
        }
    }
    let [strangers, admitted] = classes;
    assert!(admitted.0 <= cfg.max_envelopes, "{} admitted", admitted.0);
    assert!(admitted.1 <= cfg.max_bytes, "{} admitted bytes", admitted.1);
    assert!(
        admitted
            .2
            .values()
            .all(|(n, b)| *n <= cfg.sender_quota && *b <= cfg.sender_max_bytes),
        "{:?}",
        admitted.2
    );
    assert!(
        strangers.0 <= cfg.stranger_slots,
        "{} strangers",
        strangers.0
    );
    assert!(
        strangers.1 <= cfg.stranger_max_bytes,
        "{} stranger bytes",
        strangers.1
    );
    assert!(
        strangers
            .2
            .values()
            .all(|(n, _)| *n <= cfg.stranger_sender_quota),
        "{:?}",
        strangers.2
    );
}

// ---- unit tests ----

#[test]
fn record_key_is_domain_separated_hash() {
    let k = record_key(&owner().public(), &inbox());
    let mut h = Sha256::new();
    h.update(b"interlink-p2p/v1/mailbox");
    h.update(owner().public().as_bytes());
    h.update(b"inbox");
    let expected: [u8; 32] = h.finalize().into();
    assert_eq!(k, expected);
    assert_eq!(empty().record_key(), k);
    assert_ne!(record_key(&owner().public(), &sid("other")), k);
    assert_ne!(record_key(&ident(2).public(), &inbox()), k);
}

#[test]
fn wrong_mailbox_refused() {
    let cfg = Config::default();
    let mut m = empty();
    let other_session = envelope_to(&ident(2), &owner(), &sid("other"), mid(1), T0, None);
    let err = m.insert(other_session, NOW, &cfg).unwrap_err();
    assert!(matches!(err, MailboxError::WrongMailbox { .. }), "{err}");
    let other_owner = envelope_to(&ident(2), &ident(3), &inbox(), mid(2), T0, None);
    assert!(matches!(
        m.insert(other_owner, NOW, &cfg),
        Err(MailboxError::WrongMailbox { .. })
    ));
    let other = Mailbox::new(owner().public(), sid("other"));
    assert!(matches!(
        m.merge(&other, NOW, &cfg),
        Err(MailboxError::WrongMailbox { .. })
    ));
    assert!(m.is_empty());
}

#[test]
fn forged_ack_rejected() {
    let cfg = Config::default();
    let mut m = empty();
    m.insert(env(2, 1, T0, None), NOW, &cfg).unwrap();
    // The stranger signs an ack for this session under its own key.
    let forged = ack_by(&ident(9), &inbox(), &[mid(1)], T0 + 1);
    let err = m.apply_ack(forged, NOW, &cfg).unwrap_err();
    assert!(matches!(err, MailboxError::NotOwner { .. }), "{err}");
    // The owner's ack for another of its sessions does not apply here either.
    let elsewhere = ack_by(&owner(), &sid("other"), &[mid(1)], T0 + 1);
    assert!(matches!(
        m.apply_ack(elsewhere, NOW, &cfg),
        Err(MailboxError::WrongMailbox { .. })
    ));
    assert_eq!(m.len(), 1);
    assert_eq!(m.acks().len(), 0);
}

#[derive(Serialize)]
struct RawSigned {
    body: ByteBuf,
    sig: ByteArray<64>,
}

#[test]
fn ack_claiming_the_owner_but_signed_by_another_is_rejected_on_decode() {
    let cfg = Config::default();
    let mut m = empty();
    m.insert(env(2, 1, T0, None), NOW, &cfg).unwrap();
    // Body names the real owner; signature is the forger's.
    let body = Ack {
        v: wire::VERSION,
        owner: owner().public(),
        owner_session: inbox(),
        entries: vec![AckEntry(ident(2).public(), mid(1))],
        ts: T0 + 1,
    };
    let body_bytes = wire::encode(&body);
    let forged = wire::encode(&RawSigned {
        sig: ByteArray::new(ident(9).sign(Domain::Ack, &body_bytes)),
        body: ByteBuf::from(body_bytes),
    });
    let record = wire::encode(&RecordOut {
        v: RECORD_VERSION,
        owner: &owner().public(),
        session: &inbox(),
        envelopes: vec![ByteBuf::from(
            m.envelopes.values().next().unwrap().env.to_bytes(),
        )],
        acks: vec![ByteBuf::from(forged)],
    });
    let (decoded, rejected) = Mailbox::decode(&record, NOW, &cfg).unwrap();
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0].kind, EntryKind::Ack);
    assert!(matches!(
        rejected[0].reason,
        MailboxError::InvalidEntry(WireError::BadSignature { .. })
    ));
    assert!(
        rejected[0].to_string().starts_with("ack #0"),
        "{}",
        rejected[0]
    );
    assert_eq!(decoded, m, "the envelope survives; the forged ack does not");
}

#[test]
fn an_ack_names_sender_and_id_so_a_copied_id_cannot_ack_another_senders_message() {
    let cfg = Config::default();
    let mut m = empty();
    // Sender 3 copied sender 2's pending id 1 and its own message got acked.
    m.insert(env(2, 1, T0, None), NOW, &cfg).unwrap();
    m.insert(env(3, 1, T0 + 1, None), NOW, &cfg).unwrap();
    assert_eq!(m.apply_ack(ack_of(&[(3, 1)], T0 + 10), NOW, &cfg), Ok(1));
    assert_eq!(
        m.pending().map(|e| e.body().sender).collect::<Vec<_>>(),
        vec![ident(2).public()],
        "the genuine message stays"
    );
    // Re-inserting the acked one is refused; the other sender's is not.
    assert!(m.insert(env(3, 1, T0 + 1, None), NOW, &cfg).is_err());
    assert_eq!(
        m.insert(env(2, 1, T0, None), NOW, &cfg),
        Ok(Inserted::Duplicate)
    );
}

#[test]
fn ack_removes_and_tombstones() {
    let cfg = Config::default();
    let mut m = empty();
    let e = env(2, 1, T0, None);
    m.insert(e.clone(), NOW, &cfg).unwrap();
    m.insert(env(2, 2, T0 + 1, None), NOW, &cfg).unwrap();
    let stale_copy = m.clone();
    assert_eq!(m.apply_ack(ack(&[1], T0 + 10), NOW, &cfg), Ok(1));
    assert_eq!(ids(&m), vec![mid(2)]);
    assert_eq!(
        m.acked(),
        BTreeSet::from([AckEntry(ident(2).public(), mid(1))])
    );
    assert_eq!(
        m.insert(e, NOW, &cfg),
        Err(MailboxError::AlreadyAcked(mid(1)))
    );
    // A holder's older copy cannot bring it back, in either merge direction.
    m.merge(&stale_copy, NOW, &cfg).unwrap();
    assert_eq!(ids(&m), vec![mid(2)]);
    let mut other = stale_copy.clone();
    other.merge(&m, NOW, &cfg).unwrap();
    assert_eq!(other.encode(), m.encode());
}

#[test]
fn expiry_sweep() {
    let cfg = Config::default();
    let r = cfg.retention_ms;
    let mut m = empty();
    assert!(matches!(
        m.insert(env(2, 1, NOW - r - 1, None), NOW, &cfg),
        Err(MailboxError::Time(TimeError::Stale { .. }))
    ));
    assert!(matches!(
        m.insert(env(2, 1, NOW + 3 * MINUTE_MS, None), NOW, &cfg),
        Err(MailboxError::Time(TimeError::FutureDated { .. }))
    ));
    m.insert(env(2, 1, T0, None), NOW, &cfg).unwrap();
    m.insert(env(2, 2, T0 + 1000, None), NOW, &cfg).unwrap();
    m.apply_ack(ack(&[99], T0), NOW, &cfg).unwrap();
    assert_eq!(m.sweep(T0 + r, &cfg), 0);
    assert_eq!(m.sweep(T0 + r + 1, &cfg), 1);
    assert_eq!(ids(&m), vec![mid(2)]);
    assert_eq!(m.sweep(T0 + r + 1001, &cfg), 1);
    assert!(m.is_empty());
    // The ack outlives the retention by the skew tolerance.
    m.sweep(T0 + r + MAX_FUTURE_SKEW_MS, &cfg);
    assert_eq!(m.acks().len(), 1);
    m.sweep(T0 + r + MAX_FUTURE_SKEW_MS + 1, &cfg);
    assert_eq!(m.acks().len(), 0);
}

#[test]
fn one_admitted_flood_cannot_evict_a_friend() {
    let cfg = Config::default();
    let mut m = empty();
    // Even a sender the owner admitted is held to its quota; the friend's single
    // envelope is the newest in the mailbox, taken last.
    let flooder = ident(3);
    for i in 1..=1000u32 {
        let e = envelope_to(
            &flooder,
            &owner(),
            &inbox(),
            mid(i),
            T0 + u64::from(i),
            None,
        );
        let expected = if i as usize <= cfg.sender_quota {
            Inserted::Stored
        } else {
            Inserted::Dropped
        };
        assert_eq!(m.insert(e, NOW, &cfg), Ok(expected), "flooder's #{i}");
    }
    assert_eq!(
        m.insert(env(2, 0, T0 + 2000, None), NOW, &cfg),
        Ok(Inserted::Stored)
    );
    assert_eq!(m.len(), cfg.sender_quota + 1);
    // The flooder keeps its first envelopes; later ones are refused, not swapped in.
    assert_eq!(m.pending().next().map(|e| e.body().msg_id), Some(mid(1)));
    let last_kept = u32::try_from(cfg.sender_quota).unwrap();
    assert_eq!(
        m.pending()
            .nth(cfg.sender_quota - 1)
            .map(|e| e.body().msg_id),
        Some(mid(last_kept))
    );
    assert_eq!(m.pending().last().map(|e| e.body().msg_id), Some(mid(0)));
    let late = envelope_to(&flooder, &owner(), &inbox(), mid(5000), T0 + 3000, None);
    assert_eq!(m.insert(late, NOW, &cfg), Ok(Inserted::Dropped));
    assert_within(&m, &cfg);
}

/// The measured attack (issue 13, item 1): strangers' large envelopes, backdated six
/// days, from any number of fresh identities, never take a paired friend's room, and
/// the friend's small message — the newest of all — is kept.
#[test]
fn no_stranger_traffic_evicts_or_blocks_admitted_mail() {
    let cfg = Config::default();
    let six_days_ago = NOW - 6 * crate::limits::DAY_MS;
    let mut m = empty();
    // 200 fresh identities, each sending big messages and knocks, backdated.
    for s in 0..200u32 {
        let stranger = Identity::from_seed(&[
            (s % 250) as u8 + 3,
            (s / 250) as u8 + 1,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
            7,
        ]);
        for k in 0..3u32 {
            let id = mid(10_000 + s * 10 + k);
            let text = (k != 2).then_some(60_000);
            let e = envelope_classed(
                &stranger,
                &owner(),
                &inbox(),
                id,
                six_days_ago + u64::from(k),
                text,
                false,
            );
            let r = m.insert(e, NOW, &cfg).unwrap();
            if text.is_some() {
                assert_eq!(
                    r,
                    Inserted::Dropped,
                    "a stranger's 60 kB message is over the stranger envelope size"
                );
            }
        }
    }
    // The strangers' knocks took their own slots only.
    assert_eq!(m.len(), cfg.stranger_slots);
    // A friend's admitted mail still fits, up to its own quota.
    for i in 0..u32::try_from(cfg.sender_quota).unwrap() {
        assert_eq!(
            m.insert(env(2, i, NOW - 1000 + u64::from(i), Some(400)), NOW, &cfg),
            Ok(Inserted::Stored),
            "friend's #{i}"
        );
    }
    // And re-merging every copy in any order changes nothing.
    let again = merged(&m, &m.clone(), &cfg);
    assert_eq!(again, m);
    assert_within(&m, &cfg);
}

/// Bytes count as well as envelopes: one admitted sender cannot fill the mailbox's
/// bytes with few large envelopes.
#[test]
fn an_admitted_sender_is_held_to_its_bytes() {
    let cfg = Config::default();
    let mut m = empty();
    let mut stored = 0usize;
    for i in 0..64u32 {
        if m.insert(env(3, i, T0 + u64::from(i), Some(60_000)), NOW, &cfg) == Ok(Inserted::Stored) {
            stored += 1;
        }
    }
    let big = env(3, 999, T0, Some(60_000)).to_bytes().len();
    assert_eq!(stored, cfg.sender_max_bytes / big, "only its byte quota");
    // Another friend still has room.
    assert_eq!(
        m.insert(env(2, 1, T0 + 100, Some(60_000)), NOW, &cfg),
        Ok(Inserted::Stored)
    );
    assert_within(&m, &cfg);
}

/// A pass admits only the sender it was issued to, for the owner that issued it:
/// copied onto another sender's envelope, or issued by someone else, it admits nothing.
#[test]
fn a_pass_is_checked_against_the_envelope() {
    let cfg = Config::default();
    let mut m = empty();
    let (friend, thief) = (ident(2), ident(3));
    let mk = |from: &Identity, pass: Option<wire::MailboxPass>, id: u32| {
        let mut e = envelope_classed(from, &owner(), &inbox(), mid(id), T0, Some(20_000), false)
            .body()
            .clone();
        e.pass = pass;
        Signed::sign(e, from).unwrap()
    };
    let friends_pass = wire::MailboxPass::issue(&owner(), &friend.public());
    let self_issued = wire::MailboxPass::issue(&thief, &thief.public());
    assert!(mk(&friend, Some(friends_pass), 1).body().is_admitted());
    assert!(
        !mk(&thief, Some(friends_pass), 2).body().is_admitted(),
        "a copied pass"
    );
    assert!(
        !mk(&thief, Some(self_issued), 3).body().is_admitted(),
        "a self-issued pass"
    );
    // 20 kB is over a stranger's envelope size: only the friend's is kept, also after
    // a round trip through the record (which checks passes once per sender).
    for (id, from, pass) in [
        (1, &friend, friends_pass),
        (2, &thief, friends_pass),
        (3, &thief, self_issued),
    ] {
        let _ = m.insert(mk(from, Some(pass), id), NOW, &cfg);
    }
    assert_eq!(ids(&m), vec![mid(1)]);
    let (decoded, rejected) = Mailbox::decode(&m.encode(), NOW, &cfg).unwrap();
    assert!(rejected.is_empty());
    assert_eq!(decoded, m);
    // The owner's own other sessions need no pass.
    let own = envelope_classed(
        &owner(),
        &owner(),
        &inbox(),
        mid(9),
        T0,
        Some(20_000),
        false,
    );
    assert!(own.body().is_admitted());
}

#[test]
fn count_and_byte_caps_keep_the_oldest() {
    let cfg = Config {
        max_envelopes: 3,
        ..Config::default()
    };
    let mut m = empty();
    for i in 0..6u8 {
        let expected = if i < 3 {
            Inserted::Stored
        } else {
            Inserted::Dropped
        };
        assert_eq!(
            m.insert(
                env(10 + i, u32::from(i), T0 + u64::from(i), None),
                NOW,
                &cfg
            ),
            Ok(expected)
        );
    }
    assert_eq!(ids(&m), vec![mid(0), mid(1), mid(2)]);
    // Only an envelope older than one kept can take a place, and it takes the newest's.
    assert_eq!(
        m.insert(env(20, 9, T0 - 1, None), NOW, &cfg),
        Ok(Inserted::Stored)
    );
    assert_eq!(ids(&m), vec![mid(9), mid(0), mid(1)]);
    assert_within(&m, &cfg);

    let big = env(2, 1, T0 + 2, Some(2000));
    let small = env(3, 2, T0 + 3, None);
    let newest = env(4, 3, T0 + 4, Some(1000));
    let tiny = env(5, 4, T0 + 5, None);
    let size = |e: &Signed<Envelope>| e.to_bytes().len();
    let cfg = Config {
        max_bytes: size(&newest) + size(&small) + size(&big) - 1,
        ..Config::default()
    };
    assert!(size(&tiny) < size(&newest));
    let mut m = empty();
    for e in [big, small] {
        assert_eq!(m.insert(e, NOW, &cfg), Ok(Inserted::Stored));
    }
    // The newest envelope does not fit beside the two older ones.
    assert_eq!(m.insert(newest, NOW, &cfg), Ok(Inserted::Dropped));
    assert_eq!(ids(&m), vec![mid(1), mid(2)]);
    // A newer, smaller one still does: each envelope takes what room is left.
    assert_eq!(m.insert(tiny, NOW, &cfg), Ok(Inserted::Stored));
    assert_eq!(ids(&m), vec![mid(1), mid(2), mid(4)]);
    assert_within(&m, &cfg);
}

#[test]
fn duplicates_versions_and_shared_ids() {
    let cfg = Config::default();
    let mut m = empty();
    let v1 = env(2, 1, T0, None);
    assert_eq!(m.insert(v1.clone(), NOW, &cfg), Ok(Inserted::Stored));
    assert_eq!(m.insert(v1.clone(), NOW, &cfg), Ok(Inserted::Duplicate));
    // The sender re-signed the same message later: the first version stays.
    let v2 = env(2, 1, T0 + 5, Some(10));
    assert_eq!(m.insert(v2.clone(), NOW, &cfg), Ok(Inserted::Duplicate));
    assert_eq!(m.pending().collect::<Vec<_>>(), vec![&v1]);
    // A version older than the one held replaces it.
    let v0 = env(2, 1, T0 - 5, Some(3));
    assert_eq!(m.insert(v0.clone(), NOW, &cfg), Ok(Inserted::Stored));
    assert_eq!(m.insert(v1, NOW, &cfg), Ok(Inserted::Duplicate));
    assert_eq!(m.pending().collect::<Vec<_>>(), vec![&v0]);
    // Another sender reusing the id does not displace it.
    let copycat = env(3, 1, T0 + 9, None);
    assert_eq!(m.insert(copycat, NOW, &cfg), Ok(Inserted::Stored));
    assert_eq!(m.len(), 2);
}

#[test]
fn encode_decode_round_trip() {
    let cfg = Config::default();
    let mut m = empty();
    m.insert(env(2, 1, T0, Some(50)), NOW, &cfg).unwrap();
    m.insert(env(3, 2, T0 + 1, None), NOW, &cfg).unwrap();
    m.apply_ack(ack(&[7, 8], T0 + 2), NOW, &cfg).unwrap();
    let bytes = m.encode();
    assert_eq!(m.encoded_len(), bytes.len());
    let (back, rejected) = Mailbox::decode(&bytes, NOW, &cfg).unwrap();
    assert!(rejected.is_empty());
    assert_eq!(back, m);
    assert_eq!(back.encode(), bytes);
    // Decoding later normalises: everything has expired.
    let (later, rejected) =
        Mailbox::decode(&bytes, NOW + 30 * crate::limits::DAY_MS, &cfg).unwrap();
    assert!(rejected.is_empty() && later.is_empty() && later.acks().len() == 0);
}

#[test]
fn decode_refuses_bad_records() {
    let cfg = Config::default();
    let huge = vec![0u8; MAX_MAILBOX_RECORD_BYTES + 1];
    assert!(matches!(
        Mailbox::decode(&huge, NOW, &cfg),
        Err(MailboxError::Oversized { .. })
    ));
    assert!(matches!(
        Mailbox::decode(b"\xff\x00garbage", NOW, &cfg),
        Err(MailboxError::Malformed(_))
    ));
    let record = |v: u8, n_env: usize, extra: bool| {
        #[derive(Serialize)]
        struct Rec {
            v: u8,
            owner: IdentityKey,
            session: SessionId,
            envelopes: Vec<ByteBuf>,
            acks: Vec<ByteBuf>,
            #[serde(skip_serializing_if = "Option::is_none")]
            extra: Option<u8>,
        }
        wire::encode(&Rec {
            v,
            owner: owner().public(),
            session: inbox(),
            envelopes: vec![ByteBuf::from(vec![0u8; 4]); n_env],
            acks: vec![],
            extra: extra.then_some(1),
        })
    };
    assert_eq!(
        Mailbox::decode(&record(RECORD_VERSION + 1, 0, true), NOW, &cfg),
        Err(MailboxError::UnsupportedVersion {
            got: RECORD_VERSION + 1
        })
    );
    assert!(matches!(
        Mailbox::decode(&record(RECORD_VERSION, 0, true), NOW, &cfg),
        Err(MailboxError::Malformed(_))
    ));
    assert!(matches!(
        Mailbox::decode(
            &record(RECORD_VERSION, cfg.max_held_envelopes() + 1, false),
            NOW,
            &cfg
        ),
        Err(MailboxError::TooManyEntries { .. })
    ));
    // Bad entries are reported one by one; the record itself decodes.
    let (m, rejected) = Mailbox::decode(&record(RECORD_VERSION, 2, false), NOW, &cfg).unwrap();
    assert!(m.is_empty());
    assert_eq!(rejected.len(), 2);
    assert_eq!(rejected[1].index, 1);
}

#[test]
fn decode_reports_entries_of_other_mailboxes() {
    let cfg = Config::default();
    let good = env(2, 1, T0, None);
    let foreign = envelope_to(&ident(2), &owner(), &sid("other"), mid(2), T0, None);
    let foreign_ack = ack_by(&owner(), &sid("other"), &[mid(1)], T0 + 1);
    let record = wire::encode(&RecordOut {
        v: RECORD_VERSION,
        owner: &owner().public(),
        session: &inbox(),
        envelopes: vec![
            ByteBuf::from(foreign.to_bytes()),
            ByteBuf::from(good.to_bytes()),
        ],
        acks: vec![ByteBuf::from(foreign_ack.to_bytes())],
    });
    let (m, rejected) = Mailbox::decode(&record, NOW, &cfg).unwrap();
    assert_eq!(ids(&m), vec![mid(1)], "the foreign ack did not apply");
    let kinds: Vec<_> = rejected.iter().map(|r| (r.kind, r.index)).collect();
    assert_eq!(kinds, vec![(EntryKind::Ack, 0), (EntryKind::Envelope, 0)]);
    assert!(
        rejected
            .iter()
            .all(|r| matches!(r.reason, MailboxError::WrongMailbox { .. }))
    );
}

/// The ack-cap boundary: with room for one ack, a newer ack pushes out the tombstone of
/// an envelope a third copy still holds, so grouping changes the result. The difference
/// is exactly that already-acked envelope.
#[test]
fn ack_cap_boundary_breaks_associativity() {
    let cfg = Config {
        max_acks: 1,
        ..Config::default()
    };
    let mut x = empty();
    x.insert(env(2, 1, T0, None), NOW, &cfg).unwrap();
    let mut y = empty();
    y.apply_ack(ack(&[1], T0 + 10), NOW, &cfg).unwrap();
    let mut z = empty();
    z.apply_ack(ack(&[2], T0 + 20), NOW, &cfg).unwrap();

    let left = merged(&merged(&x, &y, &cfg), &z, &cfg);
    let right = merged(&x, &merged(&y, &z, &cfg), &cfg);
    assert!(left.is_empty());
    assert_eq!(
        ids(&right),
        vec![mid(1)],
        "resurrected: its ack was capped out"
    );
    assert_eq!(left.acked(), right.acked());
    // Without the cap binding, both groupings agree.
    let roomy = Config::default();
    let l = merged(&merged(&x, &y, &roomy), &z, &roomy);
    let r = merged(&x, &merged(&y, &z, &roomy), &roomy);
    assert_eq!(l.encode(), r.encode());
}

/// The late-ack boundary: a copy over the quota refuses its newest envelope; had the
/// ack of the older one been merged first, the new one would have had room.
#[test]
fn late_ack_boundary_breaks_associativity() {
    let cfg = Config {
        sender_quota: 1,
        ..Config::default()
    };
    let mut x = empty();
    x.insert(env(2, 1, T0, None), NOW, &cfg).unwrap();
    let mut y = empty();
    y.insert(env(2, 2, T0 + 1, None), NOW, &cfg).unwrap();
    let mut z = empty();
    z.apply_ack(ack(&[1], T0 + 10), NOW, &cfg).unwrap();

    let left = merged(&merged(&x, &y, &cfg), &z, &cfg);
    let right = merged(&x, &merged(&y, &z, &cfg), &cfg);
    assert!(
        left.is_empty(),
        "mid(2) was refused for the quota before the ack made room"
    );
    assert_eq!(ids(&right), vec![mid(2)]);
}

/// The byte-cap boundary: which newer envelopes fit depends on which larger, older
/// ones competed for the bytes.
#[test]
fn byte_cap_boundary_breaks_associativity() {
    let first = env(4, 3, T0 + 1, Some(20));
    let large = env(3, 2, T0 + 2, Some(40));
    let last = env(2, 1, T0 + 3, None);
    let size = |e: &Signed<Envelope>| e.to_bytes().len();
    let cfg = Config {
        max_bytes: size(&first) + size(&last),
        ..Config::default()
    };
    // `large` fits alone, but beside neither of the others.
    assert!(size(&large) <= cfg.max_bytes);
    assert!(size(&large) > size(&first).max(size(&last)));
    let one = |e: &Signed<Envelope>| {
        let mut m = empty();
        m.insert(e.clone(), NOW, &cfg).unwrap();
        m
    };
    let (l, f, n) = (one(&large), one(&first), one(&last));
    let left = merged(&merged(&l, &n, &cfg), &f, &cfg);
    let right = merged(&l, &merged(&n, &f, &cfg), &cfg);
    assert_eq!(
        ids(&left),
        vec![mid(3)],
        "last lost its bytes to large first"
    );
    assert_eq!(ids(&right), vec![mid(3), mid(1)]);
    assert_within(&left, &cfg);
    assert_within(&right, &cfg);
}

// ---- property tests ----

/// Signed entries made once: signing and sealing inside every case would be slow.
struct Pool {
    envelopes: Vec<Signed<Envelope>>,
    acks: Vec<Signed<Ack>>,
}

const POOL_ENVELOPES: usize = 43;
const POOL_ACKS: usize = 6;

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut envelopes: Vec<_> = (0..40u32)
            .map(|i| {
                // Sender 2 sends twice as much as the others, to exercise its quota.
                let sender = [2, 2, 3, 4, 5][i as usize % 5];
                let ts = T0 + u64::from(i * 17 % 40) * 1000;
                let text = (i % 7 != 6).then_some((i as usize * 131) % 700);
                // Sender 5 has no pass: the pool exercises both classes.
                if sender == 5 {
                    stranger_env(sender, i, ts, text)
                } else {
                    env(sender, i, ts, text)
                }
            })
            .collect();
        let sender_of = |i: usize| [2u8, 2, 3, 4, 5][i % 5];
        // A second sender reusing envelope 0's id.
        envelopes.push(env(3, 0, T0 + 500, None));
        // Two re-signed versions of envelope 1: later, and same time with other bytes.
        envelopes.push(env(sender_of(1), 1, T0 + 45_000, Some(20)));
        envelopes.push(env(sender_of(1), 1, T0 + 45_000, Some(21)));
        assert_eq!(envelopes.len(), POOL_ENVELOPES);
        let acks = (0..POOL_ACKS as u32)
            .map(|j| {
                // Acks 4 and 5 share a timestamp: the signature breaks the tie.
                let ts = T0 + 50_000 + u64::from(j.min(4)) * 1000;
                let ids = [j * 6, j * 6 + 1, j * 6 + 2, 1000 + j];
                ack_of(&ids.map(|i| (sender_of(i as usize), i)), ts)
            })
            .collect();
        Pool { envelopes, acks }
    })
}

/// Indices into the pool: a subset of envelopes and of acks.
type Replica = (Vec<usize>, Vec<usize>);

fn replica() -> impl Strategy<Value = Replica> {
    (
        prop::collection::vec(0..POOL_ENVELOPES, 0..20),
        prop::collection::vec(0..POOL_ACKS, 0..3),
    )
}

fn build(r: &Replica, cfg: &Config) -> Mailbox {
    let p = pool();
    let mut m = empty();
    for &i in &r.1 {
        let _ = m.apply_ack(p.acks[i].clone(), NOW, cfg);
    }
    for &i in &r.0 {
        // Refusals (already acked) are part of building a replica.
        let _ = m.insert(p.envelopes[i].clone(), NOW, cfg);
    }
    m
}

/// No bound can discard anything: the pool fits.
fn roomy_cfg() -> Config {
    Config {
        max_envelopes: POOL_ENVELOPES,
        sender_quota: POOL_ENVELOPES,
        max_bytes: usize::MAX,
        sender_max_bytes: usize::MAX,
        stranger_slots: POOL_ENVELOPES,
        stranger_sender_quota: POOL_ENVELOPES,
        stranger_max_bytes: usize::MAX,
        stranger_envelope_max_bytes: usize::MAX,
        max_acks: POOL_ACKS,
        retention_ms: MAILBOX_RETENTION_MS,
    }
}

/// Every bound binds.
fn tight_cfg() -> Config {
    Config {
        max_envelopes: 8,
        sender_quota: 3,
        max_bytes: 2500,
        sender_max_bytes: 1800,
        stranger_slots: 3,
        stranger_sender_quota: 2,
        stranger_max_bytes: 1200,
        stranger_envelope_max_bytes: 700,
        max_acks: 2,
        retention_ms: MAILBOX_RETENTION_MS,
    }
}

fn show(m: &Mailbox) -> String {
    format!("{:?} acks={}", ids(m), m.acks().len())
}

/// Commutative, idempotent, absorbing and bounded; returns both groupings of
/// `a ⊔ b ⊔ c`.
fn check_lattice(a: &Mailbox, b: &Mailbox, c: &Mailbox, cfg: &Config) -> (Mailbox, Mailbox) {
    let ab = merged(a, b, cfg);
    let ba = merged(b, a, cfg);
    assert!(
        ab.encode() == ba.encode(),
        "commutative: {} vs {}",
        show(&ab),
        show(&ba)
    );
    assert!(
        merged(a, a, cfg).encode() == a.encode(),
        "idempotent: {}",
        show(a)
    );
    for part in [a, b] {
        let again = merged(&ab, part, cfg);
        assert!(
            again.encode() == ab.encode(),
            "absorbing: {} vs {}",
            show(&again),
            show(&ab)
        );
    }
    let left = merged(&ab, c, cfg);
    let right = merged(a, &merged(b, c, cfg), cfg);
    for m in [a, b, c, &ab, &left, &right] {
        assert_within(m, cfg);
    }
    (left, right)
}

/// Whether merging `x` and `y` under `cfg` discards anything a bound-free merge keeps.
fn bound_discards(x: &Mailbox, y: &Mailbox, cfg: &Config) -> bool {
    merged(x, y, cfg).encode() != merged(x, y, &roomy_cfg()).encode()
}

fn no_acks(r: Replica) -> Replica {
    (r.0, Vec::new())
}

proptest! {
    // Each case builds and merges several mailboxes; more cases add little.
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// While nothing overflows, merging is the union minus acked entries: associative,
    /// and equal to receiving everything in one place.
    #[test]
    fn merge_is_a_semilattice(a in replica(), b in replica(), c in replica()) {
        let cfg = roomy_cfg();
        let (ma, mb, mc) = (build(&a, &cfg), build(&b, &cfg), build(&c, &cfg));
        let (left, right) = check_lattice(&ma, &mb, &mc, &cfg);
        prop_assert!(left.encode() == right.encode(), "{} vs {}", show(&left), show(&right));
        let all = ([a.0, b.0, c.0].concat(), [a.1, b.1, c.1].concat());
        prop_assert!(build(&all, &cfg).encode() == left.encode());
    }

    /// Quotas and the count cap alone keep the oldest k, which composes.
    #[test]
    fn quotas_and_count_cap_compose(a in replica(), b in replica(), c in replica()) {
        // Every byte bound off (the stranger envelope size is a filter on each envelope
        // alone, so it may stay).
        let cfg = Config {
            max_bytes: usize::MAX,
            sender_max_bytes: usize::MAX,
            stranger_max_bytes: usize::MAX,
            ..tight_cfg()
        };
        let (a, b, c) = (no_acks(a), no_acks(b), no_acks(c));
        let (ma, mb, mc) = (build(&a, &cfg), build(&b, &cfg), build(&c, &cfg));
        let (left, right) = check_lattice(&ma, &mb, &mc, &cfg);
        prop_assert!(left.encode() == right.encode(), "{} vs {}", show(&left), show(&right));
        let all = ([a.0, b.0, c.0].concat(), Vec::new());
        prop_assert!(build(&all, &cfg).encode() == left.encode());
    }

    /// With every bound binding, the lattice laws that replication needs still hold,
    /// and the groupings differ only after a bound discarded something on the way.
    #[test]
    fn bounded_merge_is_commutative_idempotent_absorbing(
        a in replica(),
        b in replica(),
        c in replica(),
    ) {
        let cfg = tight_cfg();
        let (ma, mb, mc) = (build(&a, &cfg), build(&b, &cfg), build(&c, &cfg));
        let (left, right) = check_lattice(&ma, &mb, &mc, &cfg);
        // Decoding verifies every signature (slow in debug builds), so only here, where
        // the bounds keep mailboxes small.
        let (back, rejected) = Mailbox::decode(&left.encode(), NOW, &cfg).unwrap();
        prop_assert!(rejected.is_empty());
        prop_assert_eq!(&back, &left);
        if left.encode() != right.encode() {
            let (ab, bc) = (merged(&ma, &mb, &cfg), merged(&mb, &mc, &cfg));
            let discarded = bound_discards(&ma, &mb, &cfg)
                || bound_discards(&mb, &mc, &cfg)
                || bound_discards(&ab, &mc, &cfg)
                || bound_discards(&ma, &bc, &cfg);
            prop_assert!(discarded, "{} vs {}", show(&left), show(&right));
        }
    }

}

proptest! {
    // Intact entries are verified, which is slow in debug builds.
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Any bytes, and any damage to a valid record, decode to an error or to a mailbox
    /// within bounds, never a panic.
    #[test]
    fn decode_never_panics(
        noise in prop::collection::vec(any::<u8>(), 0..512),
        r in replica(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let cfg = tight_cfg();
        let _ = Mailbox::decode(&noise, NOW, &cfg);
        let mut bytes = build(&r, &cfg).encode();
        for (at, x) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= x;
        }
        if let Ok((m, _)) = Mailbox::decode(&bytes, NOW, &cfg) {
            assert_within(&m, &cfg);
        }
        bytes.truncate(cut.index(bytes.len() + 1));
        let _ = Mailbox::decode(&bytes, NOW, &cfg);
    }
}

/// A holder that merged a handed copy names what of it the result keeps: the
/// envelopes it holds and those the owner acked, never another sender's, never what a
/// quota full of older mail left out.
#[test]
fn kept_of_names_the_handed_entries_the_merge_keeps() {
    let cfg = Config {
        sender_quota: 3,
        ..Config::default()
    };
    let mut held = empty();
    for i in 0..3 {
        held.insert(env(2, i, T0 + u64::from(i), Some(10)), NOW, &cfg)
            .unwrap();
    }
    held.insert(env(3, 50, T0, Some(10)), NOW, &cfg).unwrap();
    held.apply_ack(ack_of(&[(2, 0)], T0 + 10), NOW, &cfg)
        .unwrap();
    // Sender 2's copy: one it had sent before (acked since), one more, two new.
    let mut handed = empty();
    for i in [0, 2, 10, 11] {
        handed
            .insert(env(2, i, T0 + 100 + u64::from(i), Some(10)), NOW, &cfg)
            .unwrap();
    }
    let mut merged = held.clone();
    merged.merge(&handed, NOW, &cfg).unwrap();
    let kept: Vec<(u8, u32)> = merged
        .kept_of(&handed)
        .iter()
        .map(|e| {
            let who = (2..=3).find(|n| ident(*n).public() == e.0).unwrap();
            let n = u32::from_be_bytes(e.1.as_bytes()[..4].try_into().unwrap());
            (who, n)
        })
        .collect();
    // 0 is acked; 2 is held (an older version of it); 1 and 2 fill the quota with the
    // new 10, so 11 is left out; sender 3's envelope is not named.
    assert_eq!(kept, vec![(2, 0), (2, 2), (2, 10)]);
}

#[test]
fn a_record_with_indefinite_length_entries_is_malformed() {
    // The record's entries are read in place (borrowed), which needs definite lengths
    // (PROTOCOL §1, §4.6); an indefinite-length byte string is refused, not a panic.
    let mut record = vec![0xa5];
    let text = |s: &str| {
        [
            vec![0x60 | u8::try_from(s.len()).unwrap()],
            s.as_bytes().to_vec(),
        ]
        .concat()
    };
    record.extend(text("v"));
    record.push(RECORD_VERSION);
    record.extend(text("owner"));
    record.extend([0x58, 32]);
    record.extend(owner().public().as_bytes());
    record.extend(text("session"));
    record.extend(text("s"));
    record.extend(text("envelopes"));
    record.extend([0x81, 0x5f, 0x41, b'x', 0xff]);
    record.extend(text("acks"));
    record.push(0x80);
    let cfg = Config::default();
    assert!(matches!(
        Mailbox::decode(&record, NOW, &cfg),
        Err(MailboxError::Malformed(_))
    ));
    // The same record with a definite-length entry decodes (and rejects the entry).
    let definite = [
        &record[..record.len() - 11],
        &[0x81, 0x41, b'x'],
        &record[record.len() - 6..],
    ]
    .concat();
    let (_, rejected) = Mailbox::decode(&definite, NOW, &cfg).unwrap();
    assert_eq!(rejected.len(), 1);
}
