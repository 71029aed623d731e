use super::*;

#[test]
fn counts_what_it_serves_within_bounds() {
    let mut s = RelayServer::default();
    let (a, b) = (PeerId::random(), PeerId::random());
    s.handle(relay::Event::ReservationClosed { src_peer_id: a });
    s.handle(relay::Event::CircuitClosed {
        src_peer_id: a,
        dst_peer_id: b,
        error: None,
    });
    assert_eq!(s.served(), (0, 0), "never below zero");
    s.handle(relay::Event::CircuitReqAccepted {
        src_peer_id: a,
        dst_peer_id: b,
    });
    s.handle(relay::Event::ReservationReqAccepted {
        src_peer_id: a,
        renewed: false,
    });
    s.handle(relay::Event::ReservationReqAccepted {
        src_peer_id: a,
        renewed: true,
    });
    assert_eq!(s.served(), (1, 1));
    s.handle(relay::Event::ReservationTimedOut { src_peer_id: a });
    assert_eq!(s.served(), (0, 1));
}
