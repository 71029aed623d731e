//! Hostile live deliveries, sent to a session node the way an attacker would: a raw
//! swarm speaking the deliver protocol with envelopes it signed itself (the production
//! `Handle` can put neither a forged reply-to hint nor a chosen message id on one).
//!
//! Covered: a stranger's message is refused with its reason and never stored, also when
//! it reuses the id of a message the inbox holds (no receipt either way); a peer reusing
//! another sender's stored id is stored as its own message (the inbox keys by sender and
//! id) and its retry answered as a retry; the sender's own retry of a stored message is
//! receipted again; an unsigned reply-to hint naming another identity
//! is ignored (the inbox records the signed sender session), one naming the sender's own
//! other session is kept.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::Duration;

use futures::StreamExt as _;
use interlink_core::{
    Identity, MsgId, SessionId,
    wire::{
        DeliverRequest, DeliverResponse, Envelope, Receipt, Refusal, RefusalCode, SessionAddr,
        Signed, VERSION,
    },
};
use interlink_net::{
    Config, OutgoingMessage,
    behaviour::{Behaviour, BehaviourEvent},
};
use interlink_store::inbox::{self, INBOX_FILE};
use interlink_testkit::{
    ids::{random_msg_id, session, sys_rng},
    node::{delivered, memory, raw_swarm, start, wait_roster},
    signed,
};
use libp2p::{PeerId, Swarm, request_response, swarm::SwarmEvent};
use serde_bytes::ByteBuf;

/// A message from `from`'s session `from_session` to `to`, sealed to `to`'s identity
/// (a session's sealing key is its identity's), with id `id`.
fn message(
    from: &Identity,
    from_session: &str,
    to: &SessionAddr,
    to_identity: &Identity,
    id: MsgId,
    text: &str,
) -> Signed<Envelope> {
    signed::envelope(
        from.public(),
        &session(from_session),
        to,
        id,
        interlink_net::Clock::system().now_ms(),
    )
    .sealed(text, &to_identity.sealing_secret().public(), &mut sys_rng())
    .sign(from)
}

/// Sends one delivery request from the raw swarm and waits for its answer.
async fn deliver(
    evil: &mut Swarm<Behaviour>,
    to: PeerId,
    envelopes: &[&Signed<Envelope>],
) -> DeliverResponse {
    let request = DeliverRequest {
        v: VERSION,
        envelopes: envelopes
            .iter()
            .map(|e| ByteBuf::from(e.to_bytes()))
            .collect(),
    };
    match request_raw(evil, to, request).await {
        Ok(response) => response,
        Err(error) => panic!("delivery request failed: {error}"),
    }
}

/// Sends `request` as it is and waits (15 s at most) for its answer, or its failure.
async fn request_raw(
    evil: &mut Swarm<Behaviour>,
    to: PeerId,
    request: DeliverRequest,
) -> Result<DeliverResponse, String> {
    let id = evil.behaviour_mut().deliver.send_request(&to, request);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let ev = tokio::time::timeout_at(deadline, evil.select_next_some())
            .await
            .expect("the session neither answered nor failed the request");
        match ev {
            SwarmEvent::Behaviour(BehaviourEvent::Deliver(request_response::Event::Message {
                message:
                    request_response::Message::Response {
                        request_id,
                        response,
                    },
                ..
            })) if request_id == id => return Ok(response),
            SwarmEvent::Behaviour(BehaviourEvent::Deliver(
                request_response::Event::OutboundFailure {
                    request_id, error, ..
                },
            )) if request_id == id => return Err(error.to_string()),
            _ => {}
        }
    }
}

/// The one result of a one-envelope response: `Ok` with the verified receipt's ids, or
/// the refusal reason (then there must be no receipt).
fn outcome(response: DeliverResponse) -> Result<Vec<MsgId>, Refusal> {
    assert_eq!(response.results.len(), 1, "{response:?}");
    match &response.results[0].refused {
        Some(reason) => {
            assert!(
                response.receipt.is_none(),
                "refused ({reason}) yet receipted"
            );
            Err(reason.clone())
        }
        None => {
            let bytes = response.receipt.expect("accepted without a receipt");
            Ok(Signed::<Receipt>::decode(&bytes)
                .unwrap()
                .body()
                .msg_ids
                .clone())
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_deliveries_are_refused_or_stored_under_the_signed_sender() {
    let base = interlink_testkit::node::memory_base();
    let alice_id = Identity::from_seed(&[1; 32]);
    let bob_id = Identity::from_seed(&[2; 32]);
    let mallory_id = Identity::from_seed(&[3; 32]);
    let carol_id = Identity::from_seed(&[5; 32]);
    let eve_id = Identity::from_seed(&[66; 32]);
    let bob = start(
        base,
        2,
        "bob-1",
        &[
            ("alice", &alice_id),
            ("mallory", &mallory_id),
            ("carol", &carol_id),
        ],
        None,
    );
    let boot = Some((base, bob.handle().peer_id()));
    let alice = start(base + 1, 1, "alice-1", &[("bob", &bob_id)], boot);
    wait_roster(&[alice.handle(), bob.handle()], 2).await;

    // One genuine message in Bob's inbox, whose id the others then reuse.
    let genuine = delivered(
        alice
            .handle()
            .send(OutgoingMessage::text(bob.addr.clone(), "genuine"))
            .await
            .unwrap(),
    );
    let taken = genuine.msg_id;

    let config = Config {
        max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
        listen: vec![memory(base + 2)],
        mdns: false,
        ..Config::default()
    };
    let mut evil = raw_swarm(&config);
    let bob_peer = bob.handle().peer_id();
    evil.add_peer_address(bob_peer, memory(base));
    let to_bob = |from: &Identity, session: &str, id: MsgId, text: &str| {
        message(from, session, &bob.addr, &bob_id, id, text)
    };

    // A stranger's message: refused with the reason, no receipt.
    let fresh = to_bob(&eve_id, "eve-1", random_msg_id(), "let me in");
    let e = outcome(deliver(&mut evil, bob_peer, &[&fresh]).await).unwrap_err();
    assert_eq!(e.code, RefusalCode::NotPaired, "{e}");
    assert!(e.detail.contains("not a peer"), "{e}");
    // The same with the id of the message Bob holds: still refused as a stranger, not
    // answered as a retry of Alice's message (which would sign a receipt for it).
    let reused = to_bob(&eve_id, "eve-1", taken, "let me in");
    let e = outcome(deliver(&mut evil, bob_peer, &[&reused]).await).unwrap_err();
    assert_eq!(e.code, RefusalCode::NotPaired, "{e}");
    assert!(e.detail.contains("not a peer"), "{e}");
    // A peer reusing that id sends a message of its own: stored beside Alice's (it
    // cannot suppress or replace hers), receipted to Mallory, and its retry is a retry.
    let clash = to_bob(&mallory_id, "mallory-1", taken, "same id");
    assert_eq!(
        outcome(deliver(&mut evil, bob_peer, &[&clash]).await),
        Ok(vec![taken])
    );
    assert_eq!(
        outcome(deliver(&mut evil, bob_peer, &[&clash]).await),
        Ok(vec![taken])
    );
    // Alice's own retry of the stored message is answered again, receipted.
    let retry = to_bob(&alice_id, "alice-1", taken, "genuine");
    assert_eq!(
        outcome(deliver(&mut evil, bob_peer, &[&retry]).await),
        Ok(vec![taken])
    );

    // A peer's message whose unsigned reply-to names another identity's session: it is
    // stored, under the signed sender, with replies routed to the signed sending session.
    let carol = SessionAddr {
        key: carol_id.public(),
        session: SessionId::new("carol-1").unwrap(),
    };
    let forged =
        to_bob(&mallory_id, "mallory-1", random_msg_id(), "forged hint").with_reply_to(carol);
    let forged_id = forged.body().msg_id;
    assert_eq!(
        outcome(deliver(&mut evil, bob_peer, &[&forged]).await),
        Ok(vec![forged_id])
    );
    // A hint naming the sender's own other session is kept (the same identity).
    let own_other = SessionAddr {
        key: mallory_id.public(),
        session: SessionId::new("mallory-2").unwrap(),
    };
    let hinted = to_bob(&mallory_id, "mallory-1", random_msg_id(), "own hint")
        .with_reply_to(own_other.clone());
    let hinted_id = hinted.body().msg_id;
    assert_eq!(
        outcome(deliver(&mut evil, bob_peer, &[&hinted]).await),
        Ok(vec![hinted_id])
    );

    let (entries, _) = inbox::read_from(&bob.dir.path().join(INBOX_FILE), 0).unwrap();
    let lines: Vec<(String, String, String, Option<String>)> = entries
        .iter()
        .map(|e| {
            (
                e.msg_id.clone(),
                e.sender.clone(),
                e.reply_to.clone(),
                e.text.clone(),
            )
        })
        .collect();
    let mallory_1 = format!("{}#mallory-1", mallory_id.public());
    assert_eq!(
        lines,
        [
            (
                taken.to_string(),
                alice_id.public().to_hex(),
                format!("{}#alice-1", alice_id.public()),
                Some("genuine".into())
            ),
            (
                taken.to_string(),
                mallory_id.public().to_hex(),
                mallory_1.clone(),
                Some("same id".into())
            ),
            (
                forged_id.to_string(),
                mallory_id.public().to_hex(),
                mallory_1,
                Some("forged hint".into())
            ),
            (
                hinted_id.to_string(),
                mallory_id.public().to_hex(),
                own_other.to_string(),
                Some("own hint".into())
            ),
        ]
    );

    // A request of another protocol version is refused per envelope, nothing stored.
    let other_version = to_bob(&mallory_id, "mallory-1", MsgId::from_bytes([9; 16]), "v1");
    let request = DeliverRequest {
        v: VERSION - 1,
        envelopes: vec![ByteBuf::from(other_version.to_bytes())],
    };
    let response = request_raw(&mut evil, bob_peer, request).await.unwrap();
    assert_eq!(
        outcome(response).unwrap_err().code,
        interlink_core::wire::RefusalCode::UnsupportedVersion
    );

    // A request with no envelope (the spec says 1 to 64) is closed unanswered.
    let empty = DeliverRequest {
        v: VERSION,
        envelopes: Vec::new(),
    };
    let answer = request_raw(&mut evil, bob_peer, empty).await;
    assert!(answer.is_err(), "an empty request was answered: {answer:?}");

    drop(evil);
    alice.node.shutdown().await;
    bob.node.shutdown().await;
}
