//! The real swarm's TCP transport on loopback: two nodes that dial each other at the
//! same instant must both end up connected.
//!
//! A TCP dial bound to the dialler's listening port (libp2p's default, for NAT hole
//! punching) meets the other side's dial bound to *its* listening port in one TCP
//! "simultaneous open": a single connection on which both sides act as the Noise
//! initiator, so both handshakes fail ("input error") and neither dial connects. A
//! shell `send` whose live attempt crossed the recipient's pass offer queued a message
//! that should have been delivered (tests/e2e/claude_inbox.rs, 2 runs in 6).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    sync::{
        Arc, Barrier,
        mpsc::{Receiver, SyncSender, sync_channel},
    },
    time::Duration,
};

use futures::StreamExt as _;
use interlink_net::{Config, behaviour::Behaviour};
use libp2p::{Multiaddr, PeerId, Swarm, multiaddr::Protocol, swarm::SwarmEvent};

/// A loopback connection takes milliseconds; a crossing that failed never connects.
const LIMIT: Duration = Duration::from_secs(3);
/// Rounds of crossing dials: each round's window for a simultaneous open is small, so
/// the old transport failed some of them, not each.
const ROUNDS: usize = 20;

/// Listens on loopback TCP (a bare swarm ignores `Config::listen`); returns the
/// address with `/p2p/`.
async fn listening(swarm: &mut Swarm<Behaviour>) -> Multiaddr {
    swarm
        .listen_on("/ip4/127.0.0.1/tcp/0".parse().unwrap())
        .unwrap();
    loop {
        if let SwarmEvent::NewListenAddr { address, .. } = swarm.select_next_some().await {
            return address.with(Protocol::P2p(*swarm.local_peer_id()));
        }
    }
}

/// What one side saw of its own dial to `peer`: connected, or the dial's error.
#[derive(Debug, Default)]
struct Seen {
    connected: bool,
    errors: Vec<String>,
}

fn note(seen: &mut Seen, peer: PeerId, ev: &SwarmEvent<interlink_net::behaviour::BehaviourEvent>) {
    match ev {
        SwarmEvent::ConnectionEstablished { peer_id, .. } if *peer_id == peer => {
            seen.connected = true;
        }
        SwarmEvent::OutgoingConnectionError { error, .. } => seen.errors.push(error.to_string()),
        SwarmEvent::IncomingConnectionError { error, .. } => seen.errors.push(error.to_string()),
        _ => {}
    }
}

/// One side of a round on its own thread and runtime (as two processes would be): it
/// listens, hands its address over, waits at `start` for the other, dials it and runs
/// until it has a connection with it or [`LIMIT`] passes.
fn side(
    addr_tx: SyncSender<(PeerId, Multiaddr)>,
    addr_rx: Receiver<(PeerId, Multiaddr)>,
    start: Arc<Barrier>,
) -> Seen {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let mut swarm = interlink_testkit::node::raw_swarm(&Config {
            mdns: false,
            max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
            ..Config::default()
        });
        let addr = listening(&mut swarm).await;
        addr_tx.send((*swarm.local_peer_id(), addr)).unwrap();
        let (peer, other) = addr_rx.recv().unwrap();
        start.wait();
        swarm.dial(other).unwrap();
        let mut seen = Seen::default();
        let deadline = tokio::time::Instant::now() + LIMIT;
        // Both sides keep running a little after connecting, so the other's handshake
        // on the same connection can finish.
        let mut linger = None;
        loop {
            tokio::select! {
                ev = swarm.select_next_some() => note(&mut seen, peer, &ev),
                () = tokio::time::sleep_until(deadline) => break,
                () = async { tokio::time::sleep_until(linger.unwrap()).await }, if linger.is_some() => break,
            }
            if seen.connected && linger.is_none() {
                linger = Some(tokio::time::Instant::now() + Duration::from_millis(200));
            }
        }
        seen
    })
}

#[test]
fn two_nodes_dialling_each_other_at_once_both_connect() {
    let mut failed = Vec::new();
    for round in 0..ROUNDS {
        // One address each way.
        let (a_tx, a_rx) = sync_channel(1);
        let (b_tx, b_rx) = sync_channel(1);
        let start = Arc::new(Barrier::new(2));
        let s = start.clone();
        let a = std::thread::spawn(move || side(a_tx, b_rx, s));
        let b = std::thread::spawn(move || side(b_tx, a_rx, start));
        let (seen_a, seen_b) = (a.join().unwrap(), b.join().unwrap());
        let clean = |s: &Seen| s.connected && s.errors.is_empty();
        if !(clean(&seen_a) && clean(&seen_b)) {
            failed.push((round, seen_a, seen_b));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {ROUNDS} rounds of crossing dials failed a dial or left a side unconnected: {failed:?}",
        failed.len()
    );
}
