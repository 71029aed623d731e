//! Live delivery over a lossy wide-area link: the network lab's two hosts joined by a
//! link of 100 ms round trip, 5 % loss each way and 1 Mbit/s (`support/impair.py`,
//! since this kernel has no netem). Alice's MCP session on A sends Bob's session on B
//! fifty 4 KiB messages, one after the other, as an agent would. All must arrive once,
//! in order, and all live: Bob stays up and connected throughout, so a message answered
//! `queued` is a fault (issue 51). In every run the latency (sent → in Bob's inbox)
//! must be p50 ≤ 400 ms and p99 ≤ 2 s; the figures are printed for
//! docs/BENCHMARKS.md. `WAN_SEED` seeds the link's loss (default 1); `WAN_LOGS=<dir>`
//! keeps both sessions' stderr there (with `RUST_LOG` passed on to them).
//!
//! Two ways in:
//! - settled: Alice is given Bob's TCP address (as users give each other addresses),
//!   and the burst starts once Bob is on her roster and she has moved to QUIC on her
//!   own (`node::quic_upgrade`);
//! - right after pairing, as an outside tester ran it: both sessions on their default
//!   listen addresses (TCP and QUIC) and mDNS on the link, and Alice sends as soon as
//!   her session is up — while the two are still meeting, dialling each other and
//!   moving to QUIC.
//!
//! Before the live window followed the measured answer time, one attempt longer than
//! the fixed 1 s marked Bob unreachable and every later message queued (p50
//! 0.23–3.66 s between runs).
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::{Duration, Instant};

use interlink_e2e::{
    lab::{Lab, Wan},
    mcp_session::McpSession,
    process::{self, Session},
    user::User,
};
use serde_json::json;

const MESSAGES: usize = 50;
const TEXT_BYTES: usize = 4096;
/// The targets for every run (sent → in Bob's inbox).
const P50_MAX_MS: u64 = 400;
const P99_MAX_MS: u64 = 2_000;

const LINK: Wan = Wan {
    delay_ms: 50,
    loss_percent: 5.0,
    rate_kbit: 1000,
    queue_bytes: 64 * 1024,
};

/// Both sessions listen on TCP and QUIC, and Alice is given Bob's TCP address, as
/// users give each other addresses: she moves to QUIC on her own (`node::quic_upgrade`).
/// Over TCP alone, 2 runs in 10 had a p99 over 2 s (retransmission backoff).
const BOTH: &str = "/ip4/0.0.0.0/tcp/0,/ip4/0.0.0.0/udp/0/quic-v1";

fn percentile(sorted: &[u64], p: f64) -> u64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// How the two sessions meet and when the burst starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Burst {
    /// Bob's TCP address given, mDNS off; the burst once the connection settled.
    Settled,
    /// Default listen addresses, mDNS on the link, paired beforehand (`peer add`),
    /// Alice given Bob's TCP address too; the burst as soon as her session is up.
    RightAfterStart,
    /// Default listen addresses, mDNS on the link; both MCP sessions running unpaired,
    /// Alice knocks (`request_pair`), Bob accepts (`accept_pair`), and the burst
    /// starts as soon as Alice's session has Bob as a peer.
    RightAfterPairing,
}

/// Bob's session: headless, or an MCP session (to accept a pair request).
enum Bob {
    Run(Session),
    Mcp(Box<McpSession>),
}

impl Bob {
    fn stderr(&self) -> String {
        match self {
            Bob::Run(s) => s.process.stderr(),
            Bob::Mcp(s) => s.stderr(),
        }
    }
}

fn fingerprint(user: &User) -> String {
    let out = user.cli(&["id", "--json"], None).unwrap();
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    v["fingerprint"].as_str().unwrap().to_owned()
}

fn seed() -> u64 {
    std::env::var("WAN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

/// The environment of both sessions: their own overlay, and `RUST_LOG` passed on.
fn session_env() -> Vec<(&'static str, String)> {
    let mut env = vec![("INTERLINK_NETWORK", "wan-e2e".to_owned())];
    if let Ok(log) = std::env::var("RUST_LOG") {
        env.push(("RUST_LOG", log));
    }
    env
}

/// Keeps a session's stderr in `WAN_LOGS`, if set.
fn keep_log(test: &str, who: &str, text: &str) {
    if let Some(dir) = std::env::var_os("WAN_LOGS") {
        let path = std::path::Path::new(&dir).join(format!("{test}.seed{}.{who}.log", seed()));
        let _ = std::fs::write(path, text);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_messages_over_a_lossy_wan_arrive_once_in_order() {
    burst(
        "fifty_messages_over_a_lossy_wan_arrive_once_in_order",
        Burst::Settled,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_right_after_start_over_mdns_goes_live() {
    burst(
        "a_burst_right_after_start_over_mdns_goes_live",
        Burst::RightAfterStart,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_right_after_pairing_over_mdns_goes_live() {
    burst(
        "a_burst_right_after_pairing_over_mdns_goes_live",
        Burst::RightAfterPairing,
    )
    .await;
}

async fn burst(test: &str, how: Burst) {
    let seed = seed();
    let Some(lab) = Lab::wan_for_test(test, LINK, seed) else {
        return;
    };
    process::use_netns(&lab.a);
    let env_owned = session_env();
    let env: Vec<(&str, &str)> = env_owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let alice = User::new("alice", &env).unwrap();
    let mut bob = User::new("bob", &env).unwrap();
    bob.set_netns(&lab.b);
    if how != Burst::RightAfterPairing {
        alice.pair_with(&bob).unwrap();
        bob.pair_with(&alice).unwrap();
    }

    let (b, a) = match how {
        Burst::Settled => {
            let b = bob
                .start_with_args("b-1", &["--no-mdns", "--listen", BOTH])
                .unwrap();
            let b_addr = b
                .addrs
                .iter()
                .find(|x| x.starts_with(&format!("/ip4/{}/tcp/", lab.addr(2))))
                .expect("B listens on the lab link over TCP")
                .clone();
            let a = McpSession::start(
                alice.home(),
                "a-1",
                &["--no-mdns", "--listen", BOTH, "--bootstrap", &b_addr],
                &env,
            )
            .await
            .unwrap();
            // Bob's session on Alice's roster across the link, and Alice moved to QUIC.
            a.poll(
                "whoami",
                json!({}),
                Instant::now() + Duration::from_secs(60),
                |v| {
                    v["network"]["peers"]
                        .as_array()
                        .and_then(|p| p.first())
                        .is_some_and(|p| p["transports"] == json!(["quic"]))
                },
            )
            .await
            .unwrap();
            a.poll(
                "discover",
                json!({}),
                Instant::now() + Duration::from_secs(60),
                |v| v.to_string().contains("b-1"),
            )
            .await
            .unwrap();
            (Bob::Run(b), a)
        }
        Burst::RightAfterStart => {
            // Default listen addresses (TCP and QUIC), mDNS on: how a user runs it.
            // Alice is also given Bob's TCP address, so she meets him over TCP (as
            // when mDNS's dial of both addresses is won by TCP, QUIC's first flight
            // lost) and moves to QUIC during the burst.
            let b: Session = bob.start_with_args("b-1", &[]).unwrap();
            let b_addr = b
                .addrs
                .iter()
                .find(|x| x.starts_with(&format!("/ip4/{}/tcp/", lab.addr(2))))
                .expect("B listens on the lab link over TCP")
                .clone();
            let a = McpSession::start(alice.home(), "a-1", &["--bootstrap", &b_addr], &env)
                .await
                .unwrap();
            (Bob::Run(b), a)
        }
        Burst::RightAfterPairing => {
            let named = |name: &'static str| {
                let mut e = env.clone();
                e.push(("INTERLINK_NAME", name));
                e
            };
            let b = McpSession::start_in_netns(&lab.b, bob.home(), "b-1", &[], &named("bob"))
                .await
                .unwrap();
            let a = McpSession::start(alice.home(), "a-1", &[], &named("alice"))
                .await
                .unwrap();
            a.poll(
                "discover",
                json!({}),
                Instant::now() + Duration::from_secs(60),
                |v| v.to_string().contains("\"session_id\":\"b-1\""),
            )
            .await
            .unwrap();
            let (text, knocked) = a
                .ok("request_pair", json!({"target": fingerprint(&bob)}))
                .await
                .unwrap();
            assert_eq!(knocked["status"], "delivered", "{text}");
            b.poll(
                "list_pair_requests",
                json!({}),
                Instant::now() + Duration::from_secs(60),
                |v| v["incoming"].as_array().is_some_and(|i| !i.is_empty()),
            )
            .await
            .unwrap();
            let (text, accepted) = b
                .ok("accept_pair", json!({"fingerprint": fingerprint(&alice)}))
                .await
                .unwrap();
            assert_eq!(accepted["confirmation"], "delivered", "{text}");
            a.poll(
                "list_peers",
                json!({}),
                Instant::now() + Duration::from_secs(60),
                |v| v["peers"].to_string().contains("\"bob\""),
            )
            .await
            .unwrap();
            (Bob::Mcp(Box::new(b)), a)
        }
    };

    let burst_started = Instant::now();
    let mut live = 0;
    let mut queued = Vec::new();
    let mut answered = Vec::new();
    for i in 0..MESSAGES {
        let text = format!("m{i:02} {}", "x".repeat(TEXT_BYTES - 4));
        let started = Instant::now();
        let (_, v) = a
            .ok(
                "send_message",
                json!({"to": "bob", "session": "b-1", "text": text}),
            )
            .await
            .unwrap();
        answered.push(started.elapsed().as_millis() as u64);
        match v["status"].as_str() {
            Some("delivered") => live += 1,
            Some("queued") => queued.push((i, burst_started.elapsed().as_millis())),
            other => panic!("message {i}: {other:?} {v}"),
        }
    }
    let entries = bob
        .wait_inbox("b-1", Instant::now() + Duration::from_secs(180), |e| {
            e.len() >= MESSAGES
        })
        .unwrap();
    keep_log(test, "alice", &a.stderr());
    keep_log(test, "bob", &b.stderr());
    let texts: Vec<String> = entries
        .iter()
        .filter_map(|e| e["text"].as_str())
        .map(|t| t[..3].to_owned())
        .collect();
    let want: Vec<String> = (0..MESSAGES).map(|i| format!("m{i:02}")).collect();
    assert_eq!(texts, want, "every message once, in order");

    let mut latency: Vec<u64> = entries
        .iter()
        .map(|e| {
            e["received_at"]
                .as_u64()
                .unwrap()
                .saturating_sub(e["sent_at"].as_u64().unwrap())
        })
        .collect();
    latency.sort_unstable();
    answered.sort_unstable();
    // The impairment is what was asked for: loss near 5 % each way, and the round
    // trip at least the link's 100 ms.
    let stats = lab.wan_stats().unwrap_or_default();
    for line in &stats {
        let count = |k: &str| -> f64 {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{k}=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0)
        };
        let (frames, lost) = (count("in"), count("lost"));
        assert!(frames > 200.0, "{line}");
        let rate = lost / frames;
        assert!((0.02..0.09).contains(&rate), "loss {rate:.3}: {line}");
    }
    let (_, who) = a.ok("whoami", json!({})).await.unwrap();
    let peers = who["network"]["peers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let rtt = peers.iter().find_map(|p| p["rtt_ms"].as_f64());
    let transports = peers.first().map(|p| p["transports"].clone());
    let (p50, p99) = (percentile(&latency, 0.5), percentile(&latency, 0.99));
    eprintln!(
        "{test} seed {seed}: {live}/{MESSAGES} delivered live; send_message answered p50 {} \
         ms, p99 {} ms; sent → in Bob's inbox p50 {p50} ms, p99 {p99} ms, max {} ms; ping \
         RTT {:?} ms; transports {transports:?}; queued (message, ms into the burst): \
         {queued:?}; link: {stats:?}",
        percentile(&answered, 0.5),
        percentile(&answered, 0.99),
        latency.last().copied().unwrap_or_default(),
        rtt,
    );
    assert!(
        rtt.is_some_and(|ms| ms >= 95.0),
        "the link's round trip: {rtt:?} {who}"
    );
    if how == Burst::Settled {
        assert_eq!(
            transports,
            Some(json!(["quic"])),
            "Alice moved to QUIC: {who}"
        );
    }
    // Bob never left and the link was never cut: every message had to go live.
    assert!(
        queued.is_empty(),
        "answered `queued` while Bob stayed connected: {queued:?}"
    );
    assert!(
        p50 <= P50_MAX_MS && p99 <= P99_MAX_MS,
        "latency p50 {p50} ms (target ≤ {P50_MAX_MS}), p99 {p99} ms (target ≤ {P99_MAX_MS})"
    );
}
