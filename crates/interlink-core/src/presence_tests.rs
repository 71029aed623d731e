//! Roster tests: every presence transition with an injected clock, ordering, goodbyes,
//! caps, and properties over arbitrary arrival orders.

use proptest::prelude::*;

use super::*;
use crate::{
    identity::Identity,
    limits::{DAY_MS, MAX_FUTURE_SKEW_MS, MINUTE_MS, SECOND_MS},
    wire::{DeliveryMode, Details, HostKind, SealingBinding, VERSION},
};

/// An arbitrary but realistic epoch time for tests.
pub(crate) const T0: u64 = 1_700_000_000_000;

pub(crate) fn identity(seed: u8) -> Identity {
    Identity::from_seed(&[seed; 32])
}

pub(crate) fn sid(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

pub(crate) fn addr(seed: u8, session: &str) -> SessionAddr {
    SessionAddr {
        key: identity(seed).public(),
        session: sid(session),
    }
}

/// A signed announcement of `session` under identity `seed`; cwd and summary are
/// derived from the session id so views can be told apart.
pub(crate) fn ann(seed: u8, session: &str, ts: u64, seq: u64) -> Signed<Announcement> {
    let id = identity(seed);
    let session_id = sid(session);
    let peer_id = id
        .transport_keypair(&session_id)
        .unwrap()
        .public()
        .to_peer_id()
        .to_bytes();
    let body = Announcement {
        v: VERSION,
        identity: id.public(),
        sealing: SealingBinding::new(&id),
        session_id: session_id.clone(),
        peer_id: peer_id.into(),
        addrs: vec!["/ip4/127.0.0.1/udp/4001/quic-v1".to_owned()],
        details: Details {
            cwd: format!("/home/dev/{session}"),
            git_label: Some(format!("repo-{session}")),
            summary: format!("working on {session}"),
            host: HostKind::Claude,
            delivery: DeliveryMode::Inbox,
            project: None,
            claims: Vec::new(),
        }
        .seal(
            &id,
            &session_id,
            &[],
            &mut <rand_chacha::ChaCha20Rng as rand_chacha::rand_core::SeedableRng>::seed_from_u64(
                7,
            ),
        )
        .unwrap(),
        heartbeat_ms: crate::limits::HEARTBEAT_MS,
        ts,
        seq,
    };
    Signed::sign(body, &id).unwrap()
}

pub(crate) fn bye(seed: u8, session: &str, ts: u64, seq: u64) -> Signed<Goodbye> {
    let id = identity(seed);
    let body = Goodbye {
        v: VERSION,
        identity: id.public(),
        session_id: sid(session),
        ts,
        seq,
    };
    Signed::sign(body, &id).unwrap()
}

fn small(max_sessions_per_identity: usize, max_identities: usize) -> Roster {
    Roster::new(Config {
        max_sessions_per_identity,
        max_identities,
        ..Config::default()
    })
}

/// Checks every cap and the cached length against the actual contents.
fn assert_bounded(r: &Roster) {
    let c = r.config();
    let untrusted = r.groups.keys().filter(|k| !r.trusted.contains(k)).count();
    assert!(
        untrusted <= c.max_identities,
        "untrusted identities over cap"
    );
    let mut total = 0;
    for g in r.groups.values() {
        assert!(
            g.sessions.len() <= c.max_sessions_per_identity,
            "sessions over cap"
        );
        assert!(
            g.tombstones.len() <= c.max_sessions_per_identity,
            "tombstones over cap"
        );
        assert!(!g.is_empty(), "empty group left behind");
        total += g.sessions.len();
    }
    assert_eq!(r.len(), total);
}

#[test]
fn presence_display_is_lowercase() {
    let all = [Presence::Live, Presence::Away, Presence::Gone].map(|p| p.to_string());
    assert_eq!(all, ["live", "away", "gone"]);
}

#[test]
fn live_becomes_away_at_exactly_the_live_window() {
    let mut r = Roster::default();
    assert_eq!(
        r.apply_announcement(ann(1, "a", T0, 1), T0),
        Ok(Upsert::Inserted)
    );
    let a = addr(1, "a");
    assert_eq!(r.presence_of(&a, T0), Presence::Live);
    assert_eq!(r.presence_of(&a, T0 + LIVE_WINDOW_MS - 1), Presence::Live);
    assert_eq!(r.presence_of(&a, T0 + LIVE_WINDOW_MS), Presence::Away);
    assert_eq!(LIVE_WINDOW_MS, 90 * SECOND_MS);
}

#[test]
fn away_becomes_gone_after_retention_and_is_swept() {
    let mut r = Roster::default();
    r.apply_announcement(ann(1, "a", T0, 1), T0).unwrap();
    let a = addr(1, "a");
    let last_away = T0 + AWAY_RETENTION_MS;
    assert_eq!(AWAY_RETENTION_MS, 3 * DAY_MS);
    assert_eq!(r.presence_of(&a, last_away), Presence::Away);
    assert!(r.sweep(last_away).is_empty());
    assert_eq!(r.sessions_of(&a.key, last_away).len(), 1);

    assert_eq!(r.presence_of(&a, last_away + 1), Presence::Gone);
    // Expired but unswept entries are already hidden from every view.
    assert!(r.sessions_of(&a.key, last_away + 1).is_empty());
    assert!(r.view(last_away + 1).is_empty());
    assert_eq!(r.sweep(last_away + 1), vec![a.clone()]);
    assert!(r.is_empty());
    assert_eq!(r.identity_count(), 0);
    assert!(r.get(&a).is_none());
}

#[test]
fn goodbye_is_gone_immediately() {
    let mut r = Roster::default();
    r.apply_announcement(ann(1, "a", T0, 1), T0).unwrap();
    assert_eq!(r.apply_goodbye(bye(1, "a", T0 + 1, 2), T0 + 1), Ok(true));
    assert_eq!(r.presence_of(&addr(1, "a"), T0 + 1), Presence::Gone);
    assert!(r.is_empty());
    assert!(r.view(T0 + 1).is_empty());
    // A repeated goodbye removes nothing more.
    assert_eq!(r.apply_goodbye(bye(1, "a", T0 + 1, 2), T0 + 2), Ok(false));
    assert_bounded(&r);
}

/// The sessions that said goodbye are what a sender can still queue for: newest first.
#[test]
fn departed_sessions_are_listed_newest_goodbye_first() {
    let mut r = Roster::default();
    for (i, s) in ["a", "b", "c"].into_iter().enumerate() {
        r.apply_announcement(ann(1, s, T0, 1), T0).unwrap();
        r.apply_goodbye(bye(1, s, T0 + 10 - i as u64, 2), T0 + 10)
            .unwrap();
    }
    r.apply_announcement(ann(1, "live", T0, 1), T0).unwrap();
    let departed: Vec<(String, u64)> = r
        .departed(&addr(1, "a").key)
        .into_iter()
        .map(|(s, ts)| (s.as_str().to_owned(), ts))
        .collect();
    assert_eq!(
        departed,
        [
            ("a".into(), T0 + 10),
            ("b".into(), T0 + 9),
            ("c".into(), T0 + 8)
        ]
    );
    assert!(r.departed(&addr(2, "a").key).is_empty());
}

#[test]
fn reannouncing_after_away_is_live_again() {
    let mut r = Roster::default();
    r.apply_announcement(ann(1, "a", T0, 1), T0).unwrap();
    let later = T0 + DAY_MS;
    assert_eq!(r.presence_of(&addr(1, "a"), later), Presence::Away);
    assert_eq!(
        r.apply_announcement(ann(1, "a", later, 2), later),
        Ok(Upsert::Updated)
    );
    assert_eq!(r.presence_of(&addr(1, "a"), later), Presence::Live);
    assert_eq!(r.len(), 1);
}

#[test]
fn duplicates_and_older_announcements_change_nothing() {
    let mut r = Roster::default();
    let now = T0 + MINUTE_MS;
    r.apply_announcement(ann(1, "a", T0, 5), now).unwrap();
    assert_eq!(
        r.apply_announcement(ann(1, "a", T0, 5), now),
        Ok(Upsert::Unchanged)
    );
    assert_eq!(
        r.apply_announcement(ann(1, "a", T0, 4), now),
        Ok(Upsert::Unchanged)
    );
    assert_eq!(
        r.apply_announcement(ann(1, "a", T0 - 1, 9), now),
        Ok(Upsert::Unchanged)
    );
    assert_eq!(r.get(&addr(1, "a")).unwrap().body().seq, 5);
    // Equal ts, higher seq: newer.
    assert_eq!(
        r.apply_announcement(ann(1, "a", T0, 6), now),
        Ok(Upsert::Updated)
    );
    assert_eq!(r.get(&addr(1, "a")).unwrap().body().seq, 6);
    assert_eq!(r.len(), 1);
}

#[test]
fn tombstone_blocks_stale_resurrection_but_not_a_restart() {
    let mut r = Roster::default();
    let now = T0 + 10 * SECOND_MS;
    let stale = ann(1, "a", T0, 1);
    r.apply_announcement(stale.clone(), now).unwrap();
    r.apply_goodbye(bye(1, "a", T0 + SECOND_MS, 2), now)
        .unwrap();
    // A delayed copy of the old announcement, and one stamped like the goodbye.
    assert_eq!(r.apply_announcement(stale, now), Ok(Upsert::Unchanged));
    assert_eq!(
        r.apply_announcement(ann(1, "a", T0 + SECOND_MS, 2), now),
        Ok(Upsert::Unchanged)
    );
    assert_eq!(r.presence_of(&addr(1, "a"), now), Presence::Gone);
    // The same session id restarted: strictly newer, so it is back.
    let restart = ann(1, "a", T0 + 5 * SECOND_MS, 0);
    assert_eq!(r.apply_announcement(restart, now), Ok(Upsert::Inserted));
    assert_eq!(r.presence_of(&addr(1, "a"), now), Presence::Live);
}

#[test]
fn goodbye_overtaking_its_announcement_still_wins() {
    let mut r = Roster::default();
    let now = T0 + 10 * SECOND_MS;
    assert_eq!(
        r.apply_goodbye(bye(1, "a", T0 + SECOND_MS, 2), now),
        Ok(false)
    );
    assert_eq!(
        r.apply_announcement(ann(1, "a", T0, 1), now),
        Ok(Upsert::Unchanged)
    );
    assert!(r.is_empty());
    assert!(r.view(now).is_empty());
}

#[test]
fn goodbye_older_than_the_held_announcement_is_ignored() {
    let mut r = Roster::default();
    let now = T0 + 10 * SECOND_MS;
    r.apply_announcement(ann(1, "a", T0 + 5 * SECOND_MS, 1), now)
        .unwrap();
    assert_eq!(r.apply_goodbye(bye(1, "a", T0, 7), now), Ok(false));
    assert_eq!(r.presence_of(&addr(1, "a"), now), Presence::Live);
}

#[test]
fn future_dated_and_too_old_are_refused() {
    let mut r = Roster::default();
    let ahead = T0 + MAX_FUTURE_SKEW_MS + 1;
    assert!(matches!(
        r.apply_announcement(ann(1, "a", ahead, 1), T0),
        Err(RosterError::Time(TimeError::FutureDated { .. }))
    ));
    let old = T0 - AWAY_RETENTION_MS - 1;
    assert!(matches!(
        r.apply_announcement(ann(1, "a", old, 1), T0),
        Err(RosterError::Time(TimeError::Stale { .. }))
    ));
    assert!(matches!(
        r.apply_goodbye(bye(1, "a", ahead, 1), T0),
        Err(RosterError::Time(TimeError::FutureDated { .. }))
    ));
    assert!(r.is_empty());
    assert_eq!(r.identity_count(), 0);
    // Within the skew tolerance is accepted and counts as live.
    r.apply_announcement(ann(1, "a", T0 + MAX_FUTURE_SKEW_MS, 1), T0)
        .unwrap();
    assert_eq!(r.presence_of(&addr(1, "a"), T0), Presence::Live);
    // Exactly at the retention edge is accepted (as away).
    r.apply_announcement(ann(1, "b", T0 - AWAY_RETENTION_MS, 1), T0)
        .unwrap();
    assert_eq!(r.presence_of(&addr(1, "b"), T0), Presence::Away);
}

#[test]
fn session_cap_cannot_be_exceeded_by_live_sessions() {
    let mut r = Roster::default();
    let cap = r.config().max_sessions_per_identity;
    let key = identity(1).public();
    for i in 0..cap + 10 {
        let res = r.apply_announcement(ann(1, &format!("s{i}"), T0, 1), T0);
        if i < cap {
            assert_eq!(res, Ok(Upsert::Inserted));
        } else {
            assert_eq!(res, Err(RosterError::SessionCapReached { key, cap }));
        }
        assert!(r.sessions_of(&key, T0).len() <= cap);
    }
    assert_eq!(r.len(), cap);
    assert_bounded(&r);
}

#[test]
fn session_cap_evicts_the_longest_silent_non_live_session() {
    let mut r = small(3, 8);
    r.apply_announcement(ann(1, "old", T0, 1), T0).unwrap();
    r.apply_announcement(ann(1, "older", T0 - MINUTE_MS, 1), T0)
        .unwrap();
    let now = T0 + 10 * MINUTE_MS;
    r.apply_announcement(ann(1, "live", now, 1), now).unwrap();
    // "older" and "old" are away; the newcomer evicts the longest silent.
    assert_eq!(
        r.apply_announcement(ann(1, "new", now, 1), now),
        Ok(Upsert::Inserted)
    );
    assert!(r.get(&addr(1, "older")).is_none());
    assert!(r.get(&addr(1, "old")).is_some());
    // A newcomer staler than every away session does not push out fresher ones.
    let stale = ann(1, "stale", T0 - DAY_MS, 1);
    assert!(matches!(
        r.apply_announcement(stale, now),
        Err(RosterError::SessionCapReached { cap: 3, .. })
    ));
    // Once the rest are live too, nothing can be evicted.
    r.apply_announcement(ann(1, "old", now, 2), now).unwrap();
    assert!(matches!(
        r.apply_announcement(ann(1, "x", now, 1), now),
        Err(RosterError::SessionCapReached { .. })
    ));
    assert_bounded(&r);
}

#[test]
fn identity_cap_evicts_the_stalest_away_identity() {
    let mut r = small(4, 2);
    r.apply_announcement(ann(1, "a", T0 - 2 * MINUTE_MS, 1), T0)
        .unwrap();
    r.apply_announcement(ann(2, "b", T0 - MINUTE_MS, 1), T0)
        .unwrap();
    let now = T0 + 10 * MINUTE_MS;
    assert_eq!(
        r.apply_announcement(ann(3, "c", now, 1), now),
        Ok(Upsert::Inserted)
    );
    assert!(r.get(&addr(1, "a")).is_none());
    assert!(r.get(&addr(2, "b")).is_some());
    assert_eq!(r.identity_count(), 2);
    // Identity 2 live again: both held identities are live, so a fourth is refused.
    r.apply_announcement(ann(2, "b", now, 2), now).unwrap();
    assert_eq!(
        r.apply_announcement(ann(4, "d", now, 1), now),
        Err(RosterError::RosterFull { cap: 2 })
    );
    assert_bounded(&r);
}

/// A flood of strangers' presence never pushes a trusted (paired) identity off the
/// roster, however stale it is; strangers take room only from strangers; a trusted
/// identity always finds room.
#[test]
fn strangers_never_evict_a_trusted_identity() {
    let mut r = small(4, 2);
    r.set_trusted([identity(1).public()]);
    // The friend announced long ago (away now), a stranger recently.
    r.apply_announcement(ann(1, "friend", T0 - 60 * MINUTE_MS, 1), T0)
        .unwrap();
    r.apply_announcement(ann(2, "s2", T0 - MINUTE_MS, 1), T0)
        .unwrap();
    let mut now = T0 + 10 * MINUTE_MS;
    for seed in 3..40u8 {
        now += MINUTE_MS;
        // Each stranger evicts the previous (stalest non-live untrusted) one.
        let _ = r.apply_announcement(ann(seed, "s", now - 5 * MINUTE_MS, 1), now);
        assert!(
            r.get(&addr(1, "friend")).is_some(),
            "the friend was evicted at {seed}"
        );
        assert_bounded(&r);
    }
    // Two strangers fill the untrusted room; live strangers cannot be evicted, yet a
    // new trusted identity is still admitted.
    r.apply_announcement(ann(50, "x", now, 1), now).unwrap();
    r.apply_announcement(ann(51, "y", now, 1), now).unwrap();
    assert_eq!(
        r.apply_announcement(ann(52, "z", now, 1), now),
        Err(RosterError::RosterFull { cap: 2 })
    );
    r.set_trusted([identity(1).public(), identity(53).public()]);
    assert_eq!(
        r.apply_announcement(ann(53, "peer", now, 1), now),
        Ok(Upsert::Inserted)
    );
    assert!(r.get(&addr(1, "friend")).is_some());
    assert_bounded(&r);
}

#[test]
fn tombstone_only_identities_make_room_first() {
    let mut r = small(4, 2);
    let now = T0 + MINUTE_MS;
    r.apply_goodbye(bye(1, "a", now, 3), now).unwrap();
    r.apply_announcement(ann(2, "b", T0 - 10 * MINUTE_MS, 1), now)
        .unwrap();
    r.apply_announcement(ann(3, "c", T0 - 20 * MINUTE_MS, 1), now)
        .unwrap();
    // Identity 1 held only a tombstone and went, though it was the most recent.
    assert!(r.get(&addr(2, "b")).is_some());
    assert_eq!(r.identity_count(), 2);
    // A stranger's goodbye never displaces a retained session: it is dropped.
    assert_eq!(r.apply_goodbye(bye(4, "d", now, 1), now), Ok(false));
    assert_eq!(r.len(), 2);
    assert_eq!(r.identity_count(), 2);
    assert_bounded(&r);
}

#[test]
fn tombstones_are_bounded_and_expire() {
    let mut r = small(2, 8);
    let now = T0 + MINUTE_MS;
    for (i, s) in ["a", "b", "c"].iter().enumerate() {
        r.apply_goodbye(bye(1, s, T0 + i as u64, 1), now).unwrap();
    }
    assert_bounded(&r);
    // The oldest tombstone ("a") was forgotten first.
    assert_eq!(
        r.apply_announcement(ann(1, "a", T0 - 1, 0), now),
        Ok(Upsert::Inserted)
    );
    assert_eq!(
        r.apply_announcement(ann(1, "c", T0, 0), now),
        Ok(Upsert::Unchanged)
    );
    // Past the retention the tombstones go, and with them the identity once empty.
    r.apply_goodbye(bye(1, "a", T0, 1), now).unwrap();
    assert!(r.sweep(T0 + 3 + AWAY_RETENTION_MS).is_empty());
    assert_eq!(r.identity_count(), 0);
}

#[test]
fn sessions_are_grouped_by_identity() {
    let mut r = Roster::default();
    let now = T0 + 10 * MINUTE_MS;
    r.apply_announcement(ann(2, "z", now, 1), now).unwrap();
    r.apply_announcement(ann(1, "b", T0, 1), now).unwrap();
    r.apply_announcement(ann(1, "a", now, 1), now).unwrap();
    let view = r.view(now);
    assert_eq!(view.len(), 2);
    let one = view.iter().find(|v| v.key == identity(1).public()).unwrap();
    let sessions: Vec<_> = one
        .sessions
        .iter()
        .map(|s| (s.addr.session.as_str(), s.presence, s.age_ms))
        .collect();
    assert_eq!(
        sessions,
        [
            ("a", Presence::Live, 0),
            ("b", Presence::Away, 10 * MINUTE_MS)
        ]
    );
    // Details stay sealed in the roster; the views' reader opens them.
    assert_eq!(one.sessions[0].details, None);
    let mut views = vec![one.clone()];
    crate::wire::DetailsReader::new(&identity(1)).fill(&mut views);
    assert_eq!(
        views[0].sessions[0]
            .details
            .as_ref()
            .map(|d| d.cwd.as_str()),
        Some("/home/dev/a")
    );
    assert_eq!(r.sessions_of(&identity(2).public(), now).len(), 1);
    assert_eq!(r.len(), 3);
    assert_eq!(r.identity_count(), 2);
    // The held announcements re-encode to bytes a peer accepts.
    for a in r.announcements() {
        assert_eq!(&Signed::<Announcement>::decode(&a.to_bytes()).unwrap(), a);
    }
    assert_eq!(r.announcements().count(), 3);
}

/// One generated event: an announcement or goodbye of session `s` under identity `i`.
#[derive(Clone, Debug)]
struct Ev {
    goodbye: bool,
    i: u8,
    s: u8,
    minute: u64,
    seq: u64,
}

/// The clock the generated events are judged at; minutes 0..=13 of [`Ev`] span away,
/// live, skewed-ahead and (13) too-far-ahead timestamps.
const PROP_NOW: u64 = T0 + 10 * MINUTE_MS;

fn ev() -> impl Strategy<Value = Ev> {
    (any::<bool>(), 1u8..4, 0u8..4, 0u64..14, 0u64..3).prop_map(|(goodbye, i, s, minute, seq)| Ev {
        goodbye,
        i,
        s,
        minute,
        seq,
    })
}

enum Msg {
    Ann(Box<Signed<Announcement>>),
    Bye(Box<Signed<Goodbye>>),
}

fn build(e: &Ev) -> Msg {
    let session = format!("s{}", e.s);
    let ts = T0 + e.minute * MINUTE_MS;
    if e.goodbye {
        Msg::Bye(Box::new(bye(e.i, &session, ts, e.seq)))
    } else {
        Msg::Ann(Box::new(ann(e.i, &session, ts, e.seq)))
    }
}

fn apply(r: &mut Roster, m: &Msg) {
    // Refusals are legitimate outcomes here; the properties are about the state.
    let _ = match m {
        Msg::Ann(a) => r.apply_announcement((**a).clone(), PROP_NOW).map(|_| ()),
        Msg::Bye(b) => r.apply_goodbye((**b).clone(), PROP_NOW).map(|_| ()),
    };
}

type Snapshot = Vec<(
    IdentityKey,
    Vec<(SessionId, Vec<u8>)>,
    Vec<(SessionId, Stamp)>,
)>;

fn snapshot(r: &Roster) -> Snapshot {
    r.groups
        .iter()
        .map(|(k, g)| {
            let sessions = g
                .sessions
                .iter()
                .map(|(s, h)| (s.clone(), h.ann.to_bytes()))
                .collect();
            let tombstones = g.tombstones.iter().map(|(s, t)| (s.clone(), *t)).collect();
            (*k, sessions, tombstones)
        })
        .collect()
}

fn events_and_order() -> impl Strategy<Value = (Vec<Ev>, Vec<usize>)> {
    prop::collection::vec(ev(), 0..24).prop_flat_map(|evs| {
        let order = Just((0..evs.len()).collect::<Vec<_>>()).prop_shuffle();
        (Just(evs), order)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn caps_hold_under_any_sequence((evs, _) in events_and_order(), cap in 1usize..3, ids in 1usize..3) {
        let mut r = small(cap, ids);
        for e in &evs {
            apply(&mut r, &build(e));
            assert_bounded(&r);
        }
    }

    #[test]
    fn final_state_does_not_depend_on_order((evs, order) in events_and_order()) {
        let built: Vec<_> = evs.iter().map(build).collect();
        let mut forward = Roster::default();
        for m in &built {
            apply(&mut forward, m);
        }
        let mut shuffled = Roster::default();
        for &i in &order {
            apply(&mut shuffled, &built[i]);
        }
        prop_assert_eq!(snapshot(&forward), snapshot(&shuffled));
        prop_assert_eq!(forward.len(), shuffled.len());
    }
}

#[test]
fn the_heartbeat_stretches_past_600_sessions_and_caps_at_ten_minutes() {
    use crate::limits::{HEARTBEAT_MS, MAX_HEARTBEAT_MS};
    assert_eq!(heartbeat_interval_ms(0), HEARTBEAT_MS);
    assert_eq!(heartbeat_interval_ms(600), HEARTBEAT_MS);
    assert_eq!(heartbeat_interval_ms(1_000), 50 * SECOND_MS);
    assert_eq!(heartbeat_interval_ms(10_000), 500 * SECOND_MS);
    assert_eq!(heartbeat_interval_ms(1_000_000), MAX_HEARTBEAT_MS);
    assert_eq!(heartbeat_interval_ms(usize::MAX), MAX_HEARTBEAT_MS);
}

#[test]
fn a_longer_announced_heartbeat_stretches_the_live_window_within_bounds() {
    use crate::limits::{HEARTBEAT_MS, MAX_HEARTBEAT_MS};
    let c = Config::default();
    let mut a = ann(1, "a", T0, 1).body().clone();
    assert_eq!(c.live_window_for(&a), LIVE_WINDOW_MS);
    // Shorter than the standard heartbeat (tests, or a chatty peer): never shorter.
    a.heartbeat_ms = 1;
    assert_eq!(c.live_window_for(&a), LIVE_WINDOW_MS);
    a.heartbeat_ms = 10 * HEARTBEAT_MS;
    assert_eq!(c.live_window_for(&a), 10 * LIVE_WINDOW_MS);
    assert_eq!(c.presence_of(&a, T0 + 5 * LIVE_WINDOW_MS), Presence::Live);
    assert_eq!(c.presence_of(&a, T0 + 10 * LIVE_WINDOW_MS), Presence::Away);
    // A peer claiming to beat once a year is held to the longest heartbeat.
    a.heartbeat_ms = 365 * DAY_MS;
    assert_eq!(
        c.live_window_for(&a),
        LIVE_WINDOW_MS * (MAX_HEARTBEAT_MS / HEARTBEAT_MS)
    );
    // A roster judges with it too.
    let mut r = Roster::default();
    let mut body = ann(1, "b", T0, 1).body().clone();
    body.heartbeat_ms = 4 * HEARTBEAT_MS;
    let signed = Signed::sign(body, &identity(1)).unwrap();
    let addr = signed.body().session_addr();
    r.apply_announcement(signed, T0).unwrap();
    assert_eq!(
        r.presence_of(&addr, T0 + 2 * LIVE_WINDOW_MS),
        Presence::Live
    );
    assert_eq!(
        r.presence_of(&addr, T0 + 4 * LIVE_WINDOW_MS),
        Presence::Away
    );
}

/// A beacon of identity `seed`'s session whose announcement is `a`, promising
/// `heartbeat_ms`.
fn beacon(
    seed: u8,
    a: &Signed<Announcement>,
    heartbeat_ms: u64,
    ts: u64,
    seq: u64,
) -> Signed<Beacon> {
    let id = identity(seed);
    let of = sync::Tag::of_announcement(a.body());
    Signed::sign(Beacon::new(id.public(), of, heartbeat_ms, ts, seq), &id).unwrap()
}

#[test]
fn a_beacon_keeps_its_session_live_past_the_announcements_window() {
    let a = ann(1, "a", T0, 1);
    let mut r = Roster::default();
    r.apply_announcement(a.clone(), T0).unwrap();
    let at = T0 + LIVE_WINDOW_MS + 5 * SECOND_MS;
    assert_eq!(r.presence_of(&addr(1, "a"), at), Presence::Away);
    let b = beacon(1, &a, crate::limits::HEARTBEAT_MS, T0 + LIVE_WINDOW_MS, 2);
    assert_eq!(r.beacon_target(&b.body().tag()), Some(&addr(1, "a")));
    assert_eq!(
        r.apply_beacon(b.clone(), at).unwrap(),
        BeaconOutcome::Applied
    );
    assert_eq!(r.presence_of(&addr(1, "a"), at), Presence::Live);
    let view = &r.sessions_of(&identity(1).public(), at)[0];
    assert_eq!(view.age_ms, 5 * SECOND_MS);
    // The same beacon again, or an older one, is nothing new.
    assert_eq!(r.apply_beacon(b, at).unwrap(), BeaconOutcome::Unchanged);
    let old = beacon(1, &a, crate::limits::HEARTBEAT_MS, T0 + SECOND_MS, 2);
    assert_eq!(r.apply_beacon(old, at).unwrap(), BeaconOutcome::Unchanged);
    // Heard from last by the beacon: the sweep keeps it past the announcement's age.
    let heard = r.heard(&addr(1, "a")).unwrap();
    assert_eq!((heard.ts, heard.seq), (T0 + LIVE_WINDOW_MS, 2));
    assert!(r.sweep(T0 + AWAY_RETENTION_MS + 1).is_empty());
}

#[test]
fn a_beacon_names_one_announcement_and_one_signer() {
    let a1 = ann(1, "a", T0, 1);
    let mut r = Roster::default();
    r.apply_announcement(a1.clone(), T0).unwrap();
    let a2 = ann(1, "a", T0 + 10, 2);
    r.apply_announcement(a2.clone(), T0 + 10).unwrap();
    // A beacon of the replaced version keeps nothing live, and one of the current
    // version signed by another identity is not this session's.
    let stale = beacon(1, &a1, crate::limits::HEARTBEAT_MS, T0 + 20, 3);
    assert_eq!(r.beacon_target(&stale.body().tag()), None);
    assert_eq!(
        r.apply_beacon(stale, T0 + 20).unwrap(),
        BeaconOutcome::Unchanged
    );
    let id2 = identity(2);
    let forged = Signed::sign(
        Beacon::new(
            id2.public(),
            sync::Tag::of_announcement(a2.body()),
            crate::limits::HEARTBEAT_MS,
            T0 + 20,
            3,
        ),
        &id2,
    )
    .unwrap();
    assert_eq!(
        r.apply_beacon(forged, T0 + 20).unwrap(),
        BeaconOutcome::Unchanged
    );
    // A newer announcement drops the beacon of the one before.
    let b = beacon(1, &a2, crate::limits::HEARTBEAT_MS, T0 + 20, 3);
    assert_eq!(r.apply_beacon(b, T0 + 20).unwrap(), BeaconOutcome::Applied);
    r.apply_announcement(ann(1, "a", T0 + 30, 4), T0 + 30)
        .unwrap();
    assert_eq!(r.heard(&addr(1, "a")).unwrap().seq, 4);
    // After a goodbye nothing of the session is a beacon target.
    let a3 = r.get(&addr(1, "a")).unwrap().clone();
    r.apply_goodbye(bye(1, "a", T0 + 40, 5), T0 + 40).unwrap();
    let late = beacon(1, &a3, crate::limits::HEARTBEAT_MS, T0 + 41, 6);
    assert_eq!(
        r.apply_beacon(late, T0 + 41).unwrap(),
        BeaconOutcome::Unchanged
    );
}

#[test]
fn a_beacons_interval_stretches_the_live_window_and_its_time_is_checked() {
    let a = ann(1, "a", T0, 1);
    let mut r = Roster::default();
    r.apply_announcement(a.clone(), T0).unwrap();
    let slow = 5 * crate::limits::HEARTBEAT_MS;
    let b = beacon(1, &a, slow, T0 + MINUTE_MS, 2);
    r.apply_beacon(b, T0 + MINUTE_MS).unwrap();
    let at = T0 + MINUTE_MS + 4 * LIVE_WINDOW_MS;
    assert_eq!(r.presence_of(&addr(1, "a"), at), Presence::Live);
    assert_eq!(
        r.presence_of(&addr(1, "a"), T0 + MINUTE_MS + 5 * LIVE_WINDOW_MS),
        Presence::Away
    );
    // Dated too far ahead: refused, as an announcement would be.
    let ahead = beacon(1, &a, slow, T0 + MINUTE_MS + 10 * MAX_FUTURE_SKEW_MS, 3);
    assert!(matches!(
        r.apply_beacon(ahead, T0 + MINUTE_MS),
        Err(RosterError::Time(_))
    ));
}
