use super::*;

fn peer(n: u8) -> PeerId {
    libp2p::identity::Keypair::ed25519_from_bytes([n; 32])
        .unwrap()
        .public()
        .to_peer_id()
}

fn a(s: &str) -> Multiaddr {
    s.parse().unwrap()
}

#[test]
fn the_port_is_held_on_the_listen_ips_and_dialled_on_loopback() {
    let listen = [
        a("/ip4/0.0.0.0/tcp/0"),
        a("/ip4/0.0.0.0/udp/0/quic-v1"),
        a(
            "/ip4/10.0.0.9/tcp/1/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN/p2p-circuit",
        ),
    ];
    let now = Instant::now();
    let mut wk = WellKnown::new(7385, true, &listen, &peer(1), now);
    assert_eq!(wk.ips, vec![IpAddr::V4(Ipv4Addr::UNSPECIFIED)]);
    assert_eq!(
        addrs_on(wk.ips[0], 7385),
        [
            a("/ip4/0.0.0.0/tcp/7385"),
            a("/ip4/0.0.0.0/udp/7385/quic-v1")
        ]
    );
    assert!(wk.take_due(now));
    // Not holding it: the holder is dialled on loopback, with backoff.
    assert_eq!(wk.local_dial_due(now), Some(a("/ip4/127.0.0.1/tcp/7385")));
    let id = ConnectionId::new_unchecked(1);
    wk.local_dialled(id);
    assert_eq!(
        wk.local_dial_due(now + Duration::from_secs(5)),
        None,
        "in flight"
    );
    wk.on_dial_failed(id);
    assert_eq!(wk.local_dial_due(now + Duration::from_millis(500)), None);
    assert!(wk.local_dial_due(now + Duration::from_secs(1)).is_some());
    let again = now + Duration::from_secs(1);
    assert_eq!(wk.local_dial_due(again + Duration::from_millis(1500)), None);
    assert!(
        wk.local_dial_due(again + Duration::from_secs(2)).is_some(),
        "doubled"
    );
    // Connected to the holder: no more dials until it goes away; then one after
    // the next holder had its chance.
    let conn = ConnectionId::new_unchecked(2);
    wk.local_dialled(conn);
    wk.on_established(conn);
    let later = now + Duration::from_secs(100);
    assert_eq!(wk.local_dial_due(later), None);
    wk.on_closed(conn, later);
    assert_eq!(wk.local_dial_due(later + RETRY_BASE), None);
    assert!(
        wk.local_dial_due(later + RETRY_BASE + RETRY_SPREAD)
            .is_some()
    );
    // A specific listen IP is dialled as it is; port 0 turns it all off.
    let wk = WellKnown::new(7385, true, &[a("/ip4/10.1.0.2/tcp/0")], &peer(1), now);
    assert_eq!(wk.local, Some(a("/ip4/10.1.0.2/tcp/7385")));
    let mut off = WellKnown::new(0, true, &listen, &peer(1), now);
    assert!(!off.take_due(now) && off.local_dial_due(now).is_none());
    // A node that is not to hold it never tries.
    assert!(!WellKnown::new(7385, false, &listen, &peer(1), now).take_due(now));
}

#[test]
fn nodes_try_at_different_moments_within_the_spread() {
    let intervals: std::collections::BTreeSet<Duration> =
        (1..20u8).map(|n| retry_interval(&peer(n))).collect();
    assert!(intervals.len() > 10, "{intervals:?}");
    assert!(
        intervals
            .iter()
            .all(|d| *d >= RETRY_BASE && *d < RETRY_BASE + RETRY_SPREAD)
    );
}
