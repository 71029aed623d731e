//! `roster-convergence`: N in-process session nodes on the memory transport,
//! bootstrapped in a tree (node i → node (i-1)/2, so most pairs are not directly
//! connected and presence must travel through the overlay). Measures the time from the
//! first spawn until every node's roster lists all N sessions.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use interlink_core::{Identity, SessionId};
use interlink_net::{Config, Event, Handle};
use libp2p::multiaddr::Protocol;
use tokio::sync::broadcast;

use super::Scenario;
use crate::{
    Context,
    fleet::{self, Fleet},
    process, progress,
    report::{Measurement, Row},
    stats,
};

pub(crate) const SCENARIO: Scenario = Scenario {
    name: "roster-convergence",
    about: "N in-process nodes (memory transport, tree bootstrap): first spawn -> every roster has all N sessions",
    run: |ctx| Box::pin(run(ctx)),
};

/// Node counts, each with its number of repetitions (single runs vary a lot: one
/// announcement that misses the mesh costs a heartbeat).
const SIZES: &[(usize, usize)] = &[(10, 5), (50, 3), (100, 2), (200, 1)];
const QUICK_SIZES: &[(usize, usize)] = &[(10, 1)];
/// A handful of identities, several sessions each (well under the per-identity cap).
const IDENTITIES: u8 = 7;
const POLL: Duration = Duration::from_millis(20);
/// A node's roster is re-read at least this often even without a change event.
const FULL_RECHECK: Duration = Duration::from_secs(1);
/// Overall bound of one run, spawn included.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(15);

async fn run(ctx: &Context) -> anyhow::Result<Vec<Row>> {
    let identities = fleet::identities(IDENTITIES);
    let ticks_per_s = process::clock_ticks_per_second().await;
    let mut rows = Vec::new();
    let sizes = match &ctx.roster_sizes {
        Some(sizes) => sizes.as_slice(),
        None if ctx.quick => QUICK_SIZES,
        None => SIZES,
    };
    for &(n, repeats) in sizes {
        let case = format!("{n} nodes");
        let mut runs = Vec::new();
        let mut failure = None;
        for r in 1..=repeats {
            progress(format_args!(
                "roster-convergence: {n} nodes, run {r}/{repeats}"
            ));
            match measure_run(n, &identities, ticks_per_s).await {
                Ok(run) => {
                    progress(format_args!(
                        "roster-convergence: {n} nodes converged in {:.0} ms",
                        run.converge.as_secs_f64() * 1000.0
                    ));
                    runs.push(run);
                }
                Err(f) => {
                    failure = Some(f);
                    break;
                }
            }
        }
        rows.push(match failure {
            None => Row::ok(&case, summarize(n, &identities, &runs)),
            Some(f) => {
                let mut m = f.partial;
                m.extend(summarize(n, &identities, &runs));
                Row::failed(&case, f.reason, m)
            }
        });
    }
    Ok(rows)
}

/// One run's results.
#[derive(Debug)]
struct RunResult {
    /// First spawn → the last node has all N sessions.
    converge: Duration,
    /// First spawn → the median node has all N sessions.
    node_p50: Duration,
    /// Time to build and spawn all N nodes.
    spawned: Duration,
    /// Sessions on node 0's roster at the end.
    sessions: usize,
    /// CPU the bench process used during the run, in % of all cores (is the machine,
    /// rather than the protocol, the limit?).
    cpu_pct: Option<f64>,
    /// What learning the roster cost each node, at convergence.
    costs: Vec<interlink_net::PresenceCost>,
    /// Each node's open connections at convergence.
    open: Vec<u64>,
}

/// One run of `n` nodes, bounded, with the nodes shut down afterwards whatever happens.
async fn measure_run(
    n: usize,
    identities: &[Arc<Identity>],
    ticks_per_s: u64,
) -> Result<RunResult, Failure> {
    let mut fleet = Fleet::default();
    let cpu_before = process::sample(std::process::id()).ok();
    // The inner deadline reports partial progress; the outer timeout is the hard bound
    // should a roster call itself stall.
    let outcome = tokio::time::timeout(
        RUN_TIMEOUT + Duration::from_secs(5),
        converge(n, identities, &mut fleet),
    )
    .await;
    let cpu_after = process::sample(std::process::id()).ok();
    if !fleet.shutdown(SHUTDOWN_TIMEOUT).await {
        progress("roster-convergence: some nodes did not shut down in time");
    }
    let mut run = match outcome {
        Ok(result) => result?,
        Err(_) => {
            return Err(Failure {
                reason: format!("no result within {RUN_TIMEOUT:?}"),
                partial: Vec::new(),
            });
        }
    };
    if let (Some(a), Some(b)) = (cpu_before, cpu_after) {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        // Tick counts and core counts are small: the conversions are exact.
        #[allow(clippy::cast_precision_loss)]
        let cpu_s = b.cpu_ticks.saturating_sub(a.cpu_ticks) as f64 / ticks_per_s as f64;
        #[allow(clippy::cast_precision_loss)]
        let pct = cpu_s / run.converge.as_secs_f64().max(1e-3) / cores as f64 * 100.0;
        run.cpu_pct = Some(pct);
    }
    Ok(run)
}

/// Median and worst convergence over the runs, plus context.
fn summarize(n: usize, identities: &[Arc<Identity>], runs: &[RunResult]) -> Vec<Measurement> {
    if runs.is_empty() {
        return Vec::new();
    }
    let median = |mut v: Vec<Duration>| {
        v.sort();
        stats::quantile(&v, 0.5).unwrap_or_default()
    };
    let converge: Vec<Duration> = runs.iter().map(|r| r.converge).collect();
    let mut m = vec![
        Measurement::ms("converge_p50", median(converge.clone())),
        Measurement::ms(
            "converge_max",
            converge.iter().max().copied().unwrap_or_default(),
        ),
        Measurement::ms(
            "node_p50",
            median(runs.iter().map(|r| r.node_p50).collect()),
        ),
        Measurement::ms(
            "spawn_all",
            median(runs.iter().map(|r| r.spawned).collect()),
        ),
    ];
    let cpu: Vec<f64> = runs.iter().filter_map(|r| r.cpu_pct).collect();
    if !cpu.is_empty() {
        // At most a handful of runs: exact.
        #[allow(clippy::cast_precision_loss)]
        let mean = cpu.iter().sum::<f64>() / cpu.len() as f64;
        m.push(Measurement::new("bench_cpu", mean, "%"));
    }
    // Per node, at convergence (issue 15: these must grow with N, not N × connections).
    let per_node = |f: fn(&interlink_net::PresenceCost) -> u64| {
        let mut v: Vec<u64> = runs.iter().flat_map(|r| r.costs.iter().map(f)).collect();
        v.sort_unstable();
        let p50 = v.get(v.len() / 2).copied().unwrap_or(0);
        let max = v.last().copied().unwrap_or(0);
        (
            usize::try_from(p50).unwrap_or(usize::MAX),
            usize::try_from(max).unwrap_or(usize::MAX),
        )
    };
    for (name, f) in [
        (
            "verified_per_node",
            (|c| c.verified) as fn(&interlink_net::PresenceCost) -> u64,
        ),
        ("roster_fetches_per_node", |c| c.roster_fetches),
        ("connections_per_node", |c| c.connections),
        ("gossip_messages_per_node", |c| c.gossip_messages),
        ("presence_kib_per_node", |c| {
            (c.gossip_bytes + c.roster_bytes + c.summary_bytes) / 1024
        }),
        ("summary_kib_per_node", |c| c.summary_bytes / 1024),
    ] {
        let (p50, max) = per_node(f);
        m.push(Measurement::count(format!("{name}_p50"), p50));
        m.push(Measurement::count(format!("{name}_max"), max));
    }
    let mut open: Vec<u64> = runs.iter().flat_map(|r| r.open.iter().copied()).collect();
    open.sort_unstable();
    for (name, q) in [("open_connections_p50", 0.5), ("open_connections_max", 1.0)] {
        let i = ((open.len().saturating_sub(1)) as f64 * q).round() as usize;
        m.push(Measurement::count(
            name,
            usize::try_from(open.get(i).copied().unwrap_or(0)).unwrap_or(usize::MAX),
        ));
    }
    m.push(Measurement::count(
        "sessions",
        runs.iter().map(|r| r.sessions).min().unwrap_or(0),
    ));
    m.push(Measurement::count("identities", identities.len().min(n)));
    m.push(Measurement::count("runs", runs.len()));
    m
}

/// A failed run: why, and what was measured before.
struct Failure {
    reason: String,
    partial: Vec<Measurement>,
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Self {
            reason: format!("{e:#}"),
            partial: Vec::new(),
        }
    }
}

async fn converge(
    n: usize,
    identities: &[Arc<Identity>],
    fleet: &mut Fleet,
) -> Result<RunResult, Failure> {
    let base = fleet::memory_ports(n as u64);
    let start = Instant::now();
    let mut handles: Vec<Handle> = Vec::with_capacity(n);
    for i in 0..n {
        let bootstrap = match i.checked_sub(1).map(|p| p / 2) {
            Some(parent) => vec![
                fleet::memory_addr(base + parent as u64)
                    .with(Protocol::P2p(handles[parent].peer_id())),
            ],
            None => Vec::new(),
        };
        let config = Config {
            listen: vec![fleet::memory_addr(base + i as u64)],
            bootstrap,
            mdns: false,
            ..Config::default()
        };
        let session = SessionId::new(format!("conv-{n}-{i}")).map_err(anyhow::Error::from)?;
        let identity = &identities[i % identities.len()];
        let node = fleet::spawn_session(identity, &session, config)?;
        handles.push(node.handle());
        fleet.push(node);
    }
    let spawned = start.elapsed();

    // Rosters only grow here (nobody leaves), so a node that has seen all N sessions is
    // not polled again, and an incomplete node is re-read only when it reported a roster
    // change since the last poll (or once a second as a safety net): copying 100
    // rosters every 20 ms would itself load a 2-core machine and slow what is measured.
    let deadline = start + RUN_TIMEOUT;
    let mut done: Vec<Option<Duration>> = vec![None; n];
    let mut counts = vec![0usize; n];
    let mut last_read = vec![None::<Instant>; n];
    let mut events: Vec<_> = handles.iter().map(Handle::events).collect();
    let mut trace_at = None;
    let mut have: Vec<std::collections::HashSet<String>> = vec![Default::default(); n];
    loop {
        // Read every roster due at once: read one after another, each waiting for its
        // node's turn on a loaded runtime, the harness itself lagged by seconds.
        let due: Vec<usize> = (0..n)
            .filter(|&i| {
                done[i].is_none() && {
                    let changed = drain_changed(&mut events[i]);
                    changed || last_read[i].is_none_or(|t| t.elapsed() >= FULL_RECHECK)
                }
            })
            .collect();
        let rosters = futures::future::join_all(due.iter().map(|&i| handles[i].roster())).await;
        for (&i, roster) in due.iter().zip(rosters) {
            let roster = roster.map_err(anyhow::Error::from)?;
            if std::env::var_os("BENCH_DIAG").is_some() {
                have[i] = roster
                    .iter()
                    .flat_map(|v| v.sessions.iter().map(|s| s.addr.session.to_string()))
                    .collect();
            }
            last_read[i] = Some(Instant::now());
            counts[i] = fleet::session_count(&roster);
            if counts[i] >= n {
                done[i] = Some(start.elapsed());
            }
        }
        if std::env::var_os("BENCH_TRACE").is_some() {
            let t = start.elapsed().as_millis() / 250;
            if trace_at != Some(t) {
                trace_at = Some(t);
                if std::env::var_os("BENCH_DIAG").is_some() {
                    let mut missing: std::collections::BTreeMap<String, usize> = Default::default();
                    for j in 0..n {
                        let name = format!("conv-{n}-{j}");
                        let lack = (0..n)
                            .filter(|&i| done[i].is_none() && !have[i].contains(&name))
                            .count();
                        if lack > 0 {
                            missing.insert(name, lack);
                        }
                    }
                    eprintln!("missing: {missing:?}");
                }
                let mut c = counts.clone();
                c.sort_unstable();
                eprintln!(
                    "t={:.2}s min={} p10={} p50={} done={}",
                    start.elapsed().as_secs_f64(),
                    c[0],
                    c[n / 10],
                    c[n / 2],
                    done.iter().filter(|d| d.is_some()).count()
                );
            }
        }
        if done.iter().all(Option::is_some) {
            break;
        }
        if Instant::now() >= deadline {
            let converged = done.iter().filter(|d| d.is_some()).count();
            let min = counts.iter().min().copied().unwrap_or(0);
            return Err(Failure {
                reason: format!(
                    "timeout after {RUN_TIMEOUT:?}: {converged}/{n} nodes complete, smallest roster {min}/{n}"
                ),
                partial: vec![
                    Measurement::ms("spawn_all", spawned),
                    Measurement::count("nodes_converged", converged),
                    Measurement::count("min_sessions", min),
                ],
            });
        }
        tokio::time::sleep(POLL).await;
    }
    let mut per_node: Vec<Duration> = done.into_iter().flatten().collect();
    per_node.sort();
    let converge = per_node.last().copied().unwrap_or_default();
    let median = per_node
        .get(per_node.len() / 2)
        .copied()
        .unwrap_or_default();
    let sessions = match handles.first() {
        Some(h) => fleet::session_count(&h.roster().await.map_err(anyhow::Error::from)?),
        None => 0,
    };
    let mut costs = Vec::with_capacity(n);
    let mut open = Vec::with_capacity(n);
    for h in &handles {
        let d = h.diagnostics().await.map_err(anyhow::Error::from)?;
        costs.push(d.presence);
        open.push(d.connected.len() as u64);
    }
    Ok(RunResult {
        converge,
        node_p50: median,
        spawned,
        sessions,
        cpu_pct: None,
        costs,
        open,
    })
}

/// Whether the node reported a roster change (or dropped events, which may have been
/// one) since the last call.
fn drain_changed(events: &mut broadcast::Receiver<Event>) -> bool {
    let mut changed = false;
    loop {
        match events.try_recv() {
            Ok(Event::RosterChanged) | Err(broadcast::error::TryRecvError::Lagged(_)) => {
                changed = true;
            }
            Ok(_) => {}
            Err(_) => return changed,
        }
    }
}
