//! Named groups end to end: three real `interlink-p2p mcp` processes on loopback
//! (explicit addresses, no mDNS), each its own user, all paired, driven over MCP stdio.
//!
//! Covered: alice creates the group `team` {bob, carol} and sees it in discover;
//! carol's session is not running (killed) when alice sends to `group:team` — bob's
//! copy is delivered, carol's queued, and carol gets it exactly once when her session
//! starts again; both recipients are shown the group line (the group, its thread and
//! every recipient session), framed as interlink's header; `message_status` of the
//! thread shows each member's copy moving on; bob replies to all (alice and carol get
//! it in the same thread) and then to alice alone (`in_reply_to` without `to`), which
//! stays in the thread too; a member removed from peers.json is skipped with the
//! reason. A second test: a member running two sessions (neither narrowed nor sticky)
//! gets a copy in each, and `interlink-p2p send --to group:<name>` from a shell reaches
//! every member session the same way.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::Duration;

use interlink_e2e::{
    framing,
    mcp_session::{McpSession, deadline, loopback_addr, sees, start_on_loopback},
    user::User,
};
use serde_json::{Value, json};

/// Whole-test deadline.
const TEST_DEADLINE: Duration = Duration::from_secs(180);

/// The unread messages of `s` once at least `n` are there (one step's deadline).
async fn unread(s: &McpSession, n: usize) -> Vec<Value> {
    let got = s
        .poll("receive_messages", json!({}), deadline(), |v| {
            v["messages"].as_array().is_some_and(|m| m.len() >= n)
        })
        .await
        .unwrap();
    got["messages"].as_array().unwrap().clone()
}

/// The header line interlink put above the block of the message `msg_id` in a
/// `receive_messages` text.
async fn header_of(s: &McpSession, msg_id: &str) -> String {
    let (text, _) = s.ok("receive_messages", json!({})).await.unwrap();
    let blocks = framing::blocks(&text).unwrap();
    blocks
        .into_iter()
        .map(|b| b.header)
        .find(|h| h.contains(msg_id))
        .unwrap_or_else(|| panic!("no block for {msg_id} in {text}"))
}

/// The `(petname, session)` pairs a message's group lists.
fn members(m: &Value) -> Vec<(String, String)> {
    m["group"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["petname"].as_str().unwrap_or("?").to_owned(),
                x["session_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn pair(names: &[(&str, &str)]) -> Vec<(String, String)> {
    names
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_message_reaches_every_member_once_and_replies_keep_its_thread() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let alice = User::new("alice", &[]).unwrap();
        let bob = User::new("bob", &[]).unwrap();
        let carol = User::new("carol", &[]).unwrap();
        let a = start_on_loopback(&alice, "g-a", None, &[]).await.unwrap();
        let boot = loopback_addr(&a).await;
        let b = start_on_loopback(&bob, "g-b", Some(&boot), &[])
            .await
            .unwrap();
        let c = start_on_loopback(&carol, "g-c", Some(&boot), &[])
            .await
            .unwrap();
        for (s, others) in [
            (&a, [&bob, &carol]),
            (&b, [&alice, &carol]),
            (&c, [&alice, &bob]),
        ] {
            // whoami waits for the node, so add_peer applies to it at once.
            s.ok("whoami", json!({})).await.unwrap();
            for o in others {
                s.ok("add_peer", json!({"name": o.name, "key": o.key}))
                    .await
                    .unwrap();
            }
        }
        sees(&a, "g-b").await.unwrap();
        sees(&a, "g-c").await.unwrap();

        // Only peers can be members; the group is in discover.
        let e = a
            .err(
                "group",
                json!({"name": "team", "members": ["bob", "0123456789abcdef"]}),
            )
            .await
            .unwrap();
        assert!(e.contains("only peers"), "{e}");
        let (text, g) = a
            .ok(
                "group",
                json!({"name": "team", "members": ["bob", "carol"]}),
            )
            .await
            .unwrap();
        assert!(text.starts_with("created group team: bob, carol"), "{text}");
        assert_eq!(g["size"], 2, "{g}");
        let (text, d) = a.ok("discover", json!({})).await.unwrap();
        assert!(text.contains("team: bob, carol"), "{text}");
        assert_eq!(d["groups"][0]["name"], "team", "{d}");
        assert_eq!(
            d["groups"][0]["members"].as_array().unwrap().len(),
            2,
            "{d}"
        );

        // Carol's session is not running when alice writes to the group.
        c.kill(deadline()).await.unwrap();
        let (text, sent) = a
            .ok(
                "send_message",
                json!({"to": "group:team", "text": "standup at ten", "task_id": "t-9"}),
            )
            .await
            .unwrap();
        assert_eq!(
            sent["status"], "queued",
            "bob delivered, carol queued: {text}"
        );
        assert_eq!(sent["group"], "team");
        let thread = sent["thread"].as_str().unwrap().to_owned();
        let copies = sent["recipients"].as_array().unwrap();
        let by_name = |n: &str| copies.iter().find(|r| r["to"] == n).unwrap().clone();
        assert_eq!(by_name("bob")["status"], "delivered", "{text}");
        assert_eq!(by_name("bob")["session_id"], "g-b");
        assert_eq!(by_name("carol")["status"], "queued", "{text}");
        assert_eq!(by_name("carol")["session_id"], "g-c");
        assert_eq!(sent["skipped"], json!([]), "{text}");
        assert!(
            text.contains(&format!("message_status({thread})")),
            "{text}"
        );

        // Bob sees the group, its thread and every recipient, in interlink's header.
        let got = unread(&b, 1).await;
        let m = &got[0];
        assert_eq!(m["text"], "standup at ten");
        assert_eq!(m["task_id"], "t-9");
        assert_eq!(m["group"]["name"], "team");
        assert_eq!(m["group"]["thread"], thread.as_str());
        assert_eq!(members(m), pair(&[("self", "g-b"), ("carol", "g-c")]));
        let bob_copy = m["msg_id"].as_str().unwrap().to_owned();
        let header = header_of(&b, &bob_copy).await;
        assert!(
            header.contains(&format!(
                "group \"team\" (to: self/g-b, carol/g-c; thread {thread})"
            )) && header.ends_with("(verified sender):"),
            "{header}"
        );

        // Alice's view of the thread: one copy per member, each with its state.
        let (text, st) = a
            .ok("message_status", json!({"msg_id": &thread}))
            .await
            .unwrap();
        let states: Vec<(String, String)> = st["copies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["to"].as_str().unwrap().to_owned(),
                    c["state"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            states,
            pair(&[("bob", "delivered"), ("carol", "queued")]),
            "{text}"
        );
        assert!(text.contains("carol session g-c"), "{text}");

        // Carol's session starts again and gets the message from its mailbox, once.
        let c = start_on_loopback(&carol, "g-c", Some(&boot), &[])
            .await
            .unwrap();
        let got = unread(&c, 1).await;
        assert_eq!(got.len(), 1, "{got:?}");
        let m = &got[0];
        assert_eq!(m["text"], "standup at ten");
        assert_eq!(m["group"]["thread"], thread.as_str());
        assert_eq!(members(m), pair(&[("bob", "g-b"), ("self", "g-c")]));
        let carol_copy = m["msg_id"].as_str().unwrap().to_owned();
        assert_ne!(carol_copy, bob_copy, "one envelope per recipient session");
        let header = header_of(&c, &carol_copy).await;
        assert!(
            header.contains(&format!(
                "group \"team\" (to: bob/g-b, self/g-c; thread {thread})"
            )),
            "{header}"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (_, again) = c.ok("receive_messages", json!({})).await.unwrap();
        assert_eq!(
            again["messages"].as_array().unwrap().len(),
            1,
            "still once: {again}"
        );
        // Alice learns carol's copy arrived; bob's is read once he acknowledges it.
        b.ok("acknowledge_messages", json!({"msg_ids": [&bob_copy]}))
            .await
            .unwrap();
        let st = a
            .poll(
                "message_status",
                json!({"msg_id": &thread}),
                deadline(),
                |v| {
                    let copies = v["copies"].as_array().cloned().unwrap_or_default();
                    let state = |n: &str| {
                        copies
                            .iter()
                            .find(|c| c["to"] == n)
                            .map(|c| c["state"].clone())
                    };
                    state("bob") == Some(json!("read"))
                        && state("carol") == Some(json!("delivered"))
                },
            )
            .await
            .unwrap();
        assert_eq!(st["group"], "team", "{st}");

        // Bob replies to the whole group: alice and carol, in the same thread.
        let (text, all) = b
            .ok(
                "send_message",
                json!({"in_reply_to": &bob_copy, "reply_all": true, "text": "I will be late"}),
            )
            .await
            .unwrap();
        assert_eq!(all["thread"], thread.as_str(), "{text}");
        assert_eq!(all["group"], "team");
        let mut to: Vec<(String, String)> = all["recipients"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["to"].as_str().unwrap().to_owned(),
                    r["session_id"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        to.sort();
        assert_eq!(to, pair(&[("alice", "g-a"), ("carol", "g-c")]), "{text}");
        let got = unread(&a, 1).await;
        let m = got.iter().find(|m| m["text"] == "I will be late").unwrap();
        assert_eq!(m["from"], "bob");
        assert_eq!(m["in_reply_to"], bob_copy.as_str());
        assert_eq!(m["group"]["thread"], thread.as_str());
        assert_eq!(members(m), pair(&[("self", "g-a"), ("carol", "g-c")]));
        let to_alice = m["msg_id"].as_str().unwrap().to_owned();
        let header = header_of(&a, &to_alice).await;
        assert!(
            header.contains(&format!(
                "group \"team\" (to: self/g-a, carol/g-c; thread {thread})"
            )),
            "{header}"
        );
        let got = unread(&c, 2).await;
        let m = got.iter().find(|m| m["text"] == "I will be late").unwrap();
        assert_eq!(m["group"]["thread"], thread.as_str());
        assert_eq!(members(m), pair(&[("alice", "g-a"), ("self", "g-c")]));

        // A reply without `to` goes to the sender alone, still in the thread.
        let (text, one) = b
            .ok(
                "send_message",
                json!({"in_reply_to": &bob_copy, "text": "only to you"}),
            )
            .await
            .unwrap();
        assert_eq!(
            (&one["to"], &one["session_id"], &one["status"]),
            (&json!("alice"), &json!("g-a"), &json!("delivered")),
            "{text}"
        );
        assert_eq!(one["thread"], thread.as_str(), "{text}");
        let got = unread(&a, 2).await;
        let m = got.iter().find(|m| m["text"] == "only to you").unwrap();
        assert_eq!(m["group"]["thread"], thread.as_str());
        assert_eq!(members(m), pair(&[("self", "g-a")]));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (_, c_now) = c.ok("receive_messages", json!({})).await.unwrap();
        assert!(
            c_now["messages"]
                .as_array()
                .unwrap()
                .iter()
                .all(|m| m["text"] != "only to you"),
            "carol is not in a reply to the sender alone: {c_now}"
        );
        // Bob's own view of the thread: his three copies.
        let (_, bt) = b
            .ok("message_status", json!({"msg_id": &thread}))
            .await
            .unwrap();
        assert_eq!(bt["copies"].as_array().unwrap().len(), 3, "{bt}");

        // A member removed from peers.json stays in the group, marked, and gets no copy.
        a.ok("remove_peer", json!({"name": "carol"})).await.unwrap();
        let (text, _) = a.ok("group", json!({})).await.unwrap();
        assert!(text.contains("(not a peer any more)"), "{text}");
        let (text, sent) = a
            .ok(
                "send_message",
                json!({"to": "group:team", "text": "without carol"}),
            )
            .await
            .unwrap();
        assert_eq!(sent["status"], "partial", "{text}");
        assert_eq!(sent["recipients"].as_array().unwrap().len(), 1, "{text}");
        assert_eq!(sent["recipients"][0]["to"], "bob");
        assert_eq!(
            sent["skipped"][0]["identity_key"],
            carol.key.as_str(),
            "{text}"
        );
        assert!(
            sent["skipped"][0]["reason"]
                .as_str()
                .unwrap()
                .contains("not a peer any more"),
            "{text}"
        );
        let m = unread(&b, 1)
            .await
            .into_iter()
            .find(|m| m["text"] == "without carol");
        assert!(m.is_some_and(|m| members(&m) == pair(&[("self", "g-b")])));

        // Stdout stayed JSON-RPC only.
        for s in [&a, &b, &c] {
            assert_eq!(s.non_jsonrpc_stdout(), Vec::<String>::new());
        }
        for s in [a, b, c] {
            s.close(deadline()).await.unwrap();
        }
    })
    .await
    .expect("test deadline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_session_of_a_member_gets_a_copy_and_the_shell_sends_to_groups_too() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let alice = User::new("alice", &[]).unwrap();
        let bob = User::new("bob", &[]).unwrap();
        let carol = User::new("carol", &[]).unwrap();
        let a = start_on_loopback(&alice, "f-a", None, &[]).await.unwrap();
        let boot = loopback_addr(&a).await;
        let b1 = start_on_loopback(&bob, "f-b1", Some(&boot), &[])
            .await
            .unwrap();
        let b2 = start_on_loopback(&bob, "f-b2", Some(&boot), &[])
            .await
            .unwrap();
        let c = start_on_loopback(&carol, "f-c", Some(&boot), &[])
            .await
            .unwrap();
        a.ok("whoami", json!({})).await.unwrap();
        for o in [&bob, &carol] {
            a.ok("add_peer", json!({"name": o.name, "key": o.key}))
                .await
                .unwrap();
        }
        for s in [&b1, &b2, &c] {
            s.ok("whoami", json!({})).await.unwrap();
            s.ok("add_peer", json!({"name": "alice", "key": alice.key}))
                .await
                .unwrap();
        }
        for session in ["f-b1", "f-b2", "f-c"] {
            sees(&a, session).await.unwrap();
        }
        a.ok(
            "group",
            json!({"name": "crew", "members": ["bob", "carol"]}),
        )
        .await
        .unwrap();

        // Bob runs two live sessions and neither is sticky: a direct message would have
        // to name one; the group message goes to each.
        let (text, sent) = a
            .ok(
                "send_message",
                json!({"to": "group:crew", "text": "all hands"}),
            )
            .await
            .unwrap();
        assert_eq!(sent["status"], "delivered", "{text}");
        let mut to: Vec<(String, String)> = sent["recipients"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["to"].as_str().unwrap().to_owned(),
                    r["session_id"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        to.sort();
        assert_eq!(
            to,
            pair(&[("bob", "f-b1"), ("bob", "f-b2"), ("carol", "f-c")]),
            "{text}"
        );
        for r in sent["recipients"].as_array().unwrap() {
            if r["to"] == "bob" {
                assert!(
                    r["route"]
                        .as_str()
                        .unwrap()
                        .contains("each of which gets a copy"),
                    "{text}"
                );
            }
        }
        let thread = sent["thread"].as_str().unwrap().to_owned();
        for s in [&b1, &b2] {
            let got = unread(s, 1).await;
            assert_eq!(got.len(), 1, "{got:?}");
            assert_eq!(got[0]["text"], "all hands");
            assert_eq!(got[0]["group"]["thread"], thread.as_str());
            assert_eq!(
                members(&got[0]).len(),
                3,
                "every recipient session is listed: {got:?}"
            );
        }

        // The same from a shell: one stdout line per copy, each delivered.
        let (out, _) = alice
            .send(&boot, "group:crew", &["from the shell"], None)
            .unwrap();
        assert!(out.status.success(), "{}", out.stderr);
        let mut lines: Vec<(String, String)> = out
            .stdout
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                assert_eq!(f.len(), 3, "{l}");
                assert_eq!(f[0], "delivered", "{l}\n{}", out.stderr);
                (f[2].to_owned(), f[1].to_owned())
            })
            .collect();
        lines.sort();
        let who: Vec<&str> = lines.iter().map(|(w, _)| w.as_str()).collect();
        assert_eq!(who, ["bob/f-b1", "bob/f-b2", "carol/f-c"], "{}", out.stderr);
        for (s, session) in [(&b1, "f-b1"), (&b2, "f-b2"), (&c, "f-c")] {
            let got = unread(s, 2).await;
            let m = got
                .iter()
                .find(|m| m["text"] == "from the shell")
                .unwrap_or_else(|| panic!("{session}: {got:?}"));
            assert_eq!(m["from"], "alice");
            assert_eq!(m["group"]["name"], "crew");
            let id = lines
                .iter()
                .find(|(w, _)| w.ends_with(session))
                .map(|(_, id)| id.as_str())
                .unwrap();
            assert_eq!(m["msg_id"], id, "{m}");
        }
        // An unknown group is an error naming the user's groups; nothing is sent.
        let (out, _) = alice.send(&boot, "group:nope", &["x"], None).unwrap();
        assert!(!out.status.success());
        assert!(out.stderr.contains("crew"), "{}", out.stderr);

        for s in [&a, &b1, &b2, &c] {
            assert_eq!(s.non_jsonrpc_stdout(), Vec::<String>::new());
        }
        for s in [a, b1, b2, c] {
            s.close(deadline()).await.unwrap();
        }
    })
    .await
    .expect("test deadline");
}
