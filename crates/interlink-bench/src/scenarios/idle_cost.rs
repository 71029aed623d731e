//! `idle-cost`: the resident memory and CPU of an idle `interlink-p2p run` session
//! process, sampled from `/proc` after it settles. Three processes run side by side
//! (each measured by its own pid): alone on loopback, connected to one peer, and with
//! the default settings (TCP and QUIC on all interfaces, mDNS on).

use std::time::{Duration, Instant};

use anyhow::Context as _;
use interlink_core::names::Network;

use super::Scenario;
use crate::{
    Context, P2p,
    fleet::{self, Peer},
    process::{self, Proc},
    progress,
    report::{Measurement, Row},
};

pub(crate) const SCENARIO: Scenario = Scenario {
    name: "idle-cost",
    about: "RSS and CPU of an idle `interlink-p2p run` session process (from /proc)",
    run: |ctx| Box::pin(run(ctx)),
};

/// The targets for one idle session node.
const TARGET_RSS_MIB: f64 = 20.0;
const TARGET_CPU_PCT: f64 = 0.2;
/// Time after `ready` before sampling starts.
const SETTLE: Duration = Duration::from_secs(5);
const WINDOW: Duration = Duration::from_secs(30);
const QUICK_WINDOW: Duration = Duration::from_secs(10);
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
const READY_TIMEOUT: Duration = Duration::from_secs(15);

/// One process configuration.
struct Case {
    name: &'static str,
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
    /// Wait until the process is on this peer's roster before settling.
    joins: Option<String>,
}

async fn run(ctx: &Context) -> anyhow::Result<Vec<Row>> {
    let names = ["alone, loopback", "one peer, loopback", "defaults, alone"];
    let p2p = match &ctx.p2p {
        Ok(p2p) => p2p,
        Err(reason) => {
            progress(format_args!("idle-cost skipped: {reason}"));
            return Ok(names
                .iter()
                .map(|n| Row::skipped(*n, reason.clone()))
                .collect());
        }
    };
    let window = if ctx.quick { QUICK_WINDOW } else { WINDOW };
    let ticks_per_s = process::clock_ticks_per_second().await;
    let peer = Peer::start(Network::default(), fleet::loopback_tcp(), false).await?;
    let loopback = fleet::loopback_tcp().to_string();
    let mut cases = vec![
        Case {
            name: names[0],
            args: vec![
                "run".into(),
                "--listen".into(),
                loopback.clone(),
                "--no-mdns".into(),
            ],
            env: vec![],
            joins: None,
        },
        Case {
            name: names[1],
            args: vec![
                "run".into(),
                "--bootstrap".into(),
                peer.addr.to_string(),
                "--listen".into(),
                loopback,
                "--no-mdns".into(),
            ],
            env: vec![],
            joins: Some(peer.key.clone()),
        },
    ];
    // The defaults include mDNS: keep it off the LAN's real overlay when `run` lets us.
    let mut defaults_env = Vec::new();
    if p2p.run_help.contains(interlink_store::env::NETWORK) {
        defaults_env.push((
            interlink_store::env::NETWORK,
            format!("bench-idle-{}", std::process::id()),
        ));
    }
    cases.push(Case {
        name: names[2],
        args: vec!["run".into()],
        env: defaults_env,
        joins: None,
    });
    progress(format_args!(
        "idle-cost: {} processes side by side; settle {SETTLE:?}, sample {window:?}",
        cases.len()
    ));
    let rows = futures::future::join_all(
        cases
            .iter()
            .map(|case| measure(case, p2p, &peer, window, ticks_per_s)),
    )
    .await;
    peer.fleet.shutdown(Duration::from_secs(3)).await;
    Ok(rows)
}

async fn measure(case: &Case, p2p: &P2p, peer: &Peer, window: Duration, ticks_per_s: u64) -> Row {
    match try_measure(case, p2p, peer, window, ticks_per_s).await {
        Ok(m) => Row::ok(case.name, m),
        Err(e) => Row::failed(case.name, format!("{e:#}"), vec![]),
    }
}

async fn try_measure(
    case: &Case,
    p2p: &P2p,
    peer: &Peer,
    window: Duration,
    ticks_per_s: u64,
) -> anyhow::Result<Vec<Measurement>> {
    let home = tempfile::tempdir().context("temporary home")?;
    let key = process::create_identity(&p2p.path, home.path()).await?;
    let env: Vec<(&str, &str)> = case.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut events = peer.handle.events();
    let mut proc = Proc::spawn(&p2p.path, &case.args, &env, home)?;
    proc.wait_ready(READY_TIMEOUT).await?;
    if case.joins.is_some() {
        fleet::wait_visible(&peer.handle, &mut events, &key, None, READY_TIMEOUT)
            .await
            .context("never joined the peer")?;
    }
    tokio::time::sleep(SETTLE).await;

    let pid = proc.pid();
    let first = process::sample(pid)?;
    let start = Instant::now();
    let mut rss = vec![first.rss_kib];
    let mut last = first;
    while start.elapsed() < window {
        tokio::time::sleep(SAMPLE_EVERY).await;
        anyhow::ensure!(
            !proc.has_exited(),
            "process exited while idle: {}",
            proc.stderr_tail()
        );
        last = process::sample(pid)?;
        rss.push(last.rss_kib);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let still_joined = match &case.joins {
        Some(_) => fleet::roster_has(&peer.handle.roster().await?, &key, None),
        None => true,
    };
    proc.stop().await;
    anyhow::ensure!(still_joined, "left the peer's roster while idle");

    // KiB and tick counts are far below 2^52: the conversions are exact.
    #[allow(clippy::cast_precision_loss)]
    let (rss_mean, rss_max, hwm, cpu_pct) = {
        let mib = |kib: u64| kib as f64 / 1024.0;
        let mean = rss.iter().sum::<u64>() as f64 / rss.len() as f64 / 1024.0;
        let max = rss.iter().max().copied().unwrap_or(0);
        let ticks = last.cpu_ticks.saturating_sub(first.cpu_ticks);
        let cpu = ticks as f64 / ticks_per_s as f64 / elapsed * 100.0;
        (mean, mib(max), mib(last.hwm_kib), cpu)
    };
    // One tick over the window is the resolution of the CPU figure.
    #[allow(clippy::cast_precision_loss)]
    let resolution = 100.0 / ticks_per_s as f64 / elapsed;
    #[allow(clippy::cast_precision_loss)]
    let cpu_precise = match (first.cpu_ns, last.cpu_ns) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1e9 / elapsed * 100.0),
        _ => None,
    };
    let mut out = vec![
        Measurement::new("rss_mean", rss_mean, "MiB").at_most(TARGET_RSS_MIB),
        Measurement::new("rss_max", rss_max, "MiB"),
        Measurement::new("rss_peak_since_start", hwm, "MiB"),
        Measurement::new("cpu", cpu_pct, "%").at_most(TARGET_CPU_PCT),
        Measurement::new("cpu_resolution", resolution, "%"),
    ];
    if let Some(cpu) = cpu_precise {
        out.push(Measurement::new("cpu_schedstat", cpu, "%"));
    }
    out.push(Measurement::new("window", elapsed, "s"));
    out.push(Measurement::count(
        "threads",
        usize::try_from(last.threads).unwrap_or(usize::MAX),
    ));
    Ok(out)
}
