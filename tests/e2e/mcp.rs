//! The MCP server as an agent host drives it: two real `interlink-p2p mcp` processes
//! with their own homes on loopback (explicit bootstrap, no mDNS), each driven by an
//! rmcp client over its stdin/stdout.
//!
//! Covered: the tool list, whoami, pairing with add_peer, discover, messages both ways
//! (delivered, with the verified sender), acknowledging (also across a restart), bad
//! input as tool errors, channel-mode notifications (and the sender's host_queued), the Stop hook's exit codes,
//! shutdown on stdin close and SIGTERM, and that stdout carries only JSON-RPC.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    collections::BTreeSet,
    process::Stdio,
    time::{Duration, Instant},
};

use interlink_e2e::{
    framing,
    mcp_session::{
        self, LOOPBACK, McpSession, STEADY, deadline, loopback_addr, session_ids, start_on_loopback,
    },
    process::{command, run_with_input},
    user::User,
};
use rmcp::{ServiceExt as _, model::CallToolRequestParams, transport::TokioChildProcess};
use serde_json::{Value, json};

/// Whole-test deadline.
const TEST_DEADLINE: Duration = Duration::from_secs(90);

/// How long a session may take to exit after stdin closes or SIGTERM: the server's
/// budget is one second; the rest is slack for a loaded test machine.
const EXIT_BUDGET: Duration = Duration::from_millis(2500);

/// Starts an MCP session for `user` on loopback, bootstrapped to `boot` if given.
async fn start(user: &User, session: &str, boot: Option<&str>, env: &[(&str, &str)]) -> McpSession {
    start_on_loopback(user, session, boot, env).await.unwrap()
}

/// Waits until `viewer`'s discover shows `session` (of any identity).
async fn sees(viewer: &McpSession, session: &str) -> Value {
    mcp_session::sees(viewer, session).await.unwrap()
}

/// Two users, one session each, paired through add_peer, B bootstrapped to A.
async fn paired(
    a_id: &str,
    b_id: &str,
    b_env: &[(&str, &str)],
) -> (User, User, McpSession, McpSession) {
    let alice = User::new("alice", STEADY).unwrap();
    let bob = User::new("bob", STEADY).unwrap();
    let spawned = Instant::now();
    let a = start(&alice, a_id, None, &[]).await;
    // `initialize` does not wait for the node (the target is 50 ms in a release build).
    let init = spawned.elapsed();
    eprintln!("spawn to initialized: {init:?}");
    // A hang guard, not a speed target (that is BENCHMARKS.md's): a busy host took
    // over 2 s here.
    assert!(init < Duration::from_secs(15), "initialize took {init:?}");
    let boot = loopback_addr(&a).await;
    let b = start(&bob, b_id, Some(&boot), b_env).await;
    a.ok("add_peer", json!({"name": "bob", "key": bob.key}))
        .await
        .unwrap();
    b.ok("add_peer", json!({"name": "alice", "key": alice.key}))
        .await
        .unwrap();
    (alice, bob, a, b)
}

fn ids(received: &Value) -> Vec<String> {
    received["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["msg_id"].as_str().unwrap().to_owned())
        .collect()
}

/// Runs `interlink-p2p wait` for `user` with `input` on stdin and `args`.
fn wait_hook(
    user: &User,
    input: &str,
    args: &[&str],
) -> (std::process::ExitStatus, String, String, Duration) {
    let mut cmd = command(user.home(), &[]).unwrap();
    cmd.arg("wait").args(args);
    let started = Instant::now();
    let (status, out, err) = run_with_input(cmd, Some(input), deadline()).unwrap();
    (status, out, err, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_pair_discover_talk_and_acknowledge() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let (alice, bob, a, b) = paired("mcp-a", "mcp-b", &[]).await;

        // The tools an agent sees: none of Codex's, with compact schemas, and with the
        // instructions within the context budget (server::tests has the exact figure).
        let listed = a.client.list_all_tools().await.unwrap();
        let listed_json = serde_json::to_string(&listed).unwrap();
        assert!(!listed_json.contains("$schema"), "{listed_json}");
        let tools: BTreeSet<String> = listed.iter().map(|t| t.name.to_string()).collect();
        for codex_only in ["bind_codex_session", "failed_deliveries"] {
            assert!(!tools.contains(codex_only), "{codex_only} shown to a non-Codex host");
        }
        for name in [
            "whoami", "discover", "send_message", "receive_messages", "acknowledge_messages",
            "set_summary", "list_peers", "add_peer", "remove_peer",
        ] {
            assert!(tools.contains(name), "{name} missing from {tools:?}");
        }
        let info = a.client.peer_info().unwrap();
        let instructions = info.instructions.clone().unwrap_or_default();
        assert!(instructions.contains("not approval"), "{instructions}");
        let surface = listed_json.len() + instructions.len();
        eprintln!("tool surface over stdio: {surface} characters");
        assert!(surface <= 8_200, "{surface} characters of tools and instructions");

        // whoami describes the session.
        let (text, who) = b.ok("whoami", json!({})).await.unwrap();
        assert_eq!(who["identity_key"], bob.key.as_str());
        assert_eq!(who["session_id"], "mcp-b");
        assert_eq!(who["delivery"], "inbox");
        let listen = who["listen_addrs"].as_array().unwrap();
        assert!(
            listen.iter().all(|l| l.as_str().unwrap().contains("/p2p/12D3KooW")),
            "{listen:?}"
        );
        assert!(text.contains("mcp-b"), "{text}");

        // Each sees the other, paired, with its petname.
        let seen = sees(&a, "mcp-b").await;
        let bob_entry = seen["identities"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["identity_key"] == bob.key.as_str())
            .unwrap();
        assert_eq!(bob_entry["petname"], "bob");
        assert_eq!(bob_entry["sessions"][0]["presence"], "live");
        sees(&b, "mcp-a").await;
        let (_, peers) = a.ok("list_peers", json!({})).await.unwrap();
        assert_eq!(peers["peers"][0]["name"], "bob");

        // A summary change reaches the peer.
        b.ok("set_summary", json!({"summary": "reviewing the parser"})).await.unwrap();
        a.poll("discover", json!({}), deadline(), |v| v.to_string().contains("reviewing the parser"))
            .await
            .unwrap();

        // Both ways, delivered.
        let (_, sent) = a
            .ok(
                "send_message",
                json!({"to": "bob", "text": "hello bob", "task_id": "t-1", "status": "needs_input"}),
            )
            .await
            .unwrap();
        assert_eq!(sent["status"], "delivered", "{sent}");
        assert_eq!(sent["session_id"], "mcp-b");
        assert_eq!(sent["presence"], "live");
        let first_id = sent["msg_id"].as_str().unwrap().to_owned();

        // Delivered means on disk: B has it, with the verified sender.
        let (text, got) = b.ok("receive_messages", json!({})).await.unwrap();
        let m = &got["messages"][0];
        assert_eq!(m["msg_id"], first_id.as_str());
        assert_eq!(m["from"], "alice");
        assert_eq!(m["sender_key"], alice.key.as_str());
        assert_eq!(m["sender_session"], "mcp-a");
        assert_eq!((&m["task_id"], &m["status"]), (&json!("t-1"), &json!("needs_input")));
        assert_eq!(m["text"], "hello bob");
        assert!(text.contains("from alice (") && text.contains("hello bob"), "{text}");
        // Every response carries the footer while a message is unread.
        let (who_text, who) = b.ok("whoami", json!({})).await.unwrap();
        assert!(who_text.contains("1 unread message"), "{who_text}");
        assert_eq!(who["unread"], 1);
        // And what it sees of its network: Alice's session, directly, over TCP.
        assert!(who_text.contains("net alice/mcp-a: direct tcp"), "{who_text}");
        let alice_peer = who["network"]["peers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["sessions"][0] == "alice/mcp-a")
            .cloned();
        assert_eq!(
            alice_peer.map(|p| (p["route"].clone(), p["transport"].clone())),
            Some((json!("direct"), json!("tcp"))),
            "{who}"
        );

        // The Stop hook wakes the agent with it (exit 2), labelled with the sender.
        let hook_input = json!({"session_id": "mcp-b", "hook_event_name": "Stop"}).to_string();
        let (status, out, err, _) = wait_hook(&bob, &hook_input, &["--timeout", "10"]);
        assert_eq!(status.code(), Some(2), "stdout {out} stderr {err}");
        assert!(out.contains("from alice (") && out.contains("hello bob"), "{out}");
        assert!(err.contains("hello bob"), "{err}");
        // It wakes the agent once: the next Stop waits for something new.
        let (status, out, _, _) = wait_hook(&bob, &hook_input, &["--timeout", "0.5"]);
        assert_eq!(status.code(), Some(0), "woken twice for one message: {out}");

        // The reply goes back to A's session (sticky on A's session), with in_reply_to.
        let (_, reply) = b
            .ok("send_message", json!({"to": "alice", "text": "hi alice", "in_reply_to": first_id}))
            .await
            .unwrap();
        assert_eq!(reply["status"], "delivered", "{reply}");
        assert_eq!(reply["session_id"], "mcp-a");
        let (_, got_a) = a.ok("receive_messages", json!({})).await.unwrap();
        assert_eq!(got_a["messages"][0]["from"], "bob");
        assert_eq!(got_a["messages"][0]["in_reply_to"], first_id.as_str());

        // Acknowledged messages are gone, also for the hook.
        let (_, acked) = b
            .ok("acknowledge_messages", json!({"msg_ids": [first_id]}))
            .await
            .unwrap();
        assert_eq!(acked["acknowledged"], json!([first_id]));
        let (_, none) = b.ok("receive_messages", json!({})).await.unwrap();
        assert_eq!(ids(&none), Vec::<String>::new());
        let (who_text, _) = b.ok("whoami", json!({})).await.unwrap();
        assert!(!who_text.contains("unread"), "{who_text}");
        let (status, out, _, took) = wait_hook(&bob, &hook_input, &["--timeout", "0.5"]);
        assert_eq!(status.code(), Some(0), "{out}");
        assert!(took >= Duration::from_millis(500), "{took:?}");

        // Stdin closed: B leaves within the budget; stdout held only JSON-RPC.
        assert_eq!(b.non_jsonrpc_stdout(), Vec::<String>::new());
        let (status, took) = b.close(deadline()).await.unwrap();
        assert!(status.success(), "{status}");
        assert!(took < EXIT_BUDGET, "exit took {took:?}");
        eprintln!("exit after stdin close: {took:?}");
        // Its goodbye: A drops it at once, not after the live window.
        a.poll("discover", json!({}), deadline(), |v| !session_ids(v).contains("mcp-b"))
            .await
            .unwrap();

        // Restarted under the same id (through rmcp's child-process transport): what
        // was acknowledged stays acknowledged; a message sent meanwhile is there.
        let boot = loopback_addr(&a).await;
        let mut cmd = command(bob.home(), STEADY).unwrap();
        cmd.args(["mcp", "--session", "mcp-b", "--bootstrap", &boot]).args(LOOPBACK);
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.stderr(Stdio::null());
        let transport = TokioChildProcess::new(cmd).unwrap();
        let b2 = ().serve(transport).await.unwrap();
        let res = b2
            .call_tool(CallToolRequestParams::new("receive_messages"))
            .await
            .unwrap();
        let none = res.structured_content.unwrap();
        assert_eq!(ids(&none), Vec::<String>::new(), "{none}");
        sees(&a, "mcp-b").await;
        let (_, again) = a.ok("send_message", json!({"to": "bob", "text": "after restart"})).await.unwrap();
        assert_eq!(again["status"], "delivered", "{again}");
        let res = b2
            .call_tool(CallToolRequestParams::new("receive_messages"))
            .await
            .unwrap();
        let got = res.structured_content.unwrap();
        assert_eq!(got["messages"][0]["text"], "after restart", "{got}");
        let _ = b2.cancel().await;

        // SIGTERM: A leaves within the budget.
        assert_eq!(a.non_jsonrpc_stdout(), Vec::<String>::new());
        let (status, took) = a.terminate(deadline()).await.unwrap();
        assert!(status.success(), "{status}");
        assert!(took < EXIT_BUDGET, "exit took {took:?}");
    })
    .await
    .expect("test deadline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_clear_tool_error() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let alice = User::new("alice", STEADY).unwrap();
        let carol = User::new("carol", STEADY).unwrap();
        let a = start(&alice, "bad-a", None, &[]).await;
        let boot = loopback_addr(&a).await;
        let c = start(&carol, "bad-c", Some(&boot), &[]).await;
        sees(&a, "bad-c").await;

        // Missing and ill-typed arguments name the tool and the problem.
        let e = a.err("send_message", json!({"to": "bob"})).await.unwrap();
        assert!(e.contains("send_message") && e.contains("text"), "{e}");
        let e = a
            .err("send_message", json!({"to": 5, "text": "x"}))
            .await
            .unwrap();
        assert!(e.contains("invalid arguments"), "{e}");
        let e = a
            .err(
                "send_message",
                json!({"to": "self", "text": "x", "status": "done"}),
            )
            .await
            .unwrap();
        assert!(e.contains("status") || e.contains("done"), "{e}");
        let e = a.err("add_peer", json!({"name": "x"})).await.unwrap();
        assert!(e.contains("add_peer") && e.contains("key"), "{e}");
        let e = a
            .err("add_peer", json!({"name": "x", "key": "abcd"}))
            .await
            .unwrap();
        assert!(e.contains("64 hex digits"), "{e}");
        let e = a
            .err("remove_peer", json!({"name": "nobody"}))
            .await
            .unwrap();
        assert!(e.contains("no peer is named"), "{e}");
        let e = a
            .err("acknowledge_messages", json!({"msg_ids": ["xyz"]}))
            .await
            .unwrap();
        assert!(e.contains("32 hex digits"), "{e}");
        let e = a
            .err("acknowledge_messages", json!({"msg_ids": []}))
            .await
            .unwrap();
        assert!(e.contains("empty"), "{e}");
        let e = a
            .err("set_summary", json!({"summary": "two\nlines"}))
            .await
            .unwrap();
        assert!(e.contains("control characters"), "{e}");

        // Unknown peer: says how to pair.
        let e = a
            .err("send_message", json!({"to": "bob", "text": "hi"}))
            .await
            .unwrap();
        assert!(e.contains("peer add"), "{e}");
        // A stranger on the overlay: not a peer; pairing is the operator's decision.
        let carol_fp = {
            let (_, who) = c.ok("whoami", json!({})).await.unwrap();
            who["fingerprint"].as_str().unwrap().to_owned()
        };
        let e = a
            .err("send_message", json!({"to": carol_fp, "text": "hi"}))
            .await
            .unwrap();
        assert!(
            e.contains("not a peer") && e.contains("operator") && e.contains(&carol.key),
            "{e}"
        );
        // Paired on one side only: the recipient refuses, and the error says why.
        a.ok("add_peer", json!({"name": "carol", "key": carol.key}))
            .await
            .unwrap();
        let e = a
            .err("send_message", json!({"to": "carol", "text": "hi"}))
            .await
            .unwrap();
        assert!(e.contains("refused") && e.contains(&alice.key), "{e}");

        // Oversized text.
        let big = "x".repeat(64 * 1024 + 1);
        let e = a
            .err("send_message", json!({"to": "carol", "text": big}))
            .await
            .unwrap();
        assert!(e.contains("65536"), "{e}");
        // Exactly at the limit it passes the size check and reaches carol's node (which
        // refuses it for trust, not size).
        let at_limit = "x".repeat(64 * 1024);
        let e = a
            .err("send_message", json!({"to": "carol", "text": at_limit}))
            .await
            .unwrap();
        assert!(e.contains("refused") && !e.contains("65536"), "{e}");
        // Empty text, an unknown field, a malformed in_reply_to, an over-long task id.
        let e = a
            .err("send_message", json!({"to": "carol", "text": "  "}))
            .await
            .unwrap();
        assert!(e.contains("text is empty"), "{e}");
        let e = a
            .err(
                "send_message",
                json!({"to": "carol", "text": "x", "urgent": true}),
            )
            .await
            .unwrap();
        assert!(
            e.contains("invalid arguments for send_message") && e.contains("urgent"),
            "{e}"
        );
        let e = a
            .err(
                "send_message",
                json!({"to": "carol", "text": "x", "in_reply_to": "xyz"}),
            )
            .await
            .unwrap();
        assert!(
            e.contains("in_reply_to") && e.contains("32 hex digits"),
            "{e}"
        );
        let e = a
            .err(
                "send_message",
                json!({"to": "carol", "text": "x", "task_id": "t".repeat(129)}),
            )
            .await
            .unwrap();
        assert!(e.contains("task_id") && e.contains("128"), "{e}");
        // receive_messages: a zero or ill-typed limit.
        let e = a
            .err("receive_messages", json!({"limit": 0}))
            .await
            .unwrap();
        assert!(e.contains("at least 1"), "{e}");
        let e = a
            .err("receive_messages", json!({"limit": "many"}))
            .await
            .unwrap();
        assert!(e.contains("invalid arguments for receive_messages"), "{e}");
        // Self with no other session of this user.
        let e = a
            .err("send_message", json!({"to": "self", "text": "hi"}))
            .await
            .unwrap();
        assert!(e.contains("no other session"), "{e}");
        // An explicit own session.
        let e = a
            .err(
                "send_message",
                json!({"to": "self", "session": "bad-a", "text": "hi"}),
            )
            .await
            .unwrap();
        assert!(e.contains("cannot message itself"), "{e}");

        assert_eq!(a.non_jsonrpc_stdout(), Vec::<String>::new());
    })
    .await
    .expect("test deadline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_mode_pushes_each_message_once() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let (alice, _bob, a, mut b) = paired("ch-a", "ch-b", &[("INTERLINK_CHANNELS", "1")]).await;
        let (_, who) = b.ok("whoami", json!({})).await.unwrap();
        assert_eq!(who["delivery"], "channel");
        let instructions = b.client.peer_info().unwrap().instructions.clone().unwrap();
        assert!(
            instructions.contains("Channel mode is on"),
            "{instructions}"
        );
        sees(&a, "ch-b").await;
        let (_, sent) = a
            .ok(
                "send_message",
                json!({"to": "bob", "text": "pushed", "task_id": "t-9", "status": "update"}),
            )
            .await
            .unwrap();
        assert_eq!(sent["status"], "delivered", "{sent}");
        let note = tokio::time::timeout(Duration::from_secs(10), b.notes.recv())
            .await
            .expect("no channel notification")
            .unwrap();
        assert_eq!(note.method, "notifications/claude/channel");
        let params = note.params.unwrap();
        let content = params["content"].as_str().unwrap();
        assert_eq!(
            framing::only_block(content).unwrap().body(),
            "pushed",
            "{content}"
        );
        let meta = &params["meta"];
        assert_eq!(meta["sender"], "alice");
        assert_eq!(meta["sender_key"], alice.key.as_str());
        assert_eq!(meta["session"], "ch-a");
        assert_eq!(meta["msg_id"], sent["msg_id"]);
        assert_eq!(meta["task_id"], "t-9");
        assert_eq!(meta["status"], "update");
        assert!(meta.get("in_reply_to").is_none(), "{meta}");
        // Pushed means consumed: the inbox path does not show it again.
        let (_, none) = b.ok("receive_messages", json!({})).await.unwrap();
        assert_eq!(ids(&none), Vec::<String>::new());
        assert_eq!(b.non_jsonrpc_stdout(), Vec::<String>::new());
        // The sender sees it handed to the agent host.
        a.poll(
            "message_status",
            json!({"msg_id": sent["msg_id"]}),
            deadline(),
            |v| v["state"] == "host_queued",
        )
        .await
        .unwrap();
    })
    .await
    .expect("test deadline");
}

/// A damaged read state stops nothing in silence: the agent is told once why new
/// messages cannot be pushed, every tool result says so, and once the file is removed
/// the messages the inbox kept are pushed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_mode_says_why_a_damaged_read_state_stops_pushes() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let (_alice, bob, a, mut b) = paired("dr-a", "dr-b", &[("INTERLINK_CHANNELS", "1")]).await;
        sees(&a, "dr-b").await;
        let read_state = bob.home().join("sessions/dr-b/read.json");
        std::fs::write(&read_state, b"{not json").unwrap();
        for text in ["one", "two"] {
            let (_, sent) = a
                .ok("send_message", json!({"to": "bob", "text": text}))
                .await
                .unwrap();
            assert_eq!(sent["status"], "delivered", "{sent}");
        }
        let note = tokio::time::timeout(Duration::from_secs(10), b.notes.recv())
            .await
            .expect("no notice of the damaged read state")
            .unwrap();
        let params = note.params.unwrap();
        assert_eq!(params["meta"]["interlink"], "read_state_error", "{params}");
        let content = params["content"].as_str().unwrap();
        assert!(
            content.contains("read.json") && content.contains("not valid"),
            "{content}"
        );
        // Told once per cause: the second message brings no second notice.
        assert!(
            tokio::time::timeout(Duration::from_secs(2), b.notes.recv())
                .await
                .is_err(),
            "a second notice"
        );
        let (text, who) = b.ok("whoami", json!({})).await.unwrap();
        assert!(who["read_state_error"].as_str().is_some(), "{who}");
        assert!(who["unread"].is_null(), "{who}");
        assert!(text.contains("unread messages cannot be shown"), "{text}");
        // Removed, the read state starts over and what the inbox kept is pushed.
        std::fs::remove_file(&read_state).unwrap();
        let (_, sent) = a
            .ok("send_message", json!({"to": "bob", "text": "three"}))
            .await
            .unwrap();
        assert_eq!(sent["status"], "delivered", "{sent}");
        let mut bodies = Vec::new();
        while bodies.len() < 3 {
            let note = tokio::time::timeout(Duration::from_secs(10), b.notes.recv())
                .await
                .expect("the kept messages are pushed")
                .unwrap();
            let content = note.params.unwrap()["content"].as_str().unwrap().to_owned();
            bodies.push(framing::only_block(&content).unwrap().body().to_owned());
        }
        // rmcp's client hands each notification to a task of its own, so the test
        // sees them in any order.
        bodies.sort();
        assert_eq!(bodies, ["one", "three", "two"]);
    })
    .await
    .expect("test deadline");
}

#[test]
fn a_second_waiter_for_a_session_exits_at_once() {
    let user = User::new("waiter", &[]).unwrap();
    let input = json!({"session_id": "idle"}).to_string();
    // Nothing arrives: exit 0 at the timeout.
    let (status, out, _, took) = wait_hook(&user, &input, &["--timeout", "0.3"]);
    assert_eq!((status.code(), out.as_str()), (Some(0), ""));
    assert!(took >= Duration::from_millis(300), "{took:?}");
    // A first waiter holds the lock...
    let mut cmd = command(user.home(), &[]).unwrap();
    cmd.args(["wait", "--session", "idle", "--timeout", "30"]);
    let first = interlink_e2e::process::Guard::spawn(cmd, user.home().join("first.log")).unwrap();
    let lock = user.home().join("sessions/idle/wait.lock");
    let until = deadline();
    loop {
        if let Ok(f) = std::fs::File::open(&lock)
            && matches!(f.try_lock(), Err(std::fs::TryLockError::WouldBlock))
        {
            break;
        }
        assert!(
            Instant::now() < until,
            "the first waiter never took the lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // ...so a second one exits 0 at once.
    let (status, _, err, took) = wait_hook(&user, &input, &["--timeout", "30"]);
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    drop(first);
    // Bad hook input is an error, not a wake-up.
    let (status, _, err, _) = wait_hook(&user, "{}", &["--timeout", "1"]);
    assert!(
        status.code() != Some(0) && status.code() != Some(2),
        "{status}: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_between_sessions_follows_the_seed_rules() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let alice = User::new("alice", STEADY).unwrap();
        let bob = User::new("bob", STEADY).unwrap();
        let b = start(&bob, "rt-b", None, &[]).await;
        let boot = loopback_addr(&b).await;
        let x = start(&alice, "rt-a-x", Some(&boot), &[]).await;
        let y = start(&alice, "rt-a-y", Some(&boot), &[]).await;
        b.ok("add_peer", json!({"name": "alice", "key": alice.key}))
            .await
            .unwrap();
        x.ok("add_peer", json!({"name": "bob", "key": bob.key}))
            .await
            .unwrap();
        y.ok("list_peers", json!({})).await.unwrap();
        sees(&b, "rt-a-x").await;
        sees(&b, "rt-a-y").await;
        sees(&x, "rt-a-y").await;
        sees(&y, "rt-a-x").await;

        // Two live sessions and no history: the sender must choose, and is shown both.
        let e = b
            .err("send_message", json!({"to": "alice", "text": "which?"}))
            .await
            .unwrap();
        assert!(
            e.contains("rt-a-x") && e.contains("rt-a-y") && e.contains("session"),
            "{e}"
        );
        // An ambiguous prefix is refused; a unique one is expanded to the full id.
        let e = b
            .err(
                "send_message",
                json!({"to": "alice", "session": "rt-a-", "text": "?"}),
            )
            .await
            .unwrap();
        assert!(e.contains("matches several sessions"), "{e}");
        let (_, sent) = b
            .ok(
                "send_message",
                json!({"to": "alice", "session": "rt-a-y", "text": "to y"}),
            )
            .await
            .unwrap();
        assert_eq!(
            (&sent["session_id"], &sent["route"]),
            (&json!("rt-a-y"), &json!("exact session id"))
        );

        // Sessions of one identity reach each other as `self`, without pairing; the
        // sending session is never a candidate, so the other one is chosen.
        let (_, to_self) = x
            .ok("send_message", json!({"to": "self", "text": "sibling"}))
            .await
            .unwrap();
        assert_eq!(
            (&to_self["status"], &to_self["session_id"]),
            (&json!("delivered"), &json!("rt-a-y"))
        );
        let (_, got) = y.ok("receive_messages", json!({})).await.unwrap();
        let froms: Vec<&Value> = got["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| &m["from"])
            .collect();
        assert_eq!(froms, [&json!("bob"), &json!("self")], "{got}");

        // Sticky: once X has written to bob, bob's reply without `session` goes to X.
        let (_, _) = x
            .ok("send_message", json!({"to": "bob", "text": "from x"}))
            .await
            .unwrap();
        b.ok("receive_messages", json!({})).await.unwrap();
        let (_, reply) = b
            .ok("send_message", json!({"to": "alice", "text": "back to x"}))
            .await
            .unwrap();
        assert_eq!(
            (&reply["session_id"], &reply["route"]),
            (&json!("rt-a-x"), &json!("the peer's last sending session"))
        );
        for s in [&b, &x, &y] {
            assert_eq!(s.non_jsonrpc_stdout(), Vec::<String>::new());
        }
    })
    .await
    .expect("test deadline");
}

/// Agent hosts written in Node start the server with Unix socket pairs as stdin and
/// stdout (libuv), not pipes: the server speaks MCP over those too, and stdin closing
/// still ends it.
#[test]
fn mcp_over_socket_pair_stdio_as_node_hosts_start_it() {
    use std::{
        io::{BufRead as _, BufReader, Write as _},
        os::unix::net::UnixStream,
    };
    let user = User::new("sockets", &[]).unwrap();
    let (host_in, child_in) = UnixStream::pair().unwrap();
    let (host_out, child_out) = UnixStream::pair().unwrap();
    let mut cmd = command(user.home(), &[]).unwrap();
    cmd.args(["mcp", "--session", "sock-1"])
        .args(LOOPBACK)
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(child_in)))
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(child_out)))
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    // The child's ends live on in the child only: its exit must read as EOF here.
    drop(cmd);
    host_out
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut lines = BufReader::new(host_out.try_clone().unwrap()).lines();
    let send = |v: Value| {
        let mut line = v.to_string();
        line.push('\n');
        (&host_in).write_all(line.as_bytes()).unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "node-like-host", "version": "1"}}}),
    );
    let init: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(init["id"], 1, "{init}");
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "whoami", "arguments": {}}}));
    let who: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(who["id"], 2, "{who}");
    assert_eq!(
        who["result"]["structuredContent"]["session_id"], "sock-1",
        "{who}"
    );
    // Closing stdin ends the server.
    host_in.shutdown(std::net::Shutdown::Both).unwrap();
    drop(host_in);
    let until = Instant::now() + EXIT_BUDGET;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(
            Instant::now() < until,
            "the server did not exit after stdin closed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One process per session id and home: a second `mcp` (or `run`) under the id of a
/// running session exits at once with an error naming the first, and the first keeps
/// working — two inbox writers under one PeerId would corrupt both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_under_a_running_sessions_id_exits_naming_the_first() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let alice = User::new("alice", STEADY).unwrap();
        let first = start(&alice, "dup-1", None, &[]).await;
        first.ok("whoami", json!({})).await.unwrap();
        let pid = first.pid().unwrap();
        for args in [
            &["mcp", "--session", "dup-1", "--no-mdns"][..],
            &["run", "--session", "dup-1", "--no-mdns"][..],
        ] {
            let mut cmd = command(alice.home(), STEADY).unwrap();
            cmd.args(args).args(["--listen", "/ip4/127.0.0.1/tcp/0"]);
            let started = Instant::now();
            let (status, stdout, stderr) =
                interlink_e2e::process::run_to_end(cmd, deadline()).unwrap();
            assert!(!status.success(), "{args:?}: {status:?} {stderr}");
            assert!(
                stderr.contains("already running") && stderr.contains(&pid.to_string()),
                "{args:?}: the error names the holder: {stderr}"
            );
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{args:?} did not exit at once"
            );
            assert!(
                stdout.trim().is_empty() || args[0] == "run",
                "nothing but JSON-RPC on an MCP server's stdout: {stdout}"
            );
        }
        // The first one is untouched.
        let (_, who) = first.ok("whoami", json!({})).await.unwrap();
        assert_eq!(who["session_id"], "dup-1", "{who}");
        first.close(deadline()).await.unwrap();
    })
    .await
    .expect("test deadline");
}

/// A host's health check (`claude mcp list`: start, `initialize`, exit) leaves no session
/// directory; a session that got a message keeps its directory, inbox and all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_health_check_leaves_no_session_directory_a_session_with_mail_keeps_it() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let alice = User::new("alice", STEADY).unwrap();
        let sessions = alice.home().join("sessions");
        // At once, and after the 1 s a host may wait before closing stdin (by then the
        // session has written its network view).
        for pause in [Duration::ZERO, Duration::ZERO, Duration::from_millis(1500)] {
            let check = McpSession::spawn(alice.home(), "health-check", LOOPBACK, &[])
                .await
                .unwrap();
            tokio::time::sleep(pause).await;
            check.close(deadline()).await.unwrap();
        }
        let left: Vec<_> = std::fs::read_dir(&sessions)
            .map(|d| d.map(|e| e.unwrap().file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "health checks left {left:?}");
        // A session that served a tool call is not a health check: it keeps its
        // directory even with nothing in it (a resumed conversation finds it).
        let used = start(&alice, "used-1", None, &[]).await;
        used.ok("whoami", json!({})).await.unwrap();
        used.close(deadline()).await.unwrap();
        assert!(sessions.join("used-1").exists());

        let kept = start(&alice, "kept-1", None, &[]).await;
        let to_self = start(&alice, "kept-2", Some(&loopback_addr(&kept).await), &[]).await;
        sees(&to_self, "kept-1").await;
        to_self
            .ok(
                "send_message",
                json!({"to": "self", "session": "kept-1", "text": "stay"}),
            )
            .await
            .unwrap();
        kept.poll("receive_messages", json!({}), deadline(), |v| {
            v["messages"].as_array().is_some_and(|m| !m.is_empty())
        })
        .await
        .unwrap();
        kept.close(deadline()).await.unwrap();
        to_self.close(deadline()).await.unwrap();
        assert!(sessions.join("kept-1").join("inbox.jsonl").exists());
        assert!(
            sessions.join("kept-2").exists(),
            "a sender keeps its sent log"
        );
    })
    .await
    .unwrap();
}
