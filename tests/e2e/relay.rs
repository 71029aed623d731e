//! The relay with real processes on loopback: `interlink-relay` and `interlink-p2p`
//! sessions that know only the relay.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    io::{Read as _, Write as _},
    net::TcpStream,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use interlink_e2e::{
    process::Session,
    relays::{Relay, free_port, start_relay, start_relay_at, start_relay_with_quic},
    user::{User, outcomes},
};

const DEADLINE: Duration = interlink_e2e::relays::DEADLINE;
const KNOBS: &[(&str, &str)] = &[
    ("INTERLINK_TEST_LIVE_WINDOW_MS", "10000"),
    ("INTERLINK_TEST_HEARTBEAT_MS", "1000"),
];

fn http_get(port: u16, path: &str) -> anyhow::Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(DEADLINE))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let (head, body) = out.split_once("\r\n\r\n").context("no HTTP header end")?;
    anyhow::ensure!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
    Ok(body.to_owned())
}

/// The value of a Prometheus sample line `name value`.
fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

fn users(relay: &str) -> (User, User) {
    let mut env = KNOBS.to_vec();
    env.push(("INTERLINK_RELAY", relay));
    let alice = User::new("alice", &env).unwrap();
    let bob = User::new("bob", &env).unwrap();
    alice.pair_with(&bob).unwrap();
    bob.pair_with(&alice).unwrap();
    (alice, bob)
}

/// The relay takes queued mail durably: the sender leaves, the relay is killed with
/// SIGKILL and restarted on the same database, and the recipient — started only then,
/// an hour later by the clocks of everything still running (the test clock knob), with
/// the relay as the only other node alive — gets every message once, and acks it.
#[test]
fn mail_held_by_a_relay_survives_its_kill_and_reaches_a_later_recipient() {
    let dir = tempfile::tempdir().unwrap();
    let (port, metrics) = (free_port(), free_port());
    let relay = start_relay(dir.path(), port, metrics).unwrap();
    let (alice, bob) = users(&relay.addr);

    // Bob's session shows up (through the relay only), then dies without a goodbye.
    let mut b = bob.start("relay-b", None).unwrap();
    let texts: Vec<String> = (0..5).map(|i| format!("kept for you {i}")).collect();
    let input: String = texts.iter().map(|t| format!("{t}\n")).collect();
    b.process.kill().unwrap();
    let (out, _) = alice
        .send(
            &relay.addr,
            "bob",
            &["--stdin", "--wait", "15"],
            Some(&input),
        )
        .unwrap();
    assert!(out.status.success(), "send: {}", out.stderr);
    assert_eq!(
        outcomes(&out.stdout, "queued").len(),
        texts.len(),
        "{}",
        out.stdout
    );
    let page = http_get(relay.metrics, "/metrics").unwrap();
    assert!(
        metric(&page, "interlink_relay_messages_held").unwrap_or(0.0) >= texts.len() as f64,
        "{page}"
    );

    // kill -9 the relay and restart it on the same database, key and port.
    let Relay { mut process, .. } = relay;
    process.kill().unwrap();
    drop(process);
    const HOUR_MS: i64 = 3_600_000;
    let relay = start_relay_at(dir.path(), port, metrics, HOUR_MS).unwrap();
    let hour = HOUR_MS.to_string();
    let mut later = KNOBS.to_vec();
    later.extend([
        ("INTERLINK_RELAY", relay.addr.as_str()),
        ("INTERLINK_TEST_CLOCK_OFFSET_MS", hour.as_str()),
    ]);
    let _b =
        Session::start_in(bob.home(), "relay-b", interlink_e2e::user::LOOPBACK, &later).unwrap();
    let inbox = bob
        .wait_inbox("relay-b", Instant::now() + DEADLINE, |e| {
            e.len() >= texts.len()
        })
        .unwrap();
    let got: Vec<&str> = inbox.iter().filter_map(|e| e["text"].as_str()).collect();
    assert_eq!(got, texts, "every message once, in order");
    // Bob acked them: the relay holds none any more.
    let deadline = Instant::now() + DEADLINE;
    loop {
        let page = http_get(relay.metrics, "/metrics").unwrap();
        if metric(&page, "interlink_relay_messages_held") == Some(0.0) {
            assert!(metric(&page, "interlink_relay_acks_total").unwrap_or(0.0) >= 1.0);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the relay still holds mail: {page}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        bob.inbox("relay-b").unwrap().len(),
        texts.len(),
        "nothing twice"
    );
}

/// Two sessions that listen nowhere but on their relay circuit see each other through
/// the relay and exchange messages both ways, delivered live through the circuit.
#[test]
fn sessions_reachable_only_through_the_relay_talk_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let relay = start_relay(dir.path(), free_port(), free_port()).unwrap();
    let (alice, bob) = users(&relay.addr);
    let circuit_only = ["--listen", "none", "--no-mdns"];
    let mut env = KNOBS.to_vec();
    env.push(("INTERLINK_RELAY", &relay.addr));
    let a = Session::start_in(alice.home(), "circ-a", &circuit_only, &env).unwrap();
    let b = Session::start_in(bob.home(), "circ-b", &circuit_only, &env).unwrap();
    for s in [&a, &b] {
        assert!(
            s.addrs.iter().all(|a| a.contains("/p2p-circuit")),
            "{} listens only through the relay: {:?}",
            s.id,
            s.addrs
        );
    }
    for (from, to, session) in [(&alice, "bob", "circ-b"), (&bob, "alice", "circ-a")] {
        let text = format!("from {} through the relay", from.name);
        let out = from
            .cli(
                &[
                    "send",
                    "--to",
                    to,
                    "--session",
                    session,
                    "--listen",
                    "none",
                    "--no-mdns",
                    "--wait",
                    "15",
                    &text,
                ],
                None,
            )
            .unwrap();
        assert!(out.status.success(), "{} → {to}: {}", from.name, out.stderr);
        assert_eq!(
            outcomes(&out.stdout, "delivered").len(),
            1,
            "{}",
            out.stdout
        );
        let owner = if to == "bob" { &bob } else { &alice };
        let inbox = owner
            .wait_inbox(session, Instant::now() + DEADLINE, |e| !e.is_empty())
            .unwrap();
        assert_eq!(inbox[0]["text"], text.as_str());
    }
    // The relay refreshes its gauges on a timer (`METRICS_EVERY`), and the shell sends
    // (which never announce) can all be done before its first refresh.
    let deadline = Instant::now() + DEADLINE;
    let page = loop {
        let page = http_get(relay.metrics, "/metrics").unwrap();
        if metric(&page, "interlink_relay_reservations").unwrap_or(0.0) >= 2.0
            || Instant::now() > deadline
        {
            break page;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        metric(&page, "interlink_relay_reservations").unwrap_or(0.0) >= 2.0,
        "{page}"
    );
    // libp2p's own metrics follow the relay's: the sessions' connections are counted.
    assert!(
        page.lines().any(|l| {
            l.starts_with("interlink_relay_libp2p_swarm_connections_incoming_total{")
                && !l.ends_with(" 0")
        }),
        "{page}"
    );
    assert!(page.ends_with("# EOF\n"));
}

/// RELAY.md's recipe gives sessions the relay's TCP address; a session reaches it over
/// QUIC as well (the relay listens on both), so hole punching has a UDP address to work
/// with. Seen in the session's own network view.
#[test]
fn a_session_given_the_relays_tcp_address_reaches_it_over_quic_too() {
    let dir = tempfile::tempdir().unwrap();
    let relay = start_relay_with_quic(dir.path(), free_port(), free_port(), free_port()).unwrap();
    let (alice, _bob) = users(&relay.addr);
    let mut env = KNOBS.to_vec();
    env.push(("INTERLINK_RELAY", &relay.addr));
    let _a = Session::start_in(
        alice.home(),
        "quic-a",
        &[
            "--listen",
            "/ip4/127.0.0.1/tcp/0,/ip4/127.0.0.1/udp/0/quic-v1",
            "--no-mdns",
        ],
        &env,
    )
    .unwrap();
    let relay_id = relay.addr.rsplit('/').next().unwrap().to_owned();
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let out = alice
            .cli(&["peers", "--session", "quic-a", "--json"], None)
            .unwrap();
        let view: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_default();
        let transports = view["peers"].as_array().and_then(|peers| {
            peers
                .iter()
                .find(|p| p["peer_id"] == relay_id.as_str())
                .map(|p| p["transports"].clone())
        });
        if transports
            .as_ref()
            .and_then(|t| t.as_array())
            .is_some_and(|t| {
                t.contains(&serde_json::json!("quic")) && t.contains(&serde_json::json!("tcp"))
            })
        {
            break;
        }
        assert!(
            Instant::now() < until,
            "the relay is not reached over QUIC too: {transports:?}\n{}",
            out.stdout
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `/probe` and `/metrics` answer with the documented shapes, and creating no session.
#[test]
fn probe_and_metrics_have_the_documented_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let relay = start_relay(dir.path(), free_port(), free_port()).unwrap();
    let probe: serde_json::Value =
        serde_json::from_str(&http_get(relay.metrics, "/probe").unwrap()).unwrap();
    assert_eq!(probe["server"], "interlink-relay");
    assert_eq!(probe["network"], "default");
    assert!(probe["version"].is_string());
    let peer_id = probe["peer_id"].as_str().unwrap();
    assert!(relay.addr.ends_with(peer_id), "{} vs {peer_id}", relay.addr);
    assert!(
        probe["addrs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == relay.addr.as_str())
    );
    let page = http_get(relay.metrics, "/metrics").unwrap();
    for name in [
        "interlink_relay_connected_peers",
        "interlink_relay_reservations",
        "interlink_relay_mailboxes",
        "interlink_relay_messages_held",
        "interlink_relay_puts_total",
        "interlink_relay_acks_total",
        "interlink_relay_sweeps_total",
    ] {
        assert!(metric(&page, name).is_some(), "{name} missing:\n{page}");
    }
    assert!(page.contains("interlink_relay_rejects_total{reason=\"malformed\"}"));
}
