//! A sender session (`Visibility::Sender`, the shell `send`): it delivers like any
//! session, but is on no roster, and its messages carry the reply-to hint.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{sync::Arc, time::Duration};

use interlink_core::{
    Identity, SessionId,
    names::Network,
    trust::PeerPolicy,
    wire::{DeliveryMode, HostKind, SessionAddr},
};
use interlink_net::{Config, Delivery, Node, OutgoingMessage, Role, SessionSpec, Visibility};
use interlink_store::inbox::{self, INBOX_FILE};
use interlink_testkit::node::{delivered, memory, start, swarm};
use libp2p::multiaddr::Protocol;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_delivers_names_its_reply_session_and_is_on_no_roster() {
    let base = interlink_testkit::node::memory_base();
    let alice_id = Arc::new(Identity::from_seed(&[1; 32]));
    let bob = start(base, 2, "bob-1", &[("alice", &alice_id)], None);

    // Alice's shell send: no inbox, replies to her session alice-main.
    let mut policy = PeerPolicy::new();
    policy
        .add("bob", Identity::from_seed(&[2; 32]).public())
        .unwrap();
    let config = Config {
        max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
        network: Network::default(),
        listen: vec![memory(base + 1)],
        bootstrap: vec![memory(base).with(Protocol::P2p(bob.handle().peer_id()))],
        mdns: false,
        delivery: Delivery {
            inbox_dir: None,
            policy,
            pins_file: None,
            address_book: None,
        },
        ..Config::default()
    };
    let session = SessionId::new("send-1").unwrap();
    let reply_to = SessionId::new("alice-main").unwrap();
    let key = alice_id.transport_keypair(&session).unwrap();
    let role = Role::Session(Box::new(SessionSpec {
        identity: alice_id.clone(),
        session,
        cwd: "/tmp".into(),
        git_label: None,
        project: None,
        summary: "interlink-p2p send".into(),
        host: HostKind::Other,
        delivery: DeliveryMode::Poll,
        visibility: Visibility::Sender {
            reply_to: Some(reply_to.clone()),
        },
    }));
    let sender = Node::spawn(swarm(key, &config), config, role).unwrap();
    let handle = sender.handle();

    // It learns Bob's session (it fetches rosters like anyone) ...
    tokio::time::timeout(Duration::from_secs(10), async {
        while !handle
            .roster()
            .await
            .unwrap()
            .iter()
            .any(|i| i.key == bob.addr.key)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the sender never saw Bob");
    // ... and writes to it, receipted.
    delivered(
        handle
            .send(OutgoingMessage::text(bob.addr.clone(), "from a shell"))
            .await
            .unwrap(),
    );
    let (entries, _) = inbox::read_from(&bob.dir.path().join(INBOX_FILE), 0).unwrap();
    assert_eq!(entries.len(), 1);
    let reply_addr = SessionAddr {
        key: alice_id.public(),
        session: reply_to,
    };
    assert_eq!(entries[0].reply_to, reply_addr.to_string());
    assert_eq!(entries[0].sender_session, "send-1");

    // Connected and subscribed well past when a session's first announcement and the
    // roster fetches would have spread it: nothing of Alice on Bob's roster, nor on
    // the sender's own.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let on_bob = bob.handle().roster().await.unwrap();
    assert!(
        on_bob.iter().all(|i| i.key != alice_id.public()),
        "{on_bob:?}"
    );
    let own = handle.roster().await.unwrap();
    assert!(own.iter().all(|i| i.key != alice_id.public()), "{own:?}");
    sender.shutdown().await;
}

/// `Handle::say_goodbye` ahead of a shutdown: peers drop the session at once, and
/// nothing the node does until it stops (a summary change re-announces) brings it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goodbye_said_before_stopping_is_final() {
    let base = interlink_testkit::node::memory_base();
    let bob = start(base, 2, "bob-1", &[], None);
    let boot = Some((base, bob.handle().peer_id()));
    let carol = start(base + 1, 3, "carol-1", &[], boot);
    interlink_testkit::node::wait_roster(&[bob.handle(), carol.handle()], 2).await;

    assert!(carol.handle().say_goodbye().await.unwrap());
    let carol_on = |roster: &[interlink_core::presence::IdentityView]| {
        roster.iter().any(|i| i.key == carol.addr.key)
    };
    tokio::time::timeout(Duration::from_secs(5), async {
        while carol_on(&bob.handle().roster().await.unwrap()) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("Bob kept Carol after her goodbye");
    // A second goodbye is not published; a summary change announces nothing.
    assert!(!carol.handle().say_goodbye().await.unwrap());
    carol
        .handle()
        .set_summary("still here?".into())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(!carol_on(&bob.handle().roster().await.unwrap()));
    assert!(!carol_on(&carol.handle().roster().await.unwrap()));
    carol.node.shutdown().await;
}
