//! `interlink-p2p peers`: join the overlay as an observer and show who is there.
//!
//! The observer runs a node with a random transport key in [`Role::Observer`]: it
//! dials, fetches rosters and listens to presence like a session, but never announces
//! itself, so looking does not change what is seen. It waits until the roster is
//! non-empty and has been quiet for a moment (or `--wait` passes), prints the roster
//! and the network diagnostics, and with `--watch` prints again on every change.

pub mod render;
pub mod report;

use std::{
    io::Write,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use interlink_core::trust::PeerPolicy;
use interlink_net::{Config, Event, Handle, Node, Role};
use interlink_store::keyfile;
use tokio::sync::broadcast::error::RecvError;

use self::report::Report;
use crate::paths::Home;

/// How long the roster must stay unchanged before the wait ends early.
const QUIET: Duration = Duration::from_millis(500);
/// After a change under `--watch`, how long to gather further changes before printing.
const WATCH_DEBOUNCE: Duration = Duration::from_millis(200);

/// How `peers` runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Print JSON (one object; one per line under `--watch`).
    pub json: bool,
    /// Keep running and print again on every change, until Ctrl-C.
    pub watch: bool,
    /// The longest wait for the roster before printing.
    pub wait: Duration,
}

/// How old a session's `network.json` may be while the session runs: it is rewritten
/// when anything in it changed, and at least every
/// [`interlink_mcp::cli::network_view::REWRITE_AT_LEAST`].
const VIEW_STALE_AFTER: Duration = Duration::from_secs(60);

/// `peers --session <id>`: what a running session of this user sees of its network,
/// from the view it keeps in its session directory.
pub fn session_view(
    home: &Home,
    session: &str,
    json: bool,
    clock: interlink_net::Clock,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let id = interlink_core::SessionId::new(session)
        .map_err(|e| crate::UsageError(format!("--session {session:?}: {e}")))?;
    let dir = home.session(&id)?;
    let bytes = match std::fs::read(dir.network()) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => anyhow::bail!(
            "session {session} has no network view: it has not run since this version, or \
             is not a session of this home ({}); {}",
            home.path().display(),
            crate::session_ids::named(
                home,
                Some(interlink_store::paths::NETWORK_FILE),
                "a network view"
            )
        ),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.network().display())),
    };
    let view: serde_json::Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is damaged", dir.network().display()))?;
    if json {
        writeln!(out, "{view}")?;
        return Ok(());
    }
    let age = view["updated_ms"]
        .as_u64()
        .map(|t| Duration::from_millis(clock.now_ms().saturating_sub(t)));
    let stopped = view["stopped_ms"].is_u64();
    let state = match age {
        Some(a) if stopped => format!("stopped: as it saw it {}s ago", a.as_secs()),
        Some(a) if a <= VIEW_STALE_AFTER => "running".to_owned(),
        Some(a) => format!("not running: as it saw it {}s ago", a.as_secs()),
        None => "age unknown".to_owned(),
    };
    writeln!(out, "session {session} ({state})")?;
    for line in interlink_mcp::cli::network_view::lines(&view) {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

/// Runs `peers`: results to `out`, progress to `progress`.
pub async fn peers(
    home: Option<&Home>,
    config: Config,
    options: Options,
    out: &mut impl Write,
    progress: &mut impl Write,
) -> anyhow::Result<()> {
    let petnames = match home {
        Some(h) => read_petnames(h, progress),
        None => PeerPolicy::new(),
    };
    let identity = home.and_then(|h| keyfile::load(&h.identity()).ok());
    let own = identity.as_ref().map(interlink_core::Identity::public);
    // The observer reads as this user: its own sessions' and its peers' details.
    let reader = identity.as_ref().map(|i| {
        std::sync::Arc::new(std::sync::Mutex::new(
            interlink_core::wire::DetailsReader::new(i),
        ))
    });
    let network = config.network.as_str().to_owned();
    let alone = crate::config::alone_hint(&config);
    let clock = config.clock;
    let key = libp2p::identity::Keypair::generate_ed25519();
    let swarm = interlink_net::build_swarm(key, &config)?;
    let node = Node::spawn(swarm, config, Role::Observer)?;
    let handle = node.handle();
    let mut events = handle.events();

    let snapshot = |handle: Handle| {
        let petnames = petnames.clone();
        let network = network.clone();
        let reader = reader.clone();
        async move {
            let mut roster = handle.roster().await?;
            if let Some(reader) = &reader {
                reader
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .fill(&mut roster);
            }
            let diagnostics = handle.diagnostics().await?;
            anyhow::Ok(report::build(
                &network,
                clock.now_ms(),
                &roster,
                &diagnostics,
                &petnames,
                own.as_ref(),
            ))
        }
    };
    let result = async {
        let _ = writeln!(progress, "peers: joining overlay {network} as an observer…");
        wait_for_roster(&handle, &mut events, options.wait, &alone, progress).await?;
        let first = snapshot(handle.clone()).await?;
        print(out, &first, options.json)?;
        if options.watch {
            watch(&handle, &mut events, first, out, options.json, &snapshot).await?;
        }
        anyhow::Ok(())
    }
    .await;
    node.shutdown().await;
    result
}

/// Waits until the roster is non-empty and quiet for [`QUIET`], or `wait` passes,
/// reporting progress whenever the counts change.
async fn wait_for_roster(
    handle: &Handle,
    events: &mut tokio::sync::broadcast::Receiver<Event>,
    wait: Duration,
    alone: &str,
    progress: &mut impl Write,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let deadline = tokio::time::Instant::now() + wait;
    let mut last_change = Instant::now();
    let mut shown = (usize::MAX, usize::MAX);
    loop {
        let sessions: usize = handle
            .roster()
            .await?
            .iter()
            .map(|i| i.sessions.len())
            .sum();
        let connected = handle.diagnostics().await?.connected.len();
        if (connected, sessions) != shown {
            shown = (connected, sessions);
            let _ = writeln!(
                progress,
                "peers: {:.1}s: {connected} peer(s) connected, {sessions} session(s) seen",
                start.elapsed().as_secs_f64()
            );
        }
        if sessions > 0 && last_change.elapsed() >= QUIET {
            return Ok(());
        }
        let tick = tokio::time::Instant::now() + Duration::from_millis(100);
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => {
                if sessions == 0 {
                    let _ = writeln!(progress, "peers: no sessions seen within {wait:?}");
                    if connected == 0 {
                        let _ = writeln!(progress, "peers: {alone}");
                    }
                }
                return Ok(());
            }
            ev = events.recv() => match ev {
                Ok(Event::RosterChanged | Event::PeerConnected(_)) | Err(RecvError::Lagged(_)) => {
                    last_change = Instant::now();
                }
                Ok(_) => {}
                Err(RecvError::Closed) => anyhow::bail!("the observer node stopped"),
            },
            () = tokio::time::sleep_until(tick) => {}
        }
    }
}

/// Prints again whenever the roster changes (and when a session's presence changes,
/// which the node does not announce as an event), until Ctrl-C.
async fn watch<F, Fut>(
    handle: &Handle,
    events: &mut tokio::sync::broadcast::Receiver<Event>,
    first: Report,
    out: &mut impl Write,
    json: bool,
    snapshot: &F,
) -> anyhow::Result<()>
where
    F: Fn(Handle) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Report>>,
{
    let mut stop =
        crate::stop_signal::StopSignals::install().context("installing the signal handlers")?;
    let mut shown = first.presence_signature();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let changed = tokio::select! {
            _ = stop.recv() => return Ok(()),
            ev = events.recv() => match ev {
                Ok(Event::RosterChanged) | Err(RecvError::Lagged(_)) => true,
                Ok(_) => false,
                Err(RecvError::Closed) => anyhow::bail!("the observer node stopped"),
            },
            _ = tick.tick() => false,
        };
        if changed {
            // Gather a burst of changes into one print.
            tokio::time::sleep(WATCH_DEBOUNCE).await;
            while !events.is_empty() {
                let _ = events.try_recv();
            }
        }
        let report = snapshot(handle.clone()).await?;
        let signature = report.presence_signature();
        if changed || signature != shown {
            shown = signature;
            if !json {
                writeln!(out, "\n---")?;
            }
            print(out, &report, json)?;
        }
    }
}

fn print(out: &mut impl Write, report: &Report, json: bool) -> anyhow::Result<()> {
    if json {
        serde_json::to_writer(&mut *out, report)?;
        writeln!(out)?;
    } else {
        out.write_all(render::render(report).as_bytes())?;
    }
    out.flush().context("writing the report")
}

/// Petnames from `peers.json` in `home`; none when the file is absent. A file that
/// cannot be read is reported on `progress` and ignored: this is a debugging view.
pub fn read_petnames(home: &Home, progress: &mut impl Write) -> PeerPolicy {
    let path = home.peers();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return PeerPolicy::new(),
        Err(e) => {
            let _ = writeln!(progress, "peers: ignoring {}: {e}", path.display());
            return PeerPolicy::new();
        }
    };
    serde_json::from_str(&text).unwrap_or_else(|e| {
        let _ = writeln!(progress, "peers: ignoring {}: {e}", path.display());
        PeerPolicy::new()
    })
}

/// Join the overlay as an observer and show the sessions and network state; or,
/// with --session, what a running session of this user sees of its network.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  interlink-p2p peers\n  interlink-p2p peers --watch\n  interlink-p2p peers --json --bootstrap /ip4/192.168.1.5/tcp/4001\n  interlink-p2p peers --session reviewer"
)]
pub struct Args {
    /// Print one JSON object (one per line with --watch); shape in docs/CLI.md.
    #[arg(long)]
    json: bool,
    /// Show this running session's own connections (direct or relayed, transport,
    /// round trip), NAT status and external addresses, from the view it keeps
    /// current in its session directory.
    #[arg(long, value_name = "ID", conflicts_with = "watch")]
    session: Option<String>,
    /// Keep running and print again on every change, until Ctrl-C.
    #[arg(long)]
    watch: bool,
    /// Longest wait for the roster before printing, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 3.0)]
    wait: f64,
    #[command(flatten)]
    net: crate::config::NetArgs,
}

/// `interlink-p2p peers`.
pub fn command(args: Args, ctx: &crate::Ctx) -> anyhow::Result<std::process::ExitCode> {
    if let Some(session) = args.session {
        // Runs no node: only the clock of the configuration.
        let clock = crate::config::clock(ctx.env()).map_err(|e| ctx.settings.explain(e.into()))?;
        session_view(
            &ctx.home()?,
            &session,
            args.json,
            clock,
            &mut std::io::stdout(),
        )?;
    } else {
        let config = args.net.config(&ctx.settings)?;
        let options = Options {
            json: args.json,
            watch: args.watch,
            wait: crate::ctx::seconds("--wait", args.wait)?,
        };
        crate::ctx::runtime()?.block_on(peers(
            ctx.home_if_any(),
            config,
            options,
            &mut std::io::stdout(),
            &mut std::io::stderr(),
        ))?;
    }
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
#[path = "peers_tests.rs"]
mod tests;
