//! `interlink-p2p mcp`: the MCP server of one agent session, on stdio
//! ([`interlink_mcp::serve_stdio`]).
//!
//! The session id is resolved like `run`'s (`--session`, `INTERLINK_SESSION`,
//! `CLAUDE_CODE_SESSION_ID`, random); the working directory and its git root label are
//! announced automatically. `INTERLINK_CHANNELS=1` turns channel mode on. Stdout carries
//! only JSON-RPC; SIGTERM, SIGINT or the end of stdin shut the session down (goodbye
//! first) within a second.

use std::path::PathBuf;

use anyhow::Context as _;
use interlink_core::{
    session::{self, SessionSource},
    wire::HostKind,
};
use interlink_mcp::Options;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing::info;

/// Environment variable turning channel mode on (`1`).
pub const ENV_CHANNELS: &str = "INTERLINK_CHANNELS";

/// Runs the server until stdin closes or a signal arrives.
pub async fn run(
    home: PathBuf,
    session: Option<String>,
    summary: String,
    config: interlink_net::Config,
) -> anyhow::Result<()> {
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let (session, source) = session::resolve(
        session.as_deref(),
        |k| std::env::var(k).ok(),
        &mut crate::os_rng(),
    )?;
    info!(%session, ?source, "session id");
    let channels = std::env::var(ENV_CHANNELS).is_ok_and(|v| v.trim() == "1");
    let options = Options {
        home,
        session,
        summary,
        cwd: std::env::current_dir().context("reading the current directory")?,
        host: match source {
            SessionSource::ClaudeEnv => HostKind::Claude,
            _ => HostKind::Other,
        },
        channels,
        name: interlink_mcp::pairing::own_name(|k| std::env::var(k).ok()),
        config,
    };
    let shutdown = CancellationToken::new();
    let signals = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => info!("SIGTERM: shutting down"),
                _ = int.recv() => info!("SIGINT: shutting down"),
            }
            shutdown.cancel();
        })
    };
    let result = interlink_mcp::serve_stdio(options, shutdown).await;
    signals.abort();
    Ok(result?)
}
