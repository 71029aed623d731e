//! The last mile into a real Claude Code session (the pinned CLI, `claude -p` with
//! stream-json input so the session stays up between turns, against the fake model API
//! of [`interlink_e2e::agent_cli`]), with the message sent by another user — its own
//! home, its own node on loopback, paired by hand — as from another machine:
//!
//! - through Claude Code's own inbox socket: a message sent while the model is in a
//!   tool call is in the very next model request, as the host's "sent a message while
//!   you were working" notice; one sent to the idle session starts a new turn; the Stop
//!   hook announces neither a second time;
//! - with the inbound setting on hold: the host holds the frame, the server sees the
//!   hold, and the Stop hook wakes the agent with the message instead — once;
//! - with no socket (`CLAUDE_CODE_HARBOR_KITE=0`, Claude Code's own switch): the Stop
//!   hook wakes the agent, as before there was a socket.
//!
//! Unset `INTERLINK_TEST_CLAUDE_BIN`: SKIPPED, except under CI, where it fails.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    fs::File,
    io::Write as _,
    path::{Path, PathBuf},
    process::{ChildStdin, Stdio},
    time::{Duration, Instant},
};

use interlink_e2e::{
    agent_cli::{FakeModel, Group, Home, STEP, agent_cli, check_runs, poll, run},
    binary,
    process::{DEADLINE, Session},
    user::{LOOPBACK, User},
};
use serde_json::{Value, json};

/// What Claude Code prefixes a socket message with during a busy turn, and when idle.
const HOST_BUSY_NOTICE: &str = "sent a message while you were working";
const HOST_NOTICE: &str = "Another Claude session sent a message";
/// The first words of the Stop hook's wake-up text ([`interlink_mcp::stop_hook`]).
const HOOK_NOTICE: &str = "new message for this session";

/// A running `claude -p` session of `home`'s user, its log, and the fake model.
struct Claude {
    _group: Group,
    stdin: Option<ChildStdin>,
    log: PathBuf,
    model: FakeModel,
}

impl Claude {
    /// Starts the session with `args` and `env` added, and sends it `prompt`.
    fn start(
        home: &Home,
        claude: &Path,
        model: FakeModel,
        bootstrap: &str,
        args: &[&str],
        env: &[(&str, &str)],
        prompt: &str,
    ) -> Self {
        // The inbox sockets go to a directory of this test's own (Claude Code puts
        // them under $XDG_RUNTIME_DIR/cc-socks), not the machine's shared /tmp/cc-socks.
        let run_dir = home.path().join("run");
        std::fs::create_dir_all(&run_dir).unwrap();
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let log = home.path().join("claude.log");
        let file = File::create(&log).unwrap();
        let mut cmd = home.command(claude);
        cmd.args(["-p", "--input-format", "stream-json"])
            .args(["--output-format", "stream-json", "--verbose"])
            .args(args)
            .env("ANTHROPIC_BASE_URL", &model.url)
            .env("ANTHROPIC_API_KEY", "sk-ant-test-not-a-key")
            .env("INTERLINK_BOOTSTRAP", bootstrap)
            .env("XDG_RUNTIME_DIR", &run_dir)
            .stdin(Stdio::piped())
            .stderr(file.try_clone().unwrap())
            .stdout(file);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut group = Group::spawn(&mut cmd);
        let stdin = group.child.stdin.take();
        let mut c = Self {
            _group: group,
            stdin,
            log,
            model,
        };
        c.say(prompt);
        c
    }

    /// A user turn on stdin.
    fn say(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(
            stdin,
            "{}",
            json!({"type": "user", "message": {"role": "user", "content": text}})
        )
        .unwrap();
        stdin.flush().unwrap();
    }

    fn context(&self) -> String {
        format!(
            "--- claude\n{}\n--- model requests: {}",
            std::fs::read_to_string(&self.log).unwrap_or_default(),
            self.model.requests().len()
        )
    }

    /// Turns finished so far (`result` lines of the stream-json output).
    fn results(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| v["type"] == "result"))
            .count()
    }

    /// Waits until `n` turns have ended.
    fn wait_turns(&self, n: usize, what: &str) {
        poll(
            Instant::now() + STEP,
            what,
            || self.context(),
            || (self.results() >= n).then_some(()),
        );
    }

    /// The model requests containing `text`.
    fn requests_with(&self, text: &str) -> Vec<String> {
        self.model
            .requests()
            .into_iter()
            .filter(|r| r.contains(text))
            .collect()
    }

    /// Waits for the first model request containing `text`.
    fn wait_request_with(&self, text: &str, what: &str) -> String {
        poll(
            Instant::now() + DEADLINE,
            what,
            || self.context(),
            || self.requests_with(text).into_iter().next(),
        )
    }
}

/// The interlink session the MCP server started under Claude Code's session id: the
/// directory (other than `skip`) holding an inbox and `marker`.
fn claude_session(home: &Home, claude: &Claude, marker: &str) -> String {
    let sessions = home.interlink_home().join("sessions");
    poll(
        Instant::now() + STEP,
        &format!("no session of Claude Code's with {marker}"),
        || claude.context(),
        || {
            std::fs::read_dir(&sessions)
                .ok()?
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .find(|id| {
                    let dir = sessions.join(id);
                    dir.join("inbox.jsonl").exists() && dir.join(marker).exists()
                })
        },
    )
}

/// The `delivery` the session `session` announces, as an observer on the overlay reads
/// it from `home` (`interlink-p2p peers --json`: the session's own identity, since the
/// details are sealed for it and its peers), once it is `want`.
fn wait_announced_delivery(
    home: &Home,
    bootstrap: &str,
    session: &str,
    want: &str,
    claude: &Claude,
) {
    let mut last = String::new();
    let deadline = Instant::now() + DEADLINE;
    loop {
        let report =
            interlink_e2e::process::peers_json_as(&home.interlink_home(), bootstrap, &[], &[])
                .unwrap();
        last = report["identities"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|i| i["sessions"].as_array().into_iter().flatten())
            .find(|s| s["session_id"] == session)
            .map(|s| s["delivery"].as_str().unwrap_or_default().to_owned())
            .unwrap_or(last);
        if last == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "session {session} announces delivery {last:?}, not {want:?}\n{}",
            claude.context()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn handover(home: &Home, session: &str) -> Value {
    let path = home
        .interlink_home()
        .join("sessions")
        .join(session)
        .join("host_inbox.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_default()).unwrap_or(Value::Null)
}

/// Claude Code's user (`home`, with interlink installed) and bob, another user on his
/// own node, paired both ways; returns bob, his running node and its address (the
/// overlay's bootstrap for both).
fn alice_and_bob(home: &Home, claude: &Path) -> (User, Session, String) {
    // With the real CLI on PATH, `install` says which path its sessions will take.
    let mut install = home.command(&binary("interlink-p2p").unwrap());
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![claude.parent().unwrap().to_owned()];
    dirs.extend(std::env::split_paths(&path));
    install.env("PATH", std::env::join_paths(dirs).unwrap());
    let out = run(install.args(["install", "claude"]));
    assert!(out.status.success(), "install claude: {out}");
    assert!(
        out.stdout
            .contains("sessions get messages through their own inbox socket"),
        "install claude does not name the inbox socket path: {out}"
    );
    let id: Value = serde_json::from_str(&home.p2p(&["id", "--json"])).unwrap();
    let alice_key = id["identity_key"].as_str().unwrap().to_owned();
    let bob = User::new("bob", &[]).unwrap();
    home.p2p(&["peer", "add", "bob", &bob.key]);
    let out = bob
        .cli(&["peer", "add", "alice", &alice_key], None)
        .unwrap();
    assert!(out.status.success(), "bob: peer add alice: {}", out.stderr);
    let node = bob.start("bob-desk", None).unwrap();
    let bootstrap = node.loopback_addr().unwrap().to_owned();
    (bob, node, bootstrap)
}

/// Bob sends `text` to Claude Code's session `session`; it must be delivered live.
fn bob_sends(bob: &User, bootstrap: &str, session: &str, text: &str, claude: &Claude) {
    let (out, took) = bob
        .send(bootstrap, "alice", &["--session", session, text], None)
        .unwrap();
    assert!(
        out.status.success() && out.stdout.starts_with("delivered "),
        "bob's send to Claude Code's session {session} ({took:?}): {} {}\n{}",
        out.stdout,
        out.stderr,
        claude.context()
    );
}

fn claude_bin() -> Option<PathBuf> {
    agent_cli("INTERLINK_TEST_CLAUDE_BIN", "Claude Code CLI")
}

/// The real CLI, checked to run, and a throwaway home for it (`None`: skipped).
fn claude_and_home() -> Option<(PathBuf, Home)> {
    let bin = claude_bin()?;
    let home = Home::new();
    check_runs(&home, &bin, "INTERLINK_TEST_CLAUDE_BIN");
    Some((bin, home))
}

#[test]
fn through_claudes_inbox_socket_a_message_arrives_mid_turn_and_wakes_an_idle_session() {
    let Some((bin, home)) = claude_and_home() else {
        return;
    };
    let (bob, _bob_node, bootstrap) = alice_and_bob(&home, &bin);

    // The model's first move is a long tool call: the turn is busy while bob sends.
    // The call leaves a mark the moment it starts.
    let started = home.path().join("tool-started");
    let command = format!("touch '{}'; sleep 15; echo SLEPT", started.display());
    let sleep = json!({"name": "Bash",
        "input": {"command": command, "description": "wait a while"}});
    let model = FakeModel::scripted(vec![sleep]);
    let mut claude = Claude::start(
        &home,
        &bin,
        model,
        &bootstrap,
        &["--allowedTools", "Bash"],
        &[],
        "start the long task",
    );
    let session = claude_session(&home, &claude, "host_inbox.json");
    let handed_at = poll(
        Instant::now() + STEP,
        "the fake model's tool call was never requested",
        || claude.context(),
        || claude.model.tool_calls_served().first().copied(),
    );
    // Send once the tool runs.
    poll(
        Instant::now() + STEP,
        "the Bash tool never started",
        || claude.context(),
        || started.exists().then_some(()),
    );
    let busy = "MIDTURN ping from bob's machine: which branch are you on?";
    bob_sends(&bob, &bootstrap, &session, busy, &claude);
    assert!(
        handed_at.elapsed() < Duration::from_secs(13),
        "the send took too long to count as mid-turn ({:?} after the tool call)",
        handed_at.elapsed()
    );
    assert_eq!(
        claude.results(),
        0,
        "the turn ended before the message was sent"
    );

    // The next model request — the one carrying the tool's result — has the message,
    // as the host's mid-turn notice, with interlink's verified-sender header and fence.
    let request = claude.wait_request_with(busy, "the mid-turn message never reached the model");
    assert!(
        request.contains(HOST_BUSY_NOTICE) && request.contains("SLEPT"),
        "not the host's mid-turn notice after the tool's result: {request}\n{}",
        claude.context()
    );
    assert!(
        request.contains("(verified sender):") && request.contains("<<<msg-"),
        "{request}"
    );

    // The turn ends; the idle session gets a new turn from the next message.
    claude.wait_turns(1, "the first turn never ended");
    let idle = "IDLE ping from bob's machine: are you free?";
    bob_sends(&bob, &bootstrap, &session, idle, &claude);
    let request = claude.wait_request_with(idle, "the message did not start a turn");
    assert!(
        request.contains(HOST_NOTICE)
            && !request.contains(&format!("{HOST_BUSY_NOTICE}:\\n{idle}")),
        "not the host's idle notice: {request}"
    );
    claude.wait_turns(2, "the woken turn never ended");

    // Nothing twice: the Stop hook (running since the first turn ended) announced
    // neither message, and the server lists both as handed over.
    std::thread::sleep(Duration::from_secs(2));
    let hooked = claude.requests_with(HOOK_NOTICE);
    assert!(
        hooked.is_empty(),
        "the Stop hook announced a message the socket delivered: {hooked:?}"
    );
    let h = handover(&home, &session);
    assert_eq!(h["active"], true, "{h}");
    assert_eq!(h["handed"].as_array().map(Vec::len), Some(2), "{h}");
    assert_eq!(h["fell_back"].as_array().map(Vec::len), Some(0), "{h}");
    // Its own identity (and its peers) read how this session is reached.
    wait_announced_delivery(&home, &bootstrap, &session, "host_inbox", &claude);
    claude.say("thanks");
}

#[test]
fn a_message_the_host_holds_wakes_the_agent_through_the_stop_hook_once() {
    let Some((bin, home)) = claude_and_home() else {
        return;
    };
    let (bob, _bob_node, bootstrap) = alice_and_bob(&home, &bin);
    let claude = Claude::start(
        &home,
        &bin,
        FakeModel::start(),
        &bootstrap,
        &["--settings", r#"{"crossSessionInbound":"hold"}"#],
        &[],
        "hello",
    );
    let session = claude_session(&home, &claude, "host_inbox.json");
    claude.wait_turns(1, "the first turn never ended");

    let text = "HELD ping from bob's machine: please review my change";
    bob_sends(&bob, &bootstrap, &session, text, &claude);
    let request = claude.wait_request_with(text, "the held message never reached the agent");
    assert!(
        request.contains(HOOK_NOTICE) && !request.contains(HOST_NOTICE),
        "a held message must reach the agent through the Stop hook: {request}"
    );
    let h = poll(
        Instant::now() + DEADLINE,
        "the hold was not recorded",
        || claude.context(),
        || {
            let h = handover(&home, &session);
            (h["active"] == false).then_some(h)
        },
    );
    assert_eq!(h["fell_back"].as_array().map(Vec::len), Some(1), "{h}");
    assert_eq!(h["handed"].as_array().map(Vec::len), Some(0), "{h}");
    // Its own identity now reads that this session is woken by the Stop hook.
    wait_announced_delivery(&home, &bootstrap, &session, "inbox", &claude);
    // Once: the host never released it, so no request has its notice.
    std::thread::sleep(Duration::from_secs(2));
    let released = claude.requests_with(HOST_NOTICE);
    assert!(
        released.is_empty(),
        "the held message also came through the host: {released:?}"
    );
}

#[test]
fn without_an_inbox_socket_the_stop_hook_wakes_the_agent() {
    let Some((bin, home)) = claude_and_home() else {
        return;
    };
    home.p2p(&["install", "claude"]);

    // A headless session of the same user: the overlay's bootstrap node, through which
    // `send` finds the session Claude Code starts.
    let anchor = Session::start_in(&home.interlink_home(), "anchor", LOOPBACK, &[]).unwrap();
    let bootstrap = anchor.loopback_addr().unwrap().to_owned();
    // Claude Code's own switch: no inbox socket is bound, none is exported.
    let claude = Claude::start(
        &home,
        &bin,
        FakeModel::start(),
        &bootstrap,
        &[],
        &[("CLAUDE_CODE_HARBOR_KITE", "0")],
        "hello",
    );
    // The turn ends, and the Stop hook `interlink-p2p wait` runs for the session the
    // MCP server started under (it locks that session's wait.lock).
    let id = claude_session(&home, &claude, "wait.lock");
    let sessions = home.interlink_home().join("sessions");

    // What Claude Code declared at `initialize`, as our server recorded it: the
    // declaration the e2e tests' client copies (`claude_code_capabilities`), so pairing
    // asks the human there as it does in the real CLI.
    let client_file = sessions.join(&id).join("client.json");
    let client: Value = poll(
        Instant::now() + STEP,
        "our server never recorded Claude Code's initialize (client.json)",
        || claude.context(),
        || serde_json::from_str(&std::fs::read_to_string(&client_file).ok()?).ok(),
    );
    assert!(
        client["capabilities"]["elicitation"].is_object(),
        "Claude Code no longer declares elicitation: {client}"
    );
    assert_eq!(
        client["pairing"], "asks the human (MCP elicitation)",
        "{client}"
    );
    let ours =
        serde_json::to_value(interlink_e2e::mcp_session::claude_code_capabilities()).unwrap();
    for (capability, declared) in ours.as_object().unwrap() {
        assert_eq!(
            &client["capabilities"][capability], declared,
            "our stand-in declares {capability} unlike Claude Code: {client}"
        );
    }
    assert!(
        !sessions.join(&id).join("host_inbox.json").exists(),
        "the server used an inbox socket Claude Code did not bind"
    );

    let text = "PING from the overlay: what are you working on?";
    let out = run(home.command(&binary("interlink-p2p").unwrap()).args([
        "send",
        "--to",
        "self",
        "--session",
        &id,
        "--bootstrap",
        &bootstrap,
        "--listen",
        "/ip4/127.0.0.1/tcp/0",
        "--no-mdns",
        text,
    ]));
    assert!(
        out.status.success() && out.stdout.starts_with("delivered "),
        "send to Claude Code's session {id}: {out}\n{}",
        claude.context()
    );
    // The hook exits 2 with the message; Claude Code (asyncRewake) starts a turn with it.
    let request = claude.wait_request_with(text, "the message did not wake the agent");
    assert!(request.contains(HOOK_NOTICE), "{request}");
}

/// The session ids, other than `not`, whose directories hold an inbox.
fn other_sessions(home: &Home, not: &[&str]) -> Vec<String> {
    let sessions = home.interlink_home().join("sessions");
    let mut ids: Vec<String> = std::fs::read_dir(&sessions)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|id| !not.contains(&id.as_str()))
        .filter(|id| sessions.join(id).join("inbox.jsonl").exists())
        .collect();
    ids.sort();
    ids
}

/// The `session_id` of the SessionStart hook with `source` in Claude Code's stream-json
/// output (`hook_started`, named `SessionStart:<source>`).
fn session_start_id(claude: &Claude, source: &str) -> Option<String> {
    std::fs::read_to_string(&claude.log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| {
            v["subtype"] == "hook_started" && v["hook_name"] == format!("SessionStart:{source}")
        })
        .and_then(|v| v["session_id"].as_str().map(str::to_owned))
}

fn inbox_text(home: &Home, session: &str) -> String {
    std::fs::read_to_string(
        home.interlink_home()
            .join("sessions")
            .join(session)
            .join("inbox.jsonl"),
    )
    .unwrap_or_default()
}

/// `/clear` in a running Claude Code starts a new conversation in the same process:
/// the interlink session moves with it (the SessionStart hook calls `bind_session`),
/// so the new conversation has a fresh mailbox, the old session says goodbye, and
/// mail for the old conversation is never delivered into the new one; it waits, and
/// resuming the old conversation reopens its mailbox with it.
#[test]
fn clear_gives_a_fresh_mailbox_and_resume_reopens_the_old_one() {
    let Some((bin, home)) = claude_and_home() else {
        return;
    };
    let (bob, _bob_node, bootstrap) = alice_and_bob(&home, &bin);
    let mut claude = Claude::start(
        &home,
        &bin,
        FakeModel::start(),
        &bootstrap,
        &[],
        &[],
        "hello",
    );
    claude.wait_turns(1, "the first turn never ended");
    let first = claude_session(&home, &claude, "client.json");

    claude.say("/clear");
    let second = poll(
        Instant::now() + STEP,
        "no new session after /clear",
        || claude.context(),
        || other_sessions(&home, &[&first]).into_iter().next(),
    );
    assert_eq!(
        Some(second.clone()),
        session_start_id(&claude, "clear"),
        "the new session is not the new conversation's\n{}",
        claude.context()
    );
    // On the overlay: the new conversation's session is there, the old one left.
    let deadline = Instant::now() + DEADLINE;
    loop {
        let report = interlink_e2e::process::peers_json(&bootstrap, &[], &[]).unwrap();
        let ids = interlink_e2e::process::presences(&report);
        let old_left = ids.get(&first).is_none_or(|p| p != "live");
        if ids.get(&second).map(String::as_str) == Some("live") && old_left {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after /clear the overlay shows {ids:?}\n{}",
            claude.context()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // Mail for the old conversation waits; mail for the new one is delivered to it.
    let old = "OLDCONV for the conversation before /clear";
    let (out, _) = bob
        .send(
            &bootstrap,
            "alice",
            &["--session", &first, "--wait", "2", old],
            None,
        )
        .unwrap();
    assert!(
        out.stdout.starts_with("queued "),
        "{} {}",
        out.stdout,
        out.stderr
    );
    let new = "NEWCONV for the conversation after /clear";
    bob_sends(&bob, &bootstrap, &second, new, &claude);
    assert!(inbox_text(&home, &second).contains(new));
    assert!(
        !inbox_text(&home, &second).contains(old),
        "old mail in the new mailbox"
    );
    assert!(!inbox_text(&home, &first).contains(old));

    // Resuming the old conversation reopens its mailbox: the mail that waited arrives.
    drop(claude);
    let claude = Claude::start(
        &home,
        &bin,
        FakeModel::start(),
        &bootstrap,
        &["--resume", &first],
        &[],
        "back again",
    );
    poll(
        Instant::now() + STEP,
        "the resumed conversation's mailbox never got its mail",
        || claude.context(),
        || inbox_text(&home, &first).contains(old).then_some(()),
    );
    assert!(!inbox_text(&home, &first).contains(new));
}

/// A burst past Claude Code's rate limit on one sender (30, then one per 2 s): the
/// server paces its frames under it and packs what waits into later frames, so every
/// message reaches the model — none dropped by the host, none through the Stop hook.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_past_the_hosts_rate_limit_reaches_the_model_whole() {
    let Some((bin, home)) = claude_and_home() else {
        return;
    };
    let (bob, _node, _) = tokio::task::block_in_place(|| alice_and_bob(&home, &bin));
    let bob_mcp = interlink_e2e::mcp_session::start_on_loopback(&bob, "bob-burst", None, &[])
        .await
        .unwrap();
    let bootstrap = interlink_e2e::mcp_session::loopback_addr(&bob_mcp).await;
    let claude = Claude::start(
        &home,
        &bin,
        FakeModel::start(),
        &bootstrap,
        &[],
        &[],
        "hello",
    );
    let session = tokio::task::block_in_place(|| {
        let s = claude_session(&home, &claude, "host_inbox.json");
        claude.wait_turns(1, "the first turn never ended");
        s
    });
    let texts: Vec<String> = (0..40)
        .map(|i| format!("BURST message {i:02} from bob"))
        .collect();
    for text in &texts {
        mcp_sends(&bob_mcp, &session, text).await;
    }
    let deadline = Instant::now() + STEP;
    loop {
        let missing: Vec<&String> = texts
            .iter()
            .filter(|t| claude.requests_with(t).is_empty())
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} of 40 never reached the model: {missing:?}\n{}",
            missing.len(),
            claude.context()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let h = handover(&home, &session);
    assert_eq!(h["active"], true, "the host dropped or refused frames: {h}");
    assert_eq!(h["handed"].as_array().map(Vec::len), Some(40), "{h}");
    let hooked = claude.requests_with(HOOK_NOTICE);
    assert!(
        hooked.is_empty(),
        "the Stop hook announced part of the burst: {} requests",
        hooked.len()
    );
    // Packed: fewer frames than messages once the pace ran out.
    let frames = claude.requests_with("messages for this session, from other agents");
    assert!(
        !frames.is_empty(),
        "no frame carried several messages\n{}",
        claude.context()
    );
}

/// `send_message` from `from` (bob's MCP session) to Claude Code's session `session`,
/// which must answer `delivered`.
async fn mcp_sends(from: &interlink_e2e::mcp_session::McpSession, session: &str, text: &str) {
    let (_, sent) = from
        .ok(
            "send_message",
            json!({"to": "alice", "session": session, "text": text}),
        )
        .await
        .unwrap();
    assert_eq!(sent["status"], "delivered", "{sent}");
}

/// Milliseconds at the `q` quantile of sorted `v`.
fn quantile(v: &[Duration], q: f64) -> f64 {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v[i].as_secs_f64() * 1000.0
}

/// One path's latencies: bob's `send_message` (his MCP session, already on the
/// overlay) → the first model request of the idle Claude session that has the text.
async fn send_to_model_request(
    home: &Home,
    bin: &Path,
    bob: &User,
    env: &[(&str, &str)],
    marker: &str,
    rounds: usize,
) -> Vec<Duration> {
    let bob_mcp = interlink_e2e::mcp_session::start_on_loopback(bob, "bob-bench", None, &[])
        .await
        .unwrap();
    let bootstrap = interlink_e2e::mcp_session::loopback_addr(&bob_mcp).await;
    let claude = Claude::start(home, bin, FakeModel::start(), &bootstrap, &[], env, "hello");
    let session = tokio::task::block_in_place(|| claude_session(home, &claude, marker));
    let mut took = Vec::new();
    for i in 0..rounds {
        // Each message finds the session idle: the previous turn has ended.
        let ended = i + 1;
        tokio::task::block_in_place(|| {
            claude.wait_turns(ended, "a turn never ended");
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let text = format!("BENCH {marker} {i} {}", std::process::id());
        let start = Instant::now();
        mcp_sends(&bob_mcp, &session, &text).await;
        loop {
            if !claude.requests_with(&text).is_empty() {
                break;
            }
            assert!(
                start.elapsed() < STEP,
                "round {i}: the text never reached the model\n{}",
                claude.context()
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        took.push(start.elapsed());
    }
    took.sort();
    took
}

/// `cargo nextest run -p interlink-e2e --test claude_inbox --run-ignored only`
/// (docs/BENCHMARKS.md, "Into Claude Code"): 30 messages per path to an idle session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn bench_send_to_model_request_inbox_socket_vs_stop_hook() {
    let Some(bin) = claude_bin() else { return };
    let rounds: usize = std::env::var("INTERLINK_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    for (name, env, marker) in [
        ("inbox socket", &[][..], "host_inbox.json"),
        (
            "Stop hook",
            &[("CLAUDE_CODE_HARBOR_KITE", "0")][..],
            "wait.lock",
        ),
    ] {
        let home = Home::new();
        let (bob, _node, _) = tokio::task::block_in_place(|| alice_and_bob(&home, &bin));
        let took = send_to_model_request(&home, &bin, &bob, env, marker, rounds).await;
        eprintln!(
            "BENCH {name}: send_message → model request, {} messages: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            took.len(),
            quantile(&took, 0.5),
            quantile(&took, 0.9),
            quantile(&took, 0.99),
            quantile(&took, 1.0)
        );
    }
}
