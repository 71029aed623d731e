use super::*;

#[test]
fn quic_is_dialled_at_the_host_reached_with_the_listen_ports() {
    let listen: Vec<Multiaddr> = [
            "/ip4/127.0.0.1/udp/4001/quic-v1",
            "/ip4/10.0.0.5/udp/4001/quic-v1",
            "/ip4/10.0.0.5/udp/4002/quic-v1",
            "/ip4/10.0.0.5/udp/4003/quic-v1",
            "/ip4/10.0.0.5/tcp/4001",
            "/ip4/198.51.100.1/tcp/4001/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN/p2p-circuit",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    let tcp: Multiaddr = "/ip4/203.0.113.9/tcp/4001".parse().unwrap();
    let got: Vec<String> = quic_addrs_at(&tcp, &listen)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        [
            "/ip4/203.0.113.9/udp/4001/quic-v1",
            "/ip4/203.0.113.9/udp/4002/quic-v1"
        ]
    );
    let dns: Multiaddr = "/dns4/relay.example.org/tcp/4001".parse().unwrap();
    assert_eq!(
        quic_addrs_at(&dns, &listen)[0].to_string(),
        "/dns4/relay.example.org/udp/4001/quic-v1"
    );
    let tcp_only: Vec<Multiaddr> = vec!["/ip4/10.0.0.5/tcp/4001".parse().unwrap()];
    assert!(quic_addrs_at(&tcp, &tcp_only).is_empty());
    let circuit: Multiaddr = "/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN"
        .parse()
        .unwrap();
    assert!(quic_addrs_at(&circuit, &listen).is_empty());
}

#[test]
fn only_a_direct_tcp_connection_we_dialled_gives_the_host() {
    use libp2p::core::{Endpoint, transport::PortUse};
    let dialer = |a: &str| ConnectedPoint::Dialer {
        address: a.parse().unwrap(),
        role_override: Endpoint::Dialer,
        port_use: PortUse::New,
    };
    assert!(dialled_tcp(&dialer("/ip4/203.0.113.9/tcp/4001")).is_some());
    assert!(dialled_tcp(&dialer("/ip4/203.0.113.9/udp/4001/quic-v1")).is_none());
    let listener = ConnectedPoint::Listener {
        local_addr: "/ip4/10.0.0.2/tcp/4001".parse().unwrap(),
        send_back_addr: "/ip4/203.0.113.9/tcp/50000".parse().unwrap(),
    };
    assert!(dialled_tcp(&listener).is_none());
}

fn connections(points: &[(usize, &str, bool)]) -> Connections {
    use libp2p::core::{Endpoint, transport::PortUse};
    points
        .iter()
        .map(|(id, addr, dialer)| {
            let address: Multiaddr = addr.parse().unwrap();
            let point = if *dialer {
                ConnectedPoint::Dialer {
                    address,
                    role_override: Endpoint::Dialer,
                    port_use: PortUse::New,
                }
            } else {
                ConnectedPoint::Listener {
                    local_addr: "/ip4/10.0.0.2/tcp/4001".parse().unwrap(),
                    send_back_addr: address,
                }
            };
            (ConnectionId::new_unchecked(*id), point)
        })
        .collect()
}

#[test]
fn the_side_that_dialled_tcp_dials_quic_and_retires_tcp_once_the_peer_confirms_it() {
    let (mut u, peer, start) = (QuicUpgrades::default(), PeerId::random(), Instant::now());
    let listen: Vec<Multiaddr> = vec!["/ip4/10.0.0.5/udp/4001/quic-v1".parse().unwrap()];
    let tcp = connections(&[(1, "/ip4/203.0.113.9/tcp/4001", true)]);
    assert!(
        u.to_dial(
            &peer,
            &connections(&[(1, "/ip4/203.0.113.9/tcp/4001", false)]),
            &listen
        )
        .is_none(),
        "it dialled us"
    );
    let addrs = u.to_dial(&peer, &tcp, &listen).unwrap();
    assert_eq!(addrs[0].to_string(), "/ip4/203.0.113.9/udp/4001/quic-v1");
    u.dialling(peer, start);
    assert!(
        u.to_dial(&peer, &tcp, &listen).is_none(),
        "one dial at a time"
    );
    let both = connections(&[
        (1, "/ip4/203.0.113.9/tcp/4001", true),
        (2, "/ip4/203.0.113.9/udp/4001/quic-v1", true),
    ]);
    assert!(
        !u.on_connected(peer, &both, start),
        "QUIC not confirmed by the peer yet"
    );
    assert!(u.identified_over(ConnectionId::new_unchecked(2), &both));
    assert!(u.on_connected(peer, &both, start));
    // A live delivery waits on the peer: TCP stays until the wait is over.
    assert!(u.retire(peer, &both, true, start).is_empty());
    assert_eq!(u.handle_timeout(start + Duration::from_secs(1)), [peer]);
    let closed = u.retire(peer, &both, true, start + RETIRE_WAIT);
    assert_eq!(closed, [ConnectionId::new_unchecked(1)]);
    assert_eq!(u.retired(), 1);
    assert!(!u.is_retiring(&peer));
}

#[test]
fn a_dial_that_never_connects_is_given_up_and_tcp_stays_without_quic() {
    let (mut u, peer, start) = (QuicUpgrades::default(), PeerId::random(), Instant::now());
    u.dialling(peer, start);
    assert!(
        u.handle_timeout(start + DIAL_WAIT - Duration::from_millis(1))
            .is_empty()
    );
    u.handle_timeout(start + DIAL_WAIT);
    let tcp = connections(&[(1, "/ip4/203.0.113.9/tcp/4001", true)]);
    let listen: Vec<Multiaddr> = vec!["/ip4/10.0.0.5/udp/4001/quic-v1".parse().unwrap()];
    assert!(
        u.to_dial(&peer, &tcp, &listen).is_some(),
        "free to try again"
    );
    // Retiring, but the QUIC connection is gone again: nothing is closed.
    let both = connections(&[
        (1, "/ip4/203.0.113.9/tcp/4001", true),
        (2, "/ip4/203.0.113.9/udp/4001/quic-v1", true),
    ]);
    assert!(u.identified_over(ConnectionId::new_unchecked(2), &both));
    assert!(u.on_connected(peer, &both, start));
    u.closed(ConnectionId::new_unchecked(2));
    assert!(u.retire(peer, &tcp, false, start).is_empty());
    assert_eq!(u.retired(), 0);
}
