//! `wake-to-drained`: a `run` session is stopped (SIGSTOP) while a peer queues 50
//! messages for it; the time from SIGCONT until all 50 are in its inbox. The session
//! has to notice it was stopped (a late housekeeping tick), fetch its mailbox from the
//! holders and store everything.

use std::time::{Duration, Instant};

use anyhow::Context as _;

use super::Scenario;
use crate::{
    Context,
    process::{self, Proc, cli},
    progress,
    report::{Measurement, Row},
    stats,
};

pub(crate) const SCENARIO: Scenario = Scenario {
    name: "wake-to-drained",
    about: "SIGCONT -> 50 messages queued while stopped are in the inbox (two `run` processes)",
    run: |ctx| Box::pin(run(ctx)),
};

/// The target.
const TARGET_MS: f64 = 250.0;
const MESSAGES: usize = 50;
const RUNS: usize = 5;
const QUICK_RUNS: usize = 2;
const LIMIT: Duration = Duration::from_secs(30);
const ENV: &[(&str, &str)] = &[
    (interlink_store::env::TEST_LIVE_WINDOW_MS, "10000"),
    (interlink_store::env::TEST_HEARTBEAT_MS, "1000"),
];

async fn run(ctx: &Context) -> anyhow::Result<Vec<Row>> {
    let p2p = match &ctx.p2p {
        Ok(p) => p.path.clone(),
        Err(reason) => {
            return Ok(vec![Row::skipped(
                "50 queued, SIGCONT -> drained",
                reason.clone(),
            )]);
        }
    };
    let homes = [tempfile::tempdir()?, tempfile::tempdir()?];
    let keys = [
        process::create_identity(&p2p, homes[0].path()).await?,
        process::create_identity(&p2p, homes[1].path()).await?,
    ];
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
    let args = |session: &str, boot: Option<&str>| {
        let mut a: Vec<String> = ["run", "--session", session]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(loopback.iter().map(|s| s.to_string()));
        if let Some(b) = boot {
            a.extend(["--bootstrap".to_string(), b.to_string()]);
        }
        a
    };
    let [home_a, home_b] = homes;
    let (path_a, path_b) = (home_a.path().to_owned(), home_b.path().to_owned());
    let mut a = Proc::spawn(&p2p, &args("wake-a", None), ENV, home_a)?;
    let boot = a
        .wait_ready(LIMIT)
        .await?
        .addrs
        .into_iter()
        .next()
        .context("no address")?;
    let mut b = Proc::spawn(&p2p, &args("wake-b", Some(&boot)), ENV, home_b)?;
    b.wait_ready(LIMIT).await?;
    let send_args = [
        "send",
        "--to",
        "bob",
        "--bootstrap",
        &boot,
        "--listen",
        "/ip4/127.0.0.1/tcp/0",
        "--no-mdns",
        "--stdin",
    ];
    cli(&p2p, &path_a, &send_args, Some("warm up\n".into())).await?;

    let runs = if ctx.quick { QUICK_RUNS } else { RUNS };
    let mut samples = Vec::new();
    let mut expected = 1usize;
    for run in 0..runs {
        progress(format_args!("wake-to-drained: run {}/{runs}", run + 1));
        b.signal("STOP")?;
        let input: String = (0..MESSAGES)
            .map(|i| format!("run {run} message {i}\n"))
            .collect();
        let out = cli(&p2p, &path_a, &send_args, Some(input)).await?;
        let queued = out.lines().filter(|l| l.starts_with("queued ")).count();
        expected += MESSAGES;
        b.signal("CONT")?;
        let resumed = Instant::now();
        loop {
            let inbox = cli(
                &p2p,
                &path_b,
                &["inbox", "--session", "wake-b", "--json"],
                None,
            )
            .await?;
            if inbox.lines().count() >= expected {
                samples.push(resumed.elapsed());
                break;
            }
            anyhow::ensure!(
                resumed.elapsed() < LIMIT,
                "not drained after {LIMIT:?} ({queued} queued)"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    b.stop().await;
    a.stop().await;
    samples.sort();
    let mut m = stats::summary("drained", &samples, Some(TARGET_MS));
    m.push(Measurement::count("runs", samples.len()));
    Ok(vec![Row::ok("50 queued, SIGCONT -> drained", m)])
}
