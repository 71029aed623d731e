//! `visible-after-start`: one long-running peer; then, repeatedly, the time from
//! starting a new session until it is on that peer's roster. Via bootstrap (the new
//! session dials the peer's loopback TCP address) and via mDNS (no address given),
//! each in-process (spawn → visible) and as a real `interlink-p2p run` process
//! (process start → visible).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use interlink_core::{Identity, SessionId, names::Network};
use interlink_net::Config;

use super::Scenario;
use crate::{
    Context, P2p,
    fleet::{self, Fleet},
    process::{self, Proc},
    progress,
    report::{Measurement, Row},
    stats,
};

pub(crate) const SCENARIO: Scenario = Scenario {
    name: "visible-after-start",
    about: "start a session -> it is on a running peer's roster (bootstrap and mDNS; in-process and process)",
    run: |ctx| Box::pin(run(ctx)),
};

/// The target: visible in a peer's roster within a second.
const TARGET_MS: f64 = 1000.0;
const IN_PROCESS_RUNS: usize = 20;
const PROCESS_RUNS: usize = 10;
const QUICK_IN_PROCESS_RUNS: usize = 5;
const QUICK_PROCESS_RUNS: usize = 3;
/// Bound on one start → visible wait (a miss here is a failure, not a slow sample).
const VISIBLE_TIMEOUT: Duration = Duration::from_secs(15);
/// Misses after which a case stops (each costs [`VISIBLE_TIMEOUT`]).
const MAX_MISSES: usize = 3;
/// How long a departed session may take to leave the peer's roster before the next run.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(3);

async fn run(ctx: &Context) -> anyhow::Result<Vec<Row>> {
    let (in_process_runs, process_runs) = if ctx.quick {
        (QUICK_IN_PROCESS_RUNS, QUICK_PROCESS_RUNS)
    } else {
        (IN_PROCESS_RUNS, PROCESS_RUNS)
    };
    let mut rows = Vec::new();

    // Bootstrap: the default overlay is safe here because mDNS is off everywhere, so
    // only nodes given this peer's loopback address ever reach it.
    let peer = fleet::Peer::start(Network::default(), fleet::loopback_tcp(), false).await?;
    let bootstrap = peer.addr.clone();
    rows.push(
        in_process_case("bootstrap, in-process", &peer, in_process_runs, || Config {
            listen: vec![fleet::loopback_tcp()],
            bootstrap: vec![bootstrap.clone()],
            mdns: false,
            ..Config::default()
        })
        .await,
    );
    rows.push(match &ctx.p2p {
        Ok(p2p) => {
            let args = vec![
                "run".into(),
                "--bootstrap".into(),
                peer.addr.to_string(),
                "--listen".into(),
                fleet::loopback_tcp().to_string(),
                "--no-mdns".into(),
            ];
            process_case("bootstrap, process", p2p, &peer, &args, process_runs).await
        }
        Err(reason) => Row::skipped("bootstrap, process", reason.clone()),
    });
    peer.fleet.shutdown(SETTLE_TIMEOUT).await;

    // mDNS: a private overlay name, so nothing else on the LAN mixes with the bench,
    // and all interfaces (libp2p-mdns advertises only the querying interface's own
    // addresses, never loopback ones).
    let interface = match process::private_multicast_interface() {
        Ok(i) => i,
        Err(reason) => {
            progress(format_args!("visible-after-start: mDNS skipped: {reason}"));
            for case in ["mdns, in-process", "mdns, process"] {
                rows.push(Row::skipped(case, reason.clone()));
            }
            return Ok(rows);
        }
    };
    progress(format_args!(
        "visible-after-start: mDNS via multicast interface {interface}"
    ));
    let network = private_network()?;
    let peer = fleet::Peer::start(network.clone(), fleet::any_tcp(), true).await?;
    rows.push(
        in_process_case("mdns, in-process", &peer, in_process_runs, || Config {
            network: network.clone(),
            listen: vec![fleet::any_tcp()],
            mdns: true,
            ..Config::default()
        })
        .await,
    );
    rows.push(match &ctx.p2p {
        Ok(p2p) if !p2p.run_help.contains(interlink_store::env::NETWORK) => Row::skipped(
            "mdns, process",
            "`run` does not take INTERLINK_NETWORK (the bench cannot isolate its overlay)",
        ),
        Ok(p2p) => {
            let args = vec![
                "run".into(),
                "--listen".into(),
                fleet::any_tcp().to_string(),
            ];
            let env = [(interlink_store::env::NETWORK, network.as_str())];
            process_case_env("mdns, process", p2p, &peer, &args, &env, process_runs).await
        }
        Err(reason) => Row::skipped("mdns, process", reason.clone()),
    });
    peer.fleet.shutdown(SETTLE_TIMEOUT).await;
    Ok(rows)
}

/// `bench-<pid>-<nanos>`: an overlay nobody else uses.
fn private_network() -> anyhow::Result<Network> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    Network::new(&format!("bench-{}-{nanos}", std::process::id())).context("overlay name")
}

/// Spawns `runs` in-process sessions one after the other with `config()`; times spawn →
/// on the peer's roster, and spawn → the peer on the new session's roster.
async fn in_process_case(
    case: &str,
    peer: &fleet::Peer,
    runs: usize,
    config: impl Fn() -> Config,
) -> Row {
    progress(format_args!("visible-after-start: {case}, {runs} runs"));
    // Fresh identities (not the peer's): the new session is found by key and session.
    let identities: Vec<Arc<Identity>> = fleet::identities(5);
    let mut tally = Tally::default();
    for i in 0..runs {
        let identity = &identities[i % identities.len()];
        let key = identity.public().to_hex();
        let one = async {
            let session = SessionId::new(format!("vis-{i}"))?;
            let mut peer_events = peer.handle.events();
            let mut fleet = Fleet::default();
            let start = Instant::now();
            let node = fleet::spawn_session(identity, &session, config())?;
            let new = node.handle();
            fleet.push(node);
            let mut new_events = new.events();
            let (on_peer, on_new) = tokio::join!(
                fleet::wait_visible(
                    &peer.handle,
                    &mut peer_events,
                    &key,
                    Some(&session),
                    VISIBLE_TIMEOUT
                ),
                fleet::wait_visible(&new, &mut new_events, &peer.key, None, VISIBLE_TIMEOUT),
            );
            if on_peer.is_err() || on_new.is_err() {
                anyhow::bail!(
                    "peer sees new: {}; new sees peer: {}; new node: {}; peer: {}",
                    outcome(&on_peer),
                    outcome(&on_new),
                    fleet::describe(&new).await,
                    fleet::describe(&peer.handle).await,
                );
            }
            let timings = (on_peer? - start, on_new? - start);
            fleet.shutdown(SETTLE_TIMEOUT).await;
            anyhow::Ok(timings)
        };
        let keep_going = tally.record(case, i + 1, runs, one.await);
        fleet::wait_gone(&peer.handle, &key, SETTLE_TIMEOUT).await;
        if !keep_going {
            break;
        }
    }
    tally.row(case, "sees_peer")
}

fn outcome(r: &anyhow::Result<Instant>) -> String {
    match r {
        Ok(_) => "yes".into(),
        Err(e) => format!("{e:#}"),
    }
}

/// The timings and misses of one case. A miss (not visible within
/// [`VISIBLE_TIMEOUT`]) is recorded and the case goes on, up to [`MAX_MISSES`]: how
/// often a start is missed is itself a result.
#[derive(Debug, Default)]
struct Tally {
    visible: Vec<Duration>,
    /// The case's second timing (the new session sees the peer; `ready` printed).
    other: Vec<Duration>,
    misses: Vec<String>,
}

impl Tally {
    /// Records run `run` of `runs`; returns whether the case should go on.
    fn record(
        &mut self,
        case: &str,
        run: usize,
        runs: usize,
        outcome: anyhow::Result<(Duration, Duration)>,
    ) -> bool {
        match outcome {
            Ok((visible, other)) => {
                self.visible.push(visible);
                self.other.push(other);
            }
            Err(e) => {
                let miss = format!("run {run}/{runs}: {e:#}");
                progress(format_args!("visible-after-start: {case}: {miss}"));
                self.misses.push(miss);
            }
        }
        self.misses.len() < MAX_MISSES
    }

    fn row(self, case: &str, other: &str) -> Row {
        let mut m = stats::summary("visible", &self.visible, Some(TARGET_MS));
        m.extend(stats::summary(other, &self.other, None).into_iter().take(1));
        m.push(Measurement::count("runs", self.visible.len()));
        m.push(Measurement::count("misses", self.misses.len()));
        match self.misses.first() {
            None => Row::ok(case, m),
            Some(first) => Row::failed(
                case,
                format!(
                    "{} of {} starts never became visible; first: {first}",
                    self.misses.len(),
                    self.misses.len() + self.visible.len()
                ),
                m,
            ),
        }
    }
}

async fn process_case(
    case: &str,
    p2p: &P2p,
    peer: &fleet::Peer,
    args: &[String],
    runs: usize,
) -> Row {
    process_case_env(case, p2p, peer, args, &[], runs).await
}

/// Starts `runs` `interlink-p2p` processes one after the other, each with a fresh
/// identity in a temporary home; times process start → on the peer's roster, and
/// process start → `ready` on its stdout.
async fn process_case_env(
    case: &str,
    p2p: &P2p,
    peer: &fleet::Peer,
    args: &[String],
    env: &[(&str, &str)],
    runs: usize,
) -> Row {
    progress(format_args!("visible-after-start: {case}, {runs} runs"));
    let mut tally = Tally::default();
    for i in 0..runs {
        let one = async {
            let home = tempfile::tempdir().context("temporary home")?;
            // Not timed: the identity exists before the session starts, as for a user.
            let key = process::create_identity(&p2p.path, home.path()).await?;
            let mut events = peer.handle.events();
            let mut proc = Proc::spawn(&p2p.path, args, env, home)?;
            let (on_peer, ready_line) = tokio::join!(
                fleet::wait_visible(&peer.handle, &mut events, &key, None, VISIBLE_TIMEOUT),
                proc.wait_ready(VISIBLE_TIMEOUT),
            );
            let on_peer = on_peer
                .with_context(|| format!("pid {}: stderr: {}", proc.pid(), proc.stderr_tail()))?;
            let timings = (on_peer - proc.started, ready_line?.at - proc.started);
            proc.stop().await;
            // Each process has its own identity, so a missed one cannot disturb the
            // next; after a clean stop its goodbye clears the roster.
            fleet::wait_gone(&peer.handle, &key, SETTLE_TIMEOUT).await;
            anyhow::Ok(timings)
        };
        if !tally.record(case, i + 1, runs, one.await) {
            break;
        }
    }
    tally.row(case, "ready")
}
