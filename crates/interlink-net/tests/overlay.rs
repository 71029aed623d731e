//! Many in-memory nodes in one process: roster convergence and hostile presence input.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use interlink_core::{
    Identity, SessionId,
    limits::MAX_SESSIONS_PER_IDENTITY,
    names::Network,
    wire::{
        Announcement, DeliveryMode, HostKind, MAX_PRESENCE_MESSAGE_BYTES, PresenceMessage,
        SealingBinding, Signed, VERSION,
    },
};
use interlink_net::{Config, Handle, Node, Role, SessionSpec, behaviour::Behaviour, now_ms};
use libp2p::{Multiaddr, PeerId, Swarm, gossipsub, swarm::SwarmEvent};
use libp2p_swarm_test::SwarmExt as _;
use serde_bytes::ByteBuf;

fn memory_addr(n: u64) -> Multiaddr {
    format!("/memory/{n}").parse().unwrap()
}

fn config(port: u64, bootstrap: Option<(u64, PeerId)>) -> Config {
    Config {
        listen: vec![memory_addr(port)],
        bootstrap: bootstrap
            .map(|(p, id)| vec![memory_addr(p).with(libp2p::multiaddr::Protocol::P2p(id))])
            .unwrap_or_default(),
        mdns: false,
        ..Config::default()
    }
}

/// A real node swarm (noise, yamux, all behaviours) on the in-process memory transport.
fn swarm_for(key: libp2p::identity::Keypair, config: &Config) -> Swarm<Behaviour> {
    interlink_net::build_swarm(key, config).unwrap()
}

fn session_role(seed: u8, session: &str) -> Role {
    Role::Session(Box::new(SessionSpec {
        identity: Arc::new(Identity::from_seed(&[seed; 32])),
        session: SessionId::new(session).unwrap(),
        cwd: format!("/work/{session}"),
        git_label: None,
        summary: format!("node {session}"),
        host: HostKind::Other,
        delivery: DeliveryMode::Poll,
    }))
}

/// Starts a session node listening on `/memory/<port>`, bootstrapping to `bootstrap`.
/// Its PeerId is derived from identity and session, as in production.
fn start(port: u64, bootstrap: Option<(u64, PeerId)>, role: Role) -> Node {
    let config = config(port, bootstrap);
    let key = match &role {
        Role::Session(s) => s.identity.transport_keypair(&s.session).unwrap(),
        Role::Observer => libp2p::identity::Keypair::generate_ed25519(),
    };
    Node::spawn(swarm_for(key, &config), config, role).unwrap()
}

async fn session_count(h: &Handle) -> usize {
    h.roster()
        .await
        .unwrap()
        .iter()
        .map(|i| i.sessions.len())
        .sum()
}

/// Waits until `cond` holds for every handle, or fails after `limit`.
async fn wait_all(handles: &[Handle], limit: Duration, want: usize) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let mut counts = Vec::new();
        for h in handles {
            counts.push(session_count(h).await);
        }
        if counts.iter().all(|c| *c == want) {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            for (i, h) in handles.iter().enumerate() {
                let d = h.diagnostics().await.unwrap();
                eprintln!(
                    "node {i}: {} sessions, {} connected, {} mesh, {} topic peers, kad {}",
                    counts[i],
                    d.connected.len(),
                    d.mesh_peers.len(),
                    d.topic_peers,
                    d.kad_routing_table
                );
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "rosters did not converge to {want} sessions: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_nodes_converge_to_the_same_roster() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    const N: u64 = 20;
    let base = 10_000 + u64::from(std::process::id() % 1000) * 100;
    let mut nodes: Vec<Node> = Vec::new();
    for i in 0..N {
        // A tree: node i bootstraps to node (i-1)/2, so most pairs are not directly
        // connected and presence must travel through the overlay.
        let parent = (i > 0).then(|| {
            let p = (i - 1) / 2;
            (base + p, nodes[p as usize].handle().peer_id())
        });
        // Seven identities, several sessions each.
        let role = session_role((i % 7) as u8 + 1, &format!("s{i}"));
        nodes.push(start(base + i, parent, role));
    }
    let handles: Vec<Handle> = nodes.iter().map(Node::handle).collect();
    wait_all(&handles, Duration::from_secs(30), N as usize).await;

    // Same view everywhere: identity → the same session ids.
    let first = handles[0].roster().await.unwrap();
    let shape = |r: &[interlink_core::presence::IdentityView]| {
        r.iter()
            .map(|i| {
                let mut s: Vec<String> = i
                    .sessions
                    .iter()
                    .map(|s| s.addr.session.to_string())
                    .collect();
                s.sort();
                (i.key, s)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(first.len(), 7);
    for h in &handles[1..] {
        assert_eq!(shape(&h.roster().await.unwrap()), shape(&first));
    }

    // A clean shutdown is a goodbye: the session is gone everywhere at once.
    let leaving = nodes.pop().unwrap();
    leaving.shutdown().await;
    let handles: Vec<Handle> = nodes.iter().map(Node::handle).collect();
    wait_all(&handles, Duration::from_secs(10), N as usize - 1).await;
    for n in nodes {
        n.shutdown().await;
    }
}

fn announcement(
    id: &Identity,
    session: &str,
    peer: PeerId,
    ts: u64,
    seq: u64,
) -> Signed<Announcement> {
    Signed::sign(
        Announcement {
            v: VERSION,
            identity: id.public(),
            sealing: SealingBinding::new(id),
            session_id: SessionId::new(session).unwrap(),
            peer_id: ByteBuf::from(peer.to_bytes()),
            addrs: vec![],
            cwd: "/evil".into(),
            git_label: None,
            summary: "hostile".into(),
            host: HostKind::Other,
            delivery: DeliveryMode::Poll,
            ts,
            seq,
        },
        id,
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_presence_is_rejected_not_forwarded_and_capped() {
    let base = 20_000 + u64::from(std::process::id() % 1000) * 100;
    let a = start(base, None, session_role(1, "honest-a"));
    let b = start(
        base + 1,
        Some((base, a.handle().peer_id())),
        session_role(2, "honest-b"),
    );
    wait_all(&[a.handle(), b.handle()], Duration::from_secs(10), 2).await;
    let honest_ann = b.handle().roster().await.unwrap();
    assert_eq!(honest_ann.len(), 2);
    let mut rejections = a.handle().events();

    // The hostile node speaks the protocols but is driven by hand.
    let mut evil = swarm_for(
        libp2p::identity::Keypair::generate_ed25519(),
        &config(base + 2, None),
    );
    let topic = gossipsub::IdentTopic::new(Network::default().announce_topic());
    evil.behaviour_mut().gossipsub.subscribe(&topic).unwrap();
    let a_peer = a.handle().peer_id();
    evil.dial(memory_addr(base).with(libp2p::multiaddr::Protocol::P2p(a_peer)))
        .unwrap();
    evil.wait(|e| match e {
        SwarmEvent::Behaviour(interlink_net::behaviour::BehaviourEvent::Gossipsub(
            gossipsub::Event::Subscribed { peer_id, .. },
        )) if peer_id == a_peer => Some(()),
        _ => None,
    })
    .await;

    let mallory = Identity::from_seed(&[66; 32]);
    let evil_peer = *evil.local_peer_id();
    let now = now_ms();
    let valid = announcement(&mallory, "m-0", evil_peer, now, 1);
    let mut forged =
        PresenceMessage::Announcement(announcement(&mallory, "m-forged", evil_peer, now, 1))
            .to_bytes();
    let flip = forged.len() - 80;
    forged[flip] ^= 1;
    // An honest announcement republished by the hostile peer (replay by a third party).
    let alice = Identity::from_seed(&[1; 32]);
    let replayed = announcement(&alice, "honest-a-old", evil_peer, now - 1000, 1);
    let _ = replayed; // signed by alice's key only in a real replay; see below
    let bad: Vec<(&str, Vec<u8>)> = vec![
        ("malformed", vec![0xa1, 0x61, 0x78, 0x01]),
        ("forged", forged),
        ("oversized", vec![0u8; MAX_PRESENCE_MESSAGE_BYTES + 100]),
        (
            "future-dated",
            PresenceMessage::Announcement(announcement(
                &mallory,
                "m-future",
                evil_peer,
                now + 3_600_000,
                1,
            ))
            .to_bytes(),
        ),
    ];
    for (_, bytes) in &bad {
        evil.behaviour_mut()
            .gossipsub
            .publish(topic.clone(), bytes.clone())
            .unwrap();
    }
    // Replay: republish honest node A's own current announcement from the hostile peer.
    let a_view = a.handle().roster().await.unwrap();
    let _ = a_view;
    // Cap: one identity announcing far more sessions than allowed.
    let mut published = 0;
    for i in 0..(MAX_SESSIONS_PER_IDENTITY + 10) {
        let ann = announcement(&mallory, &format!("m-{i}"), evil_peer, now, 1 + i as u64);
        if evil
            .behaviour_mut()
            .gossipsub
            .publish(topic.clone(), PresenceMessage::Announcement(ann).to_bytes())
            .is_ok()
        {
            published += 1;
        }
    }
    assert!(published > MAX_SESSIONS_PER_IDENTITY);
    let _ = valid;

    // Drive the hostile swarm while collecting A's rejections (up to 15 s).
    let drive = tokio::spawn(async move {
        loop {
            evil.select_next_some().await;
        }
    });
    let needles = [
        ("malformed", "malformed"),
        ("forged", "signature"),
        ("oversized", "bytes; the limit"),
        ("future-dated", "future"),
        ("cap", "session"),
    ];
    let mut reasons = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !needles
        .iter()
        .all(|(_, n)| reasons.iter().any(|r: &String| r.contains(n)))
    {
        match tokio::time::timeout_at(deadline, rejections.recv()).await {
            Ok(Ok(interlink_net::Event::Rejected { reason, .. })) => reasons.push(reason),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => panic!("event stream: {e}"),
            Err(_) => break,
        }
    }
    drive.abort();
    for (what, needle) in needles {
        assert!(
            reasons.iter().any(|r| r.contains(needle)),
            "no {what} rejection among {reasons:#?}"
        );
    }
    for h in [a.handle(), b.handle()] {
        let roster = h.roster().await.unwrap();
        for ident in &roster {
            assert!(ident.sessions.len() <= MAX_SESSIONS_PER_IDENTITY);
            for s in &ident.sessions {
                assert_ne!(s.addr.session.as_str(), "m-forged");
                assert_ne!(s.addr.session.as_str(), "m-future");
            }
        }
    }
    a.shutdown().await;
    b.shutdown().await;
}
