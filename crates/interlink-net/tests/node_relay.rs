//! Relays in process: a relay node with a durable store (here an in-memory one that
//! merges like the real one), sessions that use it for mailbox copies and fetches, and
//! hostile `hold` requests.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use interlink_core::{
    Identity, SessionId,
    mailbox::{self, Mailbox},
};
use interlink_net::{
    Config, DurableMailboxes, HeldCopy, Node, OutgoingMessage, Refusal, RelaySpec, Role,
    SendOutcome,
};
use interlink_testkit::node::{
    Peer, memory, raw_swarm, raw_swarm_negotiating_first, start, start_with, swarm, wait_roster,
};
use libp2p::{Multiaddr, PeerId, multiaddr::Protocol};

/// A durable store kept in memory: verifies and merges exactly as a relay must.
#[derive(Debug, Default)]
struct MemoryDurable {
    records: Mutex<HashMap<[u8; 32], Vec<u8>>>,
    holds: Mutex<usize>,
}

impl DurableMailboxes for MemoryDurable {
    fn hold(&self, key: &[u8; 32], record: &[u8], now_ms: u64) -> Result<HeldCopy, Refusal> {
        let cfg = mailbox::Config::default();
        let refuse = |label, reason: String| Refusal { label, reason };
        let (mut mb, rejected) = Mailbox::decode(record, now_ms, &cfg)
            .map_err(|e| refuse("malformed", e.to_string()))?;
        if let Some(first) = rejected.first() {
            return Err(refuse("invalid_entry", first.to_string()));
        }
        if mb.record_key() != *key {
            return Err(refuse(
                "wrong_mailbox",
                "record key does not match the mailbox".into(),
            ));
        }
        let handed = mb.clone();
        let mut records = self.records.lock().unwrap();
        if let Some(held) = records.get(key) {
            let (held, _) = Mailbox::decode(held, now_ms, &cfg).unwrap();
            mb.merge(&held, now_ms, &cfg).unwrap();
        }
        let merged = mb.encode();
        let before = records.get(key).map_or(0, Vec::len);
        let grew_by = merged.len().saturating_sub(before) as u64;
        records.insert(*key, merged.clone());
        *self.holds.lock().unwrap() += 1;
        Ok(HeldCopy {
            record: merged,
            kept: mb.kept_of(&handed),
            grew_by,
        })
    }

    fn get(&self, key: &[u8; 32]) -> Option<Vec<u8>> {
        self.records.lock().unwrap().get(key).cloned()
    }

    fn keys(&self) -> Vec<[u8; 32]> {
        self.records.lock().unwrap().keys().copied().collect()
    }
}

fn relay_node(port: u64, store: Arc<dyn DurableMailboxes>) -> (Node, Multiaddr) {
    let key = libp2p::identity::Keypair::generate_ed25519();
    let addr = memory(port).with(Protocol::P2p(key.public().to_peer_id()));
    let config = Config {
        max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
        listen: vec![memory(port)],
        mdns: false,
        relay_server: true,
        ..Config::default()
    };
    let node = Node::spawn(
        swarm(key, &config),
        config,
        Role::Relay(RelaySpec { store }),
    )
    .unwrap();
    (node, addr)
}

fn session(
    dir: tempfile::TempDir,
    port: u64,
    seed: u8,
    name: &str,
    peer: &Identity,
    relay: &Multiaddr,
) -> Peer {
    start_with(
        dir,
        port,
        seed,
        name,
        &[("peer", peer)],
        None,
        std::slice::from_ref(relay),
    )
}

/// A message queued while the recipient is down is confirmed by the relay's durable
/// hold; the sender leaves; the recipient, knowing only the relay, gets it from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_holds_mail_durably_and_hands_it_to_the_returning_recipient() {
    let base = interlink_testkit::node::memory_base();
    let store = Arc::new(MemoryDurable::default());
    let (relay, relay_addr) = relay_node(base, store.clone());
    let (alice_id, bob_id) = (Identity::from_seed(&[1; 32]), Identity::from_seed(&[2; 32]));
    let alice = session(
        tempfile::tempdir().unwrap(),
        base + 1,
        1,
        "alice-1",
        &bob_id,
        &relay_addr,
    );
    let bob = session(
        tempfile::tempdir().unwrap(),
        base + 2,
        2,
        "bob-1",
        &alice_id,
        &relay_addr,
    );
    // The relay never announces itself, yet both sessions see each other through it.
    wait_roster(&[alice.node.handle()], 2).await;
    wait_roster(&[relay.handle()], 2).await;
    // Both took a circuit reservation on the relay and listen through it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let served = relay
            .handle()
            .diagnostics()
            .await
            .unwrap()
            .served_reservations;
        let circuit = alice
            .node
            .handle()
            .diagnostics()
            .await
            .unwrap()
            .relay_reservations;
        if served == 2 && !circuit.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "reservations: relay serves {served}, alice listens on {circuit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let Peer {
        node,
        dir: bob_dir,
        addr: bob_addr,
    } = bob;
    node.abort();
    let outcome = alice
        .node
        .handle()
        .send(OutgoingMessage::text(bob_addr.clone(), "kept by the relay"))
        .await
        .unwrap();
    assert!(matches!(outcome, SendOutcome::Queued { .. }), "{outcome:?}");
    let settled = alice
        .node
        .handle()
        .settle(Duration::from_secs(10))
        .await
        .unwrap();
    assert!(settled.stored_remotely >= 1, "{settled:?}");
    let key = mailbox::record_key(&bob_addr.key, &bob_addr.session);
    assert!(store.get(&key).is_some(), "the relay committed the mailbox");
    alice.node.shutdown().await;

    let bob = session(bob_dir, base + 3, 2, "bob-1", &alice_id, &relay_addr);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while bob.inbox_texts() != ["kept by the relay"] {
        assert!(
            tokio::time::Instant::now() < deadline,
            "inbox: {:?}",
            bob.inbox_texts()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Bob's ack reaches the relay's store: nothing pending there any more.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (held, _) = Mailbox::decode(
            &store.get(&key).unwrap(),
            interlink_net::Clock::system().now_ms(),
            &Default::default(),
        )
        .unwrap();
        if held.is_empty() && !held.acked().is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the relay never got the ack"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bob.node.shutdown().await;
    relay.shutdown().await;
}

/// Hostile `hold`s (garbage, a copy under another mailbox's key) are refused with the
/// reason, counted, and leave the store untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_refuses_hostile_holds() {
    use futures::StreamExt as _;
    use interlink_core::wire::{MailboxOp, MailboxOutcome, MailboxRequest, VERSION};
    use interlink_net::behaviour::BehaviourEvent;
    use libp2p::{request_response, swarm::SwarmEvent};

    let base = interlink_testkit::node::memory_base();
    let store = Arc::new(MemoryDurable::default());
    let (relay, relay_addr) = relay_node(base, store.clone());
    let relay_peer: PeerId = relay.handle().peer_id();
    let config = Config {
        max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
        listen: vec![memory(base + 1)],
        mdns: false,
        ..Config::default()
    };
    let mut evil = raw_swarm(&config);
    evil.add_peer_address(relay_peer, relay_addr.clone());

    let owner = Identity::from_seed(&[7; 32]);
    let other = mailbox::record_key(&owner.public(), &SessionId::new("other").unwrap());
    let empty = Mailbox::new(owner.public(), SessionId::new("victim").unwrap()).encode();
    let cases: Vec<(Vec<u8>, Vec<u8>, &str)> = vec![
        (other.to_vec(), b"not cbor at all".to_vec(), "malformed"),
        (other.to_vec(), empty, "does not match"),
    ];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    for (key, record, label) in cases {
        let id = evil.behaviour_mut().mailbox.send_request(
            &relay_peer,
            MailboxRequest {
                v: VERSION,
                op: MailboxOp::Hold {
                    key: key.into(),
                    record: record.into(),
                },
            },
        );
        let outcome = loop {
            let ev = tokio::time::timeout_at(deadline, evil.select_next_some())
                .await
                .expect("no answer from the relay");
            match ev {
                SwarmEvent::Behaviour(BehaviourEvent::Mailbox(
                    request_response::Event::Message {
                        message:
                            request_response::Message::Response {
                                request_id,
                                response,
                            },
                        ..
                    },
                )) if request_id == id => break response.outcome,
                SwarmEvent::Behaviour(BehaviourEvent::Mailbox(
                    request_response::Event::OutboundFailure { error, .. },
                )) => panic!("{error}"),
                _ => {}
            }
        };
        match outcome {
            MailboxOutcome::Refused { reason } => {
                assert!(reason.detail.contains(label), "{label}: {reason}")
            }
            other => panic!("{label}: expected a refusal, got {other:?}"),
        }
    }
    assert!(store.keys().is_empty());
    assert_eq!(
        relay
            .handle()
            .diagnostics()
            .await
            .unwrap()
            .mailbox_puts_refused,
        2
    );
    relay.shutdown().await;
}

/// A durable store whose holds wait until the test lets them through.
#[derive(Debug)]
struct GatedDurable {
    inner: MemoryDurable,
    entered: std::sync::atomic::AtomicBool,
    release: Mutex<std::sync::mpsc::Receiver<()>>,
}

impl DurableMailboxes for GatedDurable {
    fn hold(&self, key: &[u8; 32], record: &[u8], now_ms: u64) -> Result<HeldCopy, Refusal> {
        self.entered
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = self.release.lock().unwrap().recv();
        self.inner.hold(key, record, now_ms)
    }

    fn get(&self, key: &[u8; 32]) -> Option<Vec<u8>> {
        self.inner.get(key)
    }

    fn keys(&self) -> Vec<[u8; 32]> {
        self.inner.keys()
    }
}

/// A relay's commit waits for the disk; it must not stall the relay node. While a hold
/// is stuck in the store, the node still answers; the hold is answered `held` once the
/// store lets it through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_relay_store_does_not_stall_the_relay_node() {
    use futures::StreamExt as _;
    use interlink_core::wire::{MailboxOp, MailboxOutcome, MailboxRequest, VERSION};
    use interlink_net::behaviour::BehaviourEvent;
    use libp2p::{request_response, swarm::SwarmEvent};

    let base = interlink_testkit::node::memory_base();
    let (release, gate) = std::sync::mpsc::sync_channel(1);
    let store = Arc::new(GatedDurable {
        inner: MemoryDurable::default(),
        entered: false.into(),
        release: Mutex::new(gate),
    });
    let (relay, relay_addr) = relay_node(base, store.clone());
    let relay_peer = relay.handle().peer_id();
    let client_config = Config {
        max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
        listen: vec![memory(base + 1)],
        mdns: false,
        ..Config::default()
    };
    let mut client = raw_swarm(&client_config);
    client.add_peer_address(relay_peer, relay_addr);
    let owner = Identity::from_seed(&[9; 32]);
    let session = SessionId::new("held").unwrap();
    let record_key = mailbox::record_key(&owner.public(), &session);
    let id = client.behaviour_mut().mailbox.send_request(
        &relay_peer,
        MailboxRequest {
            v: VERSION,
            op: MailboxOp::Hold {
                key: record_key.to_vec().into(),
                record: Mailbox::new(owner.public(), session).encode().into(),
            },
        },
    );
    let answer = tokio::spawn(async move {
        loop {
            if let SwarmEvent::Behaviour(BehaviourEvent::Mailbox(
                request_response::Event::Message {
                    message:
                        request_response::Message::Response {
                            request_id,
                            response,
                        },
                    ..
                },
            )) = client.select_next_some().await
                && request_id == id
            {
                return response.outcome;
            }
        }
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !store.entered.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the hold never reached the store"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The store is stuck in the hold: the node answers anyway.
    let diagnostics = tokio::time::timeout(Duration::from_secs(10), relay.handle().diagnostics())
        .await
        .expect("the relay node stalled behind its store")
        .unwrap();
    assert_eq!(diagnostics.mailboxes_held, 0, "not held before the commit");
    assert!(!answer.is_finished(), "answered before the store committed");
    release.send(()).unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(10), answer)
        .await
        .expect("no answer after the commit")
        .unwrap();
    assert!(
        matches!(outcome, MailboxOutcome::Held { .. }),
        "{outcome:?}"
    );
    assert_eq!(store.keys(), vec![record_key]);
    relay.shutdown().await;
}

/// A peer that sends mailbox copies faster than its budget allows is refused
/// `over_budget` before the node decodes (or verifies) anything more of its input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_beyond_its_hold_budget_is_refused_before_decoding() {
    use interlink_core::wire::{MailboxOutcome, RefusalCode};

    let base = interlink_testkit::node::memory_base();
    // A session node (a relay's budgets are larger by design).
    let node = start(base, 5, "budgeted", &[], None);
    let node_peer = node.handle().peer_id();
    let node_addr = memory(base).with(Protocol::P2p(node_peer));
    let client_config = Config {
        max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
        listen: vec![memory(base + 1)],
        mdns: false,
        ..Config::default()
    };
    let mut client = raw_swarm(&client_config);
    client.add_peer_address(node_peer, node_addr);
    // 1 MiB of garbage per hold: each is refused, but each is charged first.
    let junk = vec![0xffu8; 1 << 20];
    let mut codes = Vec::new();
    for _ in 0..160 {
        let outcome = hold(&mut client, node_peer, vec![1u8; 32], junk.clone()).await;
        match outcome {
            MailboxOutcome::Refused { reason } => codes.push(reason.code),
            other => panic!("junk was held: {other:?}"),
        }
        if codes.last() == Some(&RefusalCode::OverBudget) {
            break;
        }
    }
    assert_eq!(codes.first(), Some(&RefusalCode::Malformed), "{codes:?}");
    assert_eq!(
        codes.last(),
        Some(&RefusalCode::OverBudget),
        "never over budget after {} MiB: {codes:?}",
        codes.len()
    );
    node.node.shutdown().await;
}

/// A mailbox for `owner`'s session `s` holding one envelope from `from` with a sealed
/// body of `body_bytes` (never opened by a holder).
fn mailbox_with_one(owner: &Identity, from: &Identity, body_bytes: usize) -> ([u8; 32], Vec<u8>) {
    use interlink_core::{
        MsgId,
        seal::Sealed,
        wire::{Envelope, EnvelopeKind, Signed, VERSION},
    };
    use serde_bytes::{ByteArray, ByteBuf};
    let session = SessionId::new("s").unwrap();
    let now = interlink_net::Clock::system().now_ms();
    let env = Envelope {
        v: VERSION,
        sender: from.public(),
        sender_session: SessionId::new("f").unwrap(),
        recipient: owner.public(),
        recipient_session: session.clone(),
        msg_id: MsgId::from_bytes([7; 16]),
        ts: now,
        kind: EnvelopeKind::Message,
        in_reply_to: None,
        also_about: Vec::new(),
        name: None,
        sealed: Some(Sealed {
            enc: ByteArray::new([7; 32]),
            ct: ByteBuf::from(vec![0; body_bytes]),
        }),
        pass: Some(interlink_core::wire::MailboxPass::issue(
            owner,
            &from.public(),
        )),
        reply_pass: None,
    };
    let mut mb = Mailbox::new(owner.public(), session.clone());
    mb.insert(
        Signed::sign(env, from).unwrap(),
        now,
        &mailbox::Config::default(),
    )
    .unwrap();
    (mailbox::record_key(&owner.public(), &session), mb.encode())
}

/// A session holds others' mailbox copies only up to its byte budget
/// (`Config::max_held_bytes`): a flood of fresh strangers' mailboxes cannot grow its
/// memory without end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_holds_others_mail_only_up_to_its_byte_budget() {
    use interlink_core::wire::{MailboxOutcome, RefusalCode};

    let base = interlink_testkit::node::memory_base();
    let identity = Arc::new(Identity::from_seed(&[11; 32]));
    let session = SessionId::new("holder").unwrap();
    let config = Config {
        max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
        listen: vec![memory(base)],
        mdns: false,
        max_held_bytes: 100 * 1024,
        ..Config::default()
    };
    let key = identity.transport_keypair(&session).unwrap();
    let node_peer = key.public().to_peer_id();
    let swarm = interlink_net::build_swarm(key, &config).unwrap();
    let spec = interlink_net::SessionSpec {
        identity,
        session,
        cwd: "/w".into(),
        git_label: None,
        project: None,
        summary: String::new(),
        host: interlink_core::wire::HostKind::Other,
        delivery: interlink_core::wire::DeliveryMode::Poll,
        visibility: interlink_net::Visibility::Announced,
    };
    let node = Node::spawn(swarm, config, Role::Session(Box::new(spec))).unwrap();
    let client_config = Config {
        max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
        listen: vec![memory(base + 1)],
        mdns: false,
        ..Config::default()
    };
    let mut client = raw_swarm(&client_config);
    client.add_peer_address(node_peer, memory(base));
    let stranger = Identity::from_seed(&[12; 32]);
    let mut outcomes = Vec::new();
    for seed in [20u8, 21] {
        let owner = Identity::from_seed(&[seed; 32]);
        let (key, record) = mailbox_with_one(&owner, &stranger, 60 * 1024);
        let outcome = hold(&mut client, node_peer, key.to_vec(), record).await;
        outcomes.push(outcome);
    }
    assert!(
        matches!(outcomes[0], MailboxOutcome::Held { .. }),
        "{outcomes:?}"
    );
    match &outcomes[1] {
        MailboxOutcome::Refused { reason } => {
            assert_eq!(reason.code, RefusalCode::OverBudget, "{reason}")
        }
        other => panic!("held beyond the budget: {other:?}"),
    }
    assert_eq!(node.handle().diagnostics().await.unwrap().mailboxes_held, 1);
    node.shutdown().await;
}

/// Sends one `hold` of `record` under `key` from `client` to `to` and drives `client`
/// until its answer (panics after 30 s).
async fn hold(
    client: &mut libp2p::Swarm<interlink_net::behaviour::Behaviour>,
    to: PeerId,
    key: Vec<u8>,
    record: Vec<u8>,
) -> interlink_core::wire::MailboxOutcome {
    use futures::StreamExt as _;
    use interlink_core::wire::{MailboxOp, MailboxRequest, VERSION};
    use interlink_net::behaviour::BehaviourEvent;
    use libp2p::{request_response, swarm::SwarmEvent};
    let id = client.behaviour_mut().mailbox.send_request(
        &to,
        MailboxRequest {
            v: VERSION,
            op: MailboxOp::Hold {
                key: key.into(),
                record: record.into(),
            },
        },
    );
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(30), client.select_next_some())
            .await
            .expect("no answer to the hold");
        if let SwarmEvent::Behaviour(BehaviourEvent::Mailbox(request_response::Event::Message {
            message:
                request_response::Message::Response {
                    request_id,
                    response,
                },
            ..
        })) = ev
            && request_id == id
        {
            return response.outcome;
        }
    }
}

/// An open relay (no `--serve`) budgets what each source network adds to its store:
/// fresh identities minted on one machine fill that network's share and are refused
/// `over_budget`, whatever key they use, while mail handed over from another network
/// is still held. Real TCP on loopback: the attacker reaches the relay over IPv4
/// (from 127.0.0.1), the honest sender over IPv6 (from ::1, another network).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_relay_filled_from_one_network_still_takes_mail_from_another() {
    use interlink_core::wire::{MailboxOutcome, RefusalCode};
    use interlink_testkit::ids::sys_rng;

    if std::net::TcpListener::bind("[::1]:0").is_err() {
        let why = "no IPv6 loopback (::1) to send from a second network";
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("SKIPPED: {why}");
        return;
    }
    // The relay, on TCP, with a 1 MiB share per network so the test fills it quickly.
    let store = Arc::new(MemoryDurable::default());
    let key = libp2p::identity::Keypair::generate_ed25519();
    let relay_peer = key.public().to_peer_id();
    let config = Config {
        max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
        listen: vec![
            "/ip4/127.0.0.1/tcp/0".parse().unwrap(),
            "/ip6/::1/tcp/0".parse().unwrap(),
        ],
        mdns: false,
        relay_server: true,
        network_growth_burst: 1 << 20,
        ..Config::default()
    };
    let relay = Node::spawn(
        swarm(key, &config),
        config,
        Role::Relay(RelaySpec {
            store: store.clone(),
        }),
    )
    .unwrap();
    let listening = |ip: &'static str| {
        let handle = relay.handle();
        async move {
            loop {
                let addrs = handle.diagnostics().await.unwrap().listen_addrs;
                if let Some(a) = addrs.into_iter().find(|a| a.to_string().starts_with(ip)) {
                    return a;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let (v4, v6) = (listening("/ip4/").await, listening("/ip6/").await);
    let client_to = |addr: Multiaddr| {
        let config = Config {
            max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
            listen: vec![],
            mdns: false,
            ..Config::default()
        };
        let mut client = raw_swarm(&config);
        client.add_peer_address(relay_peer, addr);
        client
    };

    // Fresh identities, each holding 60 KB mailboxes of its own, until refused.
    let mut attacker = client_to(v4);
    let mut held = 0usize;
    let refusal = 'fill: loop {
        let owner = Identity::generate(&mut sys_rng());
        for _ in 0..4 {
            let sender = Identity::generate(&mut sys_rng());
            let (k, record) = mailbox_with_one(&owner, &sender, 60_000);
            match hold(&mut attacker, relay_peer, k.to_vec(), record).await {
                MailboxOutcome::Held { .. } => held += 1,
                MailboxOutcome::Refused { reason } => break 'fill reason,
                other => panic!("unexpected answer {other:?}"),
            }
            assert!(held < 64, "one network filled the relay past its share");
        }
    };
    assert_eq!(refusal.code, RefusalCode::OverBudget, "{refusal}");
    assert!(
        refusal.detail.contains("127.0.0.1"),
        "the refusal names the network: {refusal}"
    );
    // About 1 MiB of 60 KB copies went in before the share ran out.
    assert!((14..=20).contains(&held), "held {held} copies");

    // Another fresh identity from the same machine gains nothing.
    let fresh = Identity::generate(&mut sys_rng());
    let (k, record) = mailbox_with_one(&fresh, &fresh, 1_000);
    assert!(matches!(
        hold(&mut attacker, relay_peer, k.to_vec(), record).await,
        MailboxOutcome::Refused { reason } if reason.code == RefusalCode::OverBudget
    ));

    // A paired sender on another network still gets its mail held.
    let mut honest = client_to(v6);
    let (alice, bob) = (
        Identity::generate(&mut sys_rng()),
        Identity::generate(&mut sys_rng()),
    );
    let (k, record) = mailbox_with_one(&bob, &alice, 2_000);
    let outcome = hold(&mut honest, relay_peer, k.to_vec(), record).await;
    assert!(
        matches!(&outcome, MailboxOutcome::Held { kept } if kept.len() == 1),
        "{outcome:?}"
    );
    let d = relay.handle().diagnostics().await.unwrap();
    assert_eq!(d.holds_refused_network, 2);
    relay.shutdown().await;
}

/// A peer keeping more mailbox requests in flight on one connection than it may
/// (`MAILBOX_UNREAD_PER_CONNECTION`; an honest node keeps 2) has that connection
/// closed, instead of each extra stream being reset for it to retry at once. A peer
/// within the bound is served as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_opening_too_many_mailbox_streams_at_once_is_disconnected() {
    use futures::StreamExt as _;
    use interlink_core::wire::{MailboxOp, MailboxRequest, VERSION};
    use interlink_net::behaviour::MAILBOX_UNREAD_PER_CONNECTION;
    use libp2p::swarm::SwarmEvent;

    let base = interlink_testkit::node::memory_base();
    let node = start(base, 6, "victim", &[], None);
    let node_peer = node.handle().peer_id();
    let node_addr = memory(base).with(Protocol::P2p(node_peer));
    let client_at = |port: u64| {
        let config = Config {
            max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
            listen: vec![memory(port)],
            mdns: false,
            // A hostile build: libp2p's own stream cap.
            mailbox_streams_per_connection: 100,
            ..Config::default()
        };
        let mut client = raw_swarm(&config);
        client.add_peer_address(node_peer, node_addr.clone());
        client
    };
    let junk = |i: u8| MailboxRequest {
        v: VERSION,
        op: MailboxOp::Hold {
            key: vec![i; 32].into(),
            record: vec![0xff; 256 * 1024].into(),
        },
    };

    // Within the bound: answered (refused as garbage, but answered), connection kept.
    let mut polite = client_at(base + 1);
    for i in 0..3 {
        let outcome = hold(&mut polite, node_peer, vec![i; 32], vec![0xff; 1024]).await;
        assert!(matches!(
            outcome,
            interlink_core::wire::MailboxOutcome::Refused { .. }
        ));
    }
    assert!(polite.is_connected(&node_peer));

    // Past it: the connection is closed.
    let mut greedy = client_at(base + 2);
    for i in 0..(MAILBOX_UNREAD_PER_CONNECTION as u8 * 4) {
        greedy
            .behaviour_mut()
            .mailbox
            .send_request(&node_peer, junk(i));
    }
    let closed = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let SwarmEvent::ConnectionClosed { peer_id, .. } = greedy.select_next_some().await
                && peer_id == node_peer
            {
                return;
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the greedy peer stayed connected");
    let d = node.handle().diagnostics().await.unwrap();
    assert!(d.mailbox_connections_closed >= 1, "{d:?}");
    // And it is shut out for a while: coming straight back gets it nothing.
    let again = greedy
        .behaviour_mut()
        .mailbox
        .send_request(&node_peer, junk(0));
    let failed = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match greedy.select_next_some().await {
                SwarmEvent::Behaviour(interlink_net::behaviour::BehaviourEvent::Mailbox(
                    libp2p::request_response::Event::OutboundFailure { request_id, .. },
                )) if request_id == again => return true,
                SwarmEvent::Behaviour(interlink_net::behaviour::BehaviourEvent::Mailbox(
                    libp2p::request_response::Event::Message { .. },
                )) => return false,
                _ => {}
            }
        }
    })
    .await;
    assert_eq!(failed, Ok(true), "a blocked peer was answered");
    // The polite peer is still served.
    let outcome = hold(&mut polite, node_peer, vec![9; 32], vec![0xff; 1024]).await;
    assert!(matches!(
        outcome,
        interlink_core::wire::MailboxOutcome::Refused { .. }
    ));
    node.node.shutdown().await;
}

/// A peer opening more live-delivery streams on one connection than
/// `DELIVER_STREAMS_PER_CONNECTION` has the extra ones reset unread, instead of this
/// node reading and holding 100 requests of up to 1 MiB for it; the node keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_opening_too_many_deliver_streams_has_the_extra_ones_reset() {
    use futures::StreamExt as _;
    use interlink_core::wire::{DeliverRequest, VERSION};
    use interlink_net::behaviour::{BehaviourEvent, DELIVER_STREAMS_PER_CONNECTION};
    use libp2p::{request_response, swarm::SwarmEvent};

    let base = interlink_testkit::node::memory_base();
    let node = start(base, 6, "victim", &[], None);
    let node_peer = node.handle().peer_id();
    let node_addr = memory(base).with(Protocol::P2p(node_peer));
    let config = Config {
        max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
        listen: vec![memory(base + 1)],
        mdns: false,
        // A hostile build: libp2p's own stream cap.
        deliver_streams_per_connection: 100,
        ..Config::default()
    };
    // All 40 streams stand open before any request arrives (a node's own swarm sends
    // each request with its stream's proposal, so the victim would take them one by one).
    let mut greedy = raw_swarm_negotiating_first(&config);
    greedy.add_peer_address(node_peer, node_addr);
    let sent = 40;
    for i in 0..sent {
        greedy.behaviour_mut().deliver.send_request(
            &node_peer,
            DeliverRequest {
                v: VERSION,
                envelopes: vec![vec![i; 200 * 1024].into()],
            },
        );
    }
    let (mut answered, mut failed) = (0, 0);
    let done = tokio::time::timeout(Duration::from_secs(60), async {
        while answered + failed < usize::from(sent) {
            match greedy.select_next_some().await {
                SwarmEvent::Behaviour(BehaviourEvent::Deliver(
                    request_response::Event::Message {
                        message: request_response::Message::Response { .. },
                        ..
                    },
                )) => answered += 1,
                SwarmEvent::Behaviour(BehaviourEvent::Deliver(
                    request_response::Event::OutboundFailure { .. },
                )) => failed += 1,
                _ => {}
            }
        }
    })
    .await;
    assert!(
        done.is_ok(),
        "answered {answered}, failed {failed} of {sent}"
    );
    assert!(
        // All 40 open at once: about the cap's worth is read and answered.
        failed >= usize::from(sent) / 2 && answered >= 1,
        "the streams past {DELIVER_STREAMS_PER_CONNECTION} were not reset: answered {answered}, failed {failed}"
    );
    // The node is still up and answering.
    node.handle().diagnostics().await.unwrap();
    node.node.shutdown().await;
}
