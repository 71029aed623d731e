//! Presence that tells strangers nothing about the work (protocol version 13): three
//! real `interlink-p2p mcp` sessions on loopback — Alice, Bob her peer, and Mallory, a
//! stranger with a fresh key on the same overlay. Bob's `discover` shows Alice's
//! working directory and summary; Mallory's shows her session (a knock needs it) but
//! none of its details, and neither does the `peers` view run from Mallory's home;
//! once Alice removes Bob, the announcement she makes next is closed to him too.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::Duration;

use interlink_e2e::{
    mcp_session::{McpSession, STEADY, deadline, loopback_addr, start_on_loopback},
    process::command,
    user::User,
};
use serde_json::{Value, json};

const TEST_DEADLINE: Duration = Duration::from_secs(90);
const SUMMARY: &str = "migrating the acme-billing invoices table";

/// Alice's session as `viewer`'s discover shows it, once `ready` says it is as wanted.
async fn alice_as_seen_by(
    viewer: &McpSession,
    alice_key: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    let find = |v: &Value| -> Option<Value> {
        v["identities"]
            .as_array()?
            .iter()
            .find(|i| i["identity_key"] == alice_key)?["sessions"]
            .as_array()?
            .iter()
            .find(|s| s["session_id"] == "alice-1")
            .cloned()
    };
    let roster = viewer
        .poll("discover", json!({}), deadline(), |v| {
            find(v).is_some_and(|s| ready(&s))
        })
        .await
        .unwrap_or_else(|e| panic!("alice-1 never looked as expected: {e}"));
    find(&roster).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_read_no_details_peers_do_and_a_removed_peer_stops() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let alice = User::new("alice", STEADY).unwrap();
        let bob = User::new("bob", STEADY).unwrap();
        let mallory = User::new("mallory", STEADY).unwrap();
        let a = start_on_loopback(&alice, "alice-1", None, &[])
            .await
            .unwrap();
        let boot = loopback_addr(&a).await;
        let b = start_on_loopback(&bob, "bob-1", Some(&boot), &[])
            .await
            .unwrap();
        let m = start_on_loopback(&mallory, "mallory-1", Some(&boot), &[])
            .await
            .unwrap();
        a.ok("add_peer", json!({"name": "bob", "key": bob.key}))
            .await
            .unwrap();
        b.ok("add_peer", json!({"name": "alice", "key": alice.key}))
            .await
            .unwrap();
        a.ok("set_summary", json!({"summary": SUMMARY}))
            .await
            .unwrap();
        let (_, who) = a.ok("whoami", json!({})).await.unwrap();
        let cwd = who["cwd"].as_str().unwrap().to_owned();

        // Bob, her peer, reads her details.
        let seen = alice_as_seen_by(&b, &alice.key, |s| s["summary"] == SUMMARY).await;
        assert_eq!(seen["cwd"], cwd.as_str(), "{seen}");
        assert_eq!(seen["private"], false, "{seen}");

        // Mallory sees the session (she may knock) and nothing of the work.
        let seen = alice_as_seen_by(&m, &alice.key, |s| s["private"] == true).await;
        for field in ["cwd", "summary", "git_label", "host", "delivery"] {
            assert_eq!(seen[field], Value::Null, "{field}: {seen}");
        }
        // (Every session of this test runs in the same directory: Mallory's own line
        // shows it, Alice's must not.)
        let (text, roster) = m.ok("discover", json!({})).await.unwrap();
        let line = text.lines().find(|l| l.contains("alice-1")).unwrap();
        assert!(line.contains("details not shared"), "{text}");
        assert!(!line.contains(&cwd) && !text.contains(SUMMARY), "{text}");
        assert!(!roster.to_string().contains(SUMMARY), "{roster}");

        // The debugging view, run from Mallory's home, shows no more.
        let out = command(mallory.home(), STEADY)
            .unwrap()
            .args(["peers", "--json", "--wait", "5", "--bootstrap", &boot])
            .output()
            .unwrap();
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{printed}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_str(&printed).unwrap();
        let sessions: Vec<&Value> = report["identities"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|i| i["sessions"].as_array().unwrap())
            .collect();
        let seen = sessions
            .iter()
            .find(|s| s["session_id"] == "alice-1")
            .unwrap();
        assert_eq!(
            (&seen["private"], &seen["cwd"]),
            (&json!(true), &Value::Null),
            "{seen}"
        );
        assert!(!printed.contains(SUMMARY), "{printed}");

        // Alice removes Bob: her next announcement is closed to him.
        a.ok("remove_peer", json!({"name": "bob"})).await.unwrap();
        let seen = alice_as_seen_by(&b, &alice.key, |s| s["private"] == true).await;
        assert_eq!(seen["summary"], Value::Null, "{seen}");
    })
    .await
    .expect("test deadline");
}
