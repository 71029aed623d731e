//! Pairing by knock through MCP: real `interlink-p2p mcp` processes with their own
//! homes on loopback (explicit bootstrap, no mDNS), driven by an rmcp client, and the
//! operator's `interlink-p2p pair` command.
//!
//! Covered: from zero (no peers on either side), a knock waits for the operator, who
//! accepts with the tool (both sides end up paired and talk) or with the command after
//! a restart of the session that holds the request; a rejected knock leaves no trace.
//! Admitting a key needs the human: `add_peer` and `accept_pair` ask through MCP
//! elicitation (the client declares what Claude Code declares) and change nothing on a
//! no; a client that cannot ask gets the operator's command and nothing changes;
//! `INTERLINK_AGENT_PAIRING=1` lets the agent pair alone.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::Duration;

use interlink_e2e::{
    mcp_session::{Human, LOOPBACK, McpSession, STEADY, deadline, loopback_addr},
    user::User,
};
use serde_json::{Value, json};

const TEST_DEADLINE: Duration = Duration::from_secs(120);

async fn start(user: &User, session: &str, boot: Option<&str>) -> McpSession {
    start_as(user, session, boot, (Human::Approves, false), &[]).await
}

/// Starts a session whose client has `human` behind it and speaks Claude Code's
/// protocol if `like_claude`.
async fn start_as(
    user: &User,
    session: &str,
    boot: Option<&str>,
    (human, like_claude): (Human, bool),
    extra: &[(&str, &str)],
) -> McpSession {
    let mut args: Vec<&str> = vec!["--session", session];
    args.extend(LOOPBACK);
    if let Some(b) = boot {
        args.extend(["--bootstrap", b]);
    }
    let mut env = STEADY.to_vec();
    env.push(("INTERLINK_NAME", user.name.as_str()));
    env.extend_from_slice(extra);
    McpSession::spawn_with(user.home(), session, &args, &env, None, human, like_claude)
        .await
        .unwrap()
}

async fn sees(viewer: &McpSession, session: &str) {
    viewer
        .poll("discover", json!({}), deadline(), |v| {
            v.to_string()
                .contains(&format!("\"session_id\":\"{session}\""))
        })
        .await
        .unwrap();
}

fn fingerprint(user: &User) -> String {
    let out = user.cli(&["id", "--json"], None).unwrap();
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    v["fingerprint"].as_str().unwrap().to_owned()
}

/// Waits until `s` has a pair request waiting; returns `list_pair_requests`.
async fn requests_waiting(s: &McpSession) -> Value {
    s.poll("list_pair_requests", json!({}), deadline(), |v| {
        v["incoming"].as_array().is_some_and(|i| !i.is_empty())
    })
    .await
    .unwrap()
}

async fn peer_names(s: &McpSession) -> Vec<String> {
    let (_, v) = s.ok("list_peers", json!({})).await.unwrap();
    v["peers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_from_zero_by_knock_both_ways() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let alice = User::new("alice", STEADY).unwrap();
        let bob = User::new("bob", STEADY).unwrap();
        let carol = User::new("carol", STEADY).unwrap();
        let a = start(&alice, "pair-a", None).await;
        let boot = loopback_addr(&a).await;
        let b = start(&bob, "pair-b", Some(&boot)).await;
        sees(&a, "pair-b").await;
        let bob_fp = fingerprint(&bob);
        let alice_fp = fingerprint(&alice);

        // Strangers cannot message; the error says how pairing works.
        let e = a
            .err("send_message", json!({"to": &bob_fp, "text": "hi"}))
            .await
            .unwrap();
        assert!(e.contains("not a peer") && e.contains("operator"), "{e}");

        // A knocks B's only live session.
        let (text, knocked) = a
            .ok("request_pair", json!({"target": &bob_fp}))
            .await
            .unwrap();
        assert_eq!(knocked["status"], "delivered", "{text}");
        assert_eq!(knocked["session_id"], "pair-b");
        assert_eq!(knocked["suggested_name"], "alice");

        // It waits at B for the operator, with the footer saying so.
        let waiting = requests_waiting(&b).await;
        let req = &waiting["incoming"][0];
        assert_eq!(req["fingerprint"], alice_fp.as_str());
        assert_eq!(req["suggested_name"], "alice");
        assert_eq!(req["session"], "pair-a");
        let (who, _) = b.ok("whoami", json!({})).await.unwrap();
        assert!(
            who.contains("pair request") && who.contains("operator"),
            "{who}"
        );
        assert!(peer_names(&b).await.is_empty());

        // B's operator accepts: B pins alice; the confirmation reaches A's session,
        // whose side pins bob.
        let (text, accepted) = b
            .ok("accept_pair", json!({"fingerprint": &alice_fp}))
            .await
            .unwrap();
        assert_eq!(accepted["name"], "alice", "{text}");
        assert_eq!(accepted["confirmation"], "delivered", "{text}");
        assert_eq!(peer_names(&b).await, vec!["alice"]);
        a.poll("list_peers", json!({}), deadline(), |v| {
            v["peers"].to_string().contains("\"bob\"")
        })
        .await
        .unwrap();
        let (_, none) = b.ok("list_pair_requests", json!({})).await.unwrap();
        assert_eq!(none["incoming"], json!([]));
        let (_, nothing_sent) = a.ok("list_pair_requests", json!({})).await.unwrap();
        assert_eq!(nothing_sent["outgoing"], json!([]));

        // Asking a peer again re-confirms rather than refusing (its side may have lost
        // this user); its name works as the target.
        let (again, _) = a
            .ok("request_pair", json!({"target": "bob"}))
            .await
            .unwrap();
        assert!(again.contains("already a peer here"), "{again}");

        // Bad requests are clear tool errors.
        let e = a
            .err("request_pair", json!({"target": "ab"}))
            .await
            .unwrap();
        assert!(e.contains("fingerprint"), "{e}");
        let e = a.err("request_pair", json!({})).await.unwrap();
        assert!(e.contains("request_pair") && e.contains("target"), "{e}");
        let e = b
            .err("accept_pair", json!({"fingerprint": "zz"}))
            .await
            .unwrap();
        assert!(e.contains("no pair request"), "{e}");

        // Paired both ways: messages flow in both directions.
        let (_, sent) = a
            .ok("send_message", json!({"to": "bob", "text": "paired!"}))
            .await
            .unwrap();
        assert_eq!(sent["status"], "delivered", "{sent}");
        let (_, back) = b
            .ok("send_message", json!({"to": "alice", "text": "yes"}))
            .await
            .unwrap();
        assert_eq!(back["status"], "delivered", "{back}");

        // Carol knocks B, naming the petname she wants for bob; B restarts before its
        // operator decides: the request is still there.
        let c = start(&carol, "pair-c", Some(&boot)).await;
        sees(&c, "pair-b").await;
        let (_, k) = c
            .ok(
                "request_pair",
                json!({"target": &bob_fp[..9], "name": "bobby"}),
            )
            .await
            .unwrap();
        assert_eq!(k["status"], "delivered", "{k}");
        requests_waiting(&b).await;
        b.close(deadline()).await.unwrap();
        let b = start(&bob, "pair-b", Some(&boot)).await;
        let (_, still) = b.ok("list_pair_requests", json!({})).await.unwrap();
        let carol_fp = fingerprint(&carol);
        assert_eq!(
            still["incoming"][0]["fingerprint"],
            carol_fp.as_str(),
            "{still}"
        );
        sees(&c, "pair-b").await;

        // The operator accepts at a shell: the command pins carol and confirms to her
        // session from a short-lived session.
        let mut args = vec!["pair", "--bootstrap", boot.as_str()];
        args.extend(LOOPBACK);
        args.extend(["accept", carol_fp.as_str()]);
        let out = bob.cli(&args, None).unwrap();
        assert!(out.status.success(), "{}", out.stderr);
        assert!(out.stdout.contains("paired carol"), "{}", out.stdout);
        assert!(
            out.stdout.contains("confirmation delivered"),
            "{}",
            out.stdout
        );
        c.poll("list_peers", json!({}), deadline(), |v| {
            v["peers"].to_string().contains("\"bobby\"")
        })
        .await
        .unwrap();
        let (_, to_b) = c
            .ok("send_message", json!({"to": "bobby", "text": "hello"}))
            .await
            .unwrap();
        assert_eq!(to_b["status"], "delivered", "{to_b}");

        // A rejected knock: carol knocks alice, alice's operator rejects it.
        sees(&c, "pair-a").await;
        c.ok("request_pair", json!({"target": &alice_fp}))
            .await
            .unwrap();
        requests_waiting(&a).await;
        let out = alice.cli(&["pair", "list"], None).unwrap();
        assert!(out.stdout.contains(&carol_fp), "{}", out.stdout);
        let (_, rejected) = a
            .ok("reject_pair", json!({"fingerprint": &carol_fp}))
            .await
            .unwrap();
        assert_eq!(rejected["fingerprint"], carol_fp.as_str());
        assert_eq!(peer_names(&a).await, vec!["bob"]);
        let e = a
            .err("accept_pair", json!({"fingerprint": &carol_fp}))
            .await
            .unwrap();
        assert!(e.contains("no pair request"), "{e}");
    })
    .await
    .expect("test deadline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admitting_a_key_needs_the_human_on_claude_codes_protocol() {
    admitting_a_key_needs_the_human(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admitting_a_key_needs_the_human_over_initialize() {
    admitting_a_key_needs_the_human(false).await;
}

/// The gate, through a client speaking Claude Code's protocol (the form comes back as an
/// input-required result) or the `initialize` one (the server sends an elicitation
/// request).
async fn admitting_a_key_needs_the_human(like_claude: bool) {
    tokio::time::timeout(TEST_DEADLINE, async {
        let alice = User::new("alice", STEADY).unwrap();
        let bob = User::new("bob", STEADY).unwrap();
        let carol = User::new("carol", STEADY).unwrap();
        let (alice_fp, bob_fp) = (fingerprint(&alice), fingerprint(&bob));

        // A client that cannot ask the human: nothing changes, the command is named.
        let a = start_as(&alice, "gate-a", None, (Human::Absent, like_claude), &[]).await;
        let e = a
            .err("add_peer", json!({"name": "bob", "key": bob.key}))
            .await
            .unwrap();
        assert!(
            e.contains(&format!("interlink-p2p peer add bob {}", bob.key)),
            "{e}"
        );
        assert!(peer_names(&a).await.is_empty());
        let (_, who) = a.ok("whoami", json!({})).await.unwrap();
        assert_eq!(who["pairing"], "operator command only");
        // A knock waits there; accepting it names the command and leaves it waiting.
        let boot = loopback_addr(&a).await;
        let b = start_as(
            &bob,
            "gate-b",
            Some(&boot),
            (Human::Approves, like_claude),
            &[],
        )
        .await;
        sees(&b, "gate-a").await;
        b.ok("request_pair", json!({"target": &alice_fp}))
            .await
            .unwrap();
        requests_waiting(&a).await;
        let e = a
            .err("accept_pair", json!({"fingerprint": &bob_fp}))
            .await
            .unwrap();
        assert!(
            e.contains(&format!("interlink-p2p pair accept {bob_fp}")),
            "{e}"
        );
        let (_, still) = a.ok("list_pair_requests", json!({})).await.unwrap();
        assert_eq!(still["incoming"].as_array().map(Vec::len), Some(1));
        assert!(peer_names(&a).await.is_empty());
        assert!(a.asked.lock().unwrap().is_empty());

        // The human is asked, with the key's fingerprint, and says no.
        let c = start_as(&carol, "gate-c", None, (Human::Declines, like_claude), &[]).await;
        let e = c
            .err("add_peer", json!({"name": "bob", "key": bob.key}))
            .await
            .unwrap();
        assert!(
            e.contains("not paired") && e.contains("did not approve"),
            "{e}"
        );
        assert!(peer_names(&c).await.is_empty());
        let asked = c.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1);
        assert!(asked[0].contains(&bob_fp), "{asked:?}");
        let (_, who) = c.ok("whoami", json!({})).await.unwrap();
        assert_eq!(who["pairing"], "asks the human (MCP elicitation)");
        // The form went the way the client's protocol has it.
        let client: Value = serde_json::from_str(
            &std::fs::read_to_string(carol.home().join("sessions/gate-c/client.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            client["protocol_version"] == "2026-07-28",
            like_claude,
            "{client}"
        );
        drop(c);

        // The human says yes: paired, asked exactly once.
        let (text, _) = b
            .ok("add_peer", json!({"name": "carol", "key": carol.key}))
            .await
            .unwrap();
        assert!(text.contains("added carol"), "{text}");
        assert_eq!(b.asked.lock().unwrap().len(), 1);
        assert_eq!(peer_names(&b).await, vec!["carol"]);

        // Opted in for an unattended setup: the agent pairs alone, nobody is asked.
        let c = start_as(
            &carol,
            "gate-c2",
            None,
            (Human::Absent, like_claude),
            &[("INTERLINK_AGENT_PAIRING", "1")],
        )
        .await;
        c.ok("add_peer", json!({"name": "bob", "key": bob.key}))
            .await
            .unwrap();
        assert_eq!(peer_names(&c).await, vec!["bob"]);
        let (_, who) = c.ok("whoami", json!({})).await.unwrap();
        assert!(
            who["pairing"].as_str().unwrap().starts_with("agent"),
            "{who}"
        );
    })
    .await
    .expect("test deadline");
}

/// An answer the server did not ask for is not consent: a call that brings its own
/// "approve" with a made-up state (or one meant for another call) gets a fresh form,
/// which the human here declines — nothing is paired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_answer_to_the_form_is_not_consent() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let carol = User::new("carol", STEADY).unwrap();
        let bob = User::new("bob", STEADY).unwrap();
        let c = start_as(&carol, "forge-c", None, (Human::Declines, true), &[]).await;
        let mut answers = serde_json::Map::new();
        answers.insert(
            "approve".into(),
            json!({"action": "accept", "content": {"approve": true}}),
        );
        let args = json!({"name": "bob", "key": bob.key});
        let params = rmcp::model::CallToolRequestParams::new("add_peer")
            .with_arguments(args.as_object().unwrap().clone())
            .with_input_responses(answers.into_iter().collect())
            .with_request_state("00112233445566778899aabbccddeeff");
        let r = c.client.call_tool(params).await.unwrap();
        let text = interlink_e2e::mcp_session::text_of(&r);
        assert_eq!(r.is_error, Some(true), "{text}");
        assert!(text.contains("not paired"), "{text}");
        assert!(peer_names(&c).await.is_empty());
        // The human was asked (the forged answer was ignored), and said no.
        assert_eq!(c.asked.lock().unwrap().len(), 1);
    })
    .await
    .expect("test deadline");
}
