//! Mail to sessions that are not there: real `interlink-p2p mcp` processes on loopback,
//! driven over MCP stdio, with and without a relay.
//!
//! Covered: a paired session that closed cleanly (its goodbye took it off every roster)
//! is still written to by its full id — each message `queued` with the gone warning —
//! and gets every message once, in order, when it comes back under that id.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::Duration;

use interlink_e2e::{
    mcp_session::{McpSession, STEADY, deadline, loopback_addr, start_on_loopback},
    relays::{free_port, start_relay},
    user::User,
};
use serde_json::{Value, json};

/// Whole-test deadline.
const TEST_DEADLINE: Duration = Duration::from_secs(120);

/// The texts of the messages `s` has not acknowledged, oldest first.
async fn unread_texts(s: &McpSession) -> Vec<String> {
    let (_, got) = s.ok("receive_messages", json!({})).await.unwrap();
    got["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["text"].as_str().map(str::to_owned))
        .collect()
}

/// Bob closes his session cleanly; Alice sends five messages to its full id; Bob comes
/// back under the same id and finds all five, once, in order.
async fn closed_session_gets_its_mail(relay: Option<&str>) {
    let env: Vec<(&str, &str)> = relay.map(|r| ("INTERLINK_RELAY", r)).into_iter().collect();
    let alice = User::new("alice", STEADY).unwrap();
    let bob = User::new("bob", STEADY).unwrap();
    let boot = match relay {
        Some(r) => r.to_owned(),
        None => String::new(),
    };
    let a = start_on_loopback(&alice, "a-1", relay, &env).await.unwrap();
    let boot = if boot.is_empty() {
        loopback_addr(&a).await
    } else {
        boot
    };
    let b = start_on_loopback(&bob, "b-closes", Some(&boot), &env)
        .await
        .unwrap();
    a.ok("add_peer", json!({"name": "bob", "key": bob.key}))
        .await
        .unwrap();
    b.ok("add_peer", json!({"name": "alice", "key": alice.key}))
        .await
        .unwrap();
    // Alice sees Bob's session (and so pins his sealing key) before he leaves.
    a.poll("discover", json!({}), deadline(), |v| {
        v.to_string().contains("b-closes")
    })
    .await
    .unwrap();
    b.close(deadline()).await.unwrap();
    // The goodbye takes Bob off Alice's roster.
    a.poll("discover", json!({}), deadline(), |v| {
        !v.to_string().contains("b-closes")
    })
    .await
    .unwrap();

    for i in 0..5 {
        let (text, v): (String, Value) = a
            .ok(
                "send_message",
                json!({"to": "bob", "session": "b-closes", "text": format!("note {i}")}),
            )
            .await
            .unwrap();
        assert_eq!(v["status"], "queued", "{text}");
        assert_eq!(v["presence"], "gone", "{text}");
        assert!(
            v["warning"]
                .as_str()
                .is_some_and(|w| w.contains("not on the roster")),
            "the gone warning: {text}"
        );
    }

    let b = start_on_loopback(&bob, "b-closes", Some(&boot), &env)
        .await
        .unwrap();
    let want: Vec<String> = (0..5).map(|i| format!("note {i}")).collect();
    let until = deadline();
    let got = loop {
        let got = unread_texts(&b).await;
        if got.len() >= want.len() || std::time::Instant::now() > until {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(got, want, "every message once, in order");
    // Nothing arrives twice later (a live retry and the mailbox both carry them).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(unread_texts(&b).await, want, "still once each");
    b.close(deadline()).await.unwrap();
    a.close(deadline()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_session_gets_mail_sent_to_its_full_id_without_a_relay() {
    tokio::time::timeout(TEST_DEADLINE, closed_session_gets_its_mail(None))
        .await
        .expect("test deadline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_session_gets_mail_sent_to_its_full_id_through_a_relay() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let dir = tempfile::tempdir().unwrap();
        let relay = start_relay(dir.path(), free_port(), free_port()).unwrap();
        closed_session_gets_its_mail(Some(&relay.addr)).await;
    })
    .await
    .expect("test deadline");
}
