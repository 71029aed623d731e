//! Delivery states and tasks through MCP: two real `interlink-p2p mcp` processes on
//! loopback, paired, driven by an rmcp client.
//!
//! Covered: a message goes delivered → read once the recipient's agent acknowledges it
//! (a signed read receipt comes back); a message to a stopped session is queued, listed
//! as pending, and becomes delivered when the session resumes; the conversation history
//! with filters; cancel_task; the sent log across a restart; the goodbye to a sticky
//! peer at shutdown.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::{Duration, Instant};

use interlink_e2e::{
    mcp_session::{LOOPBACK, McpSession, STEADY, deadline, loopback_addr},
    user::User,
};
use serde_json::json;

const TEST_DEADLINE: Duration = Duration::from_secs(120);

async fn start(user: &User, session: &str, boot: Option<&str>) -> McpSession {
    let mut args: Vec<&str> = LOOPBACK.to_vec();
    if let Some(b) = boot {
        args.extend(["--bootstrap", b]);
    }
    McpSession::start(user.home(), session, &args, STEADY)
        .await
        .unwrap()
}

fn signal(pid: u32, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {sig} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_states_up_to_read_history_and_cancel() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let alice = User::new("alice", STEADY).unwrap();
        let bob = User::new("bob", STEADY).unwrap();
        let a = start(&alice, "st-a", None).await;
        let boot = loopback_addr(&a).await;
        let b = start(&bob, "st-b", Some(&boot)).await;
        // whoami waits for the node, so add_peer applies to it at once.
        b.ok("whoami", json!({})).await.unwrap();
        a.ok("add_peer", json!({"name": "bob", "key": bob.key})).await.unwrap();
        b.ok("add_peer", json!({"name": "alice", "key": alice.key})).await.unwrap();

        // Delivered, then read once bob's agent acknowledges it.
        let (_, sent) = a
            .ok("send_message", json!({"to": "bob", "text": "review t-1", "task_id": "t-1", "status": "needs_input"}))
            .await
            .unwrap();
        assert_eq!(sent["status"], "delivered", "{sent}");
        let id = sent["msg_id"].as_str().unwrap().to_owned();
        let (text, st) = a.ok("message_status", json!({"msg_id": &id})).await.unwrap();
        assert_eq!(st["state"], "delivered", "{text}");
        assert_eq!(st["to"], "bob");
        assert_eq!(st["task_id"], "t-1");
        b.ok("acknowledge_messages", json!({"msg_ids": [&id]})).await.unwrap();
        let read = a
            .poll("message_status", json!({"msg_id": &id}), deadline(), |v| v["state"] == "read")
            .await
            .unwrap();
        assert!(read["read_at"].as_u64().is_some(), "{read}");

        // Bob answers in the task; the history shows both sides, oldest first.
        b.ok("send_message", json!({"to": "alice", "text": "done", "task_id": "t-1", "status": "result", "in_reply_to": &id}))
            .await
            .unwrap();
        a.ok("send_message", json!({"to": "bob", "text": "unrelated"})).await.unwrap();
        let (_, hist) = a
            .ok("conversation_history", json!({"peer": "bob", "task_id": "t-1"}))
            .await
            .unwrap();
        let msgs = hist["messages"].as_array().unwrap();
        let summary: Vec<(String, String)> = msgs
            .iter()
            .map(|m| (m["direction"].as_str().unwrap().to_owned(), m["text"].as_str().unwrap().to_owned()))
            .collect();
        assert_eq!(
            summary,
            vec![("sent".into(), "review t-1".into()), ("received".into(), "done".into())],
            "{hist}"
        );
        let (_, last) = a.ok("conversation_history", json!({"limit": 1})).await.unwrap();
        assert_eq!(last["messages"][0]["text"], "unrelated", "{last}");
        assert_eq!(last["more"], true, "older messages exist: {last}");

        // Cancel the task: bob gets a message in it with status canceled.
        let (_, canceled) = a
            .ok("cancel_task", json!({"to": "bob", "task_id": "t-1", "reason": "not needed"}))
            .await
            .unwrap();
        assert_eq!(canceled["status"], "delivered", "{canceled}");
        let got = b
            .poll("receive_messages", json!({}), deadline(), |v| {
                v["messages"].as_array().unwrap().iter().any(|m| m["status"] == "canceled")
            })
            .await
            .unwrap();
        let c = got["messages"].as_array().unwrap().iter().find(|m| m["status"] == "canceled").unwrap();
        assert_eq!(c["task_id"], "t-1");
        assert!(c["text"].as_str().unwrap().contains("not needed"), "{c}");

        // A stopped session: queued and pending; delivered when it resumes.
        let (_, none) = a.ok("list_pending", json!({})).await.unwrap();
        assert_eq!(none["pending"], json!([]));
        let pid = b.pid().unwrap();
        signal(pid, "-STOP");
        let (_, q) = a.ok("send_message", json!({"to": "bob", "text": "while you slept"})).await.unwrap();
        assert_eq!(q["status"], "queued", "{q}");
        let qid = q["msg_id"].as_str().unwrap().to_owned();
        let (_, pending) = a.ok("list_pending", json!({})).await.unwrap();
        assert_eq!(pending["pending"][0]["msg_id"], qid.as_str(), "{pending}");
        signal(pid, "-CONT");
        let late = Instant::now() + Duration::from_secs(60);
        a.poll("message_status", json!({"msg_id": &qid}), late, |v| v["state"] != "queued")
            .await
            .unwrap();
        let (_, none) = a.ok("list_pending", json!({})).await.unwrap();
        assert_eq!(none["pending"], json!([]));

        // The sent log survives a restart of the sender. Closing, A tells its sticky
        // peer (bob wrote to it) with a signed goodbye.
        a.close(deadline()).await.unwrap();
        let inbox = bob
            .wait_inbox("st-b", deadline(), |e| e.iter().any(|l| l["kind"] == "goodbye"))
            .unwrap();
        let bye = inbox.iter().find(|l| l["kind"] == "goodbye").unwrap();
        assert_eq!(bye["sender"], alice.key.as_str(), "{bye}");
        assert_eq!(bye["sender_session"], "st-a");
        let a = start(&alice, "st-a", None).await;
        let (_, again) = a.ok("message_status", json!({"msg_id": &id})).await.unwrap();
        assert_eq!(again["state"], "read", "{again}");
        let e = a.err("message_status", json!({"msg_id": "00000000000000000000000000000000"})).await.unwrap();
        assert!(e.contains("not among the messages"), "{e}");
    })
    .await
    .expect("test deadline");
}

/// Mail the recipient collects from its mailbox — it was not running yet, or it was
/// stopped while the sender restarted (so the sender lost the list it retries live) —
/// still shows as `delivered`: the recipient's node sends the sender a signed receipt
/// for what it collected. Later states keep the delivery time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_collected_from_the_mailbox_is_seen_delivered() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let alice = User::new("alice", STEADY).unwrap();
        let bob = User::new("bob", STEADY).unwrap();
        let a = start(&alice, "co-a", None).await;
        let boot_a = loopback_addr(&a).await;
        let b = start(&bob, "co-b", Some(&boot_a)).await;
        b.ok("whoami", json!({})).await.unwrap();
        a.ok("add_peer", json!({"name": "bob", "key": bob.key}))
            .await
            .unwrap();
        b.ok("add_peer", json!({"name": "alice", "key": alice.key}))
            .await
            .unwrap();
        let boot_b = loopback_addr(&b).await;

        // Not started yet: a message for bob's next session waits in its mailbox (bob's
        // running session holds a copy). No live retry can follow: the sender never
        // knew that session's node.
        let (_, q) = a
            .ok(
                "send_message",
                json!({"to": "bob", "session": "co-b2", "text": "for your next session"}),
            )
            .await
            .unwrap();
        assert_eq!(q["status"], "queued", "{q}");
        let first = q["msg_id"].as_str().unwrap().to_owned();
        let b2 = start(&bob, "co-b2", Some(&boot_b)).await;
        let st = until_not_queued(&a, &first, &[&b, &b2]).await;
        assert_eq!(st["state"], "delivered", "{st}");
        assert!(st["delivered_at"].as_u64().is_some(), "{st}");

        // Stopped while the sender restarts: the sender's live-retry list is gone (it is
        // in memory), the mailbox copy is not. On waking, bob's session sees the
        // sender's goodbye before its new announcement; its receipt waits for that.
        let pid = b2.pid().unwrap();
        signal(pid, "-STOP");
        let (_, q) = a
            .ok(
                "send_message",
                json!({"to": "bob", "session": "co-b2", "text": "while you slept"}),
            )
            .await
            .unwrap();
        assert_eq!(q["status"], "queued", "{q}");
        let second = q["msg_id"].as_str().unwrap().to_owned();
        a.close(deadline()).await.unwrap();
        let a = start(&alice, "co-a", Some(&boot_b)).await;
        let (_, again) = a
            .ok("message_status", json!({"msg_id": &second}))
            .await
            .unwrap();
        assert_eq!(again["state"], "queued", "{again}");
        signal(pid, "-CONT");
        let st = until_not_queued(&a, &second, &[&b, &b2]).await;
        assert_eq!(st["state"], "delivered", "{st}");
        let delivered_at = st["delivered_at"].as_u64().unwrap();

        // Read later: the delivery time stays.
        let (_, acked) = b2
            .ok(
                "acknowledge_messages",
                json!({"msg_ids": [&first, &second]}),
            )
            .await
            .unwrap();
        assert_eq!(acked["unknown"], json!([]), "{acked}");
        let read = a
            .poll(
                "message_status",
                json!({"msg_id": &second}),
                deadline(),
                |v| v["state"] == "read",
            )
            .await
            .unwrap();
        assert_eq!(read["delivered_at"].as_u64(), Some(delivered_at), "{read}");
        assert!(read["read_at"].as_u64().is_some(), "{read}");
    })
    .await
    .expect("test deadline");
}

/// Polls `a`'s `message_status` for `id` until it is no longer `queued`; on a timeout,
/// fails with every session's log.
async fn until_not_queued(a: &McpSession, id: &str, others: &[&McpSession]) -> serde_json::Value {
    let late = Instant::now() + Duration::from_secs(30);
    match a
        .poll("message_status", json!({"msg_id": id}), late, |v| {
            v["state"] != "queued"
        })
        .await
    {
        Ok(v) => v,
        Err(e) => {
            let logs: Vec<String> = std::iter::once(a)
                .chain(others.iter().copied())
                .map(|s| format!("--- {}:\n{}", s.session, s.stderr()))
                .collect();
            panic!("{e}\n{}", logs.join("\n"))
        }
    }
}
