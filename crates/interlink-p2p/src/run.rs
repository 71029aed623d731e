//! `interlink-p2p run`: a headless session (a node that announces itself, no MCP).
//!
//! Its stdout is a small machine-readable contract: once the node listens, each listen
//! address as a full multiaddr ending in `/p2p/<peer id>`, one per line, then `ready`,
//! then nothing more. Logs go to stderr. SIGTERM or SIGINT shuts it down cleanly: the
//! goodbye is published, so peers drop the session at once, and the exit code is 0.
//!
//! The session takes messages from its peers: delivered ones are appended to its inbox
//! (`<home>/sessions/<session id>/inbox.jsonl`), and the peers policy follows
//! `peers.json` while it runs. Start-up is shared with the MCP server
//! ([`interlink_mcp::cli::session`]).

use std::io::Write;

use anyhow::Context as _;
use interlink_core::wire::{DeliveryMode, HostKind};
use interlink_mcp::cli::session::{
    Describe, follow_policy, session_spec, start_node, wait_listening,
};
use interlink_net::{Config, Delivery};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::{paths::Home, policy};

/// Runs a headless session until SIGTERM or SIGINT. Writes the listen addresses and
/// `ready` to `out`.
///
/// The session takes messages: its inbox is `<home>/sessions/<session id>/`, and its
/// peers policy is `<home>/peers.json`, re-read whenever the file changes.
pub async fn run(
    home: &Home,
    mut config: Config,
    args: Args,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    // Handlers first: a SIGTERM that arrives right after `ready` must reach us, not
    // the default action (which would skip the goodbye).
    let mut stop =
        crate::stop_signal::StopSignals::install().context("installing the signal handlers")?;

    let (session, source) = interlink_mcp::cli::resolve_session(
        args.session.as_deref(),
        |k| std::env::var(k).ok(),
        &mut crate::os_rng(),
    )?;
    info!(%session, ?source, "session id");
    // Read the policy before the node exists: a malformed file stops the session
    // rather than letting it run with a policy nobody wrote.
    let watcher = policy::Watcher::new(home);
    let session_dir = home.session(&session)?;
    // One process per session id and home; held until this function returns.
    let _lock = session_dir.claim("run", config.clock.now_ms())?;
    config.delivery = Delivery {
        inbox_dir: Some(session_dir.path().to_owned()),
        policy: policy::load(home)?,
        pins_file: Some(home.pins()),
        address_book: Some(home.addresses()),
    };
    let describe = Describe {
        summary: args.summary,
        cwd: std::env::current_dir().context("reading the current directory")?,
        host: HostKind::Other,
        delivery: DeliveryMode::Poll,
    };
    let spec = session_spec(home, session, describe)?;
    let node = start_node(spec, &config)?;
    let handle = node.handle();

    let addrs = match wait_listening(&handle, &config.listen).await {
        Ok(addrs) => addrs,
        Err(e) => {
            node.shutdown().await;
            return Err(e.into());
        }
    };
    let peer = handle.peer_id();
    let mut lines = String::new();
    for addr in addrs {
        lines.push_str(&format!("{}\n", interlink_net::dialable(&addr, peer)));
    }
    lines.push_str("ready\n");
    if let Err(e) = out.write_all(lines.as_bytes()).and_then(|()| out.flush()) {
        node.shutdown().await;
        return Err(e).context("writing the listen addresses");
    }

    let cancel = CancellationToken::new();
    let network = tokio::spawn(interlink_mcp::cli::network_view::keep_written(
        handle.clone(),
        home.clone(),
        session_dir.clone(),
        config.clock,
        cancel.clone(),
    ));
    tokio::select! {
        signal = stop.recv() => info!("{signal}: shutting down"),
        // Returns only if the node stopped on its own.
        () = follow_policy(watcher, handle, cancel.clone()) => {}
    }
    cancel.cancel();
    let _ = network.await;
    node.shutdown().await;
    Ok(())
}

/// Run a headless session (no MCP) until SIGTERM or Ctrl-C.
///
/// Prints each listen address as a full multiaddr ending in /p2p/<peer id>, one per
/// line, then `ready`; logs go to stderr.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  interlink-p2p run --session build-bot\n  interlink-p2p run --session lab --listen /ip4/0.0.0.0/tcp/4001 --no-mdns"
)]
pub struct Args {
    /// Session id [default: $INTERLINK_SESSION, else $CLAUDE_CODE_SESSION_ID, else random]
    #[arg(long)]
    session: Option<String>,
    /// What this session is doing, as announced to peers.
    #[arg(long, default_value = "", hide_default_value = true)]
    summary: String,
    #[command(flatten)]
    net: crate::config::NetArgs,
}

/// `interlink-p2p run`.
pub fn command(args: Args, ctx: &crate::Ctx) -> anyhow::Result<std::process::ExitCode> {
    let config = args.net.config(&ctx.settings)?;
    let home = ctx.home()?;
    crate::ctx::runtime()?.block_on(run(&home, config, args, &mut std::io::stdout()))?;
    Ok(std::process::ExitCode::SUCCESS)
}
