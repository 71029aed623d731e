//! Hostile input reaching an MCP session over the network: real `interlink-p2p mcp`
//! processes with their own homes on loopback (explicit bootstrap, no mDNS), driven by
//! an rmcp client, plus what an attacker sends.
//!
//! Covered: a stranger's message — from its MCP session and from the `send` command —
//! is refused with the reason and reaches neither the inbox nor the agent (not by
//! `receive_messages`, not as a channel notification), while the same stranger's knock
//! is held for the operator; a peer's message whose unsigned `reply_to` names another
//! identity's session is shown under the verified sender, and the reply and the read
//! receipt go to the sender's signed session, never to the named one.
//!
//! The forged envelope comes from a raw libp2p swarm speaking the deliver protocol, as
//! an attacker's would: the production `Handle` cannot attach a forged hint, and the
//! recipient verifies every envelope on its own, whatever connection it arrives on.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::Duration;

use futures::StreamExt as _;
use interlink_core::{
    Identity, IdentityKey, MsgId, SessionId,
    wire::{
        Announcement, DeliverRequest, DeliverResponse, Envelope, Receipt, RosterRequest,
        RosterResponse, SessionAddr, Signed, VERSION,
    },
};
use interlink_e2e::{
    framing,
    mcp_session::{McpSession, STEADY, deadline, loopback_addr, sees, start_on_loopback},
    user::User,
};
use interlink_net::behaviour::{Behaviour, BehaviourEvent};
use interlink_testkit::{
    ids::{random_msg_id, sys_rng},
    node, signed,
};
use libp2p::{Multiaddr, PeerId, Swarm, multiaddr::Protocol, request_response, swarm::SwarmEvent};
use serde_bytes::ByteBuf;
use serde_json::{Value, json};

const TEST_DEADLINE: Duration = Duration::from_secs(120);

async fn start(user: &User, session: &str, boot: Option<&str>, env: &[(&str, &str)]) -> McpSession {
    start_on_loopback(user, session, boot, env).await.unwrap()
}

/// The lines of a session's inbox file (none if it does not exist yet).
fn inbox_lines(user: &User, session: &str) -> Vec<Value> {
    let path = user
        .home()
        .join("sessions")
        .join(session)
        .join("inbox.jsonl");
    // The data ends where the padding (spaces) starts (docs/DELIVERY.md).
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_inclusive('\n')
        .take_while(|l| l.ends_with('\n') && !l.starts_with(' '))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn messages(received: &Value) -> &Vec<Value> {
    received["messages"].as_array().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_message_is_refused_and_never_reaches_the_agent() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let bob = User::new("bob", STEADY).unwrap();
        let carol = User::new("carol", STEADY).unwrap();
        let eve = User::new("eve", STEADY).unwrap();
        // Bob has two sessions: one reads its inbox, one gets channel notifications.
        let b = start(&bob, "st-b", None, &[]).await;
        let boot = loopback_addr(&b).await;
        let mut bc = start(&bob, "st-bc", Some(&boot), &[("INTERLINK_CHANNELS", "1")]).await;
        let c = start(&carol, "st-c", Some(&boot), &[]).await;
        let e = start(&eve, "st-e", Some(&boot), &[("INTERLINK_NAME", "eve")]).await;
        // Both of Bob's nodes apply the policy at once (add_peer refreshes its own).
        for s in [&b, &bc] {
            s.ok("add_peer", json!({"name": "carol", "key": carol.key}))
                .await
                .unwrap();
        }
        c.ok("add_peer", json!({"name": "bob", "key": bob.key}))
            .await
            .unwrap();
        for viewer in [&e, &c] {
            sees(viewer, "st-b").await.unwrap();
            sees(viewer, "st-bc").await.unwrap();
        }
        let (_, who) = b.ok("whoami", json!({})).await.unwrap();
        let bob_fp = who["fingerprint"].as_str().unwrap().to_owned();

        // Eve may knock: her request is held for Bob's operator.
        let (_, knocked) = e
            .ok("request_pair", json!({"target": bob_fp, "session": "st-b"}))
            .await
            .unwrap();
        assert_eq!(knocked["status"], "delivered", "{knocked}");
        let held = b
            .poll("list_pair_requests", json!({}), deadline(), |v| {
                v["incoming"].as_array().is_some_and(|i| !i.is_empty())
            })
            .await
            .unwrap();
        assert_eq!(
            held["incoming"][0]["identity_key"],
            eve.key.as_str(),
            "{held}"
        );

        // Then her operator pins Bob's key on her side only, and she writes. From her
        // MCP session: refused by Bob's node, with the reason and what Bob's operator
        // would have to do.
        e.ok("add_peer", json!({"name": "bob", "key": bob.key}))
            .await
            .unwrap();
        let err = e
            .err(
                "send_message",
                json!({"to": "bob", "session": "st-bc", "text": "stranger via mcp"}),
            )
            .await
            .unwrap();
        assert!(
            err.contains("refused") && err.contains("not a peer") && err.contains(&eve.key),
            "{err}"
        );
        // From the command line: exit 1, the reason on stderr, no outcome line.
        let (out, _) = eve
            .send(
                &boot,
                "bob",
                &["--session", "st-b", "stranger via cli"],
                None,
            )
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}{}", out.stdout, out.stderr);
        assert!(
            out.stderr.contains("not a peer") && out.stderr.contains("strangers may only knock"),
            "{}",
            out.stderr
        );
        assert_eq!(out.stdout, "");

        // A peer's messages after them: each session's inbox is appended in arrival
        // order and pushed in inbox order, so anything of Eve's that got in would come
        // first.
        for (session, text) in [("st-b", "from carol 1"), ("st-bc", "from carol 2")] {
            let (_, sent) = c
                .ok(
                    "send_message",
                    json!({"to": "bob", "session": session, "text": text}),
                )
                .await
                .unwrap();
            assert_eq!(sent["status"], "delivered", "{sent}");
        }

        // The inbox session: only Carol's message, for the agent and on disk.
        let (text, got) = b.ok("receive_messages", json!({})).await.unwrap();
        let got = messages(&got);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(
            (&got[0]["sender_key"], &got[0]["text"]),
            (&json!(carol.key), &json!("from carol 1"))
        );
        assert!(!text.contains("stranger"), "{text}");
        // The channel session: Carol's message is the first notification, and the last.
        let note = tokio::time::timeout(Duration::from_secs(10), bc.notes.recv())
            .await
            .expect("no channel notification")
            .unwrap();
        let params = note.params.unwrap();
        assert_eq!(params["meta"]["sender_key"], json!(carol.key));
        let content = params["content"].as_str().unwrap();
        assert_eq!(
            framing::only_block(content).unwrap().body(),
            "from carol 2",
            "{content}"
        );
        assert!(bc.notes.try_recv().is_err(), "a second notification");
        for session in ["st-b", "st-bc"] {
            let lines = inbox_lines(&bob, session);
            assert_eq!(lines.len(), 1, "{session}: {lines:?}");
            assert_eq!(lines[0]["sender"], carol.key.as_str(), "{session}");
        }

        // The knock is still held for the operator, and Eve is no peer of Bob's.
        let (who_text, _) = b.ok("whoami", json!({})).await.unwrap();
        assert!(who_text.contains("pair request"), "{who_text}");
        let (_, requests) = b.ok("list_pair_requests", json!({})).await.unwrap();
        assert_eq!(requests["incoming"][0]["identity_key"], eve.key.as_str());
        let (_, peers) = b.ok("list_peers", json!({})).await.unwrap();
        assert_eq!(peers["peers"].as_array().unwrap().len(), 1, "{peers}");
        assert_eq!(peers["peers"][0]["name"], "carol");
        for s in [&b, &bc, &c, &e] {
            assert_eq!(s.non_jsonrpc_stdout(), Vec::<String>::new());
        }
    })
    .await
    .expect("test deadline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_reply_to_is_ignored_and_the_reply_goes_to_the_signed_sender() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let bob = User::new("bob", STEADY).unwrap();
        let carol = User::new("carol", STEADY).unwrap();
        let mallory = User::new("mallory", STEADY).unwrap();
        let b = start(&bob, "fr-b", None, &[]).await;
        let boot = loopback_addr(&b).await;
        let c = start(&carol, "fr-c", Some(&boot), &[]).await;
        // Mallory has two live sessions, so a reply reaches the first only if Bob
        // learnt it from the message (the sticky route), not by elimination.
        let m1 = start(&mallory, "fr-m1", Some(&boot), &[]).await;
        let m2 = start(&mallory, "fr-m2", Some(&boot), &[]).await;
        for (name, key) in [("carol", &carol.key), ("mallory", &mallory.key)] {
            b.ok("add_peer", json!({"name": name, "key": key}))
                .await
                .unwrap();
        }
        c.ok("add_peer", json!({"name": "bob", "key": bob.key}))
            .await
            .unwrap();
        for m in [&m1, &m2] {
            m.ok("add_peer", json!({"name": "bob", "key": bob.key}))
                .await
                .unwrap();
        }
        for s in ["fr-c", "fr-m1", "fr-m2"] {
            sees(&b, s).await.unwrap();
        }
        let (_, who) = m1.ok("whoami", json!({})).await.unwrap();
        let mallory_fp = who["fingerprint"].as_str().unwrap().to_owned();

        // Mallory signs a message from her session fr-m1 to Bob, and attaches an
        // unsigned reply-to hint naming Carol's session.
        let boot_addr: Multiaddr = boot.parse().unwrap();
        let mut evil = Evil::new(&boot_addr);
        let bob_key: IdentityKey = bob.key.parse().unwrap();
        let ann = evil.announcement(&bob_key, "fr-b").await;
        let (mallory_id, _) =
            interlink_p2p::load_identity(&interlink_p2p::paths::Home::new(mallory.home())).unwrap();
        let carol_addr = SessionAddr {
            key: carol.key.parse().unwrap(),
            session: SessionId::new("fr-c").unwrap(),
        };
        let forged = sealed_message(&mallory_id, "fr-m1", &ann, "which branch should I use?")
            .with_reply_to(carol_addr.clone());
        assert_eq!(forged.raw_reply_to(), Some(&carol_addr));
        let forged_id = forged.body().msg_id;
        // Bob's node takes it (a peer's validly signed message) and receipts it.
        let response = evil.deliver(&forged).await;
        assert_eq!(response.results.len(), 1, "{response:?}");
        assert_eq!(response.results[0].refused, None, "{response:?}");
        let receipt = Signed::<Receipt>::decode(&response.receipt.unwrap()).unwrap();
        assert_eq!(receipt.body().recipient, bob_key);
        assert_eq!(receipt.body().msg_ids, [forged_id]);

        // Bob's agent sees Mallory, verified, as the sender — and her own session as
        // where replies go.
        let m1_route = format!("{}#fr-m1", mallory.key);
        let (text, got) = b.ok("receive_messages", json!({})).await.unwrap();
        let got = messages(&got);
        assert_eq!(got.len(), 1, "{got:?}");
        let m = &got[0];
        assert_eq!(m["msg_id"], forged_id.to_string());
        assert_eq!(m["from"], "mallory");
        assert_eq!(m["sender_key"], mallory.key.as_str());
        assert_eq!(m["sender_fingerprint"], mallory_fp.as_str());
        assert_eq!(m["sender_session"], "fr-m1");
        assert_eq!(m["reply_to"], m1_route.as_str());
        assert!(text.contains("from mallory ("), "{text}");
        assert!(
            !text.contains("carol") && !text.contains(&carol.key),
            "{text}"
        );
        let lines = inbox_lines(&bob, "fr-b");
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(
            (&lines[0]["sender"], &lines[0]["reply_to"]),
            (&json!(mallory.key), &json!(m1_route))
        );

        // Bob answers the sender: the reply goes to fr-m1, as the session she last
        // wrote from.
        let (_, reply) = b
            .ok(
                "send_message",
                json!({"to": "mallory", "text": "use main", "in_reply_to": forged_id.to_string()}),
            )
            .await
            .unwrap();
        assert_eq!(reply["status"], "delivered", "{reply}");
        assert_eq!(
            (&reply["session_id"], &reply["route"]),
            (&json!("fr-m1"), &json!("the peer's last sending session"))
        );
        let answered = m1
            .poll("receive_messages", json!({}), deadline(), |v| {
                !messages(v).is_empty()
            })
            .await
            .unwrap();
        let a = &messages(&answered)[0];
        assert_eq!(
            (&a["from"], &a["text"], &a["in_reply_to"]),
            (
                &json!("bob"),
                &json!("use main"),
                &json!(forged_id.to_string())
            )
        );

        // Acknowledging sends the read receipt back the same way: to fr-m1.
        b.ok(
            "acknowledge_messages",
            json!({"msg_ids": [forged_id.to_string()]}),
        )
        .await
        .unwrap();
        let receipted = wait_for_line(&mallory, "fr-m1", |l| {
            l["kind"] == "read" && l["in_reply_to"] == forged_id.to_string()
        })
        .await;
        assert_eq!(receipted["sender"], bob.key.as_str());

        // Both went to fr-m1; Carol's session and Mallory's other one got nothing.
        let (_, none) = c.ok("receive_messages", json!({})).await.unwrap();
        assert_eq!(messages(&none), &Vec::<Value>::new());
        assert_eq!(inbox_lines(&carol, "fr-c"), Vec::<Value>::new());
        let (_, none) = m2.ok("receive_messages", json!({})).await.unwrap();
        assert_eq!(messages(&none), &Vec::<Value>::new());
        assert_eq!(inbox_lines(&mallory, "fr-m2"), Vec::<Value>::new());
        for s in [&b, &c, &m1, &m2] {
            assert_eq!(s.non_jsonrpc_stdout(), Vec::<String>::new());
        }
    })
    .await
    .expect("test deadline");
}

/// Ids of queued mail are visible to every mailbox holder. A paired peer that copies
/// the id of Alice's message queued for Bob into a message of its own, and gets it to
/// Bob first while Alice's node is stopped, stores its own message — and Alice's still
/// arrives, is receipted to her and shows `delivered`. A stranger's copy is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copied_message_id_cannot_suppress_a_queued_message() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let alice = User::new("alice", STEADY).unwrap();
        let bob = User::new("bob", STEADY).unwrap();
        let mallory = User::new("mallory", STEADY).unwrap();
        let eve = User::new("eve", STEADY).unwrap();
        let a = start(&alice, "cp-a", None, &[]).await;
        let boot = loopback_addr(&a).await;
        let b = start(&bob, "cp-b", Some(&boot), &[]).await;
        a.ok("add_peer", json!({"name": "bob", "key": bob.key}))
            .await
            .unwrap();
        for (name, key) in [("alice", &alice.key), ("mallory", &mallory.key)] {
            b.ok("add_peer", json!({"name": name, "key": key}))
                .await
                .unwrap();
        }
        sees(&a, "cp-b").await.unwrap();
        b.close(deadline()).await.unwrap();
        a.poll("discover", json!({}), deadline(), |v| {
            !v.to_string().contains("cp-b")
        })
        .await
        .unwrap();
        let (text, sent) = a
            .ok(
                "send_message",
                json!({"to": "bob", "session": "cp-b", "text": "genuine"}),
            )
            .await
            .unwrap();
        assert_eq!(sent["status"], "queued", "{text}");
        let taken: MsgId = sent["msg_id"].as_str().unwrap().parse().unwrap();

        // Alice's node stops: it can neither retry nor serve Bob's mailbox while the
        // copies race in.
        let pid = a.pid().unwrap().to_string();
        assert!(
            std::process::Command::new("kill")
                .args(["-STOP", &pid])
                .status()
                .unwrap()
                .success()
        );
        let b = start(&bob, "cp-b", Some(&boot), &[]).await;
        let b_addr: Multiaddr = loopback_addr(&b).await.parse().unwrap();
        let mut evil = Evil::new(&b_addr);
        let bob_key: IdentityKey = bob.key.parse().unwrap();
        let ann = evil.announcement(&bob_key, "cp-b").await;
        let (mallory_id, _) =
            interlink_p2p::load_identity(&interlink_p2p::paths::Home::new(mallory.home())).unwrap();
        let (eve_id, _) =
            interlink_p2p::load_identity(&interlink_p2p::paths::Home::new(eve.home())).unwrap();
        // The stranger's copy is refused as a stranger's; the peer's is its own message.
        let response = evil
            .deliver(&sealed_message_with_id(
                &eve_id, "cp-e", &ann, "me too", taken,
            ))
            .await;
        assert!(response.receipt.is_none(), "{response:?}");
        let refusal = response.results[0].refused.as_ref().expect("refused");
        assert_eq!(
            refusal.code,
            interlink_core::wire::RefusalCode::NotPaired,
            "{refusal}"
        );
        let response = evil
            .deliver(&sealed_message_with_id(
                &mallory_id,
                "cp-m",
                &ann,
                "copied id",
                taken,
            ))
            .await;
        assert_eq!(response.results[0].refused, None, "{response:?}");
        let receipt = Signed::<Receipt>::decode(response.receipt.as_ref().unwrap()).unwrap();
        assert_eq!(
            receipt.body().sender,
            mallory_id.public(),
            "receipted to its own sender"
        );

        assert!(
            std::process::Command::new("kill")
                .args(["-CONT", &pid])
                .status()
                .unwrap()
                .success()
        );
        let got = b
            .poll("receive_messages", json!({}), deadline(), |v| {
                messages(v).len() >= 2
            })
            .await
            .unwrap();
        let mut seen: Vec<(String, String)> = messages(&got)
            .iter()
            .map(|m| {
                (
                    m["from"].as_str().unwrap().to_owned(),
                    m["text"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        seen.sort();
        assert_eq!(
            seen,
            vec![
                ("alice".into(), "genuine".into()),
                ("mallory".into(), "copied id".into())
            ],
            "both stored, each under its verified sender"
        );
        // The agent handled the copy: acknowledging the bare id must not consume the
        // genuine message unread. The id is ambiguous; each is named by its sender.
        let copy = messages(&got)
            .iter()
            .find(|m| m["from"] == "mallory")
            .unwrap()
            .clone();
        let ack_id = copy["ack_id"].as_str().expect("an ack_id for a shared id");
        assert_eq!(ack_id, format!("{}:{taken}", mallory.key));
        let err = b
            .err(
                "acknowledge_messages",
                json!({"msg_ids": [taken.to_string()]}),
            )
            .await
            .unwrap();
        assert!(err.contains("more than one sender"), "{err}");
        b.ok("acknowledge_messages", json!({"msg_ids": [ack_id]}))
            .await
            .unwrap();
        let (_, left) = b.ok("receive_messages", json!({})).await.unwrap();
        let left = messages(&left);
        assert_eq!(left.len(), 1, "{left:?}");
        assert_eq!(left[0]["text"], "genuine");
        assert!(
            left[0].get("ack_id").is_none(),
            "alone now: its id is unique"
        );
        a.poll(
            "message_status",
            json!({"msg_id": taken.to_string()}),
            deadline(),
            |v| v["state"] == "delivered",
        )
        .await
        .unwrap();
        b.close(deadline()).await.unwrap();
        a.close(deadline()).await.unwrap();
    })
    .await
    .expect("test deadline");
}

/// Polls `user`'s inbox of `session` until a line matches `check`; returns it.
async fn wait_for_line(user: &User, session: &str, check: impl Fn(&Value) -> bool) -> Value {
    let until = deadline();
    loop {
        if let Some(line) = inbox_lines(user, session).into_iter().find(|l| check(l)) {
            return line;
        }
        assert!(
            std::time::Instant::now() < until,
            "{session}: no such inbox line; it holds {:?}",
            inbox_lines(user, session)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A message from `from`'s session `from_session` to the session `to` announced,
/// sealed to the sealing key of that announcement and signed by `from`.
fn sealed_message(
    from: &Identity,
    from_session: &str,
    to: &Announcement,
    text: &str,
) -> Signed<Envelope> {
    sealed_message_with_id(from, from_session, to, text, random_msg_id())
}

/// Like [`sealed_message`], under the message id `msg_id` (an attacker's copy of one).
fn sealed_message_with_id(
    from: &Identity,
    from_session: &str,
    to: &Announcement,
    text: &str,
    msg_id: MsgId,
) -> Signed<Envelope> {
    let to_addr = SessionAddr {
        key: to.identity,
        session: to.session_id.clone(),
    };
    signed::envelope(
        from.public(),
        &SessionId::new(from_session).unwrap(),
        &to_addr,
        msg_id,
        interlink_net::Clock::system().now_ms(),
    )
    .sealed(text, &to.sealing.key, &mut sys_rng())
    .sign(from)
}

/// An attacker's node: a bare swarm with the overlay's protocols and no session logic,
/// connected to one target node.
struct Evil {
    swarm: Swarm<Behaviour>,
    target: PeerId,
}

impl Evil {
    /// A swarm on loopback that will talk to the node at `addr` (ending in `/p2p/<id>`).
    fn new(addr: &Multiaddr) -> Self {
        let mut addr = addr.clone();
        let Some(Protocol::P2p(target)) = addr.pop() else {
            panic!("{addr} does not end in /p2p/<peer id>");
        };
        let config = interlink_net::Config {
            listen: vec!["/ip4/127.0.0.1/tcp/0".parse().unwrap()],
            mdns: false,
            ..interlink_net::Config::default()
        };
        let mut swarm = node::raw_swarm(&config);
        swarm.add_peer_address(target, addr);
        Self { swarm, target }
    }

    /// The announcement of `key`'s session `session`, from the target's roster.
    async fn announcement(&mut self, key: &IdentityKey, session: &str) -> Announcement {
        let id = self
            .swarm
            .behaviour_mut()
            .roster
            .send_request(&self.target, RosterRequest::default());
        let response: RosterResponse = self
            .until(|ev| match ev {
                BehaviourEvent::Roster(request_response::Event::Message {
                    message:
                        request_response::Message::Response {
                            request_id,
                            response,
                        },
                    ..
                }) if request_id == id => Some(Ok(response)),
                BehaviourEvent::Roster(request_response::Event::OutboundFailure {
                    request_id,
                    error,
                    ..
                }) if request_id == id => Some(Err(error.to_string())),
                _ => None,
            })
            .await;
        response
            .announcements
            .iter()
            .filter_map(|b| Signed::<Announcement>::decode(b).ok())
            .map(|a| a.body().clone())
            .find(|a| a.identity == *key && a.session_id.as_str() == session)
            .unwrap_or_else(|| panic!("{session} is not on the target's roster"))
    }

    /// Delivers `env` as it is (one delivery request) and returns the answer.
    async fn deliver(&mut self, env: &Signed<Envelope>) -> DeliverResponse {
        let request = DeliverRequest {
            v: VERSION,
            envelopes: vec![ByteBuf::from(env.to_bytes())],
        };
        let id = self
            .swarm
            .behaviour_mut()
            .deliver
            .send_request(&self.target, request);
        self.until(|ev| match ev {
            BehaviourEvent::Deliver(request_response::Event::Message {
                message:
                    request_response::Message::Response {
                        request_id,
                        response,
                    },
                ..
            }) if request_id == id => Some(Ok(response)),
            BehaviourEvent::Deliver(request_response::Event::OutboundFailure {
                request_id,
                error,
                ..
            }) if request_id == id => Some(Err(error.to_string())),
            _ => None,
        })
        .await
    }

    /// Drives the swarm until `pick` returns an outcome (one step's deadline).
    async fn until<T>(
        &mut self,
        mut pick: impl FnMut(BehaviourEvent) -> Option<Result<T, String>>,
    ) -> T {
        let until = tokio::time::Instant::now() + interlink_e2e::process::DEADLINE;
        loop {
            let ev = tokio::time::timeout_at(until, self.swarm.select_next_some())
                .await
                .expect("the target never answered");
            if let SwarmEvent::Behaviour(ev) = ev
                && let Some(outcome) = pick(ev)
            {
                return outcome.unwrap_or_else(|e| panic!("request failed: {e}"));
            }
        }
    }
}
