//! Live delivery between in-process nodes: receipts, inbox, order, trust, knocks.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::Duration;

use interlink_core::{
    Identity, SessionId,
    wire::{EnvelopeKind, MailboxOp, MailboxOutcome, MailboxRequest, RefusalCode, SessionAddr},
};
use interlink_net::{Config, Event, OutgoingMessage, SendError, SendOutcome};
use interlink_testkit::node::{
    Peer, Trio, delivered, memory, start, start_in, start_tuned, trio, wait_inbox, wait_roster,
};
use libp2p::multiaddr::Protocol;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_messages_are_receipted_stored_in_order_and_gated() {
    let base = interlink_testkit::node::memory_base();
    let (alice_id, bob_id) = (Identity::from_seed(&[1; 32]), Identity::from_seed(&[2; 32]));
    let alice = start(base, 1, "alice-1", &[("bob", &bob_id)], None);
    let boot = Some((base, alice.handle().peer_id()));
    let bob = start(base + 1, 2, "bob-1", &[("alice", &alice_id)], boot);
    let mallory = start(base + 2, 3, "mallory-1", &[("bob", &bob_id)], boot);
    let alice2 = start(base + 3, 1, "alice-2", &[], boot);
    wait_roster(
        &[
            alice.handle(),
            bob.handle(),
            mallory.handle(),
            alice2.handle(),
        ],
        4,
    )
    .await;
    let mut bob_events = bob.handle().events();

    // Both ways, with receipts signed by the recipient.
    let sent = delivered(
        alice
            .handle()
            .send(OutgoingMessage::text(bob.addr.clone(), "hello bob"))
            .await
            .unwrap(),
    );
    assert_eq!(sent.to, bob.addr);
    bob.handle()
        .send(OutgoingMessage::text(alice.addr.clone(), "hello alice"))
        .await
        .unwrap();
    assert_eq!(bob.inbox_texts(), ["hello bob"]);
    assert_eq!(alice.inbox_texts(), ["hello alice"]);
    let delivered = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Ok(Event::Delivered { msg_id, from, .. }) = bob_events.recv().await {
                return (msg_id, from);
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(delivered, (sent.msg_id, alice.addr.key));

    // Twenty sends issued at once arrive in send order.
    let handle = alice.handle();
    let sends =
        (0..20).map(|i| handle.send(OutgoingMessage::text(bob.addr.clone(), format!("n{i}"))));
    for r in futures::future::join_all(sends).await {
        r.unwrap();
    }
    let texts = bob.inbox_texts();
    let expected: Vec<String> = std::iter::once("hello bob".to_string())
        .chain((0..20).map(|i| format!("n{i}")))
        .collect();
    assert_eq!(texts, expected);

    // A stranger's message is refused with the reason, and nothing is stored.
    let err = mallory
        .handle()
        .send(OutgoingMessage::text(bob.addr.clone(), "let me in"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SendError::Refused(r) if r.code == RefusalCode::NotPaired
            && r.detail.contains("not a peer")),
        "{err}"
    );
    assert_eq!(bob.inbox_texts().len(), 21);

    // A stranger may knock: receipted, held for the operator, not in the inbox.
    let knock = OutgoingMessage {
        kind: EnvelopeKind::Knock,
        text: None,
        name: Some("mallory".into()),
        group: None,
        ..OutgoingMessage::text(bob.addr.clone(), "")
    };
    mallory.handle().send(knock).await.unwrap();
    let knocked = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Ok(Event::Knock { from, .. }) = bob_events.recv().await {
                return from;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(knocked, mallory.addr.key);
    assert_eq!(bob.inbox_texts().len(), 21);

    // Sessions of one identity reach each other without pairing.
    alice2
        .handle()
        .send(OutgoingMessage::text(alice.addr.clone(), "from my sibling"))
        .await
        .unwrap();
    assert_eq!(alice.inbox_texts(), ["hello alice", "from my sibling"]);

    for p in [alice, bob, mallory, alice2] {
        p.node.shutdown().await;
    }
}

/// A node without kept streams (an older one) and one with them deliver to each other
/// live, every message once and in order: the newer one finds its stream declined and
/// sends requests instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_kept_streams_and_one_with_them_deliver_both_ways() {
    let base = interlink_testkit::node::memory_base();
    let (old_id, new_id) = (
        Identity::from_seed(&[41; 32]),
        Identity::from_seed(&[42; 32]),
    );
    let old = start_tuned(
        tempfile::tempdir().unwrap(),
        base,
        41,
        "old-1",
        &[("new", &new_id)],
        None,
        &[],
        |c| c.live_streams = false,
    );
    let boot = Some((base, old.handle().peer_id()));
    let new = start(base + 1, 42, "new-1", &[("old", &old_id)], boot);
    wait_roster(&[old.handle(), new.handle()], 2).await;
    for i in 0..10 {
        delivered(
            new.handle()
                .send(OutgoingMessage::text(
                    old.addr.clone(),
                    format!("to old {i}"),
                ))
                .await
                .unwrap(),
        );
        delivered(
            old.handle()
                .send(OutgoingMessage::text(
                    new.addr.clone(),
                    format!("to new {i}"),
                ))
                .await
                .unwrap(),
        );
    }
    let want = |to: &str| (0..10).map(|i| format!("to {to} {i}")).collect::<Vec<_>>();
    assert_eq!(old.inbox_texts(), want("old"));
    assert_eq!(new.inbox_texts(), want("new"));
    for p in [old, new] {
        p.node.shutdown().await;
    }
}

/// Two nodes with kept streams: messages sent at once all arrive, once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_sent_at_once_on_a_kept_stream_arrive_once_in_order_large_ones_as_requests() {
    let base = interlink_testkit::node::memory_base();
    let (a_id, b_id) = (
        Identity::from_seed(&[43; 32]),
        Identity::from_seed(&[44; 32]),
    );
    let a = start(base, 43, "a-1", &[("b", &b_id)], None);
    let boot = Some((base, a.handle().peer_id()));
    let b = start(base + 1, 44, "b-1", &[("a", &a_id)], boot);
    wait_roster(&[a.handle(), b.handle()], 2).await;
    let handle = a.handle();
    let sends =
        (0..40).map(|i| handle.send(OutgoingMessage::text(b.addr.clone(), format!("m{i}"))));
    for r in futures::future::join_all(sends).await {
        delivered(r.unwrap());
    }
    let mut want: Vec<String> = (0..40).map(|i| format!("m{i}")).collect();
    assert_eq!(b.inbox_texts(), want);
    // Large ones at once: a batch past what a kept stream takes goes as a request, and
    // what both paths carry still arrives once, in order.
    let large: Vec<String> = (0..12)
        .map(|i| format!("{i:02}{}", "x".repeat(40 * 1024)))
        .collect();
    let sends = large
        .iter()
        .map(|t| handle.send(OutgoingMessage::text(b.addr.clone(), t.clone())));
    for r in futures::future::join_all(sends).await {
        delivered(r.unwrap());
    }
    want.extend(large);
    assert_eq!(b.inbox_texts(), want);
    for p in [a, b] {
        p.node.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_to_a_vanished_session_wait_in_the_dht_until_it_returns() {
    let base = interlink_testkit::node::memory_base();
    let Trio {
        alice,
        bob,
        carol,
        alice_id,
        bob_id: _,
        boot,
    } = trio(base).await;

    // Bob's process dies without a goodbye: he stays on the roster (away, in time).
    let bob_addr = bob.addr.clone();
    let Peer {
        node, dir: bob_dir, ..
    } = bob;
    node.abort();

    // The first message pays one live attempt, the rest queue at once; all are queued.
    let mut expected = Vec::new();
    for i in 0..6 {
        let text = format!("while you were away {i}");
        let outcome = alice
            .handle()
            .send(OutgoingMessage::text(bob_addr.clone(), text.clone()))
            .await
            .unwrap();
        assert!(matches!(outcome, SendOutcome::Queued { .. }), "{outcome:?}");
        expected.push(text);
    }
    // The sender leaves at once; only Carol (a holder, not a peer of anyone) remains.
    alice.node.shutdown().await;

    // Bob restarts under the same session id over the same inbox, knowing only Carol.
    let bob = start_in(bob_dir, base + 3, 2, "bob-1", &[("alice", &alice_id)], boot);
    wait_inbox(&bob, &expected).await;

    // He acked them: Carol, a holder, has the tombstones. A second restart then
    // delivers nothing twice.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let held = carol.handle().held_mailbox(bob_addr.clone()).await.unwrap();
        if held.map(|h| (h.pending, h.acked)) == Some((0, expected.len())) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Carol never held Bob's acks: {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let Peer {
        node, dir: bob_dir, ..
    } = bob;
    node.shutdown().await;
    let bob = start_in(bob_dir, base + 4, 2, "bob-1", &[("alice", &alice_id)], boot);
    let mut events = bob.handle().events();
    let carol_peer = carol.handle().peer_id();
    let fetched = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match events.recv().await {
                Ok(Event::MailboxFetched { holder }) if holder == carol_peer => return,
                Ok(Event::Delivered {
                    msg_id,
                    kind: interlink_core::wire::EnvelopeKind::Message,
                    ..
                }) => panic!("{msg_id} delivered again"),
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("{e}"),
            }
        }
    });
    fetched
        .await
        .expect("Bob never fetched his mailbox from Carol");
    assert_eq!(bob.inbox_texts(), expected);
    // Carol, a holder, received Bob's ack: his messages are tombstones there now.
    let held = carol.handle().held_mailbox(bob_addr.clone()).await.unwrap();
    assert_eq!(
        held.map(|h| (h.pending, h.acked)),
        Some((0, expected.len()))
    );
    assert_eq!(
        carol
            .handle()
            .diagnostics()
            .await
            .unwrap()
            .mailbox_puts_refused,
        0
    );
    bob.node.shutdown().await;
    carol.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_mailbox_puts_are_refused_and_counted() {
    use interlink_core::{MsgId, mailbox::record_key};
    use interlink_testkit::{
        ids::{random_msg_id, sys_rng},
        mailbox::raw_record,
        signed,
    };
    use libp2p::kad::{Quorum, Record, RecordKey};

    let base = interlink_testkit::node::memory_base();
    let Trio {
        alice,
        bob,
        carol,
        alice_id,
        bob_id,
        boot,
    } = trio(base).await;
    // Paired by hand and online together once: each holds the other's pass.
    interlink_testkit::node::wait_pass(&alice, &bob_id.public()).await;
    interlink_testkit::node::wait_pass(&bob, &alice_id.public()).await;
    let bob_addr = bob.addr.clone();
    let Peer {
        node, dir: bob_dir, ..
    } = bob;
    let bob_peer = node.handle().peer_id();
    node.abort();
    // Aborting takes effect at the task's next await: until Alice's connection to Bob
    // is gone, a send could still be taken live (seen once under Wine's scheduling).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while alice
        .handle()
        .diagnostics()
        .await
        .unwrap()
        .connected
        .iter()
        .any(|c| c.peer_id == bob_peer)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Alice still connected to Bob"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // One genuine queued message from Alice, held by Carol.
    let outcome = alice
        .handle()
        .send(OutgoingMessage::text(bob_addr.clone(), "genuine"))
        .await
        .unwrap();
    assert!(matches!(outcome, SendOutcome::Queued { .. }), "{outcome:?}");

    // Mallory, a node of the overlay, puts crafted versions of Bob's mailbox.
    let mallory = Identity::from_seed(&[66; 32]);
    let now = interlink_net::Clock::system().now_ms();
    let env_to = |recipient: &SessionAddr, text: &str| {
        signed::envelope(
            mallory.public(),
            &SessionId::new("m-1").unwrap(),
            recipient,
            random_msg_id(),
            now,
        )
        .sealed(text, &bob_id.sealing_secret().public(), &mut sys_rng())
        .sign(&mallory)
        .to_bytes()
    };
    let carol_addr = SessionAddr {
        key: Identity::from_seed(&[9; 32]).public(),
        session: SessionId::new("carol-1").unwrap(),
    };
    let forged_ack = signed::ack(
        &mallory,
        &bob_addr.session,
        &[(mallory.public(), MsgId::from_bytes([0; 16]))],
        now,
    )
    .to_bytes();
    let record = |envelopes: Vec<Vec<u8>>, acks: Vec<Vec<u8>>| {
        raw_record(&bob_addr.key, &bob_addr.session, envelopes, acks)
    };
    let bad: Vec<(&str, Vec<u8>)> = vec![
        ("malformed", vec![0xa1, 0x61, 0x76, 0x02]),
        (
            "wrong mailbox",
            record(vec![env_to(&carol_addr, "not for bob")], vec![]),
        ),
        ("forged ack", record(vec![], vec![forged_ack])),
        (
            "flood",
            record(
                (0..300)
                    .map(|i| env_to(&bob_addr, &format!("spam {i}")))
                    .collect(),
                vec![],
            ),
        ),
    ];
    let key = RecordKey::new(&record_key(&bob_addr.key, &bob_addr.session));
    let config = Config {
        max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
        listen: vec![memory(base + 5)],
        bootstrap: vec![memory(base).with(Protocol::P2p(carol.handle().peer_id()))],
        mdns: false,
        ..Config::default()
    };
    let mut evil = interlink_testkit::node::raw_swarm(&config);
    evil.dial(config.bootstrap[0].clone()).unwrap();
    let carol_peer = carol.handle().peer_id();
    let mut events = carol.handle().events();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut puts = bad.iter();
    let mut refused = Vec::new();
    use futures::StreamExt as _;
    loop {
        tokio::select! {
            ev = evil.select_next_some() => {
                if let libp2p::swarm::SwarmEvent::ConnectionEstablished { peer_id, .. } = ev
                    && peer_id == carol_peer
                {
                    evil.behaviour_mut().kad.add_address(&carol_peer, config.bootstrap[0].clone());
                    for (_, value) in puts.by_ref() {
                        hold(&mut evil, carol_peer, &key, value.clone());
                    }
                    // A DHT put is refused whatever it holds: copies travel by `hold`.
                    let _ = evil.behaviour_mut().kad.put_record_to(
                        Record::new(key.clone(), record(vec![], vec![])),
                        std::iter::once(carol_peer),
                        Quorum::One,
                    );
                }
            }
            ev = events.recv() => {
                if let Ok(Event::Rejected { reason, .. }) = ev {
                    refused.push(reason);
                    if refused.len() == bad.len() + 1 {
                        break;
                    }
                }
            }
            () = tokio::time::sleep_until(deadline) => break,
        }
    }
    assert_eq!(refused.len(), bad.len() + 1, "refusals: {refused:#?}");
    assert!(
        refused.iter().any(|r| r.contains("not a DHT put")),
        "{refused:#?}"
    );
    assert_eq!(
        carol
            .handle()
            .diagnostics()
            .await
            .unwrap()
            .mailbox_puts_refused,
        bad.len() as u64 + 1
    );
    // Carol still holds exactly Alice's genuine message for Bob.
    let held = carol.handle().held_mailbox(bob_addr.clone()).await.unwrap();
    assert_eq!(held.map(|h| h.pending), Some(1));

    // A flood of valid puts, one envelope each: Mallory has no pass, so only a
    // stranger's quota fills, and the paired sender's message is not evicted.
    let flood = (0..100)
        .map(|i| record(vec![env_to(&bob_addr, &format!("flood {i}"))], vec![]))
        .collect();
    hold_all(&mut evil, carol_peer, &key, flood).await;
    let quota = interlink_core::limits::MAILBOX_STRANGER_SENDER_QUOTA;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let _ = tokio::time::timeout(Duration::from_millis(50), evil.select_next_some()).await;
        let held = carol.handle().held_mailbox(bob_addr.clone()).await.unwrap();
        if held.map(|h| h.pending) == Some(1 + quota) {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            let d = carol.handle().diagnostics().await.unwrap();
            panic!("flood never settled: {held:?}, {d:?}");
        }
    }

    // The measured attack (issue 13, item 1), from 40 fresh identities at once: large
    // envelopes backdated six days. They share the strangers' room with Mallory's;
    // none takes the room of Alice, who holds Bob's pass.
    let six_days_ago = now - 6 * interlink_core::limits::DAY_MS;
    let mut sybils = Vec::new();
    for s in 0..40u8 {
        let sybil = Identity::from_seed(&[100 + s; 32]);
        let envelopes = (0..4)
            .map(|_| {
                signed::envelope(
                    sybil.public(),
                    &SessionId::new("sybil").unwrap(),
                    &bob_addr,
                    random_msg_id(),
                    six_days_ago,
                )
                .sealed(
                    &"x".repeat(12_000),
                    &bob_id.sealing_secret().public(),
                    &mut sys_rng(),
                )
                .sign(&sybil)
                .to_bytes()
            })
            .collect();
        sybils.push(record(envelopes, vec![]));
    }
    hold_all(&mut evil, carol_peer, &key, sybils).await;
    // Settled: the Sybils' envelopes arrived, and the count has not moved for a second.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let (mut last, mut still) = (0, 0);
    while still < 20 || last <= 1 + quota {
        if tokio::time::Instant::now() > deadline {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_millis(50), evil.select_next_some()).await;
        let held = carol.handle().held_mailbox(bob_addr.clone()).await.unwrap();
        let n = held.map_or(0, |h| h.pending);
        (last, still) = if n == last { (n, still + 1) } else { (n, 0) };
    }
    let why = carol
        .handle()
        .diagnostics()
        .await
        .unwrap()
        .mailbox_puts_refused;
    assert!(
        last > 1 + quota,
        "the Sybils' envelopes took stranger room: {last}, refused {why}"
    );
    let outcome = alice
        .handle()
        .send(OutgoingMessage::text(bob_addr.clone(), "after the flood"))
        .await
        .unwrap();
    assert!(matches!(outcome, SendOutcome::Queued { .. }), "{outcome:?}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let held = carol.handle().held_mailbox(bob_addr.clone()).await.unwrap();
        if held.map(|h| h.pending) == Some(last + 1) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Carol never held Alice's message beside the flood: {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Only Bob may read Bob's mailbox (issue 13, item 3): Carol holds it, yet a DHT get
    // finds no record (Kademlia's store holds none), and a fetch is answered only when
    // Bob signed it, for Carol, lately.
    let query = evil.behaviour_mut().kad.get_record(key.clone());
    let found = loop {
        if let libp2p::swarm::SwarmEvent::Behaviour(interlink_net::behaviour::BehaviourEvent::Kad(
            libp2p::kad::Event::OutboundQueryProgressed {
                id, result, step, ..
            },
        )) = evil.select_next_some().await
            && id == query
        {
            let found = matches!(
                result,
                libp2p::kad::QueryResult::GetRecord(Ok(libp2p::kad::GetRecordOk::FoundRecord(_)))
            );
            if found || step.last {
                break found;
            }
        }
    };
    assert!(!found, "a DHT get read Bob's mailbox");
    let carol_bytes = carol_peer.to_bytes();
    let other_holder = libp2p::PeerId::random().to_bytes();
    let fetch = |owner: &SessionAddr, holder: &[u8], ts: u64| {
        let body = interlink_core::wire::MailboxFetch {
            v: interlink_core::wire::VERSION,
            owner: owner.key,
            owner_session: owner.session.clone(),
            holder: serde_bytes::ByteBuf::from(holder.to_vec()),
            ts,
        };
        interlink_core::wire::Signed::sign(body, &bob_id)
            .unwrap()
            .to_bytes()
    };
    // Mallory cannot sign as Bob: her best is Bob's request with a signature of hers.
    let mut forged = fetch(&bob_addr, &carol_bytes, now);
    let at = forged.len() - 10;
    forged[at] ^= 1;
    let stale = now - interlink_core::limits::FETCH_FRESHNESS_MS - 60_000;
    let refusals = [
        ("a forged signature", forged, RefusalCode::BadSignature),
        (
            "Bob's fetch for another holder",
            fetch(&bob_addr, &other_holder, now),
            RefusalCode::WrongRecipient,
        ),
        (
            "Bob's stale fetch",
            fetch(&bob_addr, &carol_bytes, stale),
            RefusalCode::Stale,
        ),
        ("not a fetch", vec![0xa0], RefusalCode::Malformed),
    ];
    for (case, request, code) in refusals {
        match fetch_answer(&mut evil, carol_peer, request).await {
            MailboxOutcome::Refused { reason } => assert_eq!(reason.code, code, "{case}: {reason}"),
            other => panic!("{case}: answered {other:?}"),
        }
    }
    // Bob's own fresh fetch for Carol gets the copy, with all the mail above.
    match fetch_answer(&mut evil, carol_peer, fetch(&bob_addr, &carol_bytes, now)).await {
        MailboxOutcome::Record { record: Some(r) } => {
            let (mb, _) = interlink_core::mailbox::Mailbox::decode(
                &r,
                interlink_net::Clock::system().now_ms(),
                &interlink_core::mailbox::Config::default(),
            )
            .unwrap();
            assert_eq!(mb.len(), last + 1);
        }
        other => panic!("the owner's fetch: {other:?}"),
    }
    assert_eq!(
        carol
            .handle()
            .diagnostics()
            .await
            .unwrap()
            .mailbox_fetches_refused,
        4
    );
    drop(evil);
    // Alice goes too: what Bob gets comes from Carol's copy, not from Alice's outbox.
    alice.node.shutdown().await;

    // And Bob, back, gets only Alice's two messages.
    let bob = start_in(bob_dir, base + 3, 2, "bob-1", &[("alice", &alice_id)], boot);
    wait_inbox(
        &bob,
        &["genuine".to_string(), "after the flood".to_string()],
    )
    .await;
    bob.node.shutdown().await;
    carol.node.shutdown().await;
}

/// Hands `record` to `to` as a mailbox-protocol `hold` (the answer is not awaited).
fn hold(
    evil: &mut libp2p::Swarm<interlink_net::behaviour::Behaviour>,
    to: libp2p::PeerId,
    key: &libp2p::kad::RecordKey,
    record: Vec<u8>,
) -> libp2p::request_response::OutboundRequestId {
    let request = MailboxRequest {
        v: interlink_core::wire::VERSION,
        op: MailboxOp::Hold {
            key: serde_bytes::ByteBuf::from(key.to_vec()),
            record: serde_bytes::ByteBuf::from(record),
        },
    };
    evil.behaviour_mut().mailbox.send_request(&to, request)
}

/// Hands `to` each of `records` with `hold`, a few at a time, waiting for every answer
/// (so the copies have all been taken or refused when it returns).
async fn hold_all(
    evil: &mut libp2p::Swarm<interlink_net::behaviour::Behaviour>,
    to: libp2p::PeerId,
    key: &libp2p::kad::RecordKey,
    records: Vec<Vec<u8>>,
) {
    use futures::StreamExt as _;
    use libp2p::request_response::{Event as Rr, Message};
    let mut records = records.into_iter();
    // Its own requests only: an earlier step's late answer frees no slot.
    let mut in_flight = std::collections::HashSet::new();
    let wait = async {
        loop {
            // As many in flight as a node lets one connection have waiting (more and
            // it closes the connection: `a_peer_opening_too_many_mailbox_streams…`).
            while in_flight.len() < interlink_net::behaviour::MAILBOX_UNREAD_PER_CONNECTION {
                let Some(r) = records.next() else { break };
                in_flight.insert(hold(evil, to, key, r));
            }
            if in_flight.is_empty() {
                return;
            }
            if let libp2p::swarm::SwarmEvent::Behaviour(
                interlink_net::behaviour::BehaviourEvent::Mailbox(
                    Rr::Message {
                        message: Message::Response { request_id: id, .. },
                        ..
                    }
                    | Rr::OutboundFailure { request_id: id, .. },
                ),
            ) = evil.select_next_some().await
            {
                in_flight.remove(&id);
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .expect("holds not answered");
}

/// Sends `to` a mailbox fetch carrying `request` and waits for its answer.
async fn fetch_answer(
    evil: &mut libp2p::Swarm<interlink_net::behaviour::Behaviour>,
    to: libp2p::PeerId,
    request: Vec<u8>,
) -> MailboxOutcome {
    use futures::StreamExt as _;
    use libp2p::request_response::{Event as Rr, Message};
    let id = evil.behaviour_mut().mailbox.send_request(
        &to,
        MailboxRequest {
            v: interlink_core::wire::VERSION,
            op: MailboxOp::Fetch {
                request: serde_bytes::ByteBuf::from(request),
            },
        },
    );
    let wait = async {
        loop {
            match evil.select_next_some().await {
                libp2p::swarm::SwarmEvent::Behaviour(
                    interlink_net::behaviour::BehaviourEvent::Mailbox(Rr::Message {
                        message:
                            Message::Response {
                                request_id,
                                response,
                            },
                        ..
                    }),
                ) if request_id == id => return response.outcome,
                libp2p::swarm::SwarmEvent::Behaviour(
                    interlink_net::behaviour::BehaviourEvent::Mailbox(Rr::OutboundFailure {
                        request_id,
                        error,
                        ..
                    }),
                ) if request_id == id => panic!("fetch failed: {error}"),
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("no fetch answer")
}

/// A sender's outbox full for one recipient refuses (with the numbers) instead of
/// evicting what it holds;
/// when the recipient comes back, the sender retries its queued messages live and
/// learns they were delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_outbox_refuses_and_a_returning_recipient_is_retried_live() {
    let quota = interlink_core::limits::MAILBOX_SENDER_QUOTA;
    let limit = interlink_delivery::config::OUTBOX_PER_RECIPIENT;
    let base = interlink_testkit::node::memory_base();
    let Trio {
        alice,
        bob,
        carol,
        alice_id,
        bob_id,
        boot,
    } = trio(base).await;
    // Alice's mail counts as admitted (the quota below is an admitted sender's) only
    // once she holds Bob's pass, handed over while both were online: without it the
    // first eight fill the strangers' room and the rest are refused there.
    interlink_testkit::node::wait_pass(&alice, &bob_id.public()).await;
    let mut alice_events = alice.handle().events();

    let bob_addr = bob.addr.clone();
    let bob_addr_events = bob.addr.clone();
    let Peer {
        node, dir: bob_dir, ..
    } = bob;
    node.abort();

    let mut expected = Vec::new();
    let mut queued_ids = std::collections::HashSet::new();
    for i in 0..limit {
        let text = format!("queued {i:03}");
        let outcome = alice
            .handle()
            .send(OutgoingMessage::text(bob_addr.clone(), text.clone()))
            .await
            .unwrap();
        let SendOutcome::Queued { msg_id, held_by } = outcome else {
            panic!("message {i}: expected queued, got {outcome:?}");
        };
        assert!(held_by.outbox, "{i}: {held_by:?}");
        // The mailbox copy holds the oldest `quota`; later ones are in the outbox only,
        // and the answer says so.
        assert_eq!(held_by.peers_asked > 0, i < quota, "{i}: {held_by:?}");
        queued_ids.insert(msg_id);
        expected.push(text);
    }
    // One more than the quota: refused with the numbers (the outbox keeps for one
    // recipient what its mailbox takes from one sender), not evicting the first.
    let over = alice
        .handle()
        .send(OutgoingMessage::text(bob_addr.clone(), "one too many"))
        .await;
    match over {
        Err(SendError::OutboxFull { held, limit: l }) => {
            assert_eq!((held, l), (limit, limit));
        }
        other => panic!("expected a full outbox, got {other:?}"),
    }

    // Alice's receipts are counted as they come (a burst of them must not overflow the
    // event channel while the test waits for Bob's inbox).
    let want = queued_ids.clone();
    let counter = tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
        let mut receipted = std::collections::HashSet::new();
        while receipted.len() < want.len() {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match tokio::time::timeout(left, alice_events.recv()).await {
                Ok(Ok(Event::Receipted { msg_id, to })) => {
                    assert_eq!(to, bob_addr_events);
                    assert!(want.contains(&msg_id), "receipt for an unknown id");
                    receipted.insert(msg_id);
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => panic!("event stream: {e}"),
                Err(_) => panic!(
                    "only {} of {} queued messages were receipted",
                    receipted.len(),
                    want.len()
                ),
            }
        }
    });
    // Bob comes back under the same session: all of them arrive, in order (the mailbox
    // has the oldest, the live retry brings every one).
    let bob = start_in(bob_dir, base + 3, 2, "bob-1", &[("alice", &alice_id)], boot);
    wait_inbox(&bob, &expected).await;
    // Alice retried her queued messages live once Bob showed life: each is receipted.
    counter.await.unwrap();
    // Room again: the refused message goes through, after everything queued before it.
    let outcome = alice
        .handle()
        .send(OutgoingMessage::text(bob_addr.clone(), "one too many"))
        .await
        .unwrap();
    delivered(outcome);
    expected.push("one too many".into());
    assert_eq!(bob.inbox_texts(), expected);
    for p in [alice, bob, carol] {
        p.node.shutdown().await;
    }
}

/// `settle` tells a sender about to exit whether any peer it trusts (here Carol, a
/// peer of Alice's) took its mailbox copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_says_whether_a_peer_took_the_mailbox_copy() {
    let base = interlink_testkit::node::memory_base();
    let (alice_id, bob_id) = (Identity::from_seed(&[1; 32]), Identity::from_seed(&[2; 32]));
    let carol_id = Identity::from_seed(&[9; 32]);
    let alice = start(
        base,
        1,
        "alice-1",
        &[("bob", &bob_id), ("carol", &carol_id)],
        None,
    );
    let boot = Some((base, alice.handle().peer_id()));
    let bob = start(base + 1, 2, "bob-1", &[("alice", &alice_id)], boot);
    wait_roster(&[alice.handle(), bob.handle()], 2).await;
    let bob_addr = bob.addr.clone();
    bob.node.abort();
    let outcome = alice
        .handle()
        .send(OutgoingMessage::text(bob_addr.clone(), "nobody holds this"))
        .await
        .unwrap();
    assert!(matches!(outcome, SendOutcome::Queued { .. }), "{outcome:?}");
    let settled = alice
        .handle()
        .settle(Duration::from_secs(15))
        .await
        .unwrap();
    assert_eq!(settled.stored_remotely, 0, "{settled:?}");
    assert!(settled.local_only >= 1, "{settled:?}");

    // With a holder around, the copy is taken.
    let carol = start(base + 2, 9, "carol-1", &[], boot);
    wait_roster(&[alice.handle(), carol.handle()], 3).await;
    let outcome = alice
        .handle()
        .send(OutgoingMessage::text(bob_addr, "carol holds this"))
        .await
        .unwrap();
    assert!(matches!(outcome, SendOutcome::Queued { .. }), "{outcome:?}");
    let settled = alice
        .handle()
        .settle(Duration::from_secs(15))
        .await
        .unwrap();
    assert!(settled.stored_remotely >= 1, "{settled:?}");
    assert_eq!(settled.pending, 0, "{settled:?}");
    alice.node.shutdown().await;
    carol.node.shutdown().await;
}

/// A session not on the roster (gone, or not started yet) can be queued for: the
/// sealing key is its identity's, known from another of its sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_not_on_the_roster_is_queued_for_and_gets_it_on_start() {
    let base = interlink_testkit::node::memory_base();
    let Trio {
        alice,
        bob,
        carol,
        alice_id,
        bob_id,
        boot,
    } = trio(base).await;

    let later = SessionAddr {
        key: bob_id.public(),
        session: SessionId::new("bob-2").unwrap(),
    };
    let outcome = alice
        .handle()
        .send(OutgoingMessage::text(
            later.clone(),
            "for your next session",
        ))
        .await
        .unwrap();
    assert!(matches!(outcome, SendOutcome::Queued { .. }), "{outcome:?}");
    // An identity never seen has no sealing key: that is an error, not a silent queue.
    let stranger = SessionAddr {
        key: Identity::from_seed(&[42; 32]).public(),
        session: SessionId::new("x").unwrap(),
    };
    let err = alice
        .handle()
        .send(OutgoingMessage::text(stranger, "nobody"))
        .await
        .unwrap_err();
    assert!(matches!(err, SendError::NotOnRoster(_)), "{err}");

    let bob2 = start(base + 3, 2, "bob-2", &[("alice", &alice_id)], boot);
    wait_inbox(&bob2, &["for your next session".to_string()]).await;
    for p in [alice, bob, bob2, carol] {
        p.node.shutdown().await;
    }
}

/// Waits for a `Receipted` event for `msg_id` on `events`.
async fn receipted(
    events: &mut tokio::sync::broadcast::Receiver<Event>,
    msg_id: interlink_core::MsgId,
) -> SessionAddr {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, events.recv()).await {
            Ok(Ok(Event::Receipted { msg_id: id, to })) if id == msg_id => return to,
            Ok(_) => {}
            Err(_) => panic!("no receipt for {msg_id}"),
        }
    }
}

/// Mail a session collects from its mailbox is receipted to its sender, signed — also
/// when the sender has nothing to retry live: the recipient had not started when the
/// message was sent, or the sender restarted since (its retry list is in memory).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_collected_from_a_mailbox_is_receipted_to_its_sender() {
    let base = interlink_testkit::node::memory_base();
    let Trio {
        alice,
        bob,
        carol,
        alice_id,
        bob_id,
        boot,
    } = trio(base).await;

    // A session that has not started yet.
    let later = SessionAddr {
        key: bob_id.public(),
        session: SessionId::new("bob-2").unwrap(),
    };
    let mut alice_events = alice.handle().events();
    let SendOutcome::Queued { msg_id, .. } = alice
        .handle()
        .send(OutgoingMessage::text(
            later.clone(),
            "for your next session",
        ))
        .await
        .unwrap()
    else {
        panic!("expected queued");
    };
    let bob2 = start(base + 3, 2, "bob-2", &[("alice", &alice_id)], boot);
    wait_inbox(&bob2, &["for your next session".to_string()]).await;
    assert_eq!(receipted(&mut alice_events, msg_id).await, later);

    // The sender restarts (over the same directory) while the recipient is away.
    let Peer {
        node,
        dir: bob2_dir,
        ..
    } = bob2;
    node.abort();
    let SendOutcome::Queued { msg_id, .. } = alice
        .handle()
        .send(OutgoingMessage::text(later.clone(), "while you were away"))
        .await
        .unwrap()
    else {
        panic!("expected queued");
    };
    // Carol and Bob's other session took the copy before Alice goes.
    alice
        .handle()
        .settle(Duration::from_secs(10))
        .await
        .unwrap();
    let Peer {
        node,
        dir: alice_dir,
        ..
    } = alice;
    node.shutdown().await;
    let alice = start_in(alice_dir, base + 4, 1, "alice-1", &[("bob", &bob_id)], boot);
    let mut alice_events = alice.handle().events();
    // Alice, Bob, Carol, and Bob's away session.
    wait_roster(&[alice.handle(), carol.handle()], 4).await;
    let bob2 = start_in(
        bob2_dir,
        base + 5,
        2,
        "bob-2",
        &[("alice", &alice_id)],
        boot,
    );
    wait_inbox(
        &bob2,
        &[
            "for your next session".to_string(),
            "while you were away".to_string(),
        ],
    )
    .await;
    assert_eq!(receipted(&mut alice_events, msg_id).await, later);
    for p in [alice, bob, bob2, carol] {
        p.node.shutdown().await;
    }
}

/// A session with no outbox (what `interlink-p2p send` runs) says `queued` only for
/// what a holder answered it keeps: past the mailbox's per-sender quota nothing would
/// keep a message once the command exits, so it says `not kept` instead of `queued`.
/// A second such session of the same identity meets the first one's mail at the
/// holders: its own copy takes everything, the holders' copies nothing (the soak lost
/// mail this way while each command said `queued`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_without_an_outbox_never_says_queued_for_what_nothing_holds() {
    use std::sync::Arc;

    use interlink_core::{
        Identity, SessionId,
        limits::MAILBOX_SENDER_QUOTA,
        trust::PeerPolicy,
        wire::{DeliveryMode, HostKind},
    };
    use interlink_net::{Delivery, Node, Role, SessionSpec};

    let base = interlink_testkit::node::memory_base();
    let Trio {
        alice,
        bob,
        carol,
        alice_id,
        bob_id,
        boot,
    } = trio(base).await;
    let bob_addr = bob.addr.clone();
    bob.node.abort();
    // Dave's identity in short-lived sending sessions, as `interlink-p2p send` runs
    // (not Alice's: her long-lived session's own envelopes to Bob, its pass offer
    // among them, would share the quota).
    let identity = Arc::new(Identity::from_seed(&[0x0d; 32]));
    // Dave is paired with Alice and Carol too: only the word of a holder he has reason
    // to trust counts (a stranger's "kept" is checked at the end).
    let mut policy = PeerPolicy::new();
    policy.add("bob", bob_id.public()).unwrap();
    let strangers = policy.clone();
    policy.add("alice", alice_id.public()).unwrap();
    policy
        .add("carol", Identity::from_seed(&[9; 32]).public())
        .unwrap();
    // Dave holds Bob's mailbox pass from an earlier exchange (in the home's file, as
    // every `send` of his reads it): his mail counts among Bob's admitted mail.
    let home = tempfile::tempdir().unwrap();
    interlink_store::passes::MailboxPasses::load(
        Some(home.path().join(interlink_store::passes::PASSES_FILE)),
        identity.public(),
    )
    .learn(
        bob_id.public(),
        interlink_core::wire::MailboxPass::issue(&bob_id, &identity.public()),
    );
    let config = Config {
        max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
        listen: vec![memory(base + 7)],
        bootstrap: boot
            .map(|(p, id)| vec![memory(p).with(Protocol::P2p(id))])
            .unwrap_or_default(),
        mdns: false,
        delivery: Delivery {
            inbox_dir: None,
            policy,
            pins_file: Some(home.path().join(interlink_store::pins::PINS_FILE)),
            address_book: None,
        },
        ..Config::default()
    };
    let start = |session: SessionId, port: u64, config: &Config| {
        let mut config = config.clone();
        config.listen = vec![memory(port)];
        let key = identity.transport_keypair(&session).unwrap();
        let swarm = interlink_net::build_swarm(key, &config).unwrap();
        let role = Role::Session(Box::new(SessionSpec {
            identity: identity.clone(),
            session,
            cwd: "/tmp".into(),
            git_label: None,
            project: None,
            summary: String::new(),
            host: HostKind::Other,
            delivery: DeliveryMode::Poll,
            visibility: interlink_net::Visibility::Announced,
        }));
        Node::spawn(swarm, config, role).unwrap()
    };
    // What Alice and Carol hold for Bob before Dave sends (Alice's own mail to him).
    let holders = [alice.handle(), carol.handle()];
    let mut held_before = Vec::new();
    for h in &holders {
        let held = h.held_mailbox(bob_addr.clone()).await.unwrap();
        held_before.push(held.map_or(0, |m| m.pending));
    }
    // Sends `n` messages from a fresh sending session; returns (queued, not kept).
    // With `replicated`, the session stays up until Alice and Carol each hold what it
    // queued: a closest-peer placement still in flight when a sender exits leaves the
    // copy at fewer holders, and this test is about what holders that have it do.
    let run = async |session: &str, port: u64, n: usize, replicated: bool, config: &Config| {
        let sender = start(SessionId::new(session).unwrap(), port, config);
        // The sender learns Bob's session (away now) from the overlay.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            let roster = sender.handle().roster().await.unwrap();
            if roster
                .iter()
                .flat_map(|i| &i.sessions)
                .any(|s| s.addr == bob_addr)
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "Bob never on the roster"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (mut queued, mut not_kept) = (0, 0);
        for i in 0..n {
            match sender
                .handle()
                .send(OutgoingMessage::text(bob_addr.clone(), format!("m{i}")))
                .await
            {
                Ok(SendOutcome::Queued { held_by, .. }) => {
                    assert!(!held_by.outbox && held_by.confirmed, "{i}: {held_by:?}");
                    queued += 1;
                }
                Err(SendError::NotKept(_)) => not_kept += 1,
                other => panic!("{i}: {other:?}"),
            }
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        for (h, before) in holders.iter().zip(&held_before) {
            if !replicated {
                break;
            }
            loop {
                let held = h.held_mailbox(bob_addr.clone()).await.unwrap();
                if held.is_some_and(|m| m.pending >= before + queued) {
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the copy never reached {}: {held:?}, before {before}, queued {queued}",
                    h.peer_id()
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        sender.shutdown().await;
        (queued, not_kept)
    };
    assert_eq!(
        run("send-1", base + 7, MAILBOX_SENDER_QUOTA + 6, true, &config).await,
        (MAILBOX_SENDER_QUOTA, 6)
    );
    // Alice and Carol hold the quota's worth of Dave's mail for Bob already.
    assert_eq!(run("send-2", base + 8, 5, false, &config).await, (0, 5));
    // A sender paired with neither holder: their "kept" is a stranger's word (one that
    // could drop the copy), so nothing is said queued — even for what they would keep.
    let mut with_strangers = config.clone();
    with_strangers.delivery.policy = strangers;
    assert_eq!(
        run("send-3", base + 9, 3, false, &with_strangers).await,
        (0, 3)
    );
    for p in [alice, carol] {
        p.node.shutdown().await;
    }
}

/// PROTOCOL §4.3: two sessions paired while both are online hold each other's mailbox
/// passes without a message between them. Before, a session offered its pass only when
/// a peer's session appeared on the roster, so a pairing made while both were up
/// brought no pass until a new session appeared or a message was exchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_paired_while_both_are_online_exchange_passes() {
    use interlink_core::trust::PeerPolicy;
    use interlink_store::passes::{MailboxPasses, PASSES_FILE};

    let base = interlink_testkit::node::memory_base();
    let (alice_id, bob_id) = (Identity::from_seed(&[1; 32]), Identity::from_seed(&[2; 32]));
    let alice = start(base, 1, "alice-1", &[], None);
    let boot = Some((base, alice.handle().peer_id()));
    let bob = start(base + 1, 2, "bob-1", &[], boot);
    wait_roster(&[alice.handle(), bob.handle()], 2).await;
    let only = |name: &str, id: &Identity| {
        let mut p = PeerPolicy::new();
        p.add(name, id.public()).unwrap();
        p
    };
    alice
        .handle()
        .set_policy(only("bob", &bob_id))
        .await
        .unwrap();
    bob.handle()
        .set_policy(only("alice", &alice_id))
        .await
        .unwrap();
    let holds = |p: &Peer, holder: &Identity, owner: &Identity| {
        MailboxPasses::load(Some(p.dir.path().join(PASSES_FILE)), holder.public())
            .get(&owner.public())
            .is_some()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !(holds(&alice, &alice_id, &bob_id) && holds(&bob, &bob_id, &alice_id)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no pass exchanged: Alice holds Bob's {}, Bob holds Alice's {}",
            holds(&alice, &alice_id, &bob_id),
            holds(&bob, &bob_id, &alice_id)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    alice.node.shutdown().await;
    bob.node.shutdown().await;
}

/// Sends `to` one live-delivery request for each of `requests` at once (each a list of
/// envelopes) and waits for all their results, in order.
async fn deliver_answers(
    evil: &mut libp2p::Swarm<interlink_net::behaviour::Behaviour>,
    to: libp2p::PeerId,
    requests: Vec<Vec<Vec<u8>>>,
) -> Vec<Vec<Option<interlink_core::wire::Refusal>>> {
    use futures::StreamExt as _;
    use interlink_core::wire::DeliverRequest;
    use libp2p::request_response::{Event as Rr, Message};
    let ids: Vec<_> = requests
        .into_iter()
        .map(|envelopes| {
            let request = DeliverRequest {
                v: interlink_core::wire::VERSION,
                envelopes: envelopes
                    .into_iter()
                    .map(serde_bytes::ByteBuf::from)
                    .collect(),
            };
            evil.behaviour_mut().deliver.send_request(&to, request)
        })
        .collect();
    let mut answers = std::collections::HashMap::new();
    let wait = async {
        while answers.len() < ids.len() {
            match evil.select_next_some().await {
                libp2p::swarm::SwarmEvent::Behaviour(
                    interlink_net::behaviour::BehaviourEvent::Deliver(Rr::Message {
                        message:
                            Message::Response {
                                request_id,
                                response,
                            },
                        ..
                    }),
                ) => {
                    let results: Vec<_> = response.results.into_iter().map(|r| r.refused).collect();
                    answers.insert(request_id, results);
                }
                libp2p::swarm::SwarmEvent::Behaviour(
                    interlink_net::behaviour::BehaviourEvent::Deliver(Rr::OutboundFailure {
                        error,
                        ..
                    }),
                ) => panic!("delivery request failed: {error}"),
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(15), wait)
        .await
        .expect("delivery requests not answered");
    ids.iter()
        .map(|id| answers.remove(id).unwrap_or_default())
        .collect()
}

/// [`deliver_answers`] for one request.
async fn deliver_answer(
    evil: &mut libp2p::Swarm<interlink_net::behaviour::Behaviour>,
    to: libp2p::PeerId,
    envelopes: Vec<Vec<u8>>,
) -> Vec<Option<interlink_core::wire::Refusal>> {
    deliver_answers(evil, to, vec![envelopes]).await.remove(0)
}

/// Strangers' knocks are charged a knock budget (per remote peer, per source network,
/// per node) from their CBOR alone, before their signature is checked: one peer
/// knocking as fresh identities over and over is refused `over_budget` unverified — a
/// forged knock past the budget is refused `over_budget`, not `bad_signature`, so no
/// verification ran — while within the budget a forged knock is refused as forged and
/// a genuine one is held, and a paired peer's message is delivered all along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_knock_flood_is_refused_over_budget_before_verification_and_peers_still_deliver() {
    use interlink_testkit::{ids::random_msg_id, signed};

    let base = interlink_testkit::node::memory_base();
    let Trio {
        alice, bob, carol, ..
    } = trio(base).await;
    let bob_peer = bob.handle().peer_id();
    let config = Config {
        max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
        listen: vec![memory(base + 5)],
        mdns: false,
        ..Config::default()
    };
    let mut evil = interlink_testkit::node::raw_swarm(&config);
    let mut bob_events = bob.handle().events();
    let knock_from = |who: &Identity| {
        signed::knock(
            who,
            &bob.addr.key,
            &bob.addr.session,
            random_msg_id(),
            interlink_net::Clock::system().now_ms(),
        )
    };
    let forged = || {
        let k = knock_from(&Identity::from_seed(&[77; 32]));
        signed::forge(k.to_bytes(), k.signature())
    };
    evil.dial(memory(base + 2).with(Protocol::P2p(bob_peer)))
        .unwrap();
    let code = |r: &Option<interlink_core::wire::Refusal>| r.as_ref().map(|r| r.code);

    // Within the budget: a forged knock is verified and refused as forged.
    let first = deliver_answer(&mut evil, bob_peer, vec![forged()]).await;
    assert_eq!(
        code(&first[0]),
        Some(RefusalCode::BadSignature),
        "{first:?}"
    );

    // Fresh identities knocking from the one peer, one request at a time: a few are
    // held, then a knock is refused over budget.
    let mut held = Vec::new();
    let mut seed = 100u8;
    let over = loop {
        let stranger = Identity::from_seed(&[seed; 32]);
        seed += 1;
        let r = deliver_answer(&mut evil, bob_peer, vec![knock_from(&stranger).to_bytes()]).await;
        match r[0].clone() {
            None => held.push(stranger.public()),
            Some(refusal) => break refusal,
        }
        assert!(held.len() < 8, "held {} knocks of one peer", held.len());
    };
    assert!(!held.is_empty());
    assert_eq!(over.code, RefusalCode::OverBudget, "{over:?}");
    assert!(over.detail.contains("knock again later"), "{over:?}");
    // More at once are all refused over budget, answered late (each costs the knocker
    // the delay), while the paired peer's message goes through at once.
    let flood: Vec<Vec<Vec<u8>>> = (0..6)
        .map(|_| {
            let stranger = Identity::from_seed(&[seed; 32]);
            seed += 1;
            vec![knock_from(&stranger).to_bytes()]
        })
        .collect();
    let started = std::time::Instant::now();
    let (answers, sent) = tokio::join!(deliver_answers(&mut evil, bob_peer, flood), async {
        // Sent while the flood waits for its answers.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let sent = alice
            .handle()
            .send(OutgoingMessage::text(bob.addr.clone(), "during the flood"))
            .await;
        (sent, started.elapsed())
    });
    for a in &answers {
        assert_eq!(
            a.iter().map(code).collect::<Vec<_>>(),
            [Some(RefusalCode::OverBudget)]
        );
    }
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "over-budget knocks were answered at once"
    );
    delivered(sent.0.unwrap());

    // Past the budget a forged knock is refused over budget: it was not verified.
    let late = deliver_answer(&mut evil, bob_peer, vec![forged(), forged()]).await;
    assert_eq!(
        late.iter().map(code).collect::<Vec<_>>(),
        vec![Some(RefusalCode::OverBudget); 2]
    );

    assert_eq!(bob.inbox_texts(), ["during the flood"]);

    // The held knocks reached the operator's file (written coalesced, soon after).
    let mut knocked = Vec::new();
    while knocked.len() < held.len() {
        match tokio::time::timeout(Duration::from_secs(5), bob_events.recv()).await {
            Ok(Ok(Event::Knock { from, .. })) => knocked.push(from),
            Ok(_) => {}
            Err(_) => panic!("knock events: {knocked:?} of {held:?}"),
        }
    }
    assert_eq!(knocked, held);
    let file = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let f = interlink_store::knocks::load(bob.dir.path());
            if f.len() == held.len() {
                return f;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the held knocks were not written");
    assert_eq!(
        file.iter().map(|k| k.sender.clone()).collect::<Vec<_>>(),
        held.iter().map(|k| k.to_hex()).collect::<Vec<_>>()
    );

    for p in [alice, bob, carol] {
        p.node.shutdown().await;
    }
}
