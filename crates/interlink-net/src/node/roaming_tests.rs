use libp2p::core::{Endpoint, transport::PortUse};

use super::*;

#[test]
fn only_connections_that_may_have_used_the_address_are_closed() {
    let gone: IpAddr = "10.0.0.2".parse().unwrap();
    let listener = |local: &str| ConnectedPoint::Listener {
        local_addr: local.parse().unwrap(),
        send_back_addr: "/ip4/10.0.0.9/tcp/5000".parse().unwrap(),
    };
    let dialer = |to: &str| ConnectedPoint::Dialer {
        address: to.parse().unwrap(),
        role_override: Endpoint::Dialer,
        port_use: PortUse::New,
    };
    assert!(bound_to(&listener("/ip4/10.0.0.2/tcp/4001"), gone));
    assert!(!bound_to(&listener("/ip4/10.0.0.3/tcp/4001"), gone));
    assert!(!bound_to(&listener("/ip4/127.0.0.1/tcp/4001"), gone));
    assert!(bound_to(&dialer("/ip4/10.0.0.9/tcp/4001"), gone));
    assert!(!bound_to(&dialer("/ip4/127.0.0.1/tcp/4001"), gone));
    assert_eq!(
            host_ip(&"/ip4/10.0.0.9/tcp/1/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN/p2p-circuit".parse().unwrap()),
            None
        );
}
