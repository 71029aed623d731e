use interlink_core::Identity;

use super::*;

fn a(s: &str) -> Multiaddr {
    s.parse().unwrap()
}

fn id(n: u8) -> IdentityKey {
    Identity::from_seed(&[n; 32]).public()
}

const PEER: &str = "12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN";

#[test]
fn what_is_kept_of_an_address() {
    let keep = |s: &str, own| keepable(&a(s), own).map(|m| m.to_string());
    assert_eq!(
        keep(&format!("/ip4/10.0.0.2/tcp/7385/p2p/{PEER}"), false).as_deref(),
        Some("/ip4/10.0.0.2/tcp/7385")
    );
    assert_eq!(
        keep("/ip4/10.0.0.2/udp/4001/quic-v1", false).as_deref(),
        Some("/ip4/10.0.0.2/udp/4001/quic-v1")
    );
    assert_eq!(
        keep("/dns4/box.tailnet/tcp/7385", false).as_deref(),
        Some("/dns4/box.tailnet/tcp/7385")
    );
    let circuit = format!("/ip4/10.0.0.9/tcp/4001/p2p/{PEER}/p2p-circuit");
    for refused in [
        circuit.as_str(),
        "/ip4/0.0.0.0/tcp/7385",
        "/ip4/169.254.1.1/tcp/7385",
        "/ip6/fe80::1/tcp/7385",
        "/ip4/10.0.0.2/udp/4001",
        "/memory/5",
        "/ip4/10.0.0.2/tcp/1/ws",
    ] {
        assert_eq!(keep(refused, true), None, "{refused}");
    }
    // Loopback names this host: kept only for the user's own identity.
    assert_eq!(keep("/ip4/127.0.0.1/tcp/7385", false), None);
    assert!(keep("/ip4/127.0.0.1/tcp/7385", true).is_some());
}

#[test]
fn only_trusted_identities_are_dialled_bounded_and_stable_first() {
    let now = Instant::now();
    let mut book = Addresses::new(None, true, 7385);
    let t0 = 1_800_000_000_000;
    // Identity 1: session ports and its host's well-known port.
    let learned = book.learn(
        id(1),
        [
            a("/ip4/10.0.0.1/tcp/41000"),
            a("/ip4/10.0.0.1/udp/41001/quic-v1"),
            a("/ip4/10.0.0.1/tcp/7385"),
            a("/ip4/127.0.0.1/tcp/7385"),
        ],
        Source::Announcement,
        false,
        t0,
    );
    assert_eq!(learned, 3, "loopback of someone else is not kept");
    // The user's own: loopback at the well-known port only.
    let own = book.learn(
        id(4),
        [a("/ip4/127.0.0.1/tcp/41000"), a("/ip4/127.0.0.1/tcp/7385")],
        Source::Announcement,
        true,
        t0,
    );
    assert_eq!(own, 1);
    assert_eq!(
        book.book().addresses(&id(4))[0].addr,
        "/ip4/127.0.0.1/tcp/7385"
    );
    // Identity 2 is not (or no longer) a peer: never dialled, and forgotten.
    book.learn(
        id(2),
        [a("/ip4/10.0.0.2/tcp/7385")],
        Source::Identify,
        false,
        t0,
    );
    let new: BTreeSet<IdentityKey> = book
        .set_trusted([id(1), id(3)].into_iter().collect())
        .into_iter()
        .collect();
    assert_eq!(new, [id(1), id(3)].into_iter().collect());
    assert!(book.book().addresses(&id(2)).is_empty());
    let due = book.plan(now, |_| false);
    assert_eq!(
        due,
        vec![a("/ip4/10.0.0.1/tcp/7385")],
        "the stable address first, one dial per host at a time"
    );
    // It failed: the host's next address is tried (the first waits its backoff).
    let conn = ConnectionId::new_unchecked(7);
    book.dialling(conn, &due[0]);
    assert!(
        book.plan(now, |_| false).is_empty(),
        "one in flight per host"
    );
    book.on_dial_failed(conn);
    let next = book.plan(now, |_| false);
    assert_eq!(next.len(), 1);
    assert_ne!(next[0], due[0]);
    assert_eq!(
        host_of("/ip4/10.0.0.1/udp/1/quic-v1").as_deref(),
        Some("/ip4/10.0.0.1")
    );
    assert_eq!(host_of("/dns4/box/tcp/1").as_deref(), Some("/dns4/box"));
    assert_eq!(host_of("/memory/1"), None);
    // Many identities with many addresses: bounded in all, round robin.
    let many: BTreeSet<IdentityKey> = (10..60u8).map(id).collect();
    for (i, k) in many.iter().enumerate() {
        for port in [7385u16, 1000, 1001, 1002, 1003, 1004] {
            book.learn(
                *k,
                [a(&format!("/ip4/10.9.0.{i}/tcp/{port}"))],
                Source::Announcement,
                false,
                t0,
            );
        }
    }
    book.set_trusted(many.clone());
    let due = book.plan(now + Duration::from_secs(100), |_| false);
    assert_eq!(due.len(), MAX_BOOK_DIALS);
    assert!(
        due.iter().all(|d| d.to_string().ends_with("/tcp/7385")),
        "one stable address of each of 16 identities before anyone's second: {due:?}"
    );
    assert!(book.dials.len() <= MAX_BOOK_DIALS);
    // Addresses this node listens on or is connected to are skipped.
    let due = book.plan(now + Duration::from_secs(200), |a| a.ends_with("/7385"));
    assert!(due.iter().all(|d| !d.to_string().ends_with("/7385")));
}

#[test]
fn dialling_cadence_backoff_answers_and_giving_up() {
    let now = Instant::now();
    let mut book = Addresses::new(None, true, 7385);
    book.learn(
        id(1),
        [a("/ip4/10.0.0.1/tcp/7385")],
        Source::Invite,
        false,
        1,
    );
    book.set_trusted([id(1)].into_iter().collect());
    let mut at = now;
    let mut dial_times = Vec::new();
    let mut n = 0;
    // Failing: dialled at 0, 1, 3, 7, 15, 31 s… (the bootstrap backoff), up to the
    // give-up count.
    while at < now + Duration::from_secs(3600) {
        for d in book.plan(at, |_| false) {
            assert_eq!(d, a("/ip4/10.0.0.1/tcp/7385"));
            let conn = ConnectionId::new_unchecked(n);
            n += 1;
            book.dialling(conn, &d);
            dial_times.push(at.duration_since(now).as_secs());
            book.on_dial_failed(conn);
        }
        at += Duration::from_millis(500);
    }
    assert_eq!(dial_times.len(), GIVE_UP_AFTER as usize, "{dial_times:?}");
    assert_eq!(&dial_times[..6], &[0, 1, 3, 7, 15, 31]);
    assert_eq!(book.book().addresses(&id(1))[0].failures, GIVE_UP_AFTER);
    // A change of network makes it due again at once; this time it answers.
    book.network_changed(at);
    let d = book.plan(at, |_| false);
    assert_eq!(d.len(), 1);
    let conn = ConnectionId::new_unchecked(1000);
    book.dialling(conn, &d[0]);
    assert!(
        book.plan(at + Duration::from_secs(10), |_| false)
            .is_empty(),
        "in flight"
    );
    book.on_established(conn, 99);
    let entry = &book.book().addresses(&id(1))[0];
    assert_eq!((entry.answered_ms, entry.failures), (Some(99), 0));
    assert!(
        book.plan(at + Duration::from_secs(100), |_| false)
            .is_empty(),
        "connected"
    );
    // Its connection closed: dialled again after the (reset) backoff.
    book.on_closed(conn, at + Duration::from_secs(100));
    assert!(
        book.plan(at + Duration::from_millis(100_500), |_| false)
            .is_empty()
    );
    assert_eq!(book.plan(at + Duration::from_secs(101), |_| false).len(), 1);
}

#[test]
fn a_new_peer_is_remembered_at_its_connection_and_saves_are_coalesced() {
    let listener = ConnectedPoint::Listener {
        local_addr: a("/ip4/10.1.0.2/tcp/7385"),
        send_back_addr: a("/ip4/10.2.0.2/tcp/51234"),
    };
    assert_eq!(
        from_connection(&listener, 7385),
        vec![
            a("/ip4/10.2.0.2/tcp/7385"),
            a("/ip4/10.2.0.2/udp/7385/quic-v1")
        ],
        "a TCP client's port is not a listen port"
    );
    let quic = ConnectedPoint::Listener {
        local_addr: a("/ip4/10.1.0.2/udp/7385/quic-v1"),
        send_back_addr: a("/ip4/10.2.0.2/udp/40000/quic-v1"),
    };
    assert!(from_connection(&quic, 7385).contains(&a("/ip4/10.2.0.2/udp/40000/quic-v1")));
    assert_eq!(from_connection(&listener, 0).len(), 0);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("addresses.json");
    let mut book = Addresses::new(Some(path.clone()), true, 7385);
    let now = Instant::now();
    book.learn(
        id(1),
        from_connection(&listener, 7385),
        Source::Knock,
        false,
        1,
    );
    book.save_if_due(now, 1, false);
    assert!(!path.exists(), "not at the first change");
    book.learn(
        id(1),
        [a("/ip4/10.2.0.2/tcp/41000")],
        Source::Announcement,
        false,
        2,
    );
    book.save_if_due(now + Duration::from_secs(1), 2, false);
    assert!(!path.exists());
    book.save_if_due(now + SAVE_AFTER, 3, false);
    assert!(path.exists(), "saved once the changes waited long enough");
    let saved = AddressBook::load(Some(path.clone()));
    assert_eq!(saved.addresses(&id(1)).len(), 3);
    // A node that is not a session keeps nothing and writes nothing.
    let mut observer = Addresses::new(Some(path), false, 7385);
    assert_eq!(
        observer.learn(
            id(1),
            [a("/ip4/10.2.0.9/tcp/7385")],
            Source::Identify,
            false,
            5
        ),
        0
    );
    assert!(observer.set_trusted(BTreeSet::new()).is_empty());
}
