use super::*;
use crate::{
    limits::{HEARTBEAT_MS, LIVE_WINDOW_MS},
    presence::tests::{T0, addr, ann, bye, identity, sid},
    wire::{Unverified, VERSION},
};

fn roster_of(anns: &[Signed<Announcement>]) -> Roster {
    let mut r = Roster::default();
    for a in anns {
        r.apply_announcement(a.clone(), T0).unwrap();
    }
    r
}

/// A beacon of identity `seed`'s session whose announcement is `a`.
pub(crate) fn beacon_for(seed: u8, a: &Signed<Announcement>, ts: u64, seq: u64) -> Signed<Beacon> {
    let id = identity(seed);
    Signed::sign(
        Beacon::new(
            id.public(),
            Tag::of_announcement(a.body()),
            HEARTBEAT_MS,
            ts,
            seq,
        ),
        &id,
    )
    .unwrap()
}

/// The request a node sends for `summary`, decoded back as a responder reads it.
fn request(summary: &Summary) -> RosterRequest {
    RosterRequest::with_summary(summary)
}

#[test]
fn a_tag_names_one_version_of_one_session() {
    let k = identity(1).public();
    let t = Tag::of(&k, &sid("a"), T0, 1);
    assert_eq!(t, Tag::of(&k, &sid("a"), T0, 1));
    assert_ne!(t, Tag::of(&k, &sid("a"), T0, 2));
    assert_ne!(t, Tag::of(&k, &sid("a"), T0 + 1, 1));
    assert_ne!(t, Tag::of(&k, &sid("b"), T0, 1));
    assert_ne!(t, Tag::of(&identity(2).public(), &sid("a"), T0, 1));
    assert_eq!(t, Tag::of_announcement(ann(1, "a", T0, 1).body()));
}

#[test]
fn a_summary_round_trips_and_ragged_oversized_or_misfit_ones_are_refused() {
    let r = roster_of(&[ann(1, "a", T0, 1), ann(2, "b", T0, 1)]);
    let s = Summary::of(&r, T0);
    assert_eq!(s.len(), 2);
    let (bytes, away) = s.to_wire();
    assert_eq!(bytes.len(), 2 * TAG_BYTES);
    assert!(away.is_empty(), "both are live: no bitmap");
    assert_eq!(Summary::decode(&bytes, &away).unwrap(), s);
    assert_eq!(
        Summary::decode(&bytes[..9], &[]),
        Err(SummaryError::Ragged(9))
    );
    let huge = vec![0u8; MAX_SUMMARY_BYTES + TAG_BYTES];
    assert_eq!(
        Summary::decode(&huge, &[]),
        Err(SummaryError::Oversized(huge.len()))
    );
    assert!(Summary::decode(&[], &[]).unwrap().is_empty());
    assert_eq!(
        Summary::decode(&bytes, &[1, 0]),
        Err(SummaryError::Bitmap {
            got: 2,
            tags: 2,
            want: 1
        })
    );
}

/// A full request of `tags` distinct tags, every one marked away.
fn all_away(tags: usize) -> RosterRequest {
    let have: Vec<u8> = (0..tags as u64).flat_map(u64::to_be_bytes).collect();
    RosterRequest {
        have: serde_bytes::ByteBuf::from(have),
        away: serde_bytes::ByteBuf::from(vec![0xff; tags.div_ceil(8)]),
        ..RosterRequest::default()
    }
}

#[test]
fn every_request_section_8_2_allows_is_answered_and_an_oversized_one_answered_empty() {
    let responder = roster_of(&[ann(1, "a", T0, 1)]);
    // The largest allowed: 16,384 tags, all away. Processed: the responder's own
    // announcement is not among them, so it is sent.
    let largest = all_away(MAX_SUMMARY_TAGS);
    assert_eq!(largest.away.len(), MAX_AWAY_BYTES);
    assert_eq!(check_request(&largest), Ok(()));
    assert_eq!(responder.answer(&largest, T0).unwrap().entries.len(), 1);
    assert_eq!(
        summary_bytes_read(&largest),
        MAX_SUMMARY_BYTES + MAX_AWAY_BYTES
    );
    // One tag over: refused by its length, so answered empty, and nothing of it
    // is read.
    let over = all_away(MAX_SUMMARY_TAGS + 1);
    assert_eq!(
        responder.answer(&over, T0).unwrap_err(),
        SummaryError::Oversized(MAX_SUMMARY_BYTES + TAG_BYTES)
    );
    assert_eq!(summary_bytes_read(&over), 0);
    // Both fit the codec's request limit (PROTOCOL §8), so both reach the
    // responder: the oversized one is read and answered, not dropped.
    assert_eq!(
        crate::wire::encode(&largest).len(),
        MAX_SUMMARY_BYTES + MAX_AWAY_BYTES + 30
    );
    let over_bytes = crate::wire::encode(&over).len();
    assert_eq!(over_bytes, MAX_SUMMARY_BYTES + MAX_AWAY_BYTES + 39);
    assert!(over_bytes <= RosterRequest::MAX_BYTES, "{over_bytes} bytes");
    // Other shapes refused are not read either; a digest request costs nothing
    // beyond its fixed cost.
    let ragged = RosterRequest {
        have: serde_bytes::ByteBuf::from(vec![0u8; 9]),
        ..RosterRequest::default()
    };
    assert_eq!(summary_bytes_read(&ragged), 0);
    let misfit = RosterRequest {
        away: serde_bytes::ByteBuf::from(vec![0u8; 3]),
        ..all_away(16)
    };
    assert_eq!(summary_bytes_read(&misfit), 0);
    assert_eq!(summary_bytes_read(&all_away(16)), 16 * TAG_BYTES + 2);
    assert_eq!(summary_bytes_read(&RosterRequest::with_digest([0; 16])), 0);
}

#[test]
fn the_away_bitmap_marks_exactly_the_sessions_judged_away() {
    // Nine sessions (two bitmap bytes); those announced long ago are away.
    let anns: Vec<_> = (0..9u8)
        .map(|i| {
            let ts = if i % 3 == 0 { T0 - LIVE_WINDOW_MS } else { T0 };
            ann(i + 1, "s", ts, 1)
        })
        .collect();
    let r = roster_of(&anns);
    let s = Summary::of(&r, T0);
    let (bytes, away) = s.to_wire();
    assert_eq!(away.len(), 2);
    let back = Summary::decode(&bytes, &away).unwrap();
    for (i, a) in anns.iter().enumerate() {
        let tag = Tag::of_announcement(a.body());
        assert!(back.contains(&tag));
        assert_eq!(back.is_away(&tag), i % 3 == 0, "session {i}");
    }
}

#[test]
fn an_overdue_session_is_marked_before_it_is_away() {
    let r = roster_of(&[ann(1, "a", T0, 1)]);
    let tag = Tag::of_announcement(r.announcements().next().unwrap().body());
    assert!(!Summary::of(&r, T0 + LIVE_WINDOW_MS / 2 - 1).is_away(&tag));
    // Half the live window without a sign: still live, but marked.
    let at = T0 + LIVE_WINDOW_MS / 2;
    assert_eq!(r.presence_of(&addr(1, "a"), at), Presence::Live);
    assert!(Summary::of(&r, at).is_away(&tag));
}

#[test]
fn a_responder_sends_only_what_the_summary_lacks_or_holds_older() {
    let responder = roster_of(&[
        ann(1, "a", T0, 2),
        ann(2, "b", T0, 1),
        ann(3, "c", T0 + 5, 1),
    ]);
    // The requester holds b exactly, a in an older version, and something the
    // responder does not know at all.
    let requester = roster_of(&[ann(1, "a", T0, 1), ann(2, "b", T0, 1), ann(4, "d", T0, 1)]);
    let missing: Vec<_> = responder
        .missing_from(&Summary::of(&requester, T0))
        .into_iter()
        .map(|a| (a.body().session_id.clone(), a.body().seq))
        .collect();
    // Newest first.
    assert_eq!(missing, vec![(sid("c"), 1), (sid("a"), 2)]);
    // Nothing lacking: an empty answer.
    assert!(
        responder
            .missing_from(&Summary::of(&responder, T0))
            .is_empty()
    );
    // No summary: everything.
    assert_eq!(responder.missing_from(&Summary::default()).len(), 3);
}

#[test]
fn an_answer_carries_each_sent_announcements_beacon_and_those_the_requester_lacks() {
    let a = ann(1, "a", T0, 1);
    let b = ann(2, "b", T0, 1);
    let mut responder = roster_of(&[a.clone(), b.clone()]);
    let later = T0 + 2 * LIVE_WINDOW_MS;
    let beacon_a = beacon_for(1, &a, later - 1_000, 5);
    let beacon_b = beacon_for(2, &b, later - 1_000, 5);
    responder.apply_beacon(beacon_a.clone(), later).unwrap();
    responder.apply_beacon(beacon_b.clone(), later).unwrap();
    // The requester holds a (heard from last at T0: away by now), not b.
    let requester = roster_of(std::slice::from_ref(&a));
    let req = request(&Summary::of(&requester, later));
    let answer = responder.answer(&req, later).unwrap();
    assert_eq!(answer.entries.len(), 1);
    assert_eq!(answer.entries[0].0, &b);
    assert_eq!(answer.entries[0].1, Some(&beacon_b));
    assert_eq!(answer.beacons, vec![&beacon_a]);
    assert!(!answer.same);
    // A requester that judges a live asks for nothing of it.
    let mut fresh = roster_of(&[a.clone(), b.clone()]);
    fresh.apply_beacon(beacon_a.clone(), later).unwrap();
    fresh.apply_beacon(beacon_b, later).unwrap();
    let answer = responder
        .answer(&request(&Summary::of(&fresh, later)), later)
        .unwrap();
    assert!(answer.entries.is_empty() && answer.beacons.is_empty());
    // What the responder itself judges away is not sent as a sign of life.
    let much_later = later + 3 * LIVE_WINDOW_MS;
    let answer = responder
        .answer(&request(&Summary::of(&requester, much_later)), much_later)
        .unwrap();
    assert!(answer.beacons.is_empty());
}

#[test]
fn a_digest_names_the_held_versions_and_not_the_beacons() {
    let a = ann(1, "a", T0, 1);
    let mut one = roster_of(&[a.clone(), ann(2, "b", T0, 1)]);
    let two = roster_of(&[ann(2, "b", T0, 1), a.clone()]);
    assert_eq!(one.digest(), two.digest());
    one.apply_beacon(beacon_for(1, &a, T0 + 1_000, 2), T0 + 1_000)
        .unwrap();
    assert_eq!(one.digest(), two.digest(), "beacons do not change it");
    let three = roster_of(&[ann(1, "a", T0, 2), ann(2, "b", T0, 1)]);
    assert_ne!(one.digest(), three.digest());
    let same = one
        .answer(&RosterRequest::with_digest(two.digest()), T0)
        .unwrap();
    assert!(same.same && same.entries.is_empty());
    let differs = one
        .answer(&RosterRequest::with_digest(three.digest()), T0)
        .unwrap();
    assert!(!differs.same && differs.entries.is_empty());
    let mut both = RosterRequest::with_digest(two.digest());
    both.have = serde_bytes::ByteBuf::from(vec![0u8; 8]);
    assert_eq!(
        one.answer(&both, T0).unwrap_err(),
        SummaryError::DigestWithSummary
    );
}

#[test]
fn the_tag_index_follows_every_change_of_the_roster() {
    let mut r = roster_of(&[ann(1, "a", T0, 1), ann(1, "b", T0, 1), ann(2, "c", T0, 1)]);
    let consistent = |r: &Roster| {
        let mut from_index: Vec<Tag> = Summary::of(r, T0).tags.into_iter().collect();
        let mut from_anns: Vec<Tag> = r
            .announcements()
            .map(|a| Tag::of_announcement(a.body()))
            .collect();
        from_index.sort_unstable();
        from_anns.sort_unstable();
        assert_eq!(from_index, from_anns);
    };
    consistent(&r);
    r.apply_announcement(ann(1, "a", T0 + 1, 2), T0 + 1)
        .unwrap();
    consistent(&r);
    r.apply_goodbye(bye(1, "b", T0 + 2, 3), T0 + 2).unwrap();
    consistent(&r);
    assert_eq!(r.len(), 2);
    r.sweep(T0 + crate::limits::AWAY_RETENTION_MS + 10);
    consistent(&r);
    assert!(r.is_empty());
    assert!(
        r.beacon_target(&Tag::of_announcement(ann(2, "c", T0, 1).body()))
            .is_none()
    );
}

#[test]
fn knows_covers_the_held_version_older_ones_and_ones_a_goodbye_overtook() {
    let mut r = roster_of(&[ann(1, "a", T0, 5)]);
    let k = identity(1).public();
    assert!(r.knows(&k, &sid("a"), T0, 5));
    assert!(r.knows(&k, &sid("a"), T0, 4));
    assert!(!r.knows(&k, &sid("a"), T0, 6));
    assert!(!r.knows(&k, &sid("other"), T0, 1));
    assert!(!r.knows(&identity(9).public(), &sid("a"), T0, 1));
    r.apply_goodbye(bye(1, "a", T0 + 10, 7), T0 + 10).unwrap();
    assert!(r.knows(&k, &sid("a"), T0 + 10, 6));
    assert!(!r.knows(&k, &sid("a"), T0 + 11, 1));
}

#[test]
fn an_unverified_copy_is_recognised_and_a_forged_one_fails_verification() {
    let a = ann(1, "a", T0, 1);
    let bytes = a.to_bytes();
    let peek = Unverified::<Announcement>::decode(&bytes).unwrap();
    assert!(peek.is_copy_of(&a));
    assert_eq!(peek.claimed(), a.body());
    assert_eq!(peek.verify().unwrap(), a);
    // Same claimed stamp, another signature: not a copy, and verification fails.
    let mut forged = bytes.clone();
    let n = forged.len();
    forged[n - 1] ^= 1;
    let peek = Unverified::<Announcement>::decode(&forged).unwrap();
    assert!(!peek.is_copy_of(&a));
    assert!(peek.verify().is_err());
    let _ = (addr(1, "a"), VERSION);
}

#[test]
fn a_known_binding_is_not_checked_again_and_an_unknown_one_is() {
    let a = ann(1, "a", T0, 1);
    let known = a.body().sealing;
    // Another session of the same identity carries the same binding.
    let b = ann(1, "b", T0, 1);
    let peek = Unverified::<Announcement>::decode(&b.to_bytes()).unwrap();
    assert_eq!(peek.verify_knowing(Some(&known)).unwrap(), b);
    // A forged binding under a genuine announcement signature cannot be signed
    // without the key; one that is not the known binding is checked (and a bad one
    // refused) even when another binding is known.
    let mut body = b.body().clone();
    body.sealing.sig = serde_bytes::ByteArray::new([7; 64]);
    let body_bytes = crate::wire::encode(&body);
    #[derive(serde::Serialize)]
    struct Outer {
        body: serde_bytes::ByteBuf,
        sig: serde_bytes::ByteArray<64>,
    }
    let forged = crate::wire::encode(&Outer {
        sig: serde_bytes::ByteArray::new(
            identity(1).sign(crate::sign::Domain::Announcement, &body_bytes),
        ),
        body: serde_bytes::ByteBuf::from(body_bytes),
    });
    let peek = Unverified::<Announcement>::decode(&forged).unwrap();
    assert!(matches!(
        peek.clone().verify_knowing(Some(&known)),
        Err(crate::wire::WireError::InvalidField {
            field: "sealing",
            ..
        })
    ));
    assert!(peek.verify_knowing(None).is_err());
    // The announcement's own signature is always checked.
    let mut bytes = b.to_bytes();
    let n = bytes.len();
    bytes[n - 1] ^= 1;
    let peek = Unverified::<Announcement>::decode(&bytes).unwrap();
    assert!(peek.verify_knowing(Some(&known)).is_err());
}
