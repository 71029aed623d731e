//! Many in-memory nodes in one process: roster convergence and hostile presence input.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use interlink_core::{
    Identity,
    limits::MAX_SESSIONS_PER_IDENTITY,
    names::Network,
    presence::{
        Roster,
        sync::{Summary, Tag},
    },
    wire::{
        Announcement, Beacon, MAX_PRESENCE_MESSAGE_BYTES, PresenceMessage, RosterRequest,
        RosterResponse, Signed,
    },
};
use interlink_net::{
    Config, Handle, Node, Role,
    behaviour::{Behaviour, BehaviourEvent},
};
use interlink_testkit::{node, signed::announcement};
use libp2p::{Multiaddr, PeerId, Swarm, gossipsub, request_response, swarm::SwarmEvent};
use libp2p_swarm_test::SwarmExt as _;

fn now_ms() -> u64 {
    interlink_net::Clock::system().now_ms()
}

fn memory_addr(n: u64) -> Multiaddr {
    format!("/memory/{n}").parse().unwrap()
}

fn config(port: u64, bootstrap: Option<(u64, PeerId)>) -> Config {
    Config {
        max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
        listen: vec![memory_addr(port)],
        bootstrap: bootstrap
            .map(|(p, id)| vec![memory_addr(p).with(libp2p::multiaddr::Protocol::P2p(id))])
            .unwrap_or_default(),
        mdns: false,
        ..Config::default()
    }
}

fn session_role(seed: u8, session: &str) -> Role {
    node::session_role(
        Arc::new(Identity::from_seed(&[seed; 32])),
        &interlink_testkit::session(session),
        &format!("/work/{session}"),
        &format!("node {session}"),
    )
}

/// Starts a session node listening on `/memory/<port>`, bootstrapping to `bootstrap`.
/// Its PeerId is derived from identity and session, as in production.
fn start(port: u64, bootstrap: Option<(u64, PeerId)>, role: Role) -> Node {
    node::spawn(config(port, bootstrap), role)
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
    let base = interlink_testkit::node::memory_base();
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

    // What it cost is counted: every node fetched a roster, verified at least the
    // other sessions' announcements, and received presence bytes.
    for h in &handles {
        let c = h.diagnostics().await.unwrap().presence;
        assert!(c.roster_fetches >= 1, "{c:?}");
        assert!(c.verified >= N - 1, "{c:?}");
        assert!(c.gossip_bytes + c.roster_bytes > 0, "{c:?}");
    }

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

/// A hostile node: speaks the protocols, but is driven by hand to send crafted input.
struct Hostile {
    swarm: Swarm<Behaviour>,
    topic: gossipsub::IdentTopic,
}

impl Hostile {
    /// Connects to `target` and waits until it has subscribed to the presence topic.
    async fn join(port: u64, target: (u64, PeerId)) -> Self {
        let mut swarm = node::raw_swarm(&config(port, None));
        let topic = gossipsub::IdentTopic::new(Network::default().announce_topic());
        swarm.behaviour_mut().gossipsub.subscribe(&topic).unwrap();
        swarm
            .dial(memory_addr(target.0).with(libp2p::multiaddr::Protocol::P2p(target.1)))
            .unwrap();
        swarm
            .wait(|e| match e {
                SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(
                    gossipsub::Event::Subscribed { peer_id, .. },
                )) if peer_id == target.1 => Some(()),
                _ => None,
            })
            .await;
        Self { swarm, topic }
    }

    fn peer(&self) -> PeerId {
        *self.swarm.local_peer_id()
    }

    fn publish(&mut self, bytes: Vec<u8>) {
        self.swarm
            .behaviour_mut()
            .gossipsub
            .publish(self.topic.clone(), bytes)
            .unwrap();
    }

    /// Fetches `peer`'s roster the way any node may, returning the signed bytes.
    async fn fetch_roster(&mut self, peer: PeerId) -> Vec<Vec<u8>> {
        self.fetch_roster_with(peer, RosterRequest::default()).await
    }

    /// Sends `peer` this roster request, returning the signed bytes of the answer.
    async fn fetch_roster_with(&mut self, peer: PeerId, request: RosterRequest) -> Vec<Vec<u8>> {
        self.swarm
            .behaviour_mut()
            .roster
            .send_request(&peer, request);
        self.swarm
            .wait(|e| match e {
                SwarmEvent::Behaviour(BehaviourEvent::Roster(
                    request_response::Event::Message {
                        message: request_response::Message::Response { response, .. },
                        ..
                    },
                )) => Some(
                    response
                        .announcements
                        .into_iter()
                        .map(|b| b.into_vec())
                        .collect(),
                ),
                _ => None,
            })
            .await
    }

    /// Sends `peer` this roster request and returns its whole answer.
    async fn ask_roster(&mut self, peer: PeerId, request: RosterRequest) -> RosterResponse {
        self.swarm
            .behaviour_mut()
            .roster
            .send_request(&peer, request);
        self.swarm
            .wait(|e| match e {
                SwarmEvent::Behaviour(BehaviourEvent::Roster(
                    request_response::Event::Message {
                        message: request_response::Message::Response { response, .. },
                        ..
                    },
                )) => Some(response),
                _ => None,
            })
            .await
    }

    /// Sends `peer` this roster request: its answer, or why there was none (the stream
    /// closed unanswered, or nothing came within 10 s).
    async fn try_ask_roster(
        &mut self,
        peer: PeerId,
        request: RosterRequest,
    ) -> Result<RosterResponse, String> {
        let id = self
            .swarm
            .behaviour_mut()
            .roster
            .send_request(&peer, request);
        let answer = self.swarm.wait(|e| match e {
            SwarmEvent::Behaviour(BehaviourEvent::Roster(request_response::Event::Message {
                message:
                    request_response::Message::Response {
                        request_id,
                        response,
                    },
                ..
            })) if request_id == id => Some(Ok(response)),
            SwarmEvent::Behaviour(BehaviourEvent::Roster(
                request_response::Event::OutboundFailure {
                    request_id, error, ..
                },
            )) if request_id == id => Some(Err(format!("not answered: {error}"))),
            _ => None,
        });
        tokio::time::timeout(Duration::from_secs(10), answer)
            .await
            .unwrap_or_else(|_| Err("no answer within 10 s".into()))
    }

    /// Drives the hostile swarm until it hears an announcement of `key` on the topic.
    async fn next_announcement_of(&mut self, key: &interlink_core::IdentityKey) -> Announcement {
        let key = *key;
        tokio::time::timeout(
            Duration::from_secs(30),
            self.swarm.wait(|e| match e {
                SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(gossipsub::Event::Message {
                    message,
                    ..
                })) => match PresenceMessage::decode(&message.data, |_| None) {
                    Ok(PresenceMessage::Announcement(a)) if a.body().identity == key => {
                        Some(a.body().clone())
                    }
                    _ => None,
                },
                _ => None,
            }),
        )
        .await
        .expect("an announcement within 30 s")
    }

    /// Drives the hostile swarm until it hears a beacon signed by `key` on the topic.
    async fn next_beacon_of(&mut self, key: &interlink_core::IdentityKey) -> Beacon {
        let key = *key;
        tokio::time::timeout(
            Duration::from_secs(30),
            self.swarm.wait(|e| match e {
                SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(gossipsub::Event::Message {
                    message,
                    ..
                })) => match PresenceMessage::decode(&message.data, |_| Some(key)) {
                    Ok(PresenceMessage::Beacon(b)) => Some(b.body().clone()),
                    _ => None,
                },
                _ => None,
            }),
        )
        .await
        .expect("a beacon within 30 s")
    }

    /// Drives the hostile swarm until `events` reports a rejection containing `needle`
    /// (returned), or 10 s pass (None).
    async fn until_rejected(
        &mut self,
        events: &mut tokio::sync::broadcast::Receiver<interlink_net::Event>,
        needle: &str,
    ) -> Option<String> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            tokio::select! {
                _ = self.swarm.select_next_some() => {}
                ev = events.recv() => match ev {
                    Ok(interlink_net::Event::Rejected { reason, .. }) if reason.contains(needle) => {
                        return Some(reason);
                    }
                    Ok(_) => {}
                    Err(e) => panic!("event stream: {e}"),
                },
                () = tokio::time::sleep_until(deadline) => return None,
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_presence_is_rejected_not_forwarded_and_capped() {
    let base = interlink_testkit::node::memory_base();
    let a = start(base, None, session_role(1, "honest-a"));
    let a_peer = a.handle().peer_id();
    // B hears about the overlay only through A: whatever A does not forward, B never sees.
    let b = start(base + 1, Some((base, a_peer)), session_role(2, "honest-b"));
    wait_all(&[a.handle(), b.handle()], Duration::from_secs(10), 2).await;
    let mut events = a.handle().events();
    let mallory = Identity::from_seed(&[66; 32]);
    let now = now_ms();

    // Each kind of bad input comes from a fresh hostile peer, so gossipsub's scoring of
    // an earlier offence cannot hide a later one from the application.
    // (what, expected reason, input made for the hostile peer's PeerId)
    type Case<'a> = (&'a str, &'a str, Box<dyn Fn(PeerId) -> Vec<u8> + 'a>);
    let cases: Vec<Case<'_>> = vec![
        (
            "malformed",
            "malformed",
            Box::new(|_| vec![0xa1, 0x61, 0x78, 0x01]),
        ),
        (
            "forged",
            "signature",
            Box::new(|p| {
                let mut bytes =
                    PresenceMessage::Announcement(announcement(&mallory, "m-forged", p, now, 1))
                        .to_bytes();
                let flip = bytes.len() - 80;
                bytes[flip] ^= 1;
                bytes
            }),
        ),
        (
            "oversized",
            "the limit is",
            Box::new(|_| vec![0u8; MAX_PRESENCE_MESSAGE_BYTES + 100]),
        ),
        (
            "future-dated",
            "future",
            Box::new(|p| {
                PresenceMessage::Announcement(announcement(
                    &mallory,
                    "m-future",
                    p,
                    now + 3_600_000,
                    1,
                ))
                .to_bytes()
            }),
        ),
    ];
    for (i, (what, needle, make)) in cases.iter().enumerate() {
        let mut evil = Hostile::join(base + 10 + i as u64, (base, a_peer)).await;
        let bytes = make(evil.peer());
        evil.publish(bytes);
        let reason = evil.until_rejected(&mut events, needle).await;
        assert!(reason.is_some(), "{what} input was not rejected");
    }

    // Replay: a hostile peer fetches A's roster and republishes B's genuine, signed
    // announcement as its own message.
    let mut evil = Hostile::join(base + 20, (base, a_peer)).await;
    let held: Vec<Signed<Announcement>> = evil
        .fetch_roster(a_peer)
        .await
        .into_iter()
        .map(|bytes| Signed::<Announcement>::decode(&bytes).unwrap())
        .collect();
    let b_session = "honest-b";
    let b_ann = held
        .iter()
        .find(|s| s.body().session_id.as_str() == b_session)
        .cloned()
        .expect("A holds B's announcement");

    // Sync by summary (protocol v7): a requester naming everything A holds is sent
    // nothing, one lacking B's announcement exactly that, and a ragged summary nothing
    // (and is reported).
    let mut mine = Roster::default();
    for a in &held {
        mine.apply_announcement(a.clone(), now).unwrap();
    }
    let full = RosterRequest::with_summary(&Summary::of(&mine, now));
    assert!(evil.fetch_roster_with(a_peer, full).await.is_empty());
    let mut without_b = Roster::default();
    for a in held
        .iter()
        .filter(|a| a.body().session_id.as_str() != b_session)
    {
        without_b.apply_announcement(a.clone(), now).unwrap();
    }
    let lacking = RosterRequest::with_summary(&Summary::of(&without_b, now));
    let answer = evil.fetch_roster_with(a_peer, lacking).await;
    assert_eq!(answer, vec![b_ann.to_bytes()]);
    let ragged = RosterRequest {
        have: serde_bytes::ByteBuf::from(vec![0u8; 9]),
        ..RosterRequest::default()
    };
    assert!(evil.fetch_roster_with(a_peer, ragged).await.is_empty());
    assert!(
        evil.until_rejected(&mut events, "whole number")
            .await
            .is_some(),
        "a ragged summary was not reported"
    );
    // A digest request: the same versions are `same`, A's digest is not ours
    // without B.
    let same = evil
        .ask_roster(a_peer, RosterRequest::with_digest(mine.digest()))
        .await;
    assert!(same.same && same.announcements.is_empty());
    let differs = evil
        .ask_roster(a_peer, RosterRequest::with_digest(without_b.digest()))
        .await;
    assert!(!differs.same && differs.announcements.is_empty());
    // Protocol v8: gossipsub carries presence unsigned, so a genuine announcement
    // forwarded by another peer is a copy like any other: recognised without a
    // signature check, roster unchanged.
    let verified = a.handle().diagnostics().await.unwrap().presence.verified;
    evil.publish(PresenceMessage::Announcement(b_ann.clone()).to_bytes());
    // A beacon naming B's announcement but signed by someone else is forged.
    let forged = Signed::sign(
        Beacon::new(
            mallory.public(),
            Tag::of_announcement(b_ann.body()),
            30_000,
            now + 1_000,
            b_ann.body().seq + 1,
        ),
        &mallory,
    )
    .unwrap();
    evil.publish(PresenceMessage::Beacon(forged).to_bytes());
    assert!(
        evil.until_rejected(&mut events, "beacon signature")
            .await
            .is_some(),
        "forged beacon was not rejected"
    );
    assert_eq!(
        a.handle().diagnostics().await.unwrap().presence.verified,
        verified + 1,
        "the forwarded copy was checked again (or the beacon was not)"
    );

    // Cap: one identity announces far more sessions than allowed.
    let mut evil = Hostile::join(base + 21, (base, a_peer)).await;
    let evil_peer = evil.peer();
    for i in 0..(MAX_SESSIONS_PER_IDENTITY + 10) {
        let ann = announcement(&mallory, &format!("m-{i}"), evil_peer, now, 1 + i as u64);
        evil.publish(PresenceMessage::Announcement(ann).to_bytes());
    }
    assert!(
        evil.until_rejected(&mut events, "session").await.is_some(),
        "session cap was not enforced"
    );
    // The rejections cost the flooding peer its gossipsub score: once all ten excess
    // sessions are rejected (each invalid message counts squared) it is far below zero.
    let handle = a.handle();
    let score_of = async || {
        handle
            .diagnostics()
            .await
            .unwrap()
            .connected
            .iter()
            .find(|p| p.peer_id == evil_peer)
            .and_then(|p| p.score)
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut score = score_of().await;
    while !score.is_some_and(|s| s < 0.0) && tokio::time::Instant::now() < deadline {
        let _ =
            tokio::time::timeout(Duration::from_millis(50), evil.swarm.select_next_some()).await;
        score = score_of().await;
    }
    assert!(
        score.is_some_and(|s| s < 0.0),
        "hostile peer score {score:?}"
    );
    drop(evil);

    // A forwarded only accepted announcements, so B's view of Mallory comes to equal
    // A's (waited for, up to a bound; checked below either way).
    let count = |r: Vec<interlink_core::presence::IdentityView>| {
        r.iter()
            .find(|i| i.key == mallory.public())
            .map_or(0, |i| i.sessions.len())
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (in_a, in_b) = loop {
        let (in_a, in_b) = (
            count(a.handle().roster().await.unwrap()),
            count(b.handle().roster().await.unwrap()),
        );
        if in_a == in_b || tokio::time::Instant::now() >= deadline {
            break (in_a, in_b);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Neither A nor B (which only hears through A) holds anything hostile beyond the cap.
    for h in [a.handle(), b.handle()] {
        for ident in h.roster().await.unwrap() {
            assert!(ident.sessions.len() <= MAX_SESSIONS_PER_IDENTITY);
            for s in &ident.sessions {
                assert!(!["m-forged", "m-future"].contains(&s.addr.session.as_str()));
            }
        }
    }
    assert!(
        in_a <= MAX_SESSIONS_PER_IDENTITY && in_b <= in_a,
        "a {in_a} b {in_b}"
    );
    a.shutdown().await;
    b.shutdown().await;
}

/// A presence flood of fresh stranger identities (all published by one hostile node)
/// fills the roster's room for strangers, but never pushes a paired identity off it,
/// however long that peer has been silent (issue: a sleeping friend could no longer be
/// routed to).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_presence_flood_never_evicts_a_paired_identity() {
    let base = interlink_testkit::node::memory_base();
    let friend = Identity::from_seed(&[2; 32]);
    let mut a_config = config(base, None);
    a_config.presence.max_identities = 4;
    a_config.presence.live_window_ms = 500;
    a_config
        .delivery
        .policy
        .add("friend", friend.public())
        .unwrap();
    // Its swarm key is the session's transport key, as in production.
    let a = node::spawn(a_config, session_role(1, "honest-a"));
    let a_peer = a.handle().peer_id();
    let b = start(base + 1, Some((base, a_peer)), session_role(2, "friend-b"));
    wait_all(&[a.handle(), b.handle()], Duration::from_secs(10), 2).await;
    // The friend's node vanishes without a goodbye: away on A's roster, and the stalest.
    b.abort();
    tokio::time::sleep(Duration::from_millis(800)).await;

    let mut evil = Hostile::join(base + 10, (base, a_peer)).await;
    let evil_peer = evil.peer();
    let now = now_ms();
    for seed in 100..130u8 {
        let stranger = Identity::from_seed(&[seed; 32]);
        let ann = announcement(&stranger, "s", evil_peer, now - 100, 1);
        evil.publish(PresenceMessage::Announcement(ann).to_bytes());
    }
    // Drive the hostile swarm until A has taken in strangers up to its cap.
    let handle = a.handle();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let _ =
            tokio::time::timeout(Duration::from_millis(50), evil.swarm.select_next_some()).await;
        let roster = handle.roster().await.unwrap();
        let strangers = roster
            .iter()
            .filter(|i| {
                i.key != friend.public()
                    && i.sessions
                        .iter()
                        // A stranger's details are sealed for itself alone.
                        .all(|s| s.details.is_none())
            })
            .count();
        if strangers >= 3 || tokio::time::Instant::now() > deadline {
            assert!(
                strangers >= 3,
                "the flood never reached A ({strangers} strangers)"
            );
            break;
        }
    }
    let roster = handle.roster().await.unwrap();
    assert!(
        roster.iter().any(|i| i.key == friend.public()),
        "the paired identity was evicted by strangers"
    );
    let untrusted = roster
        .iter()
        .filter(|i| i.key != friend.public() && i.key != Identity::from_seed(&[1; 32]).public())
        .count();
    assert!(
        untrusted <= 4,
        "{untrusted} untrusted identities over the cap of 4"
    );
    a.shutdown().await;
}

/// One peer cannot hold more than a few connections to a node: the rest are denied
/// before any protocol runs (connection caps, `behaviour::connection_caps`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_peer_cannot_open_unbounded_connections() {
    use interlink_net::behaviour::connection_caps::PER_PEER;
    use libp2p::swarm::dial_opts::{DialOpts, PeerCondition};

    let base = interlink_testkit::node::memory_base();
    let a = start(base, None, session_role(1, "capped"));
    let a_peer = a.handle().peer_id();
    let mut evil = node::raw_swarm(&config(base + 1, None));
    let attempts = PER_PEER + 6;
    for _ in 0..attempts {
        evil.dial(
            DialOpts::peer_id(a_peer)
                .addresses(vec![memory_addr(base)])
                .condition(PeerCondition::Always)
                .build(),
        )
        .unwrap();
    }
    let (mut up, mut refused) = (0u32, 0u32);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while up + refused < attempts && tokio::time::Instant::now() < deadline {
        let Ok(ev) =
            tokio::time::timeout(Duration::from_millis(200), evil.select_next_some()).await
        else {
            continue;
        };
        match ev {
            SwarmEvent::ConnectionEstablished { .. } => up += 1,
            SwarmEvent::ConnectionClosed { .. } => {
                // Denied by the remote after the handshake: counts as refused.
                up -= 1;
                refused += 1;
            }
            SwarmEvent::OutgoingConnectionError { .. } => refused += 1,
            _ => {}
        }
    }
    let connected = a
        .handle()
        .diagnostics()
        .await
        .unwrap()
        .connected
        .iter()
        .filter(|p| p.peer_id == *evil.local_peer_id())
        .count();
    assert!(connected <= 1, "diagnostics list a peer once ({connected})");
    assert!(
        up <= PER_PEER,
        "{up} connections from one peer, cap {PER_PEER}"
    );
    assert!(
        refused > 0,
        "no connection was refused ({up} up of {attempts})"
    );
    a.shutdown().await;
}

/// Roster requests have a budget per peer like the other protocols: a peer that sends
/// hundreds at once gets the burst answered and the rest closed unanswered at once
/// (before: every one was answered, and a paired peer's deliveries slowed tenfold),
/// and another peer is still answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roster_request_flood_is_answered_only_within_its_budget() {
    const FLOOD: usize = 400;
    let base = interlink_testkit::node::memory_base();
    let a = start(base, None, session_role(1, "budgeted"));
    let a_peer = a.handle().peer_id();
    let mut evil = Hostile::join(base + 1, (base, a_peer)).await;
    for _ in 0..FLOOD {
        evil.swarm
            .behaviour_mut()
            .roster
            .send_request(&a_peer, RosterRequest::default());
    }
    let (mut answered, mut failed) = (0usize, 0usize);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while answered + failed < FLOOD && tokio::time::Instant::now() < deadline {
        let Ok(ev) =
            tokio::time::timeout(Duration::from_millis(200), evil.swarm.select_next_some()).await
        else {
            continue;
        };
        match ev {
            SwarmEvent::Behaviour(BehaviourEvent::Roster(request_response::Event::Message {
                message: request_response::Message::Response { .. },
                ..
            })) => answered += 1,
            SwarmEvent::Behaviour(BehaviourEvent::Roster(
                request_response::Event::OutboundFailure { .. },
            )) => failed += 1,
            _ => {}
        }
    }
    assert_eq!(answered + failed, FLOOD, "every request ended within 20 s");
    // The burst (64) and what refilled while the flood ran (32 a second).
    assert!(
        (64..=160).contains(&answered),
        "{answered} of {FLOOD} answered"
    );
    // Some fail before the node sees them (libp2p's cap on a connection's streams);
    // the node refused the rest of what reached it.
    let cost = a.handle().diagnostics().await.unwrap().presence;
    assert!(
        cost.roster_over_budget > 0 && cost.roster_over_budget <= failed as u64,
        "{cost:?}, {failed} failed"
    );

    // Another peer is answered as before.
    let mut other = Hostile::join(base + 2, (base, a_peer)).await;
    assert!(!other.fetch_roster(a_peer).await.is_empty());
    a.shutdown().await;
}

/// A full roster request of `tags` distinct tags, every one marked away.
fn all_away(tags: usize) -> RosterRequest {
    let have: Vec<u8> = (0..tags as u64).flat_map(u64::to_be_bytes).collect();
    RosterRequest {
        have: serde_bytes::ByteBuf::from(have),
        away: serde_bytes::ByteBuf::from(vec![0xff; tags.div_ceil(8)]),
        ..RosterRequest::default()
    }
}

/// PROTOCOL §8.2 at its boundary, each from a fresh peer: the largest request it
/// allows (16,384 tags, all marked away) is answered (before: it cost more than the
/// whole roster budget and the stream was closed unanswered, for ever), and one tag
/// more is answered with the empty response (before: not answered either).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_roster_request_is_answered_and_one_tag_more_gets_the_empty_response() {
    use interlink_core::presence::sync::MAX_SUMMARY_TAGS;
    let base = interlink_testkit::node::memory_base();
    let a = start(base, None, session_role(1, "boundary"));
    let a_peer = a.handle().peer_id();

    let mut fresh = Hostile::join(base + 1, (base, a_peer)).await;
    let answer = fresh
        .try_ask_roster(a_peer, all_away(MAX_SUMMARY_TAGS))
        .await
        .expect("the largest allowed request is answered");
    // None of the made-up tags is A's: A sends its own announcement.
    assert_eq!(answer.announcements.len(), 1, "{answer:?}");
    let own = Signed::<Announcement>::decode(&answer.announcements[0]).unwrap();
    assert_eq!(own.body().session_id.as_str(), "boundary");
    assert!(!answer.same);

    let mut other = Hostile::join(base + 2, (base, a_peer)).await;
    let answer = other
        .try_ask_roster(a_peer, all_away(MAX_SUMMARY_TAGS + 1))
        .await
        .expect("an oversized summary is answered");
    assert_eq!(answer, RosterResponse::empty());
    // Neither was refused for its budget.
    let cost = a.handle().diagnostics().await.unwrap().presence;
    assert_eq!(cost.roster_over_budget, 0, "{cost:?}");
    a.shutdown().await;
}

/// On a roster past 600 sessions a session announces less often, and says so in its
/// announcement (`heartbeat_ms`, protocol v7), so receivers keep it live as long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_roster_stretches_the_heartbeat_and_the_beacon_says_so() {
    use interlink_core::presence::heartbeat_interval_ms;
    let base = interlink_testkit::node::memory_base();
    let mut cfg = config(base, None);
    cfg.heartbeat = Duration::from_millis(300);
    let a = node::spawn(cfg, session_role(1, "big-roster"));
    let a_handle = a.handle();
    let a_key = Identity::from_seed(&[1; 32]).public();
    let mut evil = Hostile::join(base + 1, (base, a_handle.peer_id())).await;

    // Its heartbeat first: the configured 300 ms.
    let first = evil.next_announcement_of(&a_key).await;
    assert_eq!(first.heartbeat_ms, 300);

    // 19 identities × 32 sessions: 608 more sessions on A's roster.
    let now = now_ms();
    let peer = evil.peer();
    for i in 0..19u8 {
        let id = Identity::from_seed(&[100 + i; 32]);
        for s in 0..MAX_SESSIONS_PER_IDENTITY {
            let ann = announcement(&id, &format!("crowd-{i}-{s}"), peer, now, 1);
            evil.publish(PresenceMessage::Announcement(ann).to_bytes());
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let len = loop {
        let len = session_count(&a_handle).await;
        if len > 600 {
            break len;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "roster stuck at {len}"
        );
        // Keep the hostile swarm polled so its publications go out.
        let _ =
            tokio::time::timeout(Duration::from_millis(50), evil.swarm.select_next_some()).await;
    };

    // Its next beacon (the announcement is unchanged) promises the stretched interval.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let beacon = evil.next_beacon_of(&a_key).await;
        if beacon.heartbeat_ms > 300 {
            assert!(beacon.heartbeat_ms >= heartbeat_interval_ms(len.min(609) - 1));
            assert!(beacon.heartbeat_ms > interlink_core::limits::HEARTBEAT_MS);
            assert_eq!(beacon.tag(), Tag::of_announcement(&first));
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "heartbeat never stretched"
        );
    }
    a.shutdown().await;
}

/// Protocol v8: between changes a session re-announces by beacons, which keep it live
/// on its peers' rosters without a new announcement version; and a roster fetch that
/// marks a session away brings its newest beacon, so a node back from a partition sees
/// it live at once instead of after its next beacon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beacons_keep_a_session_live_and_a_fetch_brings_them_to_a_node_that_missed_them() {
    use interlink_core::presence::{Presence, sync::Summary};
    let base = interlink_testkit::node::memory_base();
    // A short live window, so a few seconds cover several windows: A beacons every
    // 300 ms, and B judges a session silent for 1 s away.
    let mut cfg = config(base, None);
    cfg.heartbeat = Duration::from_millis(300);
    let a = node::spawn(cfg, session_role(1, "beaconing"));
    let a_key = Identity::from_seed(&[1; 32]).public();
    let mut cfg = config(base + 1, Some((base, a.handle().peer_id())));
    cfg.presence.live_window_ms = 1_000;
    let b = node::spawn(cfg, session_role(2, "watching"));
    let b_handle = b.handle();
    let view_of_a = async || {
        b_handle
            .roster()
            .await
            .unwrap()
            .into_iter()
            .find(|i| i.key == a_key)
            .and_then(|i| i.sessions.into_iter().next())
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let first = loop {
        if let Some(v) = view_of_a().await {
            break v;
        }
        assert!(tokio::time::Instant::now() < deadline, "B never saw A");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Three live windows later A is still live on B, by the same announcement.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = view_of_a().await.expect("A still on B's roster");
    assert_eq!(later.presence, Presence::Live, "{later:?}");
    assert_eq!(
        later.announcement.seq, first.announcement.seq,
        "re-announced"
    );
    assert!(later.age_ms < 1_000, "{later:?}");

    // A node that holds A's announcement but judges A away (as after a partition)
    // asks with A's tag marked: the answer carries A's newest beacon, valid under A.
    let mut evil = Hostile::join(base + 2, (base + 1, b_handle.peer_id())).await;
    let held = evil.fetch_roster(b_handle.peer_id()).await;
    let a_ann = held
        .iter()
        .map(|bytes| Signed::<Announcement>::decode(bytes).unwrap())
        .find(|a| a.body().identity == a_key)
        .expect("B holds A's announcement");
    let mut stale = Roster::new(interlink_core::presence::Config {
        live_window_ms: 1_000,
        ..Default::default()
    });
    stale.apply_announcement(a_ann.clone(), now_ms()).unwrap();
    let request = RosterRequest::with_summary(&Summary::of(&stale, now_ms() + 5_000));
    assert!(!request.away.is_empty(), "A is not marked away");
    let answer = evil.ask_roster(b_handle.peer_id(), request).await;
    // (B's own announcement comes too: the stale roster lacks it.)
    assert!(
        answer
            .announcements
            .iter()
            .all(|b| Signed::<Announcement>::decode(b).unwrap().body().identity != a_key),
        "sent what the summary names"
    );
    let beacon = answer
        .beacons
        .iter()
        .map(|bytes| {
            interlink_core::wire::Unverified::<Beacon>::decode(bytes)
                .unwrap()
                .signed_by(a_key)
                .verify()
                .unwrap()
        })
        .next()
        .expect("no beacon for the session marked away");
    assert_eq!(beacon.body().tag(), Tag::of_announcement(a_ann.body()));
    assert!(beacon.body().ts > a_ann.body().ts);
    a.shutdown().await;
    b.shutdown().await;
}
