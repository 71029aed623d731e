use super::*;

const RELAY: &str =
    "/ip4/203.0.113.9/tcp/4001/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN";

fn client() -> (RelayClient, PeerId) {
    let addr: Multiaddr = RELAY.parse().unwrap();
    let Some(Protocol::P2p(peer)) = addr.iter().last() else {
        unreachable!()
    };
    (RelayClient::new(&[addr], true), peer)
}

fn outputs(c: &mut RelayClient) -> Vec<Output> {
    std::iter::from_fn(|| c.poll_output()).collect()
}

#[test]
fn a_session_is_tried_through_each_relay_of_ours() {
    let (relays, _) = client();
    let target = PeerId::random();
    let got: Vec<String> = relays
        .circuits_to(target)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(got, [format!("{RELAY}/p2p-circuit/p2p/{target}")]);
}

#[test]
fn listens_through_a_relay_once_per_connection() {
    let (mut c, relay) = client();
    let now = Instant::now();
    c.handle(Input::Connected(PeerId::random()), now);
    assert!(outputs(&mut c).is_empty(), "not a relay of ours");
    c.handle(Input::Connected(relay), now);
    c.handle(Input::Connected(relay), now);
    let circuit: Multiaddr = format!("{RELAY}/p2p-circuit").parse().unwrap();
    let listen = Output::Listen { relay, circuit };
    assert_eq!(outputs(&mut c), [listen]);
    c.handle(Input::Disconnected(relay), now);
    c.handle(Input::Connected(relay), now);
    assert_eq!(outputs(&mut c).len(), 1);
    c.handle(Input::ListenFailed(relay), now);
    c.handle(Input::Connected(relay), now);
    assert_eq!(outputs(&mut c).len(), 1);
}

#[test]
fn a_relay_reached_over_tcp_only_is_dialled_over_quic_again_doubling() {
    let (mut c, relay) = client();
    let start = Instant::now();
    let listen: Vec<Multiaddr> = vec!["/ip4/203.0.113.9/udp/4001/quic-v1".parse().unwrap()];
    c.handle(
        Input::Identified {
            peer: relay,
            listen: &listen,
            over_quic: false,
        },
        start,
    );
    assert!(matches!(&outputs(&mut c)[..], [Output::DialQuic { .. }]));
    let mut dials = Vec::new();
    for s in 1..=40 {
        let now = start + Duration::from_secs(s);
        c.handle_timeout(now, |_| true);
        if !outputs(&mut c).is_empty() {
            dials.push(s);
        }
    }
    assert_eq!(dials, [10, 30], "10 s, then 20 s more");
    // Reached over QUIC meanwhile: no more dials.
    c.handle_timeout(start + Duration::from_secs(400), |_| false);
    c.handle_timeout(start + Duration::from_secs(900), |_| true);
    assert!(outputs(&mut c).is_empty());
}

#[test]
fn only_sessions_use_relays() {
    let addr: Multiaddr = RELAY.parse().unwrap();
    let Some(Protocol::P2p(relay)) = addr.iter().last() else {
        unreachable!()
    };
    let mut c = RelayClient::new(&[addr], false);
    c.handle(Input::Connected(relay), Instant::now());
    assert!(c.poll_output().is_none());
    let (mut c, relay) = client();
    c.handle(
        Input::Identified {
            peer: relay,
            listen: &[],
            over_quic: true,
        },
        Instant::now(),
    );
    assert!(c.poll_output().is_none(), "already over QUIC");
}
