use std::time::Duration;

use futures::StreamExt as _;
use interlink_core::{
    names::Network,
    wire::{DeliverRequest, VERSION},
};
use libp2p::{multiaddr::Protocol, request_response, swarm::SwarmEvent};

use super::*;
use crate::behaviour::BehaviourEvent;

#[test]
fn a_declined_negotiation_is_recognised_inside_the_errors_that_carry_it() {
    let io = io::Error::other(NegotiationError::Failed);
    assert!(protocol_declined(&io));
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(io);
    assert!(protocol_declined(&*boxed));
    let other = io::Error::new(io::ErrorKind::ConnectionReset, "reset");
    assert!(!protocol_declined(&other));
    let protocol_error = io::Error::other(NegotiationError::ProtocolError(
        libp2p::core::upgrade::ProtocolError::InvalidMessage,
    ));
    assert!(!protocol_declined(&protocol_error));
}

/// A request to a node of another network (none of the same protocol names) fails
/// as unsupported, though lazy negotiation reports it as an I/O error.
#[tokio::test]
async fn a_request_the_peer_declines_fails_as_unsupported() {
    let port = 71_000 + u64::from(std::process::id() % 1000) * 10;
    let config = |network: &str, listen: u64| Config {
        network: Network::new(network).unwrap(),
        listen: vec![format!("/memory/{listen}").parse().unwrap()],
        mdns: false,
        // Under Wine a process counts its mapped debug binary (~500 MB) as working
        // set, and a session's 256 MiB cap would deny the connection
        // (interlink_testkit::IN_PROCESS_MEMORY, which this crate cannot use).
        max_process_memory: Some(8 << 30),
        ..Config::default()
    };
    let mut theirs = build_swarm(Keypair::generate_ed25519(), &config("elsewhere", port)).unwrap();
    let mut ours = build_swarm(Keypair::generate_ed25519(), &config("default", port + 1)).unwrap();
    theirs
        .listen_on(format!("/memory/{port}").parse().unwrap())
        .unwrap();
    let peer = *theirs.local_peer_id();
    let addr: Multiaddr = format!("/memory/{port}").parse().unwrap();
    ours.add_peer_address(peer, addr.with(Protocol::P2p(peer)));
    ours.behaviour_mut().deliver.send_request(
        &peer,
        DeliverRequest {
            v: VERSION,
            envelopes: vec![vec![0; 8].into()],
        },
    );
    let failure = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            tokio::select! {
                _ = theirs.select_next_some() => {}
                event = ours.select_next_some() => {
                    if let SwarmEvent::Behaviour(BehaviourEvent::Deliver(
                        request_response::Event::OutboundFailure { error, .. },
                    )) = event
                    {
                        return error;
                    }
                }
            }
        }
    })
    .await
    .expect("the request ended");
    assert!(
        matches!(&failure, request_response::OutboundFailure::Io(_)),
        "libp2p reports a lazily negotiated refusal as I/O: {failure}"
    );
    assert!(
        matches!(
            declined_as_unsupported(failure),
            request_response::OutboundFailure::UnsupportedProtocols
        ),
        "a declined protocol"
    );
}
