//! Hostile mailbox copies sent to a running relay over the network (the mailbox
//! protocol's `hold`, which a relay answers only after its store decided): each is
//! refused with its reason, counted in the metrics under that label, and the store
//! stays within its caps. A genuine copy is held.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::Duration;

use futures::StreamExt as _;
use interlink_core::{
    limits::{MAILBOX_STRANGER_SENDER_QUOTA, MAX_MAILBOX_RECORD_BYTES},
    wire::{MailboxOp, MailboxOutcome, MailboxRequest, VERSION},
};
use interlink_net::behaviour::BehaviourEvent;
use interlink_relay::{Config, start, store::RejectReason};
use interlink_testkit::{self as testkit, identity, msg_id, session};
use libp2p::{PeerId, request_response, swarm::SwarmEvent};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_holds_are_refused_counted_and_leave_the_store_within_caps() {
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let relay = start(
        Config::new(dir.path().join("relay.key"), dir.path().join("db.redb"))
            .with_listen(vec!["/ip4/127.0.0.1/tcp/0".parse().unwrap()]),
        shutdown.clone(),
    )
    .await
    .unwrap();
    let relay_addr = relay.addrs()[0].clone();
    let relay_peer = relay.peer_id();

    let (owner, mallory, friend) = (identity(1), identity(66), identity(2));
    let inbox = session("inbox");
    let now = interlink_net::Clock::system().now_ms();
    let genuine = testkit::message(&friend, &owner, &inbox, msg_id(1), now, "hello");
    let (key, genuine_record) = testkit::record(
        &owner.public(),
        &inbox,
        std::slice::from_ref(&genuine),
        &[],
        now,
    );
    let (other_key, _) = testkit::record(&owner.public(), &session("other"), &[], &[], now);
    let forged = testkit::forge(genuine.to_bytes(), genuine.signature());
    let flood: Vec<_> = (0..200u64)
        .map(|i| testkit::knock(&mallory, &owner.public(), &inbox, msg_id(1000 + i), now))
        .collect();
    let (_, flood_record) = testkit::record(&owner.public(), &inbox, &flood, &[], now);
    let cases: Vec<([u8; 32], Vec<u8>, Option<RejectReason>)> = vec![
        (
            key,
            b"\xff not a mailbox record".to_vec(),
            Some(RejectReason::Malformed),
        ),
        (
            key,
            testkit::raw_record(&owner.public(), &inbox, vec![forged], vec![]),
            Some(RejectReason::InvalidEntry),
        ),
        (
            other_key,
            genuine_record.clone(),
            Some(RejectReason::WrongMailbox),
        ),
        (
            key,
            vec![0u8; MAX_MAILBOX_RECORD_BYTES + 1],
            Some(RejectReason::Oversized),
        ),
        (key, genuine_record, None),
        // A valid flood is held, but only up to one stranger's quota: the friend's
        // message keeps its place.
        (key, flood_record, None),
    ];

    let config = interlink_net::Config {
        max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
        listen: vec!["/ip4/127.0.0.1/tcp/0".parse().unwrap()],
        mdns: false,
        ..interlink_net::Config::default()
    };
    let mut evil = testkit::node::raw_swarm(&config);
    evil.add_peer_address(relay_peer, relay_addr);
    for (key, record, expected) in cases {
        let outcome = hold(&mut evil, relay_peer, key, record).await;
        match (expected, outcome) {
            (None, MailboxOutcome::Held { .. }) => {}
            (Some(reason), MailboxOutcome::Refused { reason: text }) => {
                assert!(text.detail.contains(reason.label()), "{reason:?}: {text}");
            }
            (expected, got) => panic!("expected {expected:?}, got {got:?}"),
        }
    }
    let m = relay.metrics();
    for reason in [
        RejectReason::Malformed,
        RejectReason::InvalidEntry,
        RejectReason::WrongMailbox,
        RejectReason::Oversized,
    ] {
        assert_eq!(m.rejects(reason), 1, "{reason:?}");
    }
    let page = m.render();
    assert!(
        page.contains("interlink_relay_rejects_total{reason=\"oversized\"} 1"),
        "{page}"
    );
    let stats = relay.store().stats();
    assert_eq!(stats.mailboxes, 1);
    assert_eq!(
        stats.envelopes,
        1 + MAILBOX_STRANGER_SENDER_QUOTA as u64,
        "{stats:?}"
    );
    shutdown.cancel();
    relay.wait().await.unwrap();
}

async fn hold(
    evil: &mut libp2p::Swarm<interlink_net::behaviour::Behaviour>,
    relay: PeerId,
    key: [u8; 32],
    record: Vec<u8>,
) -> MailboxOutcome {
    let id = evil.behaviour_mut().mailbox.send_request(
        &relay,
        MailboxRequest {
            v: VERSION,
            op: MailboxOp::Hold {
                key: key.to_vec().into(),
                record: record.into(),
            },
        },
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let ev = tokio::time::timeout_at(deadline, evil.select_next_some())
            .await
            .expect("the relay did not answer");
        match ev {
            SwarmEvent::Behaviour(BehaviourEvent::Mailbox(request_response::Event::Message {
                message:
                    request_response::Message::Response {
                        request_id,
                        response,
                    },
                ..
            })) if request_id == id => return response.outcome,
            SwarmEvent::Behaviour(BehaviourEvent::Mailbox(
                request_response::Event::OutboundFailure {
                    request_id, error, ..
                },
            )) if request_id == id => panic!("{error}"),
            _ => {}
        }
    }
}
