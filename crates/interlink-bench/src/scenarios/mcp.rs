//! `mcp`: the agent host's view, measured through MCP exactly as a host drives it —
//! JSON-RPC over the stdio of real `interlink-p2p mcp` processes, channel mode on.
//!
//! - spawn → `initialize` answered (the node starts in the background);
//! - `send_message` call → the `notifications/claude/channel` notification at the
//!   recipient's host, 1 KiB bodies, one at a time;
//! - sequential `send_message` throughput (each call returns once delivered);
//! - RSS of an idle session.

use std::{
    path::Path,
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use futures::StreamExt as _;
use rmcp::{
    ClientHandler, RoleClient, ServiceExt as _,
    model::{CallToolRequestParams, ClientConfig, CustomNotification},
    service::{NotificationContext, RunningService},
};
use serde_json::{Value, json};
use tokio::{process::Command, sync::mpsc};

use super::Scenario;
use crate::{
    Context,
    process::{cli, clock_ticks_per_second, sample},
    progress,
    report::{Measurement, Row},
    stats,
};

pub(crate) const SCENARIO: Scenario = Scenario {
    name: "mcp",
    about: "through MCP stdio: spawn -> initialize; send_message -> channel notification; sends/s; idle RSS",
    run: |ctx| Box::pin(run(ctx)),
};

const SPAWNS: usize = 10;
const MESSAGES: usize = 1000;
const QUICK_MESSAGES: usize = 100;
const WARM_UP: usize = 20;
/// Tool calls in flight in the concurrent throughput case.
const CONCURRENT_CALLS: usize = 8;
/// How long sessions settle before the idle RSS is read.
const SETTLE: Duration = Duration::from_secs(2);
const NOTES_CAPACITY: usize = 64;
const LIMIT: Duration = Duration::from_secs(30);
/// The latency floor's targets (issue 33): a notification p50 of at most about one
/// libp2p round trip and one fdatasync on this machine, and a sequential caller that
/// waits for each `delivered`.
const TARGET_P50_MS: f64 = 0.7;
const TARGET_P99_MS: f64 = 2.0;
const TARGET_SENDS_PER_S: f64 = 1200.0;
/// With calls in flight the node packs one session's messages into one request.
const TARGET_CONCURRENT_SENDS_PER_S: f64 = 2000.0;
const TARGET_RSS_MIB: f64 = 20.0;

/// The host side: forwards channel notifications.
#[derive(Debug, Clone)]
struct Host {
    notes: mpsc::Sender<CustomNotification>,
}

impl ClientHandler for Host {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.notes.try_send(notification);
    }
}

pub(super) struct Session {
    client: RunningService<RoleClient, Host>,
    notes: mpsc::Receiver<CustomNotification>,
    pub(super) pid: u32,
    /// Owns the process (killed on drop).
    _child: tokio::process::Child,
}

impl Session {
    pub(super) async fn start(
        bin: &Path,
        home: &Path,
        args: &[&str],
    ) -> anyhow::Result<(Self, Duration)> {
        let mut cmd = Command::new(bin);
        cmd.arg("mcp")
            .args(args)
            .env(interlink_store::env::HOME, home)
            .env(interlink_store::env::MDNS, "0")
            .env(interlink_store::env::CHANNELS, "1")
            .env_remove(interlink_store::env::SESSION)
            .env_remove("CLAUDE_CODE_SESSION_ID")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let start = Instant::now();
        let mut child = cmd.spawn().context("spawning interlink-p2p mcp")?;
        let pid = child.id().context("no pid")?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let (tx, notes) = mpsc::channel(NOTES_CAPACITY);
        let client = Host { notes: tx }
            .serve((stdout, stdin))
            .await
            .context("MCP handshake")?;
        let initialized = start.elapsed();
        Ok((
            Self {
                client,
                notes,
                pid,
                _child: child,
            },
            initialized,
        ))
    }

    pub(super) async fn call(&self, tool: &str, args: Value) -> anyhow::Result<Value> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let Value::Object(map) = args {
            params = params.with_arguments(map);
        }
        let r = self.client.call_tool(params).await?;
        anyhow::ensure!(r.is_error != Some(true), "{tool} failed: {r:?}");
        Ok(r.structured_content.unwrap_or(Value::Null))
    }
}

async fn run(ctx: &Context) -> anyhow::Result<Vec<Row>> {
    let p2p = match &ctx.p2p {
        Ok(p) => p.path.clone(),
        Err(reason) => return Ok(vec![Row::skipped("mcp", reason.clone())]),
    };
    let messages = if ctx.quick { QUICK_MESSAGES } else { MESSAGES };
    let homes = [tempfile::tempdir()?, tempfile::tempdir()?];
    let mut keys = Vec::new();
    for h in &homes {
        let id: Value = serde_json::from_str(&cli(&p2p, h.path(), &["id", "--json"], None).await?)?;
        keys.push(id["identity_key"].as_str().context("no key")?.to_owned());
    }
    cli(
        &p2p,
        homes[0].path(),
        &["peer", "add", "bob", &keys[1]],
        None,
    )
    .await?;
    cli(
        &p2p,
        homes[1].path(),
        &["peer", "add", "alice", &keys[0]],
        None,
    )
    .await?;
    let loopback = ["--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns"];

    progress(format_args!("mcp: {SPAWNS} spawns"));
    let mut inits = Vec::new();
    for i in 0..SPAWNS {
        let session = format!("init-{i}");
        let mut args = vec!["--session", session.as_str()];
        args.extend(loopback);
        let (s, took) = Session::start(&p2p, homes[0].path(), &args).await?;
        inits.push(took);
        drop(s);
    }
    let mut rows = vec![Row::ok(
        "spawn -> initialize answered",
        stats::summary("initialize", &inits, None),
    )];

    let mut args_a = vec!["--session", "bench-a"];
    args_a.extend(loopback);
    let (alice, _) = Session::start(&p2p, homes[0].path(), &args_a).await?;
    let who = alice.call("whoami", json!({})).await?;
    let boot = who["listen_addrs"]
        .as_array()
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .context("alice has no listen address")?
        .to_owned();
    let mut args_b = vec!["--session", "bench-b", "--bootstrap", boot.as_str()];
    args_b.extend(loopback);
    let (mut bob, _) = Session::start(&p2p, homes[1].path(), &args_b).await?;
    let deadline = Instant::now() + LIMIT;
    loop {
        let seen = alice.call("discover", json!({})).await?.to_string();
        if seen.contains("bench-b") {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "bob never appeared: {seen}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    tokio::time::sleep(SETTLE).await;
    rows.push(rss_row(
        "idle session RSS (started, no messages yet)",
        &alice,
        &bob,
    ));

    let body = "x".repeat(1024);
    let send = |text: String| {
        alice.call(
            "send_message",
            json!({ "to": "bob", "session": "bench-b", "text": text }),
        )
    };
    for _ in 0..WARM_UP {
        send(body.clone()).await?;
        tokio::time::timeout(LIMIT, bob.notes.recv())
            .await?
            .context("no notification")?;
    }
    progress(format_args!(
        "mcp: {messages} sends, each to its notification"
    ));
    let mut samples = Vec::with_capacity(messages);
    for _ in 0..messages {
        let start = Instant::now();
        let sent = send(body.clone()).await?;
        anyhow::ensure!(sent["status"] == "delivered", "not delivered: {sent}");
        tokio::time::timeout(LIMIT, bob.notes.recv())
            .await?
            .context("no notification")?;
        samples.push(start.elapsed());
    }
    samples.sort();
    let mut m = stats::summary("latency", &samples, None);
    if let Some(p50) = stats::quantile(&samples, 0.5) {
        m.push(Measurement::ms("latency_p50_target", p50).at_most(TARGET_P50_MS));
    }
    if let Some(p99) = stats::quantile(&samples, 0.99) {
        m.push(Measurement::ms("latency_p99", p99).at_most(TARGET_P99_MS));
    }
    rows.push(Row::ok("send_message -> channel notification, 1 KiB", m));

    progress(format_args!("mcp: {messages} sequential sends"));
    let ticks_per_s = clock_ticks_per_second().await;
    let cpu_before = [sample(alice.pid).ok(), sample(bob.pid).ok()];
    let start = Instant::now();
    for _ in 0..messages {
        send(body.clone()).await?;
    }
    let elapsed = start.elapsed();
    let cpu_after = [sample(alice.pid).ok(), sample(bob.pid).ok()];
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    let per_s = messages as f64 / elapsed.as_secs_f64();
    let mut m = vec![
        Measurement::new("sends_per_s", per_s, "msg/s"),
        Measurement::new("per_send", 1000.0 / per_s, "ms").at_most(1000.0 / TARGET_SENDS_PER_S),
    ];
    // What each session spends per message, all its threads: on a machine of two
    // cores, where sender, recipient and host share them, this is what bounds the
    // sequential rate as much as any wait.
    for (name, before, after) in [
        ("sender", &cpu_before[0], &cpu_after[0]),
        ("recipient", &cpu_before[1], &cpu_after[1]),
    ] {
        if let (Some(b), Some(a)) = (before, after) {
            // Tick and message counts are small: the conversions are exact.
            #[allow(clippy::cast_precision_loss)]
            let us = a.cpu_ticks.saturating_sub(b.cpu_ticks) as f64 * 1e6
                / ticks_per_s as f64
                / messages as f64;
            m.push(Measurement::new(format!("cpu_per_send_{name}"), us, "us"));
        }
    }
    rows.push(Row::ok("sequential send_message throughput", m));

    progress(format_args!(
        "mcp: {messages} sends, {CONCURRENT_CALLS} calls in flight"
    ));
    let start = Instant::now();
    let results: Vec<anyhow::Result<Value>> = futures::stream::iter(0..messages)
        .map(|_| send(body.clone()))
        .buffer_unordered(CONCURRENT_CALLS)
        .collect()
        .await;
    let elapsed = start.elapsed();
    for r in results {
        let sent = r?;
        anyhow::ensure!(sent["status"] == "delivered", "not delivered: {sent}");
    }
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    let per_s = messages as f64 / elapsed.as_secs_f64();
    rows.push(Row::ok(
        format!("concurrent send_message throughput, {CONCURRENT_CALLS} in flight"),
        vec![
            Measurement::new("sends_per_s", per_s, "msg/s"),
            Measurement::new("per_send", 1000.0 / per_s, "ms")
                .at_most(1000.0 / TARGET_CONCURRENT_SENDS_PER_S),
        ],
    ));

    tokio::time::sleep(SETTLE).await;
    rows.push(rss_row("idle session RSS (after the runs)", &alice, &bob));
    Ok(rows)
}

/// RSS of both sessions: the total (against the target) and its anonymous and
/// file-backed parts.
fn rss_row(case: &str, alice: &Session, bob: &Session) -> Row {
    let mib = |kib: u64| {
        #[allow(clippy::cast_precision_loss)] // far below 2^52
        let v = kib as f64 / 1024.0;
        v
    };
    let mut m = Vec::new();
    for (name, s) in [("alice", alice), ("bob", bob)] {
        if let Ok(sampled) = sample(s.pid) {
            m.push(
                Measurement::new(format!("rss_{name}"), mib(sampled.rss_kib), "MiB")
                    .at_most(TARGET_RSS_MIB),
            );
            m.push(Measurement::new(
                format!("rss_{name}_anon"),
                mib(sampled.rss_anon_kib),
                "MiB",
            ));
            m.push(Measurement::new(
                format!("rss_{name}_file"),
                mib(sampled.rss_file_kib),
                "MiB",
            ));
        }
    }
    Row::ok(case, m)
}
