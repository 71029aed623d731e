//! The human's page, `interlink-p2p ui`: the real binary serving alice's home on
//! loopback, next to real MCP sessions of several identities.
//!
//! - Who gets in: no secret, a wrong one, a foreign Host header (DNS rebinding), and
//!   changes from another origin, without the page's CSRF token or not as JSON are
//!   refused; the secret in the address becomes an HttpOnly, SameSite=Strict cookie.
//! - In a real headless Chromium (`interlink_e2e::browser`): alice's two sessions and
//!   bob's show, bob's live on the overlay as the page's own observer node sees it; a
//!   message and a task between alice and bob appear in their thread with their
//!   delivery states as they move (delivered, then read once bob acknowledges); a
//!   search finds a message by a word in it; carol's pair request is accepted with a
//!   click, and carol is paired on both sides; an invite made on the page pairs dave;
//!   the human writes to a session, and its agent receives it framed as its user's
//!   words; the page shows it unread, then consumed once the agent acknowledges it.
//!   The screenshot taken at the end is the README's (`INTERLINK_UI_SCREENSHOT=<path>`
//!   keeps it).
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    io::{BufRead as _, BufReader, Read as _, Write as _},
    net::TcpStream,
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use fantoccini::Locator;
use interlink_e2e::{
    browser::{self, Browser},
    mcp_session::{Human, LOOPBACK, McpSession, STEADY, deadline, loopback_addr, sees},
    process::command_in,
    user::User,
};
use serde_json::{Value, json};

const TEST_DEADLINE: Duration = Duration::from_secs(200);

/// A running `interlink-p2p ui --no-open` and the address it printed.
struct Ui {
    child: Child,
    url: String,
    port: u16,
}

impl Ui {
    fn start(user: &User, boot: Option<&str>) -> Self {
        let mut env = STEADY.to_vec();
        env.push(("INTERLINK_NAME", user.name.as_str()));
        let mut cmd = command_in(None, user.home(), &env).unwrap();
        cmd.args(["ui", "--no-open"]).args(LOOPBACK);
        if let Some(b) = boot {
            cmd.args(["--bootstrap", b]);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("interlink ui: ")
            .unwrap_or_else(|| panic!("ui printed {line:?}"))
            .to_owned();
        let port = url
            .trim_start_matches("http://127.0.0.1:")
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        Self { child, url, port }
    }

    fn secret(&self) -> &str {
        self.url.split("token=").nth(1).unwrap()
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request to the page's server; the status and the whole answer.
fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, answer)
}

#[test]
fn the_page_refuses_requests_without_the_secret_from_other_hosts_or_other_sites() {
    let alice = User::new("alice", STEADY).unwrap();
    let ui = Ui::start(&alice, None);
    let port = ui.port;
    let bearer = format!("Bearer {}", ui.secret());
    let origin = format!("http://127.0.0.1:{port}");

    // No secret, a wrong one: nothing but the reason.
    let (status, answer) = http(port, "GET", "/api/overview", &[], "");
    assert_eq!(status, 401, "{answer}");
    assert!(answer.contains("open the address"), "{answer}");
    let (status, _) = http(port, "GET", "/?token=00", &[], "");
    assert_eq!(status, 401);
    let (status, _) = http(
        port,
        "GET",
        "/api/overview",
        &[("Authorization", "Bearer 00")],
        "",
    );
    assert_eq!(status, 401);

    // The right secret, under a name a DNS-rebinding page would send: refused first.
    let (status, answer) = http(
        port,
        "GET",
        &format!("/?token={}", ui.secret()),
        &[("Host", &format!("rebind.example:{port}"))],
        "",
    );
    assert_eq!(status, 421, "{answer}");
    assert!(!answer.to_lowercase().contains("set-cookie"), "{answer}");
    let (status, _) = http(
        port,
        "GET",
        "/api/overview",
        &[("Host", "127.0.0.1:1"), ("Authorization", &bearer)],
        "",
    );
    assert_eq!(status, 421);

    // The address's secret becomes a cookie the page's script cannot read, and the
    // address bar keeps no secret.
    let (status, answer) = http(port, "GET", &format!("/?token={}", ui.secret()), &[], "");
    assert_eq!(status, 303, "{answer}");
    let lower = answer.to_lowercase();
    assert!(lower.contains("location: /\r\n"), "{answer}");
    assert!(
        lower.contains(&format!(
            "set-cookie: interlink_ui={}; httponly; samesite=strict",
            ui.secret()
        )),
        "{answer}"
    );
    assert!(lower.contains("referrer-policy: no-referrer"), "{answer}");
    let cookie = format!("interlink_ui={}", ui.secret());
    let (status, page) = http(port, "GET", "/", &[("Cookie", &cookie)], "");
    assert_eq!(status, 200);
    assert!(page.contains("frame-ancestors 'none'"), "{page}");
    let csrf = page
        .split("name=\"csrf\" content=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_owned();
    let (status, overview) = http(port, "GET", "/api/overview", &[("Cookie", &cookie)], "");
    assert_eq!(status, 200, "{overview}");
    assert!(overview.contains(&alice.key), "{overview}");

    // Changes: from another site, without an origin, as a form, without the token.
    let body = r#"{"action":"remove","name":"nobody"}"#;
    let json_type = ("Content-Type", "application/json");
    let cases: [(&str, Vec<(&str, &str)>); 5] = [
        (
            "cross-site",
            vec![
                ("Cookie", &cookie),
                ("Origin", "http://evil.example"),
                json_type,
                ("X-Interlink-Csrf", &csrf),
            ],
        ),
        (
            "no origin",
            vec![("Cookie", &cookie), json_type, ("X-Interlink-Csrf", &csrf)],
        ),
        (
            "a form",
            vec![
                ("Cookie", &cookie),
                ("Origin", &origin),
                ("Content-Type", "application/x-www-form-urlencoded"),
                ("X-Interlink-Csrf", &csrf),
            ],
        ),
        (
            "no token",
            vec![("Cookie", &cookie), ("Origin", &origin), json_type],
        ),
        (
            "another site's fetch",
            vec![
                ("Cookie", &cookie),
                ("Origin", &origin),
                json_type,
                ("X-Interlink-Csrf", &csrf),
                ("Sec-Fetch-Site", "cross-site"),
            ],
        ),
    ];
    for (what, headers) in cases {
        let (status, answer) = http(port, "POST", "/api/peer", &headers, body);
        assert_eq!(status, 403, "{what}: {answer}");
    }
    // The page itself: the change is tried (and refused for its own reason).
    let (status, answer) = http(
        port,
        "POST",
        "/api/peer",
        &[
            ("Cookie", &cookie),
            ("Origin", &origin),
            json_type,
            ("X-Interlink-Csrf", &csrf),
        ],
        body,
    );
    assert_eq!(status, 400, "{answer}");
    assert!(answer.contains("nobody"), "{answer}");
}

async fn start(user: &User, session: &str, boot: Option<&str>) -> McpSession {
    let mut args: Vec<&str> = vec!["--session", session];
    args.extend(LOOPBACK);
    if let Some(b) = boot {
        args.extend(["--bootstrap", b]);
    }
    let mut env = STEADY.to_vec();
    env.push(("INTERLINK_NAME", user.name.as_str()));
    McpSession::spawn_with(
        user.home(),
        session,
        &args,
        &env,
        None,
        Human::Approves,
        false,
    )
    .await
    .unwrap()
}

fn fingerprint(user: &User) -> String {
    let out = user.cli(&["id", "--json"], None).unwrap();
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    v["fingerprint"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_sessions_threads_states_and_search_and_acts_for_the_human() {
    let Some((chromium, driver)) = browser::available() else {
        return;
    };
    tokio::time::timeout(TEST_DEADLINE, async {
        let alice = User::new("alice", STEADY).unwrap();
        let bob = User::new("bob", STEADY).unwrap();
        let carol = User::new("carol", STEADY).unwrap();
        alice.pair_with(&bob).unwrap();
        bob.pair_with(&alice).unwrap();
        let a1 = start(&alice, "a1", None).await;
        let boot = loopback_addr(&a1).await;
        let a2 = start(&alice, "a2", Some(&boot)).await;
        let b1 = start(&bob, "b1", Some(&boot)).await;
        sees(&a1, "b1").await.unwrap();
        sees(&a1, "a2").await.unwrap();

        let ui = Ui::start(&alice, Some(&boot));
        let browser = Browser::start(&chromium, &driver).await.unwrap();
        browser.client.goto(&ui.url).await.unwrap();
        // The secret left the address bar.
        let at = browser.client.current_url().await.unwrap();
        assert!(!at.as_str().contains("token"), "{at}");
        for s in ["you/a1", "you/a2"] {
            browser
                .wait_for(&format!("#overlay [data-node=\"{s}\"]"), None, deadline())
                .await
                .unwrap();
        }
        // a1 is connected to bob's session: the picture draws the link.
        browser
            .wait_for("#overlay text", Some("bob/b1"), deadline())
            .await
            .unwrap();
        // The page's own observer sees the overlay: bob's session is live, and what it
        // works on (sealed for alice, a peer) is read.
        let bob_there = browser
            .wait_for("#identities li[data-overlay-session=\"bob/b1\"]", Some("live"), deadline())
            .await
            .unwrap();
        eprintln!("bob's session on the page: {bob_there}");
        browser
            .wait_for("#identities li[data-overlay-session=\"you/a2\"]", Some("live"), deadline())
            .await
            .unwrap();

        // A message and a task, alice's a1 to bob's b1.
        let (_, sent) = a1
            .ok("send_message", json!({"to": "bob", "session": "b1", "text": "please review the parser migration"}))
            .await
            .unwrap();
        let msg = sent["msg_id"].as_str().unwrap().to_owned();
        let (_, task) = a1
            .ok("send_message", json!({"to": "bob", "session": "b1", "text": "run the flaky suite", "task_id": "t-7", "status": "needs_input"}))
            .await
            .unwrap();
        let task_msg = task["msg_id"].as_str().unwrap().to_owned();
        let conversation = "#conversations li[data-session=\"a1\"][data-peer-session=\"b1\"]";
        browser.wait_for(conversation, None, deadline()).await.unwrap();
        browser
            .client
            .find(Locator::Css(conversation))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        let row = |id: &str, state: &str| format!("#thread li[data-id=\"{id}\"][data-state=\"{state}\"]");
        browser.wait_for(&row(&msg, "delivered"), Some("parser migration"), deadline()).await.unwrap();
        browser.wait_for(&row(&task_msg, "delivered"), Some("task t-7"), deadline()).await.unwrap();

        // Bob's agent reads both and acknowledges: the page moves them to read, live.
        let (_, unread) = b1.ok("receive_messages", json!({})).await.unwrap();
        let ids: Vec<String> = unread["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["msg_id"].as_str().unwrap().to_owned())
            .collect();
        assert!(ids.contains(&msg), "{unread}");
        b1.ok("acknowledge_messages", json!({"msg_ids": ids})).await.unwrap();
        let read_at = Instant::now();
        browser.wait_for(&row(&msg, "read"), None, deadline()).await.unwrap();
        eprintln!("the read state showed on the page {:?} after the acknowledgement", read_at.elapsed());
        // Bob answers the task; the answer shows in the thread as received.
        let (_, answer) = b1
            .ok("send_message", json!({"to": "alice", "session": "a1", "text": "suite green after the fix", "task_id": "t-7", "status": "result"}))
            .await
            .unwrap();
        let answer_id = answer["msg_id"].as_str().unwrap().to_owned();
        browser.wait_for(&row(&answer_id, "received"), Some("task t-7 · result"), deadline()).await.unwrap();

        // Search by a word.
        browser.client.find(Locator::Css("#q")).await.unwrap().send_keys("MIGRATION").await.unwrap();
        browser.client.find(Locator::Css("#search button")).await.unwrap().click().await.unwrap();
        browser
            .wait_for(&format!("#results li[data-id=\"{msg}\"]"), Some("parser migration"), deadline())
            .await
            .unwrap();
        let found = browser.wait_for("#search-note", Some("found in"), deadline()).await.unwrap();
        eprintln!("search on the page: {found}");

        // Carol knocks on alice; the human accepts on the page.
        let c1 = start(&carol, "c1", Some(&boot)).await;
        sees(&c1, "a1").await.unwrap();
        let alice_fp = fingerprint(&alice);
        let carol_fp = fingerprint(&carol);
        c1.ok("request_pair", json!({"target": alice_fp, "session": "a1"})).await.unwrap();
        let request = format!("#requests li[data-fingerprint=\"{carol_fp}\"]");
        browser.wait_for(&request, Some("carol"), deadline()).await.unwrap();
        browser
            .client
            .find(Locator::Css(&format!("{request} button")))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        browser.wait_for("#peers li[data-peer=\"carol\"]", None, deadline()).await.unwrap();
        c1.poll("list_peers", json!({}), deadline(), |v| v["peers"].to_string().contains("\"alice\""))
            .await
            .unwrap();

        // An invite made on the page: dave joins with its code and shows as a peer.
        browser.client.find(Locator::Css("#invite")).await.unwrap().click().await.unwrap();
        let code = browser.wait_for("#invite-code", Some("interlink2"), deadline()).await.unwrap();
        let mut named = STEADY.to_vec();
        named.push(("INTERLINK_NAME", "dave"));
        let dave = User::new("dave", &named).unwrap();
        let joined = dave.cli(&["join", code.trim()], None).unwrap();
        assert!(joined.status.success(), "join: {}", joined.stderr);
        if let Err(e) = browser.wait_for("#peers li[data-peer=\"dave\"]", None, deadline()).await {
            panic!(
                "{e}\npeers.json: {:?}",
                std::fs::read_to_string(alice.home().join("peers.json"))
            );
        }

        // The human writes to a1 (the open thread's session), as its user.
        let words = "stop after this change and run the whole suite";
        browser.client.find(Locator::Css("#write-text")).await.unwrap().send_keys(words).await.unwrap();
        browser.client.find(Locator::Css("#write button")).await.unwrap().click().await.unwrap();
        let result = browser.wait_for("#write-result", Some("delivered"), deadline()).await.unwrap();
        eprintln!("the human's message: {result}");
        let until = deadline();
        let (text, got) = loop {
            let (text, got) = a1.ok("receive_messages", json!({"limit": 100})).await.unwrap();
            if text.contains(words) || Instant::now() > until {
                break (text, got);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(text.contains("from your user"), "{text}");
        assert!(text.contains("(verified: your own key)"), "{text}");
        let mine: Vec<&Value> = got["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["from_user"] == true)
            .collect();
        assert_eq!(mine.len(), 1, "{got}");
        assert_eq!(mine[0]["text"], words);
        // Bob's answer in the same batch is bob's, not the user's.
        assert!(
            got["messages"].as_array().unwrap().iter().any(|m| m["text"] == "suite green after the fix" && m["from_user"] == false),
            "{got}"
        );

        // The page shows the human's message as a1's conversation with the page, and
        // whether a1's agent has consumed it: not until it acknowledges, then at once.
        let with_page = "#conversations li[data-session=\"a1\"][data-peer-session=\"user-page\"]";
        browser.wait_for(with_page, Some("you (this page)"), deadline()).await.unwrap();
        browser.client.find(Locator::Css(with_page)).await.unwrap().click().await.unwrap();
        let yours = mine[0]["msg_id"].as_str().unwrap().to_owned();
        let consumed = |c: &str| format!("#thread li[data-id=\"{yours}\"][data-consumed=\"{c}\"]");
        browser.wait_for(&consumed("0"), Some(words), deadline()).await.unwrap();
        a1.ok("acknowledge_messages", json!({"msg_ids": [yours.clone()]})).await.unwrap();
        browser.wait_for(&consumed("1"), Some("consumed"), deadline()).await.unwrap();
        let png = browser.client.screenshot().await.unwrap();
        if let Some(path) = std::env::var_os("INTERLINK_UI_SCREENSHOT") {
            std::fs::write(path, &png).unwrap();
        }
        assert!(png.starts_with(b"\x89PNG"));
        browser.close().await;
        for s in [a1, a2, b1, c1] {
            s.close(deadline()).await.unwrap();
        }
    })
    .await
    .expect("the test took too long");
}
