//! The presence node on a simulated clock: handle, then poll_output.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use rand_chacha::{ChaCha20Rng, rand_core::SeedableRng};

use super::*;
use crate::{
    limits::SECOND_MS,
    presence::{
        Presence,
        tests::{T0, identity, sid},
    },
    wire::{DeliveryMode, HostKind},
};

type Node = PresenceNode<u32, ChaCha20Rng>;

fn details(summary: &str) -> Details {
    Details {
        cwd: "/home/dev".to_owned(),
        git_label: None,
        summary: summary.to_owned(),
        host: HostKind::Claude,
        delivery: DeliveryMode::Inbox,
        project: None,
        claims: Vec::new(),
    }
}

/// The node of identity `seed`'s session "s", started at `now`, listening (or not).
fn node(seed: u8, now: u64, listening: bool) -> Node {
    let id = Arc::new(identity(seed));
    let session = sid("s");
    let peer_id = id
        .transport_keypair(&session)
        .unwrap()
        .public()
        .to_peer_id()
        .to_bytes();
    let own = Own {
        identity: id,
        session,
        peer_id,
        details: details("working"),
    };
    let pacer = Pacer::new(pacer::Config::default(), now, u64::from(seed));
    let mut n = PresenceNode::new(
        Roster::default(),
        pacer,
        Some(own),
        ChaCha20Rng::seed_from_u64(u64::from(seed)),
        now,
    );
    if listening {
        n.set_addresses(vec!["/ip4/127.0.0.1/tcp/4001".to_owned()], true);
    }
    n
}

fn drain(n: &mut Node) -> Vec<Output<u32>> {
    std::iter::from_fn(|| n.poll_output()).collect()
}

/// The bytes of what `outputs` publish of `kind`.
fn published(outputs: &[Output<u32>], kind: Kind) -> Vec<Vec<u8>> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Publish { kind: k, bytes } if *k == kind => Some(bytes.clone()),
            _ => None,
        })
        .collect()
}

fn stamp(bytes: &[u8]) -> (u64, u64) {
    match UnverifiedPresence::decode(bytes).unwrap() {
        UnverifiedPresence::Announcement(a) => (a.claimed().ts, a.claimed().seq),
        UnverifiedPresence::Beacon(b) => (b.claimed().ts, b.claimed().seq),
        UnverifiedPresence::Goodbye(g) => (g.claimed().ts, g.claimed().seq),
    }
}

fn me(seed: u8) -> SessionAddr {
    SessionAddr {
        key: identity(seed).public(),
        session: sid("s"),
    }
}

#[test]
fn a_listening_session_announces_on_its_first_tick_then_beacons() {
    let mut a = node(1, T0, true);
    a.handle(Input::Tick, T0);
    let out = drain(&mut a);
    let anns = published(&out, Kind::Announcement);
    assert_eq!(anns.len(), 1, "{out:?}");
    // The seq starts from the clock.
    assert_eq!(stamp(&anns[0]), (T0, T0));
    assert!(a.roster().get(&me(1)).is_some(), "its own roster holds it");
    // Nothing more until the promised interval has passed, then a beacon.
    a.handle(Input::Tick, T0 + SECOND_MS);
    assert!(published(&drain(&mut a), Kind::Beacon).is_empty());
    let interval = a.pacer().heartbeat_interval_ms(1);
    a.handle(Input::Tick, T0 + interval);
    let beacons = published(&drain(&mut a), Kind::Beacon);
    assert_eq!(beacons.len(), 1);
    assert_eq!(stamp(&beacons[0]), (T0 + interval, T0 + interval));
}

#[test]
fn no_announcement_without_an_address_until_five_seconds() {
    let mut a = node(1, T0, false);
    for t in [0, SECOND_MS, ANNOUNCE_WITHOUT_ADDRESS_AFTER_MS - 1] {
        a.handle(Input::Tick, T0 + t);
        a.handle(Input::PeerSubscribed(9), T0 + t);
        assert!(
            published(&drain(&mut a), Kind::Announcement).is_empty(),
            "{t}"
        );
    }
    // Past the hold, it announces without one (its peers can still reach it by the
    // connection it came in on).
    a.handle(Input::Tick, T0 + ANNOUNCE_WITHOUT_ADDRESS_AFTER_MS);
    assert_eq!(published(&drain(&mut a), Kind::Announcement).len(), 1);

    // An address that arrives within the hold is announced at once.
    let mut b = node(2, T0, false);
    b.handle(Input::Tick, T0);
    assert!(published(&drain(&mut b), Kind::Announcement).is_empty());
    b.set_addresses(vec!["/ip4/10.0.0.2/tcp/1".to_owned()], true);
    b.handle(Input::AddressAdded, T0 + 300);
    let anns = published(&drain(&mut b), Kind::Announcement);
    assert_eq!(anns.len(), 1);
    assert_eq!(stamp(&anns[0]).0, T0 + 300);
}

#[test]
fn seq_is_monotonic_across_restarts_on_the_same_clock() {
    let mut a = node(1, T0, true);
    a.handle(Input::Tick, T0);
    // Several messages within one millisecond still climb.
    a.handle(Input::Details(details("other")), T0);
    a.handle(Input::Details(details("third")), T0);
    let out = drain(&mut a);
    let stamps: Vec<_> = published(&out, Kind::Announcement)
        .iter()
        .map(|b| stamp(b))
        .collect();
    assert_eq!(stamps, vec![(T0, T0), (T0, T0 + 1), (T0, T0 + 2)]);
    // A restart a second later under the same session: newer than everything the
    // first run said, so every roster takes it over the old one.
    let mut observer = node(5, T0, true);
    for b in published(&out, Kind::Announcement) {
        observer.receive(&b, T0);
    }
    let mut again = node(1, T0 + SECOND_MS, true);
    again.handle(Input::Tick, T0 + SECOND_MS);
    let anns = published(&drain(&mut again), Kind::Announcement);
    assert!(stamp(&anns[0]) > (T0, T0 + 2));
    assert_eq!(observer.receive(&anns[0], T0 + SECOND_MS), Verdict::Accept);
    let learned = drain(&mut observer);
    assert!(learned.iter().any(|o| matches!(
        o,
        Output::Learned {
            upsert: Upsert::Updated,
            live: true,
            ..
        }
    )));
}

#[test]
fn readers_changed_reannounce_and_unchanged_ones_do_not() {
    let mut a = node(1, T0, true);
    // Before the first announcement, a change of readers announces nothing.
    a.set_readers(vec![(
        identity(2).public(),
        identity(2).sealing_secret().public(),
    )]);
    a.handle(Input::ReadersChanged, T0);
    assert!(published(&drain(&mut a), Kind::Announcement).is_empty());
    a.handle(Input::Tick, T0);
    assert_eq!(published(&drain(&mut a), Kind::Announcement).len(), 1);
    // The same set: nothing.
    a.handle(Input::ReadersChanged, T0 + 10);
    assert!(published(&drain(&mut a), Kind::Announcement).is_empty());
    // A reader added: announced anew, and the new reader can open the details.
    a.set_readers(vec![
        (identity(2).public(), identity(2).sealing_secret().public()),
        (identity(3).public(), identity(3).sealing_secret().public()),
    ]);
    a.handle(Input::ReadersChanged, T0 + 20);
    let anns = published(&drain(&mut a), Kind::Announcement);
    assert_eq!(anns.len(), 1);
    let mut reader = node(3, T0, true);
    assert_eq!(reader.receive(&anns[0], T0 + 20), Verdict::Accept);
    let held = reader.roster().get(&me(1)).unwrap();
    let mut wrap = crate::wire::DetailsReader::new(&identity(3));
    assert!(
        wrap.open(held.body()).is_some(),
        "sealed for the new reader"
    );
}

#[test]
fn gossip_teaches_a_peer_copies_are_forwarded_and_old_stamps_ignored() {
    let mut a = node(1, T0, true);
    let mut b = node(2, T0, true);
    a.handle(Input::Tick, T0);
    let ann = published(&drain(&mut a), Kind::Announcement).remove(0);
    assert_eq!(b.receive(&ann, T0 + 5), Verdict::Accept);
    assert_eq!(b.verified(), 1);
    assert_eq!(b.roster().presence_of(&me(1), T0 + 5), Presence::Live);
    // A copy is forwarded unverified.
    assert_eq!(b.receive(&ann, T0 + 6), Verdict::Accept);
    assert_eq!(b.verified(), 1);
    // A beacon keeps it live; replayed, it is nothing new.
    let interval = a.pacer().heartbeat_interval_ms(1);
    a.handle(Input::Tick, T0 + interval);
    let beacon = published(&drain(&mut a), Kind::Beacon).remove(0);
    let _ = drain(&mut b);
    assert_eq!(b.receive(&beacon, T0 + interval), Verdict::Accept);
    assert_eq!(drain(&mut b), vec![Output::Heard(me(1))]);
    assert_eq!(b.verified(), 2);
    // Garbage is rejected.
    assert!(matches!(b.receive(b"nonsense", T0), Verdict::Reject(_)));
}

#[test]
fn a_roster_fetch_brings_what_gossip_missed_and_repair_republishes_it() {
    let mut a = node(1, T0, true);
    let mut b = node(2, T0, true);
    a.handle(Input::Tick, T0);
    b.handle(Input::Tick, T0);
    let _ = (drain(&mut a), drain(&mut b));
    // b joins a's topic: a asks b for its roster with a's summary.
    a.handle(Input::PeerConnected(2), T0 + 10);
    a.handle(Input::PeerSubscribed(2), T0 + 10);
    let out = drain(&mut a);
    let request = out
        .iter()
        .find_map(|o| match o {
            Output::AskRoster {
                peer: 2,
                ask: Ask::Connect,
                request,
            } => Some(request.clone()),
            _ => None,
        })
        .unwrap();
    let response = b.answer(&request, T0 + 11).unwrap();
    assert_eq!(response.announcements.len(), 1);
    a.handle(
        Input::RosterAnswered {
            peer: 2,
            ask: Ask::Repair,
            response,
        },
        T0 + 12,
    );
    let out = drain(&mut a);
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Learned { live: false, .. }))
    );
    assert_eq!(published(&out, Kind::Republish).len(), 1, "{out:?}");
    assert_eq!(a.republished(), 1);
    // The second look: a digest request shortly after, the same digest now.
    a.handle_timeout(T0 + 10 + a.pacer().config().recheck_after_ms);
    let out = drain(&mut a);
    let digest = out
        .iter()
        .find_map(|o| match o {
            Output::AskRoster {
                ask: Ask::Digest,
                request,
                ..
            } => Some(request.clone()),
            _ => None,
        })
        .unwrap();
    // b does not hold a's announcement yet: the digests differ, and a follows with
    // its summary.
    let answer = b.answer(&digest, T0 + 600).unwrap();
    assert!(!answer.same);
    a.handle(
        Input::RosterAnswered {
            peer: 2,
            ask: Ask::Digest,
            response: answer,
        },
        T0 + 601,
    );
    assert!(drain(&mut a).iter().any(|o| matches!(
        o,
        Output::AskRoster {
            ask: Ask::Repair,
            ..
        }
    )));
}

#[test]
fn an_unpublished_announcement_is_offered_again_not_signed_anew() {
    let mut a = node(1, T0, true);
    a.handle(Input::Tick, T0);
    let ann = published(&drain(&mut a), Kind::Announcement).remove(0);
    // Nobody took it: handed back, and offered as it is on the next subscription.
    a.handle(Input::NotPublished(ann.clone()), T0 + 1);
    a.handle(Input::PeerSubscribed(2), T0 + 2);
    assert_eq!(
        published(&drain(&mut a), Kind::Announcement),
        vec![ann.clone()]
    );
    // An older one handed back after a newer was signed is dropped.
    a.handle(Input::Details(details("new")), T0 + 3);
    let _ = drain(&mut a);
    a.handle(Input::NotPublished(ann), T0 + 4);
    a.handle(Input::Tick, T0 + 5);
    assert!(published(&drain(&mut a), Kind::Announcement).is_empty());
}

#[test]
fn a_goodbye_ends_the_session_everywhere_and_for_good() {
    let mut a = node(1, T0, true);
    let mut b = node(2, T0, true);
    a.handle(Input::Tick, T0);
    let ann = published(&drain(&mut a), Kind::Announcement).remove(0);
    b.receive(&ann, T0);
    a.handle(Input::Leave, T0 + 100);
    let bye = published(&drain(&mut a), Kind::Goodbye).remove(0);
    assert!(
        a.roster().get(&me(1)).is_none(),
        "its own roster dropped it"
    );
    assert_eq!(b.receive(&bye, T0 + 101), Verdict::Accept);
    assert!(drain(&mut b).contains(&Output::Departed(me(1))));
    assert_eq!(b.roster().presence_of(&me(1), T0 + 101), Presence::Gone);
    // Nothing announces it again.
    a.handle(Input::Details(details("after")), T0 + 200);
    a.handle(Input::Tick, T0 + 100 * SECOND_MS);
    a.handle(Input::Leave, T0 + 100 * SECOND_MS);
    assert!(
        drain(&mut a)
            .iter()
            .all(|o| !matches!(o, Output::Publish { .. }))
    );
    // The old announcement replayed cannot bring it back.
    assert_eq!(b.receive(&ann, T0 + 300), Verdict::Ignore);
}
