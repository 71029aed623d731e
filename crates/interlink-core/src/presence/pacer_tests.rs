use super::*;

type P = u32;

fn drain(p: &mut Pacer<P>) -> Vec<Output<P>> {
    std::iter::from_fn(|| p.poll_output()).collect()
}

fn asks(out: &[Output<P>]) -> Vec<(P, Ask)> {
    out.iter()
        .filter_map(|o| match o {
            Output::AskRoster { peer, ask } => Some((*peer, *ask)),
            _ => None,
        })
        .collect()
}

const TICK: Input<P> = Input::Tick { roster_len: 3 };

#[test]
fn the_first_heartbeat_is_an_announcement_kept_owed_until_reported() {
    let mut p = Pacer::<P>::new(Config::default(), 0, 0);
    p.handle(TICK, 1_000);
    assert!(drain(&mut p).contains(&Output::Announce {
        interval_ms: HEARTBEAT_MS
    }));
    // Not reported (no address yet): asked again.
    p.handle(TICK, 2_000);
    assert!(drain(&mut p).contains(&Output::Announce {
        interval_ms: HEARTBEAT_MS
    }));
    p.handle(
        Input::Announced {
            interval_ms: HEARTBEAT_MS,
        },
        2_000,
    );
    assert!(p.has_announced() && !p.announce_due());
    // Then beacons, once the promised interval has passed, and not before.
    p.handle(TICK, 2_000 + HEARTBEAT_MS - 1);
    assert!(
        !drain(&mut p)
            .iter()
            .any(|o| matches!(o, Output::Beacon { .. } | Output::Announce { .. }))
    );
    p.handle(TICK, 2_000 + HEARTBEAT_MS);
    assert!(drain(&mut p).contains(&Output::Beacon {
        interval_ms: HEARTBEAT_MS
    }));
    // A changed announcement goes out in full at the next tick.
    p.handle(Input::AnnouncementChanged, 40_000);
    p.handle(TICK, 40_500);
    assert!(drain(&mut p).contains(&Output::Announce {
        interval_ms: HEARTBEAT_MS
    }));
}

#[test]
fn the_interval_follows_the_roster_above_600_sessions() {
    let p = Pacer::<P>::new(Config::default(), 0, 0);
    assert_eq!(p.heartbeat_interval_ms(10), HEARTBEAT_MS);
    assert_eq!(p.heartbeat_interval_ms(10_000), 500 * SECOND_MS);
    // A short configured heartbeat (the tests') holds on small rosters only.
    let quick = Pacer::<P>::new(
        Config {
            heartbeat_ms: 1_000,
            ..Config::default()
        },
        0,
        0,
    );
    assert_eq!(quick.heartbeat_interval_ms(10), 1_000);
    assert_eq!(quick.heartbeat_interval_ms(10_000), 500 * SECOND_MS);
    let fixed = Pacer::<P>::new(
        Config {
            target_announcements_per_s: None,
            ..Config::default()
        },
        0,
        0,
    );
    assert_eq!(fixed.heartbeat_interval_ms(10_000), HEARTBEAT_MS);
}

#[test]
fn anti_entropy_is_fast_and_full_while_growing_then_slow_digests_round_robin() {
    let mut p = Pacer::<P>::new(Config::default(), 0, 0);
    for peer in [30, 10, 20] {
        p.handle(Input::PeerConnected(peer), 0);
    }
    let mut seen = Vec::new();
    for s in 1..=4 {
        p.handle(TICK, s * SECOND_MS);
        seen.extend(asks(&drain(&mut p)));
    }
    // Growing since start: a summary every second, peers in order.
    assert_eq!(
        seen,
        [
            (10, Ask::Repair),
            (20, Ask::Repair),
            (30, Ask::Repair),
            (10, Ask::Repair)
        ]
    );
    // Settled (10 s after start, nothing new): a digest every 10 s.
    let mut seen = Vec::new();
    for s in 11..=40 {
        p.handle(TICK, s * SECOND_MS);
        seen.extend(asks(&drain(&mut p)));
    }
    assert_eq!(
        seen,
        [(20, Ask::Digest), (30, Ask::Digest), (10, Ask::Digest)]
    );
    // A session new to the roster makes it fast again.
    p.handle(Input::RosterGrew, 40_500);
    p.handle(TICK, 41 * SECOND_MS);
    assert_eq!(asks(&drain(&mut p)), [(20, Ask::Repair)]);
    // No peers, no requests.
    for peer in [10, 20, 30] {
        p.handle(Input::PeerDisconnected(peer), 41_500);
    }
    p.handle(TICK, 60 * SECOND_MS);
    assert!(asks(&drain(&mut p)).is_empty());
}

#[test]
fn the_seed_picks_where_the_round_robin_starts() {
    let first = |seed| {
        let mut p = Pacer::<P>::new(Config::default(), 0, seed);
        for peer in [1, 2, 3] {
            p.handle(Input::PeerConnected(peer), 0);
        }
        p.handle(TICK, SECOND_MS);
        asks(&drain(&mut p))[0].0
    };
    assert_eq!((first(0), first(1), first(2), first(3)), (1, 2, 3, 1));
}

#[test]
fn a_differing_digest_is_followed_by_the_summary() {
    let mut p = Pacer::<P>::new(Config::default(), 0, 0);
    p.handle(
        Input::DigestAnswered {
            peer: 7,
            same: true,
        },
        0,
    );
    assert!(drain(&mut p).is_empty());
    p.handle(
        Input::DigestAnswered {
            peer: 7,
            same: false,
        },
        0,
    );
    assert_eq!(asks(&drain(&mut p)), [(7, Ask::Repair)]);
}

#[test]
fn a_subscribed_peer_is_fetched_at_once_and_checked_again_later() {
    let mut p = Pacer::<P>::new(Config::default(), 0, 0);
    p.handle(Input::PeerConnected(5), 100);
    p.handle(Input::PeerSubscribed(5), 100);
    assert_eq!(asks(&drain(&mut p)), [(5, Ask::Connect)]);
    assert_eq!(p.poll_timeout(), Some(600));
    p.handle_timeout(599);
    assert!(drain(&mut p).is_empty());
    p.handle_timeout(600);
    assert_eq!(asks(&drain(&mut p)), [(5, Ask::Digest)]);
    assert_eq!(p.poll_timeout(), None);
    // A peer gone meanwhile is not asked.
    p.handle(Input::PeerSubscribed(6), 1_000);
    drain(&mut p);
    p.handle(Input::PeerDisconnected(6), 1_200);
    p.handle_timeout(2_000);
    assert!(drain(&mut p).is_empty());
}

#[test]
fn second_looks_are_bounded() {
    let mut p = Pacer::<P>::new(Config::default(), 0, 0);
    for peer in 0..(MAX_RECHECKS as P + 10) {
        p.handle(Input::PeerConnected(peer), 0);
        p.handle(Input::PeerSubscribed(peer), 0);
    }
    drain(&mut p);
    p.handle_timeout(10_000);
    let looks = asks(&drain(&mut p));
    assert_eq!(looks.len(), MAX_RECHECKS);
    // The oldest went.
    assert_eq!(looks[0].0, 10);
}

#[test]
fn the_dht_is_joined_once_presence_settles_or_at_the_latest() {
    // Settled: the roster stopped growing a second ago.
    let mut p = Pacer::<P>::new(Config::default(), 0, 0);
    p.handle(TICK, 500);
    assert!(!drain(&mut p).contains(&Output::JoinDht));
    p.handle(TICK, 1_000);
    assert!(drain(&mut p).contains(&Output::JoinDht) && p.dht_joined());
    p.handle(TICK, 2_000);
    assert!(!drain(&mut p).contains(&Output::JoinDht), "only once");

    // Still growing: at the latest 5 s after start.
    let mut p = Pacer::<P>::new(Config::default(), 0, 0);
    for t in (0..5_000).step_by(500) {
        p.handle(Input::RosterGrew, t);
        p.handle(TICK, t);
        assert!(!drain(&mut p).contains(&Output::JoinDht), "at {t}");
    }
    p.handle(TICK, 5_000);
    assert!(drain(&mut p).contains(&Output::JoinDht));

    // Needed before: at once.
    let mut p = Pacer::<P>::new(Config::default(), 0, 0);
    p.handle(Input::DhtNeeded, 10);
    assert_eq!(drain(&mut p), [Output::JoinDht]);
}

#[test]
fn a_running_pacer_starts_settled_with_its_phase() {
    let mut p = Pacer::<P>::running(Config::default(), 0, 5_000, (3_000, HEARTBEAT_MS));
    p.handle(Input::PeerConnected(1), 0);
    p.handle(TICK, 14_999);
    assert!(drain(&mut p).is_empty());
    p.handle(TICK, 15_000);
    assert_eq!(asks(&drain(&mut p)), [(1, Ask::Digest)]);
    p.handle(TICK, 33_000);
    assert!(drain(&mut p).contains(&Output::Beacon {
        interval_ms: HEARTBEAT_MS
    }));
}

#[test]
fn a_node_without_a_session_never_heartbeats() {
    let mut p = Pacer::<P>::new(
        Config {
            announces: false,
            ..Config::default()
        },
        0,
        0,
    );
    p.handle(Input::PeerConnected(1), 0);
    for s in 1..100 {
        p.handle(TICK, s * SECOND_MS);
        assert!(
            drain(&mut p)
                .iter()
                .all(|o| matches!(o, Output::AskRoster { .. } | Output::JoinDht)),
            "at {s} s"
        );
    }
}
