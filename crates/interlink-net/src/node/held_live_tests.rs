use super::*;

fn request(n: u8) -> Held {
    (
        ReqId(u64::from(n)),
        DeliverRequest {
            v: interlink_core::wire::VERSION,
            envelopes: Vec::new(),
        },
    )
}

#[test]
fn deliveries_wait_for_every_closing_connection_or_the_deadline() {
    let (mut h, peer, now) = (HeldLive::default(), PeerId::random(), Instant::now());
    assert!(
        h.hold(peer, request(0)).is_some(),
        "nothing closing: sent at once"
    );
    let (a, b) = (
        ConnectionId::new_unchecked(1),
        ConnectionId::new_unchecked(2),
    );
    h.closing(peer, vec![a, b], now);
    assert!(h.hold(peer, request(1)).is_none());
    assert!(
        h.hold(PeerId::random(), request(2)).is_some(),
        "another peer"
    );
    assert!(h.closed(peer, a).is_none(), "one still closing");
    let released = h.closed(peer, b).unwrap();
    assert_eq!(released.len(), 1);
    // Past the deadline, whatever the swarm says.
    h.closing(peer, vec![a], now);
    assert!(h.hold(peer, request(3)).is_none());
    assert_eq!(h.poll_timeout(), Some(now + CLOSE_WAIT));
    assert!(
        h.poll_due(now + CLOSE_WAIT - Duration::from_millis(1))
            .is_none()
    );
    let (p, held) = h.poll_due(now + CLOSE_WAIT).unwrap();
    assert_eq!((p, held.len()), (peer, 1));
    assert!(h.poll_timeout().is_none());
}

#[test]
fn after_a_loss_the_first_close_releases_and_the_bound_holds() {
    let (mut h, peer, now) = (HeldLive::default(), PeerId::random(), Instant::now());
    h.lost_with_connection(peer, now);
    for n in 0..MAX_HELD_LIVE {
        assert!(h.hold(peer, request(n as u8)).is_none());
    }
    assert!(
        h.hold(peer, request(0)).is_some(),
        "past the bound: sent at once"
    );
    assert_eq!(h.poll_timeout(), Some(now + LOST_WAIT));
    let released = h.closed(peer, ConnectionId::new_unchecked(9)).unwrap();
    assert_eq!(released.len(), MAX_HELD_LIVE);
}
