use libp2p::core::{Endpoint, transport::PortUse};

use super::*;

#[test]
fn an_inbound_circuit_is_relayed_and_shown_by_its_circuit() {
    // The relay client gives an inbound circuit only the peer as remote address.
    let circuit: Multiaddr = "/ip4/198.51.100.1/tcp/4001/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN/p2p-circuit"
            .parse()
            .unwrap();
    let inbound = ConnectedPoint::Listener {
        local_addr: circuit.clone(),
        send_back_addr: Multiaddr::empty().with(libp2p::multiaddr::Protocol::P2p(PeerId::random())),
    };
    assert_eq!(transport_of(&inbound), ("relay", true));
    assert_eq!(shown_addr(&inbound), &circuit);
    let direct = ConnectedPoint::Dialer {
        address: "/ip4/198.51.100.12/udp/4242/quic-v1".parse().unwrap(),
        role_override: Endpoint::Listener,
        port_use: PortUse::Reuse,
    };
    assert_eq!(transport_of(&direct), ("quic", false));
}
