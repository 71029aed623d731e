use super::*;

#[test]
fn only_a_quic_address_outside_relays_not_seen_before_is_new() {
    let mut hp = HolePunch::default();
    let quic: Multiaddr = "/ip4/198.51.100.12/udp/4242/quic-v1".parse().unwrap();
    let tcp: Multiaddr = "/ip4/198.51.100.12/tcp/4242".parse().unwrap();
    let circuit: Multiaddr =
            "/ip4/198.51.100.1/udp/4001/quic-v1/p2p/12D3KooWCggkRwDwPfyTwhmTUwf5PXVv99Y1ZKjJHAx68snbMLbz/p2p-circuit"
                .parse()
                .unwrap();
    assert!(!hp.is_new_quic(&tcp));
    assert!(!hp.is_new_quic(&circuit));
    assert!(hp.is_new_quic(&quic));
    assert!(!hp.is_new_quic(&quic), "the same address again");
}

#[test]
fn the_seen_set_is_bounded() {
    let mut hp = HolePunch::default();
    for port in 0..(3 * MAX_SEEN as u16) {
        let a: Multiaddr = format!("/ip4/198.51.100.12/udp/{}/quic-v1", 1000 + port)
            .parse()
            .unwrap();
        assert!(hp.is_new_quic(&a));
        assert!(hp.seen.len() <= MAX_SEEN);
    }
}

#[test]
fn a_new_udp_address_redials_only_peers_reached_through_relays() {
    use libp2p::core::{Endpoint, transport::PortUse};
    let dialer = |a: &str| ConnectedPoint::Dialer {
        address: a.parse().unwrap(),
        role_override: Endpoint::Dialer,
        port_use: PortUse::New,
    };
    let relay = "/ip4/198.51.100.1/udp/4001/quic-v1/p2p/12D3KooWCggkRwDwPfyTwhmTUwf5PXVv99Y1ZKjJHAx68snbMLbz";
    let (direct, dialled, came_in) = (PeerId::random(), PeerId::random(), PeerId::random());
    let circuit = dialer(&format!("{relay}/p2p-circuit/p2p/{dialled}"));
    let inbound = ConnectedPoint::Listener {
        local_addr: format!("{relay}/p2p-circuit").parse().unwrap(),
        send_back_addr: format!("/p2p/{came_in}").parse().unwrap(),
    };
    let tcp = dialer("/ip4/203.0.113.9/tcp/4001");
    let peers = || {
        vec![
            (direct, vec![&tcp, &circuit]),
            (dialled, vec![&circuit]),
            (came_in, vec![&inbound]),
        ]
        .into_iter()
    };
    let through_relays = |p: PeerId| vec![format!("{relay}/p2p-circuit/p2p/{p}").parse().unwrap()];
    let mut hp = HolePunch::default();
    let quic: Multiaddr = "/ip4/198.51.100.12/udp/4242/quic-v1".parse().unwrap();
    hp.on_candidate(&quic, peers(), through_relays);
    let dials: Vec<Dial> = std::iter::from_fn(|| hp.poll_output()).collect();
    assert_eq!(
        dials,
        [
            Dial {
                peer: dialled,
                circuits: vec![
                    format!("{relay}/p2p-circuit/p2p/{dialled}")
                        .parse()
                        .unwrap()
                ]
            },
            Dial {
                peer: came_in,
                circuits: through_relays(came_in)
            },
        ]
    );
    hp.on_candidate(&quic, peers(), through_relays);
    assert!(
        hp.poll_output().is_none(),
        "the same address punches nothing again"
    );
}
