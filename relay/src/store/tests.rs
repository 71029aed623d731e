use interlink_core::{
    MsgId,
    limits::{DAY_MS, MAX_FUTURE_SKEW_MS, MAX_MAILBOX_RECORD_BYTES},
    mailbox::Mailbox,
    wire::AckEntry,
};
use tempfile::TempDir;

use super::*;
use interlink_testkit::{
    self as testkit, ack, forge, identity, knock, message, msg_id, raw_record, record,
};

const T0: u64 = 1_800_000_000_000;

struct Fixture {
    dir: TempDir,
    owner: interlink_core::Identity,
    session: interlink_core::SessionId,
}

impl Fixture {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            owner: identity(1),
            session: testkit::session("inbox"),
        }
    }

    fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("mailboxes.redb")
    }

    fn open(&self, caps: Caps) -> MailboxStore {
        MailboxStore::open(&self.path(), caps).unwrap()
    }

    fn msg(&self, from: u64, id: u64, ts: u64) -> Signed {
        message(
            &identity(from),
            &self.owner,
            &self.session,
            msg_id(id),
            ts,
            "hello",
        )
    }

    fn rec(&self, envs: &[Signed], acks: &[SignedAck], now: u64) -> ([u8; 32], Vec<u8>) {
        record(&self.owner.public(), &self.session, envs, acks, now)
    }

    /// The owner's ack of `(from, id)` messages (as [`Self::msg`] numbers them).
    fn ack(&self, msgs: &[(u64, u64)], ts: u64) -> SignedAck {
        let entries: Vec<_> = msgs
            .iter()
            .map(|(from, n)| (identity(*from).public(), msg_id(*n)))
            .collect();
        ack(&self.owner, &self.session, &entries, ts)
    }
}

type Signed = interlink_core::wire::Signed<interlink_core::wire::Envelope>;
type SignedAck = interlink_core::wire::Signed<interlink_core::wire::Ack>;

fn held(store: &MailboxStore, key: &[u8; 32], now: u64) -> Mailbox {
    let bytes = store.get(key).unwrap().expect("a record is held");
    let (mb, rejected) = Mailbox::decode(&bytes, now, &mailbox::Config::default()).unwrap();
    assert!(rejected.is_empty());
    mb
}

fn ids(mb: &Mailbox) -> Vec<MsgId> {
    mb.pending().map(|e| e.body().msg_id).collect()
}

/// Caps with and without the decoded cache: both must behave the same.
fn both_caches() -> [Caps; 2] {
    [Caps::default(), Caps::default().with_decoded_cache_bytes(0)]
}

#[test]
fn put_get_round_trip() {
    let f = Fixture::new();
    let store = f.open(Caps::default());
    let (key, bytes) = f.rec(&[f.msg(2, 1, T0)], &[], T0);
    let out = store.put(key, &bytes, T0).unwrap();
    let kept = out.kept.clone();
    assert_eq!(
        out,
        PutOutcome {
            changed: true,
            new_envelopes: 1,
            new_acks: 0,
            removed: 0,
            held: 1,
            kept,
            // The store held nothing before: it grew by the whole record.
            grew_by: store.stats().bytes,
        }
    );
    assert_eq!(out.kept.len(), 1, "the one envelope put is kept");
    assert_eq!(store.get(&key).unwrap().as_deref(), Some(bytes.as_slice()));
    assert_eq!(store.get(&[7; 32]).unwrap(), None);
    assert_eq!(store.keys().unwrap(), vec![key]);
    assert_eq!(
        store.stats(),
        Stats {
            mailboxes: 1,
            envelopes: 1,
            bytes: bytes.len() as u64
        }
    );
}

#[test]
fn two_puts_merge_and_a_repeat_changes_nothing() {
    for caps in both_caches() {
        let f = Fixture::new();
        let store = f.open(caps);
        let (key, a) = f.rec(&[f.msg(2, 1, T0)], &[], T0);
        let (_, b) = f.rec(&[f.msg(3, 2, T0 + 1)], &[], T0);
        store.put(key, &a, T0).unwrap();
        let out = store.put(key, &b, T0 + 5).unwrap();
        assert_eq!((out.new_envelopes, out.held), (1, 2));
        assert_eq!(ids(&held(&store, &key, T0 + 5)), vec![msg_id(1), msg_id(2)]);
        // Re-publishing an old copy (DHT replication does, hourly) is a no-op.
        let again = store.put(key, &a, T0 + 10).unwrap();
        assert!(!again.changed);
        assert_eq!(again.new_envelopes, 0);
        assert_eq!(store.stats().envelopes, 2);
    }
}

#[test]
fn ack_removes_envelopes_and_its_tombstone_survives_reopen() {
    for caps in both_caches() {
        let f = Fixture::new();
        let (key, both) = f.rec(&[f.msg(2, 1, T0), f.msg(2, 2, T0 + 1)], &[], T0);
        {
            let store = f.open(caps.clone());
            store.put(key, &both, T0).unwrap();
            let (_, acked) = f.rec(&[], &[f.ack(&[(2, 1)], T0 + 10)], T0 + 10);
            let out = store.put(key, &acked, T0 + 10).unwrap();
            assert_eq!((out.new_acks, out.removed, out.held), (1, 1, 1));
        }
        let store = f.open(caps);
        let mb = held(&store, &key, T0 + 20);
        assert_eq!(ids(&mb), vec![msg_id(2)]);
        assert!(
            mb.acked()
                .contains(&AckEntry(identity(2).public(), msg_id(1)))
        );
        // A stale copy still carrying the acked envelope does not bring it back.
        let out = store.put(key, &both, T0 + 20).unwrap();
        assert!(!out.changed);
        assert_eq!(ids(&held(&store, &key, T0 + 20)), vec![msg_id(2)]);
    }
}

#[test]
fn survives_drop_and_reopen() {
    let f = Fixture::new();
    let (key, bytes) = f.rec(&[f.msg(2, 1, T0)], &[], T0);
    let stats = {
        let store = f.open(Caps::default());
        store.put(key, &bytes, T0).unwrap();
        store.stats()
    };
    let store = f.open(Caps::default());
    assert_eq!(store.get(&key).unwrap(), Some(bytes));
    assert_eq!(store.stats(), stats);
    // The reopened store merges onto what it held before.
    let (_, more) = f.rec(&[f.msg(3, 2, T0 + 1)], &[], T0);
    assert_eq!(store.put(key, &more, T0 + 2).unwrap().held, 2);
}

/// The store holds every user's sealed mail: owner-only, also when an earlier version
/// created it readable by others.
#[cfg(unix)]
#[test]
fn the_database_file_is_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    let mode = || std::fs::metadata(f.path()).unwrap().permissions().mode() & 0o777;
    drop(f.open(Caps::default()));
    assert_eq!(mode(), 0o600);
    std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    drop(f.open(Caps::default()));
    assert_eq!(mode(), 0o600, "narrowed on open");
}

#[test]
fn a_second_open_of_the_same_file_fails() {
    let f = Fixture::new();
    let _store = f.open(Caps::default());
    assert!(matches!(
        MailboxStore::open(&f.path(), Caps::default()),
        Err(OpenError::Db(_))
    ));
}

#[test]
fn whole_store_caps_refuse_with_a_reason_and_still_take_acks() {
    let f = Fixture::new();
    let store = f.open(Caps::default().with_max_mailboxes(2));
    let owners: Vec<_> = (10..13).map(identity).collect();
    let session = testkit::session("s");
    let mut keys = Vec::new();
    for (i, o) in owners.iter().enumerate() {
        let env = message(&identity(2), o, &session, msg_id(i as u64), T0, "hi");
        let (key, bytes) = record(&o.public(), &session, &[env], &[], T0);
        keys.push(key);
        let res = store.put(key, &bytes, T0);
        if i < 2 {
            res.unwrap();
        } else {
            let err = res.unwrap_err();
            assert_eq!(err.reason(), Some(RejectReason::StoreFullMailboxes));
            assert_eq!(store.get(&key).unwrap(), None);
        }
    }
    assert_eq!(store.stats().mailboxes, 2);
    // Full, yet an owner's ack (which shrinks its mailbox) goes through.
    let a = ack(
        &owners[0],
        &session,
        &[(identity(2).public(), msg_id(0))],
        T0 + 1,
    );
    let (_, acked) = record(&owners[0].public(), &session, &[], &[a], T0 + 1);
    assert_eq!(store.put(keys[0], &acked, T0 + 1).unwrap().removed, 1);

    // The byte cap: room for one small record only.
    let f = Fixture::new();
    let (key, one) = f.rec(&[f.msg(2, 1, T0)], &[], T0);
    let store = f.open(Caps::default().with_max_total_bytes(one.len() as u64 + 10));
    store.put(key, &one, T0).unwrap();
    let (_, two) = f.rec(&[f.msg(3, 2, T0)], &[], T0);
    let err = store.put(key, &two, T0).unwrap_err();
    assert_eq!(err.reason(), Some(RejectReason::StoreFullBytes));
    assert_eq!(store.get(&key).unwrap(), Some(one.clone()));
    assert_eq!(store.stats().bytes, one.len() as u64);
}

#[test]
fn per_sender_quota_from_the_core_keeps_a_friends_mail() {
    let f = Fixture::new();
    let store = f.open(Caps::default());
    // A stranger (no pass) is held to the strangers' quota, apart from the friend's.
    let quota = mailbox::Config::default().stranger_sender_quota as u64;
    let (key, friend) = f.rec(&[f.msg(2, 0, T0)], &[], T0);
    store.put(key, &friend, T0).unwrap();
    // A stranger floods the mailbox with knocks, one put each.
    let stranger = identity(66);
    for i in 1..=quota + 10 {
        let k = knock(&stranger, &f.owner.public(), &f.session, msg_id(i), T0 + i);
        let (_, bytes) = f.rec(&[k], &[], T0 + i);
        store.put(key, &bytes, T0 + i).unwrap();
    }
    let mb = held(&store, &key, T0 + quota + 10);
    let from_stranger = mb
        .pending()
        .filter(|e| e.body().sender == stranger.public())
        .count();
    assert_eq!(from_stranger as u64, quota);
    assert!(ids(&mb).contains(&msg_id(0)), "the friend's message stays");
    assert_eq!(store.stats().envelopes, quota + 1);
}

#[test]
fn hostile_puts_are_refused_with_their_reason_and_store_nothing() {
    let f = Fixture::new();
    let store = f.open(Caps::default());
    let owner = f.owner.public();
    let env = f.msg(2, 1, T0);
    let (key, good) = f.rec(std::slice::from_ref(&env), &[], T0);

    let forged = raw_record(
        &owner,
        &f.session,
        vec![forge(env.to_bytes(), env.signature())],
        vec![],
    );
    // An envelope for another session, inside this mailbox's record.
    let elsewhere = message(
        &identity(2),
        &f.owner,
        &testkit::session("other"),
        msg_id(2),
        T0,
        "x",
    );
    let misaddressed = raw_record(&owner, &f.session, vec![elsewhere.to_bytes()], vec![]);
    // An ack "for" this mailbox signed by someone else.
    let intruder = ack(
        &identity(9),
        &f.session,
        &[(identity(2).public(), msg_id(1))],
        T0,
    );
    let forged_ack = raw_record(&owner, &f.session, vec![], vec![intruder.to_bytes()]);
    let too_many = raw_record(
        &owner,
        &f.session,
        (0..=mailbox::Config::default().max_held_envelopes() as u64)
            .map(|i| knock(&identity(3), &owner, &f.session, msg_id(i), T0).to_bytes())
            .collect(),
        vec![],
    );
    let cases: Vec<(&str, [u8; 32], Vec<u8>, RejectReason)> = vec![
        ("forged signature", key, forged, RejectReason::InvalidEntry),
        (
            "under another key",
            [0xee; 32],
            good.clone(),
            RejectReason::WrongMailbox,
        ),
        (
            "misaddressed entry",
            key,
            misaddressed,
            RejectReason::WrongMailbox,
        ),
        (
            "ack by a non-owner",
            key,
            forged_ack,
            RejectReason::NotOwner,
        ),
        (
            "too many entries",
            key,
            too_many,
            RejectReason::TooManyEntries,
        ),
        (
            "oversized",
            key,
            vec![0; MAX_MAILBOX_RECORD_BYTES + 1],
            RejectReason::Oversized,
        ),
        (
            "garbage",
            key,
            b"\xff\x00 not cbor".to_vec(),
            RejectReason::Malformed,
        ),
        ("empty", key, Vec::new(), RejectReason::Malformed),
    ];
    for (name, k, bytes, reason) in cases {
        let err = store.put(k, &bytes, T0).unwrap_err();
        assert_eq!(err.reason(), Some(reason), "{name}: {err}");
        assert_eq!(store.get(&k).unwrap(), None, "{name}");
    }
    assert_eq!(store.stats(), Stats::default());
    // Refusals leave the store usable.
    store.put(key, &good, T0).unwrap();
}

#[test]
fn a_refused_put_leaves_the_held_copy_alone() {
    let f = Fixture::new();
    let store = f.open(Caps::default());
    let env = f.msg(2, 1, T0);
    let (key, good) = f.rec(std::slice::from_ref(&env), &[], T0);
    store.put(key, &good, T0).unwrap();
    let later = f.msg(3, 2, T0);
    let mixed = raw_record(
        &f.owner.public(),
        &f.session,
        vec![later.to_bytes(), forge(env.to_bytes(), env.signature())],
        vec![],
    );
    let err = store.put(key, &mixed, T0).unwrap_err();
    assert_eq!(err.reason(), Some(RejectReason::InvalidEntry));
    assert_eq!(store.get(&key).unwrap(), Some(good));
}

#[test]
fn put_many_commits_once_and_merges_within_the_batch() {
    for caps in both_caches() {
        let f = Fixture::new();
        let store = f.open(caps);
        let (key, a) = f.rec(&[f.msg(2, 1, T0)], &[], T0);
        let (_, b) = f.rec(&[f.msg(3, 2, T0)], &[], T0);
        let results = store.put_many(&[(key, &a), ([1; 32], &b), (key, &b)], T0);
        assert_eq!(results.len(), 3);
        assert_eq!(results[0].as_ref().unwrap().held, 1);
        assert_eq!(
            results[1].as_ref().unwrap_err().reason(),
            Some(RejectReason::WrongMailbox)
        );
        assert_eq!(results[2].as_ref().unwrap().held, 2);
        assert_eq!(ids(&held(&store, &key, T0)), vec![msg_id(1), msg_id(2)]);
        assert_eq!(
            store.stats(),
            Stats {
                mailboxes: 1,
                envelopes: 2,
                bytes: store.get(&key).unwrap().unwrap().len() as u64
            }
        );
    }
}

#[test]
fn sweep_drops_what_expired_then_the_tombstones() {
    for caps in both_caches() {
        let f = Fixture::new();
        let store = f.open(caps);
        let retention = mailbox::Config::default().retention_ms;
        let (key, bytes) = f.rec(&[f.msg(2, 1, T0), f.msg(2, 2, T0 + DAY_MS)], &[], T0);
        store.put(key, &bytes, T0).unwrap();
        let (_, acked) = f.rec(&[], &[f.ack(&[(2, 2)], T0 + DAY_MS)], T0 + DAY_MS);
        store.put(key, &acked, T0 + DAY_MS).unwrap();
        assert_eq!(store.stats().envelopes, 1);

        // Nothing is due yet: the sweep decodes nothing.
        assert_eq!(store.sweep(T0 + retention).unwrap(), SweepReport::default());
        // Message 1 expires; the ack (a tombstone) lives on.
        let r = store.sweep(T0 + retention + 1).unwrap();
        assert_eq!(
            (
                r.mailboxes_checked,
                r.envelopes_dropped,
                r.mailboxes_deleted
            ),
            (1, 1, 0)
        );
        assert_eq!(store.stats().envelopes, 0);
        assert_eq!(store.stats().mailboxes, 1);
        assert!(
            held(&store, &key, T0 + retention + 1)
                .acked()
                .contains(&AckEntry(identity(2).public(), msg_id(2)))
        );
        // Then the ack expires and the mailbox goes.
        let ack_gone = T0 + DAY_MS + retention + MAX_FUTURE_SKEW_MS + 1;
        let r = store.sweep(ack_gone).unwrap();
        assert_eq!(r.mailboxes_deleted, 1);
        assert_eq!(store.get(&key).unwrap(), None);
        assert_eq!(store.stats(), Stats::default());
        // A put of nothing but expired mail stores nothing.
        let out = store.put(key, &bytes, ack_gone).unwrap();
        assert!(!out.changed);
        assert_eq!(store.get(&key).unwrap(), None);
    }
}

#[test]
fn invalid_caps_are_refused() {
    let f = Fixture::new();
    let caps = Caps::default().with_max_mailboxes(0);
    assert!(matches!(
        MailboxStore::open(&f.path(), caps),
        Err(OpenError::Caps(_))
    ));
}

#[test]
fn a_refusal_inside_a_batch_does_not_hide_the_held_copy_from_later_puts() {
    for caps in both_caches() {
        let f = Fixture::new();
        let (key, one) = f.rec(&[f.msg(2, 1, T0)], &[], T0);
        let store = f.open(caps.with_max_total_bytes(one.len() as u64 + 10));
        store.put(key, &one, T0).unwrap();
        let (_, grow) = f.rec(&[f.msg(3, 2, T0)], &[], T0);
        let (_, ack) = f.rec(&[], &[f.ack(&[(2, 1)], T0 + 1)], T0 + 1);
        let results = store.put_many(&[(key, &grow), (key, &ack)], T0 + 1);
        assert_eq!(
            results[0].as_ref().unwrap_err().reason(),
            Some(RejectReason::StoreFullBytes)
        );
        // The ack merged with the held copy: it removed message 1.
        let out = results[1].as_ref().unwrap();
        assert_eq!((out.removed, out.new_acks, out.held), (1, 1, 0));
        let mb = held(&store, &key, T0 + 1);
        assert!(mb.is_empty());
        assert!(
            mb.acked()
                .contains(&AckEntry(identity(2).public(), msg_id(1)))
        );
    }
}

/// One identity cannot fill the store (issue 13, item 7): its sessions' mailboxes
/// together are held to the per-identity cap, another owner's paired mail still goes
/// in, the count survives a reopen, and what the owner acks makes room again.
#[test]
fn one_identity_is_held_to_its_bytes_over_all_its_mailboxes() {
    let f = Fixture::new();
    let hog = identity(40);
    let friend_of_hog = identity(41);
    let big = "x".repeat(12_000);
    // A record of one 12 kB admitted message for session `s` of the hog.
    let hog_record = |s: u64| {
        let session = testkit::session(&format!("s{s}"));
        let env = message(&friend_of_hog, &hog, &session, msg_id(s), T0, &big);
        record(&hog.public(), &session, &[env], &[], T0)
    };
    let one = hog_record(0).1.len() as u64;
    // Room for five, and for the small ack-only record one of them shrinks to.
    let caps = Caps::default().with_max_owner_bytes(one * 5 + 400);
    let store = f.open(caps.clone());
    let mut refused = 0;
    for s in 0..20 {
        let (key, bytes) = hog_record(s);
        match store.put(key, &bytes, T0) {
            Ok(_) => {}
            Err(e) => {
                assert_eq!(e.reason(), Some(RejectReason::OwnerFull), "{e}");
                refused += 1;
            }
        }
    }
    assert_eq!((store.stats().mailboxes, refused), (5, 15));
    // Another owner's mail is not held up by it.
    let (key, friend) = f.rec(&[f.msg(2, 1, T0)], &[], T0);
    store.put(key, &friend, T0).unwrap();
    drop(store);
    // Reopened, the relay counts the hog's records again and still refuses a sixth.
    let store = f.open(caps);
    let (key, bytes) = hog_record(19);
    assert_eq!(
        store.put(key, &bytes, T0).unwrap_err().reason(),
        Some(RejectReason::OwnerFull)
    );
    // The hog acks one session's message: that record shrinks, and a new one fits.
    let s0 = testkit::session("s0");
    let a = ack(&hog, &s0, &[(friend_of_hog.public(), msg_id(0))], T0 + 1);
    let (k0, acked) = record(&hog.public(), &s0, &[], &[a], T0 + 1);
    store.put(k0, &acked, T0 + 1).unwrap();
    store.put(key, &bytes, T0 + 1).unwrap();
}

/// A relay that serves a team holds no one else's mailboxes, whoever signs them.
#[test]
fn a_serving_relay_holds_only_its_team() {
    let f = Fixture::new();
    let store = f.open(Caps::default().serving([f.owner.public()]));
    let (key, ours) = f.rec(&[f.msg(2, 1, T0)], &[], T0);
    store.put(key, &ours, T0).unwrap();
    let stranger = identity(50);
    let session = testkit::session("x");
    let env = message(&identity(51), &stranger, &session, msg_id(1), T0, "hi");
    let (k, theirs) = record(&stranger.public(), &session, &[env], &[], T0);
    assert_eq!(
        store.put(k, &theirs, T0).unwrap_err().reason(),
        Some(RejectReason::NotServed)
    );
    assert_eq!(store.stats().mailboxes, 1);
}

/// A file written before the owner table existed gets it filled at open, from its
/// records, so its identities are held to their caps too.
#[test]
fn an_older_file_gets_its_owner_rows_at_open() {
    let f = Fixture::new();
    let (key, one) = f.rec(&[f.msg(2, 1, T0)], &[], T0);
    let store = f.open(Caps::default());
    store.put(key, &one, T0).unwrap();
    // As an older relay left it: no owner rows.
    let txn = store.db.begin_write().unwrap();
    txn.delete_table(OWNER).unwrap();
    txn.commit().unwrap();
    drop(store);
    let caps = Caps::default().with_max_owner_bytes(one.len() as u64 + 10);
    let store = f.open(caps);
    assert_eq!(
        store.lock().owner_bytes(&f.owner.public()),
        one.len() as u64
    );
    let (_, two) = f.rec(&[f.msg(2, 1, T0), f.msg(3, 2, T0)], &[], T0);
    assert_eq!(
        store.put(key, &two, T0).unwrap_err().reason(),
        Some(RejectReason::OwnerFull)
    );
}
