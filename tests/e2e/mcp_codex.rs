//! Codex through MCP: a real `interlink-p2p mcp --host codex` process with no pinned
//! session id, driven by an rmcp client, whose `codex` executable is a recording
//! fixture script (`INTERLINK_CODEX_BIN`).
//!
//! Covered: before binding the session neither announces nor polls and sending is a
//! setup error; binding once (same id harmless, another refused); each verified message
//! queued into the thread as `codex queue --thread <id> --message <notice>`; a failing
//! `codex` retried, saved, listed, retried automatically with backoff, kept across a
//! restart, retried and discarded on request.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    path::Path,
    time::{Duration, Instant},
};

use interlink_e2e::{
    mcp_session::{LOOPBACK, McpSession},
    process::DEADLINE,
    user::User,
};
use serde_json::{Value, json};

const STEADY: &[(&str, &str)] = &[
    ("INTERLINK_TEST_LIVE_WINDOW_MS", "10000"),
    ("INTERLINK_TEST_HEARTBEAT_MS", "1000"),
];
const TEST_DEADLINE: Duration = Duration::from_secs(120);
const THREAD: &str = "0199a6c2-3f4e-7a10-9b2c-1234567890ab";

/// Records each call as a line (arguments separated by tabs); fails while a `fail`
/// file exists.
const FIXTURE: &str = r#"#!/bin/sh
if [ -e "$CODEX_FIXTURE_DIR/fail" ]; then echo "thread is busy" >&2; exit 3; fi
{ printf 'CALL'; for a in "$@"; do printf '\t%s' "$a"; done; printf '\n'; } >> "$CODEX_FIXTURE_DIR/calls"
"#;

fn deadline() -> Instant {
    Instant::now() + DEADLINE
}

/// The calls recorded so far: whole lines only, since the stand-in writes a line in
/// several pieces (`printf` per argument), and a read between two of them once saw
/// `queue` alone.
fn calls(dir: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(dir.join("calls"))
        .unwrap_or_default()
        .split_inclusive('\n')
        .filter_map(|l| l.strip_suffix('\n'))
        .map(|l| l.split('\t').skip(1).map(str::to_owned).collect())
        .collect()
}

async fn wait_calls(dir: &Path, n: usize) -> Vec<Vec<String>> {
    let end = deadline();
    loop {
        let c = calls(dir);
        if c.len() >= n || Instant::now() > end {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn codex_session(user: &User, boot: &str, fixture: &Path, retry_ms: &str) -> McpSession {
    let bin = fixture.join("codex");
    let bin = bin.to_str().unwrap();
    let dir = fixture.to_str().unwrap();
    let mut env = STEADY.to_vec();
    env.extend([
        ("INTERLINK_CODEX_BIN", bin),
        ("CODEX_FIXTURE_DIR", dir),
        ("INTERLINK_TEST_CODEX_TIMEOUT_MS", "5000"),
        ("INTERLINK_TEST_CODEX_BACKOFF_MS", "50"),
        ("INTERLINK_TEST_CODEX_RETRY_MS", retry_ms),
        ("INTERLINK_TEST_CODEX_RETRY_CAP_MS", retry_ms),
    ]);
    let mut args = vec!["--host", "codex", "--bootstrap", boot];
    args.extend(LOOPBACK);
    McpSession::spawn(user.home(), "codex", &args, &env)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_binding_and_queue_delivery_with_failures_and_retries() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let fixture = tempfile::tempdir().unwrap();
        let script = fixture.path().join("codex");
        std::fs::write(&script, FIXTURE).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let alice = User::new("alice", STEADY).unwrap();
        let bob = User::new("bob", STEADY).unwrap();
        let mut args = LOOPBACK.to_vec();
        args.extend(["--session", "cx-a"]);
        let a = McpSession::spawn(alice.home(), "cx-a", &args, STEADY)
            .await
            .unwrap();
        let (_, who) = a.ok("whoami", json!({})).await.unwrap();
        let boot = who["listen_addrs"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .find(|x| x.starts_with("/ip4/127.0.0.1/"))
            .unwrap()
            .to_owned();
        a.ok("add_peer", json!({"name": "bob", "key": bob.key}))
            .await
            .unwrap();

        // Unbound: not on the overlay, and sending is a setup error.
        let b = codex_session(&bob, &boot, fixture.path(), "300").await;
        b.ok("add_peer", json!({"name": "alice", "key": alice.key}))
            .await
            .unwrap();
        let (text, who) = b.ok("whoami", json!({})).await.unwrap();
        assert_eq!(who["host"], "codex", "{text}");
        // Codex sessions are shown the Codex tools (other hosts are not).
        let tools = b.client.list_all_tools().await.unwrap();
        for name in ["bind_codex_session", "failed_deliveries"] {
            assert!(
                tools.iter().any(|t| t.name == name),
                "{name} not listed for Codex"
            );
        }
        assert_eq!(who["session_id"], Value::Null, "{text}");
        let e = b
            .err("send_message", json!({"to": "alice", "text": "hi"}))
            .await
            .unwrap();
        assert!(
            e.contains("setup error") && e.contains("bind_codex_session"),
            "{e}"
        );
        let e = b.err("discover", json!({})).await.unwrap();
        assert!(e.contains("not bound"), "{e}");
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let (_, roster) = a.ok("discover", json!({})).await.unwrap();
        assert!(!roster.to_string().contains(&bob.key), "{roster}");

        // Binding: a full UUID; once; the same id again is harmless, another refused.
        let e = b
            .err("bind_codex_session", json!({"thread_id": "abc"}))
            .await
            .unwrap();
        assert!(e.contains("UUID"), "{e}");
        // The thread's directory (the plugin's hooks pass it: Codex starts a plugin's
        // server in the plugin's directory): absolute, an existing directory.
        let e = b
            .err(
                "bind_codex_session",
                json!({"thread_id": THREAD, "cwd": "relative/dir"}),
            )
            .await
            .unwrap();
        assert!(e.contains("absolute"), "{e}");
        let repo = fixture.path().join("thread-repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        let repo = repo.to_str().unwrap();
        let (_, bound) = b
            .ok(
                "bind_codex_session",
                json!({"thread_id": THREAD, "cwd": repo}),
            )
            .await
            .unwrap();
        assert_eq!(bound["session_id"], THREAD);
        assert_eq!(bound["already"], false);
        let (_, who) = b.ok("whoami", json!({})).await.unwrap();
        assert_eq!(
            (&who["cwd"], &who["git_label"]),
            (&json!(repo), &json!("thread-repo")),
            "{who}"
        );
        let (_, again) = b
            .ok("bind_codex_session", json!({"thread_id": THREAD}))
            .await
            .unwrap();
        assert_eq!(again["already"], true);
        let other = "0199a6c2-3f4e-7a10-9b2c-ffffffffffff";
        let e = b
            .err("bind_codex_session", json!({"thread_id": other}))
            .await
            .unwrap();
        assert!(e.contains("refused"), "{e}");
        let (_, who) = b.ok("whoami", json!({})).await.unwrap();
        assert_eq!(who["delivery"], "codex");

        // Bound: on the overlay under the thread id; a message becomes a queued notice.
        let roster = a
            .poll("discover", json!({}), deadline(), |v| {
                v.to_string().contains(THREAD)
            })
            .await
            .unwrap();
        assert!(roster.to_string().contains(repo), "{roster}");
        let (_, sent) = a
            .ok(
                "send_message",
                json!({"to": "bob", "text": "secret body", "task_id": "t-9"}),
            )
            .await
            .unwrap();
        assert_eq!(sent["status"], "delivered", "{sent}");
        let id1 = sent["msg_id"].as_str().unwrap().to_owned();
        let c = wait_calls(fixture.path(), 1).await;
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(&c[0][..4], ["queue", "--thread", THREAD, "--message"]);
        assert_eq!(c[0][5..], ["--resume"], "{c:?}");
        let notice = &c[0][4];
        assert!(
            notice.contains(&id1) && notice.contains("alice") && notice.contains("t-9"),
            "{notice}"
        );
        assert!(notice.contains("receive_messages"), "{notice}");
        assert!(
            !notice.contains("secret body"),
            "the notice never carries the text: {notice}"
        );
        // The sender sees it handed to the agent host.
        a.poll("message_status", json!({"msg_id": &id1}), deadline(), |v| {
            v["state"] == "host_queued"
        })
        .await
        .unwrap();

        // Codex failing: retried, then saved; retried automatically once it works again.
        std::fs::write(fixture.path().join("fail"), b"").unwrap();
        let (_, sent) = a
            .ok("send_message", json!({"to": "bob", "text": "second"}))
            .await
            .unwrap();
        let id2 = sent["msg_id"].as_str().unwrap().to_owned();
        let failed = b
            .poll(
                "failed_deliveries",
                json!({"action": "list"}),
                deadline(),
                |v| v["failures"].as_array().is_some_and(|f| !f.is_empty()),
            )
            .await
            .unwrap();
        let f = &failed["failures"][0];
        assert_eq!(f["id"], id2.as_str());
        assert_eq!(f["attempts"], 3, "{f}");
        assert!(
            f["last_error"].as_str().unwrap().contains("thread is busy"),
            "{f}"
        );
        let (text, read) = b
            .ok("failed_deliveries", json!({"action": "read", "id": &id2}))
            .await
            .unwrap();
        assert!(
            read["failure"]["notice"].as_str().unwrap().contains(&id2),
            "{text}"
        );
        std::fs::remove_file(fixture.path().join("fail")).unwrap();
        b.poll(
            "failed_deliveries",
            json!({"action": "list"}),
            deadline(),
            |v| v["failures"] == json!([]),
        )
        .await
        .unwrap();
        let c = wait_calls(fixture.path(), 2).await;
        assert!(c[1][4].contains(&id2), "{c:?}");
        a.poll("message_status", json!({"msg_id": &id2}), deadline(), |v| {
            v["state"] == "host_queued"
        })
        .await
        .unwrap();

        // A failure saved before a restart is still there after it; retry and discard
        // on request.
        std::fs::write(fixture.path().join("fail"), b"").unwrap();
        for text in ["third", "fourth"] {
            a.ok("send_message", json!({"to": "bob", "text": text}))
                .await
                .unwrap();
        }
        b.poll(
            "failed_deliveries",
            json!({"action": "list"}),
            deadline(),
            |v| v["failures"].as_array().is_some_and(|f| f.len() == 2),
        )
        .await
        .unwrap();
        b.close(deadline()).await.unwrap();
        let b = codex_session(&bob, &boot, fixture.path(), "600000").await;
        b.ok("bind_codex_session", json!({"thread_id": THREAD}))
            .await
            .unwrap();
        let (_, kept) = b
            .ok("failed_deliveries", json!({"action": "list"}))
            .await
            .unwrap();
        let kept: Vec<String> = kept["failures"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(kept.len(), 2, "{kept:?}");
        let (_, r) = b
            .ok(
                "failed_deliveries",
                json!({"action": "retry", "id": &kept[0]}),
            )
            .await
            .unwrap();
        assert_eq!(r["queued"], json!([]), "still failing: {r}");
        std::fs::remove_file(fixture.path().join("fail")).unwrap();
        let (_, r) = b
            .ok(
                "failed_deliveries",
                json!({"action": "retry", "id": &kept[0]}),
            )
            .await
            .unwrap();
        assert_eq!(r["queued"], json!([&kept[0]]), "{r}");
        b.ok(
            "failed_deliveries",
            json!({"action": "discard", "id": &kept[1]}),
        )
        .await
        .unwrap();
        let (_, none) = b
            .ok("failed_deliveries", json!({"action": "list"}))
            .await
            .unwrap();
        assert_eq!(none["failures"], json!([]));
        let e = b
            .err("failed_deliveries", json!({"action": "read"}))
            .await
            .unwrap();
        assert!(e.contains("needs `id`"), "{e}");
        // Nothing was queued twice across the restart.
        let c = calls(fixture.path());
        assert_eq!(c.len(), 3, "{c:?}");
    })
    .await
    .expect("test deadline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_client_is_recognised_at_initialize_unless_the_id_is_pinned() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let bob = User::new("bob", STEADY).unwrap();
        let args = LOOPBACK.to_vec();
        // No --host, no pinned id, a client named Codex: waits for binding.
        let codex = McpSession::spawn_as(
            bob.home(),
            "init-codex",
            &args,
            STEADY,
            Some("codex-mcp-client"),
        )
        .await
        .unwrap();
        let (_, who) = codex.ok("whoami", json!({})).await.unwrap();
        assert_eq!(
            (&who["host"], &who["session_id"]),
            (&json!("codex"), &Value::Null),
            "{who}"
        );
        let (_, b) = codex
            .ok("bind_codex_session", json!({"thread_id": THREAD}))
            .await
            .unwrap();
        assert_eq!(b["session_id"], THREAD);
        // Another client: starts at once under a random id.
        let other =
            McpSession::spawn_as(bob.home(), "init-other", &args, STEADY, Some("some-editor"))
                .await
                .unwrap();
        let (_, who) = other.ok("whoami", json!({})).await.unwrap();
        assert_eq!(who["host"], "other", "{who}");
        assert!(
            who["session_id"].as_str().is_some_and(|s| s != THREAD),
            "{who}"
        );
        // A Codex client with a pinned id runs under it at once.
        let mut pinned_args = args.clone();
        pinned_args.extend(["--session", "pinned-1"]);
        let pinned = McpSession::spawn_as(
            bob.home(),
            "init-pinned",
            &pinned_args,
            STEADY,
            Some("codex-mcp-client"),
        )
        .await
        .unwrap();
        let (_, who) = pinned.ok("whoami", json!({})).await.unwrap();
        assert_eq!(who["session_id"], "pinned-1", "{who}");
    })
    .await
    .expect("test deadline");
}
