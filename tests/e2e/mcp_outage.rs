//! Mail to sessions that are not there: real `interlink-p2p mcp` processes on loopback,
//! driven over MCP stdio, with and without a relay.
//!
//! Covered: a paired session that closed cleanly (its goodbye took it off every roster)
//! is still written to by its full id — each message `queued` with the gone warning —
//! and gets every message once, in order, when it comes back under that id; a sender
//! killed with SIGKILL right after `queued`, with no relay and no other peer holding a
//! copy, delivers everything once, in order, after it is restarted.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
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

/// Polls `s`'s unread texts until there are at least `n` or `until` passes; returns
/// the last answer.
async fn wait_unread(s: &McpSession, n: usize, until: std::time::Instant) -> Vec<String> {
    loop {
        let got = unread_texts(s).await;
        if got.len() >= n || std::time::Instant::now() > until {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Alice's session `a_id` and Bob's `b_id` (bootstrapped to `relay`, else to Alice),
/// paired; Alice sees Bob's session (and so pins his sealing key), then Bob closes it
/// cleanly and its goodbye takes it off Alice's roster. Returns Alice's session and
/// the bootstrap address.
async fn paired_then_closed(
    alice: &User,
    bob: &User,
    a_id: &str,
    b_id: &str,
    relay: Option<&str>,
    env: &[(&str, &str)],
) -> (McpSession, String) {
    let a = start_on_loopback(alice, a_id, relay, env).await.unwrap();
    let boot = match relay {
        Some(r) => r.to_owned(),
        None => loopback_addr(&a).await,
    };
    let b = start_on_loopback(bob, b_id, Some(&boot), env)
        .await
        .unwrap();
    a.ok("add_peer", json!({"name": "bob", "key": bob.key}))
        .await
        .unwrap();
    b.ok("add_peer", json!({"name": "alice", "key": alice.key}))
        .await
        .unwrap();
    a.poll("discover", json!({}), deadline(), |v| {
        v.to_string().contains(b_id)
    })
    .await
    .unwrap();
    b.close(deadline()).await.unwrap();
    a.poll("discover", json!({}), deadline(), |v| {
        !v.to_string().contains(b_id)
    })
    .await
    .unwrap();
    (a, boot)
}

/// Bob closes his session cleanly; Alice sends five messages to its full id; Bob comes
/// back under the same id and finds all five, once, in order.
async fn closed_session_gets_its_mail(relay: Option<&str>) {
    let env: Vec<(&str, &str)> = relay.map(|r| ("INTERLINK_RELAY", r)).into_iter().collect();
    let alice = User::new("alice", STEADY).unwrap();
    let bob = User::new("bob", STEADY).unwrap();
    let (a, boot) = paired_then_closed(&alice, &bob, "a-1", "b-closes", relay, &env).await;

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
    let got = wait_unread(&b, want.len(), deadline()).await;
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

/// Alice queues five messages for Bob's closed session while nobody else is on the
/// overlay — her own node holds the only mailbox copy — and is killed with SIGKILL.
/// Restarted under her id, she still has them (the outbox); Bob comes back and gets
/// all five once, in order, and Alice learns they were delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_mail_survives_the_sender_being_killed_with_no_other_holder() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let alice = User::new("alice", STEADY).unwrap();
        let bob = User::new("bob", STEADY).unwrap();
        let (a, _) = paired_then_closed(&alice, &bob, "a-killed", "b-away", None, &[]).await;
        let mut ids = Vec::new();
        for i in 0..5 {
            let (text, v) = a
                .ok(
                    "send_message",
                    json!({"to": "bob", "session": "b-away", "text": format!("kept {i}")}),
                )
                .await
                .unwrap();
            assert_eq!(v["status"], "queued", "{text}");
            assert_eq!(
                v["held_by"]["outbox"], true,
                "durable before queued: {text}"
            );
            ids.push(v["msg_id"].as_str().unwrap().to_owned());
        }
        // list_pending and message_status say the same as send_message did.
        let (_, pending) = a.ok("list_pending", json!({})).await.unwrap();
        let pending = pending["pending"].as_array().unwrap().clone();
        assert_eq!(pending.len(), 5, "{pending:?}");
        assert!(
            pending.iter().all(|p| p["held_by"]["outbox"] == true),
            "{pending:?}"
        );
        let (_, status) = a
            .ok("message_status", json!({"msg_id": ids[0]}))
            .await
            .unwrap();
        assert_eq!(
            (&status["state"], &status["held_by"]["outbox"]),
            (&json!("queued"), &json!(true)),
            "{status}"
        );
        // The sent log is saved half a second after a change; crash once it holds all
        // five.
        let session = interlink_store::paths::Home::new(alice.home())
            .session(&interlink_core::SessionId::new("a-killed").unwrap())
            .unwrap();
        let until = deadline();
        while !ids.iter().all(|id| {
            interlink_store::sent_log::SentLog::load(&session)
                .get(id)
                .is_some()
        }) {
            assert!(std::time::Instant::now() < until, "sent.json never saved");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        a.kill(deadline()).await.unwrap();

        let a = start_on_loopback(&alice, "a-killed", None, &[])
            .await
            .unwrap();
        let boot = loopback_addr(&a).await;
        let b = start_on_loopback(&bob, "b-away", Some(&boot), &[])
            .await
            .unwrap();
        let want: Vec<String> = (0..5).map(|i| format!("kept {i}")).collect();
        let got = wait_unread(&b, want.len(), deadline()).await;
        assert_eq!(
            got, want,
            "every message once, in order, after the sender's crash"
        );
        // The restarted sender learns that they arrived (a signed receipt).
        let last = ids.last().unwrap().clone();
        a.poll("message_status", json!({"msg_id": last}), deadline(), |v| {
            v["state"] == "delivered"
        })
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(unread_texts(&b).await, want, "still once each");
        b.close(deadline()).await.unwrap();
        a.close(deadline()).await.unwrap();
    })
    .await
    .expect("test deadline");
}

/// Whether this run is CI's, where a test that cannot run must fail, not skip.
fn under_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
}

/// A small tmpfs mounted on a directory, unmounted when dropped.
struct SmallFs {
    dir: std::path::PathBuf,
}

impl SmallFs {
    fn mount(dir: &std::path::Path, size: &str) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let out = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
        }
        Ok(Self {
            dir: dir.to_owned(),
        })
    }

    /// Fills the file system up with a filler file.
    fn fill(&self) {
        use std::io::Write as _;
        let mut f = std::fs::File::create(self.dir.join("filler")).unwrap();
        let block = vec![0u8; 4096];
        while f.write_all(&block).is_ok() {}
        let _ = f.sync_all();
        // A few bytes at a time, until not even one more fits.
        while f.write_all(&[0]).is_ok() {}
    }

    fn free(&self) {
        std::fs::remove_file(self.dir.join("filler")).unwrap();
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .status();
    }
}

/// Bob's session directory is on a tiny file system that fills up: Alice's messages
/// are refused with the retryable `store_failed` (so she is told `queued`, never
/// `delivered`), nothing half-written stays in Bob's inbox, and once space returns
/// every message arrives once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_at_the_recipient_loses_nothing() {
    let alice = User::new("alice", STEADY).unwrap();
    let bob = User::new("bob", STEADY).unwrap();
    let dir = bob.home().join("sessions").join("b-full");
    let fs = match SmallFs::mount(&dir, "4m") {
        Ok(fs) => fs,
        Err(reason) if under_ci() => {
            panic!("CI must run this test: cannot mount a tmpfs: {reason}")
        }
        Err(reason) => {
            eprintln!(
                "SKIPPED a_full_disk_at_the_recipient_loses_nothing: cannot mount a tmpfs ({reason}); needs root"
            );
            return;
        }
    };
    tokio::time::timeout(TEST_DEADLINE, async {
        let a = start_on_loopback(&alice, "a-1", None, &[]).await.unwrap();
        let boot = loopback_addr(&a).await;
        let b = start_on_loopback(&bob, "b-full", Some(&boot), &[])
            .await
            .unwrap();
        a.ok("add_peer", json!({"name": "bob", "key": bob.key}))
            .await
            .unwrap();
        b.ok("add_peer", json!({"name": "alice", "key": alice.key}))
            .await
            .unwrap();
        a.poll("discover", json!({}), deadline(), |v| {
            v.to_string().contains("b-full")
        })
        .await
        .unwrap();
        // Bob's node takes the new peers.json on its next look; until then Alice is
        // refused as a stranger (nothing stored), so she tries again.
        let until = deadline();
        loop {
            let sent = a
                .ok(
                    "send_message",
                    json!({"to": "bob", "text": "before the disk filled"}),
                )
                .await;
            match sent {
                Ok((_, first)) => {
                    assert_eq!(first["status"], "delivered", "{first}");
                    break;
                }
                Err(e) if std::time::Instant::now() < until => {
                    assert!(e.to_string().contains("not a peer"), "{e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("{e}"),
            }
        }

        fs.fill();
        // Each larger than a page: the inbox file's last, partly used page cannot take
        // it. The inbox's padding (64 KiB) is space the file already has, so the first
        // few still go in; once it is used up, every write is refused.
        let big = |i: usize| format!("full {i} {}", "x".repeat(6000));
        let mut sent = 0;
        let mut refused = 0;
        while refused < 3 {
            let (text, v) = a
                .ok(
                    "send_message",
                    json!({"to": "bob", "session": "b-full", "text": big(sent)}),
                )
                .await
                .unwrap();
            sent += 1;
            if refused > 0 || v["status"] != "delivered" {
                assert_eq!(
                    v["status"], "queued",
                    "a refused write is not delivered: {text}"
                );
                refused += 1;
            }
            assert!(sent - refused <= 11, "more than 64 KiB went in: {text}");
        }
        let inbox = dir.join("inbox.jsonl");
        // Whole lines, then at most the padding: spaces (docs/DELIVERY.md).
        let text = std::fs::read_to_string(&inbox).unwrap_or_default();
        let data = text.trim_end_matches(' ');
        assert!(data.is_empty() || data.ends_with('\n'), "a torn last line");
        for line in data.lines() {
            serde_json::from_str::<Value>(line)
                .unwrap_or_else(|e| panic!("a torn line {line:?}: {e}"));
        }

        fs.free();
        let mut want = vec!["before the disk filled".to_owned()];
        want.extend((0..sent).map(big));
        let got = wait_unread(
            &b,
            want.len(),
            std::time::Instant::now() + Duration::from_secs(60),
        )
        .await;
        assert_eq!(
            got, want,
            "every message once, in order, once space returned"
        );
        // Whole lines, then at most the padding: spaces (docs/DELIVERY.md).
        let text = std::fs::read_to_string(&inbox).unwrap();
        let data = text.trim_end_matches(' ');
        assert!(data.ends_with('\n'), "a torn last line");
        for line in data.lines() {
            serde_json::from_str::<Value>(line)
                .unwrap_or_else(|e| panic!("a torn line {line:?}: {e}"));
        }
        b.close(deadline()).await.unwrap();
        a.close(deadline()).await.unwrap();
    })
    .await
    .expect("test deadline");
    drop(fs);
}
