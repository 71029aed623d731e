use rand_chacha::{ChaCha20Rng, rand_core::SeedableRng};

use super::*;
use crate::{
    Identity,
    limits::{KNOCK_MIN_HOLD_MS, LIVE_FRESHNESS_MS, MINUTE_MS},
    wire::{self, WireError},
};

const NOW: u64 = 1_700_000_000_000;

fn ident(n: u8) -> Identity {
    Identity::from_seed(&[n; 32])
}

fn sid(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

fn addr(id: &Identity, session: &str) -> SessionAddr {
    SessionAddr {
        key: id.public(),
        session: sid(session),
    }
}

fn envelope(
    from: &Identity,
    from_session: &str,
    to: &SessionAddr,
    kind: EnvelopeKind,
    id: u8,
    ts: u64,
) -> Signed<Envelope> {
    let mut env = Envelope {
        v: wire::VERSION,
        sender: from.public(),
        sender_session: sid(from_session),
        recipient: to.key,
        recipient_session: to.session.clone(),
        msg_id: MsgId::from_bytes([id; 16]),
        ts,
        kind,
        in_reply_to: kind.is_receipt().then(|| MsgId::from_bytes([0xee; 16])),
        also_about: Vec::new(),
        name: matches!(kind, EnvelopeKind::Knock | EnvelopeKind::PairAccept)
            .then(|| "bob".to_string()),
        sealed: None,
        pass: None,
        reply_pass: None,
    };
    if kind == EnvelopeKind::Message {
        // The recipient's sealing key is irrelevant to the gate; seal to the sender's own.
        let to_key = from.sealing_secret().public();
        env.seal_text(
            "hello",
            &to_key,
            &mut ChaCha20Rng::seed_from_u64(u64::from(id)),
        )
        .unwrap();
    }
    Signed::sign(env, from).unwrap()
}

fn key(bytes: [u8; 32]) -> IdentityKey {
    IdentityKey::from_bytes(bytes)
}

// ---- PeerPolicy ----

#[test]
fn add_enforces_name_rules_and_uniqueness() {
    let mut p = PeerPolicy::new();
    let (a, b) = (ident(1).public(), ident(2).public());
    assert_eq!(
        p.add("bad name", a),
        Err(TrustError::InvalidName("bad name".into()))
    );
    assert_eq!(p.add("", a), Err(TrustError::InvalidName(String::new())));
    p.add("alice", a).unwrap();
    p.add("alice", a).unwrap(); // same pair again: no-op
    let err = p.add("alias", a).unwrap_err();
    assert_eq!(
        err,
        TrustError::KeyAlreadyPeer {
            key: a.fingerprint(),
            name: "alice".into()
        }
    );
    assert!(err.to_string().contains("alice"), "{err}");
    assert_eq!(
        p.add("alice", b),
        Err(TrustError::NameTaken {
            name: "alice".into(),
            key: a.fingerprint()
        })
    );
    p.add("bob", b).unwrap();
    assert_eq!(p.len(), 2);
    assert!(p.contains(&a));
    assert_eq!(p.name_of(&b), Some("bob"));
    assert_eq!(p.get("alice"), Some(&a));
    assert_eq!(
        p.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        vec!["alice", "bob"]
    );
    assert_eq!(p.remove("alice"), Some(a));
    assert_eq!(p.remove("alice"), None);
    assert!(!p.contains(&a));
    assert_eq!(p.name_of(&a), None);
    // The name and the key are both free again.
    p.add("carol", a).unwrap();
}

#[test]
fn add_is_bounded() {
    let mut p = PeerPolicy::new();
    for i in 0..MAX_PEERS {
        let mut b = [0u8; 32];
        b[..8].copy_from_slice(&(i as u64).to_be_bytes());
        p.add(format!("p{i}"), key(b)).unwrap();
    }
    assert_eq!(p.add("one-more", key([0xff; 32])), Err(TrustError::Full));
}

#[test]
fn serde_round_trip_and_validation() {
    let mut p = PeerPolicy::new();
    p.add("alice", ident(1).public()).unwrap();
    p.add("bob", ident(2).public()).unwrap();
    let bytes = wire::encode(&p);
    let back: PeerPolicy = wire::decode_cbor("peers", &bytes).unwrap();
    assert_eq!(back, p);
    assert!(back.contains(&ident(2).public()));

    let file = |version: u32, peers: &[(&str, String)]| {
        wire::encode(&PolicyFile {
            version,
            peers: peers
                .iter()
                .map(|(n, k)| (n.to_string(), k.clone()))
                .collect(),
        })
    };
    let decode = |b: &[u8]| wire::decode_cbor::<PeerPolicy>("peers", b);
    let hex = ident(1).public().to_hex();
    let reason = |r: Result<PeerPolicy, WireError>| match r {
        Err(WireError::Malformed { reason, .. }) => reason,
        other => panic!("expected an error, got {other:?}"),
    };
    assert!(reason(decode(&file(2, &[]))).contains("version 2"));
    assert!(reason(decode(&file(1, &[("a", "zz".into())]))).contains("invalid key"));
    assert!(reason(decode(&file(1, &[("x y", hex.clone())]))).contains("invalid petname"));
    let dup = file(1, &[("a", hex.clone()), ("b", hex)]);
    assert!(reason(decode(&dup)).contains("already a peer"));
}

#[test]
fn resolve_by_name_fingerprint_and_key_prefix() {
    let mut p = PeerPolicy::new();
    let a = ident(1).public();
    p.add("Alice", a).unwrap();
    p.add("bob", ident(2).public()).unwrap();
    let fp = a.fingerprint().to_string();
    assert_eq!(p.resolve("Alice"), Ok(a));
    assert_eq!(p.resolve(" alice "), Ok(a)); // trimmed, ASCII case folded
    assert_eq!(p.resolve(&fp), Ok(a));
    assert_eq!(p.resolve(&fp.replace('-', "")), Ok(a));
    assert_eq!(p.resolve(&fp.to_uppercase()), Ok(a));
    assert_eq!(p.resolve(&fp[..9]), Ok(a)); // "a1b2-c3d4"
    assert_eq!(p.resolve(&a.to_hex()), Ok(a));
    assert_eq!(p.resolve(&a.to_hex()[..10]), Ok(a));
    for unknown in ["carol", "", "abc", "zzzz-zzzz", &ident(3).public().to_hex()] {
        let err = p.resolve(unknown).unwrap_err();
        assert!(
            matches!(err, ResolveError::Unknown { .. }),
            "{unknown}: {err}"
        );
    }
}

#[test]
fn resolve_reports_ambiguity_with_candidates() {
    let mut p = PeerPolicy::new();
    let mut k1 = [7u8; 32];
    let mut k2 = [7u8; 32];
    k1[..3].copy_from_slice(&[0xab, 0xcd, 0x01]);
    k2[..3].copy_from_slice(&[0xab, 0xcd, 0x02]);
    p.add("one", key(k1)).unwrap();
    p.add("two", key(k2)).unwrap();
    let err = p.resolve("abcd").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("one (") && text.contains("two ("), "{text}");
    assert_eq!(p.resolve("abcd01"), Ok(key(k1)));
    // A dashed pattern is a fingerprint, never a key prefix.
    assert!(matches!(
        p.resolve("abcd-01"),
        Err(ResolveError::Unknown { .. })
    ));

    // Two keys whose fingerprints share their first four hex digits.
    let mut seen: HashMap<[u8; 2], IdentityKey> = HashMap::new();
    let (x, y) = (0u32..)
        .find_map(|i| {
            let mut b = [0u8; 32];
            b[..4].copy_from_slice(&i.to_be_bytes());
            b[31] = 0x55; // keep key prefixes away from "abcd"
            let k = key(b);
            let f = k.fingerprint();
            let head = [f.as_bytes()[0], f.as_bytes()[1]];
            seen.insert(head, k).map(|old| (old, k))
        })
        .unwrap();
    let mut q = PeerPolicy::new();
    q.add("x", x).unwrap();
    q.add("y", y).unwrap();
    let head = &x.fingerprint().to_string()[..4];
    assert!(
        matches!(q.resolve(head), Err(ResolveError::Ambiguous { candidates, .. }) if candidates.len() == 2)
    );
    assert_eq!(q.resolve(&x.fingerprint().to_string()), Ok(x));
}

// ---- KnockQueue ----

fn knock(sender: u8, ts: u64) -> Knock {
    Knock {
        sender: ident(sender).public(),
        sender_session: sid("s"),
        name: Some(format!("n{sender}")),
        msg_id: MsgId::from_bytes([sender; 16]),
        ts,
        recipient: ident(200).public(),
        sealed_invite: None,
    }
}

#[test]
fn knock_queue_is_bounded_and_refuses_newcomers_until_its_oldest_was_held_long_enough() {
    let mut q = KnockQueue::new(3);
    for n in 1..=3 {
        assert_eq!(q.push(knock(n, 10), n.into()), Queued::Added);
    }
    // A flood of new identities does not push out knocks held a moment ago.
    for n in 10..50 {
        assert!(q.is_full_for(&knock(n, 10), 100));
        assert_eq!(q.push(knock(n, 10), 100), Queued::Full);
    }
    // A queued identity still replaces its own knock (and is held anew).
    assert!(!q.is_full_for(&knock(3, 11), 100));
    assert_eq!(q.push(knock(3, 11), 3), Queued::Replaced);
    // Once the oldest was held long enough, newcomers displace the oldest.
    let later = 1 + KNOCK_MIN_HOLD_MS;
    assert_eq!(q.push(knock(4, 10), later), Queued::Evicted(knock(1, 10)));
    assert_eq!(
        q.push(knock(5, 10), later + 1),
        Queued::Evicted(knock(2, 10))
    );
    assert_eq!(q.len(), 3);
    let senders: Vec<_> = q.list().map(|k| k.sender).collect();
    assert_eq!(senders, [3, 4, 5].map(|n| ident(n).public()));
    // The oldest now held since `3`: full again until `3 + KNOCK_MIN_HOLD_MS`.
    assert_eq!(q.push(knock(6, 10), later + 1), Queued::Full);
    assert_eq!(KnockQueue::default().capacity, KNOCK_QUEUE_CAPACITY);
}

#[test]
fn knock_queue_dedupes_by_identity() {
    let mut q = KnockQueue::new(3);
    q.push(knock(1, 10), 0);
    q.push(knock(2, 10), 0);
    assert_eq!(q.push(knock(1, 20), 0), Queued::Replaced);
    assert_eq!(q.len(), 2);
    assert_eq!(q.get(&ident(1).public()).map(|k| k.ts), Some(20));
    // The refreshed knock moved to the back, so it is evicted last.
    assert_eq!(q.list().last().map(|k| k.ts), Some(20));
    assert_eq!(q.push(knock(1, 15), 0), Queued::Ignored);
    assert_eq!(q.get(&ident(1).public()).map(|k| k.ts), Some(20));
    // Many knocks from one identity occupy one slot and never evict anyone.
    for ts in 21..100 {
        q.push(knock(1, ts), 0);
    }
    assert_eq!(q.len(), 2);
    assert!(q.get(&ident(2).public()).is_some());
}

#[test]
fn knock_queue_take_remove_and_find() {
    let mut q = KnockQueue::default();
    q.push(knock(1, 10), 0);
    q.push(knock(2, 10), 0);
    let k1 = ident(1).public();
    let fp = k1.fingerprint().to_string();
    assert_eq!(q.find_by_fingerprint(&fp).map(|k| k.sender), Ok(k1));
    assert_eq!(q.find_by_fingerprint(&fp[..4]).map(|k| k.sender), Ok(k1));
    assert_eq!(
        q.find_by_fingerprint(&fp.replace('-', ""))
            .map(|k| k.sender),
        Ok(k1)
    );
    assert!(matches!(
        q.find_by_fingerprint("n1"),
        Err(ResolveError::Unknown { .. })
    ));
    assert_eq!(q.take(&k1).map(|k| k.ts), Some(10));
    assert_eq!(q.take(&k1), None);
    assert!(matches!(
        q.find_by_fingerprint(&fp),
        Err(ResolveError::Unknown { .. })
    ));
    assert!(q.remove(&ident(2).public()));
    assert!(!q.remove(&ident(2).public()));
    assert!(q.is_empty());
}

// ---- Gate ----

/// Me: identity 1, session "me". Friend: identity 2 (a peer). Stranger: identity 3.
fn setup() -> (Gate, SessionAddr, Identity, Identity) {
    let me = ident(1);
    let friend = ident(2);
    let mut policy = PeerPolicy::new();
    policy.add("friend", friend.public()).unwrap();
    (Gate::new(policy), addr(&me, "me"), friend, ident(3))
}

const W: u64 = LIVE_FRESHNESS_MS;

#[test]
fn peer_message_delivered_once() {
    let (mut gate, me, friend, _) = setup();
    let e = envelope(&friend, "f", &me, EnvelopeKind::Message, 1, NOW);
    assert_eq!(gate.decide(&e, &me, W, NOW), Decision::Deliver);
    // Not stored yet (the inbox write may fail): a second copy is still admitted...
    assert_eq!(gate.decide(&e, &me, W, NOW), Decision::Deliver);
    // ...and once the write is durable, it is a replay.
    gate.record_delivered(&friend.public(), &MsgId::from_bytes([1; 16]), NOW);
    assert_eq!(
        gate.decide(&e, &me, W, NOW + 1),
        Decision::Drop(DropReason::Replayed(MsgId::from_bytes([1; 16])))
    );
    // Every kind from a peer is delivered.
    for (i, kind) in [
        EnvelopeKind::Knock,
        EnvelopeKind::PairAccept,
        EnvelopeKind::Goodbye,
        EnvelopeKind::Read,
        EnvelopeKind::HostQueued,
    ]
    .into_iter()
    .enumerate()
    {
        let e = envelope(&friend, "f", &me, kind, 10 + i as u8, NOW);
        assert_eq!(gate.decide(&e, &me, W, NOW), Decision::Deliver, "{kind:?}");
    }
}

#[test]
fn sibling_session_delivered_without_pairing() {
    let me_id = ident(1);
    let mut gate = Gate::new(PeerPolicy::new());
    let me = addr(&me_id, "me");
    let e = envelope(&me_id, "other-session", &me, EnvelopeKind::Message, 1, NOW);
    assert_eq!(gate.decide(&e, &me, W, NOW), Decision::Deliver);
}

#[test]
fn wrong_recipient_dropped() {
    let (mut gate, me, friend, _) = setup();
    let other_session = addr(&ident(1), "elsewhere");
    let e = envelope(&friend, "f", &other_session, EnvelopeKind::Message, 1, NOW);
    assert_eq!(
        gate.decide(&e, &me, W, NOW),
        Decision::Drop(DropReason::WrongRecipient(other_session))
    );
    let other_key = addr(&ident(9), "me");
    let e = envelope(&friend, "f", &other_key, EnvelopeKind::Message, 2, NOW);
    assert!(matches!(
        gate.decide(&e, &me, W, NOW),
        Decision::Drop(DropReason::WrongRecipient(_))
    ));
    // A rejected envelope did not consume its id.
    let good = envelope(&friend, "f", &me, EnvelopeKind::Message, 1, NOW);
    assert_eq!(gate.decide(&good, &me, W, NOW), Decision::Deliver);
}

#[test]
fn stale_and_future_dated_dropped() {
    let (mut gate, me, friend, _) = setup();
    let old = envelope(&friend, "f", &me, EnvelopeKind::Message, 1, NOW - W - 1);
    assert!(matches!(
        gate.decide(&old, &me, W, NOW),
        Decision::Drop(DropReason::Stale(TimeError::Stale { .. }))
    ));
    // The same envelope is still fine on the mailbox path's longer window.
    assert_eq!(
        gate.decide(&old, &me, MAILBOX_RETENTION_MS, NOW),
        Decision::Deliver
    );
    let future = envelope(
        &friend,
        "f",
        &me,
        EnvelopeKind::Message,
        2,
        NOW + 10 * MINUTE_MS,
    );
    let d = gate.decide(&future, &me, W, NOW);
    assert!(
        matches!(d, Decision::Drop(DropReason::FutureDated(_))),
        "{d:?}"
    );
}

#[test]
fn stranger_message_dropped_and_id_not_consumed() {
    let (mut gate, me, _, stranger) = setup();
    let e = envelope(&stranger, "s", &me, EnvelopeKind::Message, 7, NOW);
    let reason = DropReason::NotPaired(stranger.public().fingerprint());
    assert_eq!(gate.decide(&e, &me, W, NOW), Decision::Drop(reason.clone()));
    assert!(reason.to_string().contains("not a peer"), "{reason}");
    let bye = envelope(&stranger, "s", &me, EnvelopeKind::Goodbye, 8, NOW);
    assert!(matches!(
        gate.decide(&bye, &me, W, NOW),
        Decision::Drop(DropReason::NotPaired(_))
    ));
    // A stranger cannot send read receipts either.
    let read = envelope(&stranger, "s", &me, EnvelopeKind::Read, 9, NOW);
    assert!(matches!(
        gate.decide(&read, &me, W, NOW),
        Decision::Drop(DropReason::NotPaired(_))
    ));
    // Once paired, the very same envelope is delivered: its id was never recorded.
    let mut policy = gate.policy().clone();
    policy.add("now-a-friend", stranger.public()).unwrap();
    gate.set_policy(policy);
    assert_eq!(gate.decide(&e, &me, W, NOW), Decision::Deliver);
}

#[test]
fn a_full_knock_queue_refuses_strangers_retryably_and_frees_the_room_of_new_peers() {
    let (mut gate, me, _, _) = setup();
    let strangers: Vec<Identity> = (100..=u8::try_from(99 + KNOCK_QUEUE_CAPACITY).unwrap())
        .map(ident)
        .collect();
    for (i, s) in strangers.iter().enumerate() {
        let e = envelope(s, "s", &me, EnvelopeKind::Knock, 1, NOW + i as u64);
        assert!(matches!(
            gate.decide(&e, &me, W, NOW),
            Decision::HoldKnock(_)
        ));
    }
    let late = ident(250);
    let e = envelope(&late, "s", &me, EnvelopeKind::Knock, 1, NOW);
    let refused = gate.decide(&e, &me, W, NOW);
    assert_eq!(
        refused,
        Decision::Drop(DropReason::KnocksFull(KNOCK_QUEUE_CAPACITY))
    );
    let Decision::Drop(reason) = refused else {
        unreachable!()
    };
    assert_eq!(reason.code(), RefusalCode::OverBudget);
    assert!(reason.to_string().contains("knock again later"));
    // The first knock is still held, and the refused one's id was not recorded.
    assert!(gate.knocks().get(&strangers[0].public()).is_some());
    // One of them is admitted: its room goes to the next stranger, whose same knock
    // is then held (not refused as a replay).
    let mut policy = gate.policy().clone();
    policy.add("admitted", strangers[0].public()).unwrap();
    gate.set_policy(policy);
    assert_eq!(gate.knocks().len(), KNOCK_QUEUE_CAPACITY - 1);
    assert!(matches!(
        gate.decide(&e, &me, W, NOW),
        Decision::HoldKnock(_)
    ));
}

#[test]
fn stranger_knock_held_and_queued_once() {
    let (mut gate, me, _, stranger) = setup();
    let e = envelope(&stranger, "s", &me, EnvelopeKind::Knock, 7, NOW);
    let Decision::HoldKnock(k) = gate.decide(&e, &me, W, NOW) else {
        panic!("expected a held knock");
    };
    assert_eq!(k.sender, stranger.public());
    assert_eq!(k.sender_session, sid("s"));
    assert_eq!(k.name.as_deref(), Some("bob"));
    assert_eq!(gate.knocks().len(), 1);
    assert_eq!(
        gate.decide(&e, &me, W, NOW),
        Decision::Drop(DropReason::Replayed(k.msg_id))
    );
    // A second knock from the same identity replaces the first.
    let again = envelope(&stranger, "s2", &me, EnvelopeKind::Knock, 8, NOW + 5);
    assert!(matches!(
        gate.decide(&again, &me, W, NOW),
        Decision::HoldKnock(_)
    ));
    assert_eq!(gate.knocks().len(), 1);
    let held = gate.knocks_mut().take(&stranger.public()).unwrap();
    assert_eq!(held.sender_session, sid("s2"));
}

#[test]
fn pair_accept_needs_a_pending_request() {
    let (mut gate, me, _, stranger) = setup();
    let e = envelope(&stranger, "s", &me, EnvelopeKind::PairAccept, 7, NOW);
    let d = gate.decide(&e, &me, W, NOW);
    assert_eq!(
        d,
        Decision::Drop(DropReason::UnsolicitedAccept(
            stranger.public().fingerprint()
        ))
    );
    gate.note_pair_request(stranger.public());
    gate.note_pair_request(stranger.public()); // deduped
    assert_eq!(gate.pending_pair_requests().len(), 1);
    assert_eq!(gate.decide(&e, &me, W, NOW), Decision::Deliver);
    // A stranger's plain message is still refused while the request is pending.
    let m = envelope(&stranger, "s", &me, EnvelopeKind::Message, 8, NOW);
    assert!(matches!(
        gate.decide(&m, &me, W, NOW),
        Decision::Drop(DropReason::NotPaired(_))
    ));
    // Pinning the key settles the request.
    let mut policy = gate.policy().clone();
    policy.add("stranger", stranger.public()).unwrap();
    gate.set_policy(policy);
    assert_eq!(gate.pending_pair_requests().len(), 0);
    assert!(!gate.forget_pair_request(&stranger.public()));
}

#[test]
fn pending_pair_requests_are_bounded() {
    let mut gate = Gate::new(PeerPolicy::new());
    for i in 0..=MAX_PENDING_PAIR_REQUESTS {
        let mut b = [0u8; 32];
        b[..8].copy_from_slice(&(i as u64).to_be_bytes());
        gate.note_pair_request(key(b));
    }
    assert_eq!(
        gate.pending_pair_requests().len(),
        MAX_PENDING_PAIR_REQUESTS
    );
    assert!(
        !gate.forget_pair_request(&key([0; 32])),
        "oldest request is forgotten"
    );
}

#[test]
fn stranger_cannot_burn_a_friends_message_id() {
    let (mut gate, me, friend, stranger) = setup();
    // The stranger saw the friend's id in the DHT and reuses it in a knock.
    let k = envelope(&stranger, "s", &me, EnvelopeKind::Knock, 42, NOW);
    assert!(matches!(
        gate.decide(&k, &me, W, NOW),
        Decision::HoldKnock(_)
    ));
    let m = envelope(&friend, "f", &me, EnvelopeKind::Message, 42, NOW);
    assert_eq!(gate.decide(&m, &me, W, NOW), Decision::Deliver);
}

#[test]
fn rename_keeps_the_key_and_refuses_a_taken_or_bad_name() {
    let (a, b) = (ident(1).public(), ident(2).public());
    let mut p = PeerPolicy::new();
    p.add("bob", a).unwrap();
    p.add("carol", b).unwrap();
    assert_eq!(p.rename("bob", "robert").unwrap(), Some(a));
    assert_eq!(p.get("robert"), Some(&a));
    assert_eq!(p.name_of(&a), Some("robert"));
    assert!(p.get("bob").is_none());
    assert!(matches!(
        p.rename("robert", "carol"),
        Err(TrustError::NameTaken { .. })
    ));
    assert!(matches!(
        p.rename("robert", "no spaces"),
        Err(TrustError::InvalidName(_))
    ));
    assert_eq!(p.rename("robert", "robert").unwrap(), Some(a));
    assert_eq!(p.rename("nobody", "x").unwrap(), None);
    assert_eq!(p.iter().len(), 2);
}
