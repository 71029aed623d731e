use super::*;

fn established(peer: PeerId, id: usize, relayed: bool) -> Input {
    Input::Established {
        peer,
        connection: ConnectionId::new_unchecked(id),
        relayed,
    }
}

fn identified(peer: PeerId, id: usize) -> Input {
    Input::Identified {
        peer,
        connection: ConnectionId::new_unchecked(id),
    }
}

fn closed(peer: PeerId, id: usize) -> Input {
    Input::Closed {
        peer,
        connection: ConnectionId::new_unchecked(id),
    }
}

fn close(peer: PeerId, ids: &[usize]) -> Output {
    Output::Close {
        peer,
        connections: ids
            .iter()
            .map(|i| ConnectionId::new_unchecked(*i))
            .collect(),
    }
}

fn drain(r: &mut RetireCircuits) -> Vec<Output> {
    std::iter::from_fn(|| r.poll_output()).collect()
}

#[test]
fn relayed_connections_close_a_grace_after_the_direct_one_is_confirmed() {
    let t0 = Instant::now();
    let peer = PeerId::random();
    let mut r = RetireCircuits::default();
    // Met through the relay, both ways; then the punch.
    r.handle(established(peer, 1, true), t0);
    r.handle(established(peer, 2, true), t0);
    r.handle(identified(peer, 1), t0);
    r.handle(established(peer, 3, false), t0 + Duration::from_secs(3));
    assert_eq!(r.poll_timeout(), None, "the peer may not hold it yet");
    let confirmed = t0 + Duration::from_secs(4);
    r.handle(identified(peer, 3), confirmed);
    assert_eq!(r.poll_timeout(), Some(confirmed + GRACE));
    r.handle_timeout(confirmed + GRACE - Duration::from_millis(1));
    assert_eq!(drain(&mut r), []);
    r.handle_timeout(confirmed + GRACE);
    assert_eq!(drain(&mut r), [close(peer, &[1, 2])]);
    assert_eq!(r.retired(), 2);
    assert_eq!(r.poll_timeout(), None);
    // The swarm reports them closed: nothing more to do.
    r.handle(closed(peer, 1), confirmed + GRACE);
    r.handle(closed(peer, 2), confirmed + GRACE);
    r.handle_timeout(confirmed + GRACE * 10);
    assert_eq!(drain(&mut r), []);
}

#[test]
fn a_relayed_connection_opened_later_closes_too() {
    let t0 = Instant::now();
    let peer = PeerId::random();
    let mut r = RetireCircuits::default();
    r.handle(established(peer, 1, false), t0);
    r.handle(identified(peer, 1), t0);
    assert_eq!(r.poll_timeout(), None, "nothing relayed");
    let later = t0 + Duration::from_secs(30);
    r.handle(established(peer, 2, true), later);
    assert_eq!(r.poll_timeout(), Some(later + GRACE));
    r.handle_timeout(later + GRACE);
    assert_eq!(drain(&mut r), [close(peer, &[2])]);
}

#[test]
fn without_a_confirmed_direct_connection_the_relayed_ones_stay() {
    let t0 = Instant::now();
    let peer = PeerId::random();
    let mut r = RetireCircuits::default();
    r.handle(established(peer, 1, true), t0);
    r.handle(established(peer, 2, false), t0);
    // Identify over the relayed connection proves nothing about the direct one.
    r.handle(identified(peer, 1), t0);
    r.handle_timeout(t0 + GRACE * 100);
    assert_eq!(drain(&mut r), []);
    // Confirmed, then gone within the grace: the relayed one is all there is.
    r.handle(identified(peer, 2), t0);
    r.handle(closed(peer, 2), t0 + GRACE / 2);
    assert_eq!(r.poll_timeout(), None);
    r.handle_timeout(t0 + GRACE * 100);
    assert_eq!(drain(&mut r), []);
    assert_eq!(r.retired(), 0);
}

#[test]
fn a_second_confirmed_direct_connection_keeps_the_first_deadline() {
    let t0 = Instant::now();
    let peer = PeerId::random();
    let mut r = RetireCircuits::default();
    r.handle(established(peer, 1, true), t0);
    r.handle(established(peer, 2, false), t0);
    r.handle(established(peer, 3, false), t0);
    r.handle(identified(peer, 2), t0);
    r.handle(identified(peer, 3), t0 + GRACE / 2);
    assert_eq!(r.poll_timeout(), Some(t0 + GRACE));
    // One of them closes; the other still carries the traffic.
    r.handle(closed(peer, 2), t0 + GRACE / 2);
    assert_eq!(r.poll_timeout(), Some(t0 + GRACE));
    r.handle_timeout(t0 + GRACE);
    assert_eq!(drain(&mut r), [close(peer, &[1])]);
}

#[test]
fn a_direct_connection_the_peer_never_confirms_closes_with_the_relayed_ones() {
    let t0 = Instant::now();
    let peer = PeerId::random();
    let mut r = RetireCircuits::default();
    // A punch made three: one the peer holds, one whose handshake it never
    // completed, one whose identify comes a little late.
    r.handle(established(peer, 1, true), t0);
    for id in [2, 3, 4] {
        r.handle(established(peer, id, false), t0);
    }
    r.handle(identified(peer, 2), t0);
    r.handle(identified(peer, 4), t0 + GRACE / 2);
    r.handle_timeout(t0 + GRACE);
    assert_eq!(drain(&mut r), [close(peer, &[1, 3])]);
    assert_eq!(r.retired(), 1, "only relayed ones count");
    // One made later that the peer never confirms goes a grace after it came.
    let later = t0 + GRACE * 5;
    r.handle(established(peer, 5, false), later);
    assert_eq!(r.poll_timeout(), Some(later + GRACE));
    r.handle_timeout(later + GRACE);
    assert_eq!(drain(&mut r), [close(peer, &[5])]);
}

#[test]
fn without_a_relay_between_a_slow_direct_connection_stays() {
    let t0 = Instant::now();
    let peer = PeerId::random();
    let mut r = RetireCircuits::default();
    // Met over TCP, then dialled over QUIC too: not this rule's to close.
    r.handle(established(peer, 1, false), t0);
    r.handle(identified(peer, 1), t0);
    r.handle(established(peer, 2, false), t0);
    assert_eq!(r.poll_timeout(), None);
    r.handle_timeout(t0 + GRACE * 10);
    assert_eq!(drain(&mut r), []);
}

#[test]
fn peers_are_apart_and_forgotten_when_gone() {
    let t0 = Instant::now();
    let (p, q) = (PeerId::random(), PeerId::random());
    let mut r = RetireCircuits::default();
    r.handle(established(p, 1, true), t0);
    r.handle(established(q, 2, true), t0);
    r.handle(established(p, 3, false), t0);
    r.handle(identified(p, 3), t0);
    r.handle_timeout(t0 + GRACE);
    assert_eq!(drain(&mut r), [close(p, &[1])]);
    for (peer, id) in [(p, 1), (p, 3), (q, 2)] {
        r.handle(closed(peer, id), t0 + GRACE);
    }
    assert!(r.peers.is_empty());
    // Events for unknown peers or connections change nothing.
    r.handle(identified(p, 3), t0 + GRACE);
    r.handle(closed(q, 9), t0 + GRACE);
    assert!(r.peers.is_empty());
}

#[test]
fn the_peers_tracked_are_bounded() {
    let t0 = Instant::now();
    let mut r = RetireCircuits::default();
    for i in 0..(MAX_PEERS + 10) {
        r.handle(established(PeerId::random(), i, true), t0);
    }
    assert_eq!(r.peers.len(), MAX_PEERS);
}
