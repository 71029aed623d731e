//! `interlink-p2p mcp`: the MCP server of one agent session, on stdio
//! ([`interlink_mcp::cli::serve_stdio`]).
//!
//! The session id is resolved like `run`'s (`--session`, `INTERLINK_SESSION`,
//! `CLAUDE_CODE_SESSION_ID`, random), except that a Codex-hosted server (`--host codex`,
//! or a client named Codex at `initialize`) without a pinned id starts its session
//! only when `bind_codex_session` names the thread; the working directory and its git root label are
//! announced automatically. `INTERLINK_CHANNELS=1` turns channel mode on; otherwise,
//! under a Claude Code that exports its inbox socket, messages are written there
//! ([`interlink_mcp::cli::HostInbox`]; `INTERLINK_HOST_INBOX=0` turns that off). Stdout carries
//! only JSON-RPC; SIGTERM, SIGINT or the end of stdin shut the session down (goodbye
//! first) within a second.

use std::{path::PathBuf, time::Duration};

use anyhow::Context as _;
use interlink_core::wire::HostKind;
use interlink_mcp::cli::{CodexConfig, Options, SessionSource, resolve_session};
use tokio_util::sync::CancellationToken;
use tracing::info;

/// Environment variable turning channel mode on (`1`).
pub const ENV_CHANNELS: &str = interlink_store::env::CHANNELS;
/// Environment variable naming the `codex` executable (else `codex` on `PATH`).
pub const ENV_CODEX_BIN: &str = "INTERLINK_CODEX_BIN";
/// `1` lets the agent accept pair requests and add peers itself (unattended setups):
/// otherwise `accept_pair` and `add_peer` ask the human through MCP elicitation, or
/// change nothing and name the operator's command.
pub const ENV_AGENT_PAIRING: &str = "INTERLINK_AGENT_PAIRING";
/// Test only: how long a `codex queue` run may take, in milliseconds.
pub const ENV_TEST_CODEX_TIMEOUT_MS: &str = "INTERLINK_TEST_CODEX_TIMEOUT_MS";
/// Test only: the first wait after a failed Codex hand-over, in milliseconds.
pub const ENV_TEST_CODEX_BACKOFF_MS: &str = "INTERLINK_TEST_CODEX_BACKOFF_MS";
/// Test only: how often saved Codex failures are retried, in milliseconds.
pub const ENV_TEST_CODEX_RETRY_MS: &str = "INTERLINK_TEST_CODEX_RETRY_MS";
/// Test only: the longest wait between Codex retries, in milliseconds.
pub const ENV_TEST_CODEX_RETRY_CAP_MS: &str = "INTERLINK_TEST_CODEX_RETRY_CAP_MS";

/// Delivery into Codex: the executable from [`ENV_CODEX_BIN`]; tests shorten the
/// timings with the `ENV_TEST_CODEX_*` variables.
pub fn codex_config(env: impl Fn(&str) -> Option<String>) -> CodexConfig {
    let mut cfg = CodexConfig::default();
    if let Some(bin) = env(ENV_CODEX_BIN).filter(|b| !b.trim().is_empty()) {
        cfg.bin = PathBuf::from(bin);
    }
    let ms = |k: &str| {
        env(k)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_millis)
    };
    if let Some(d) = ms(ENV_TEST_CODEX_TIMEOUT_MS) {
        cfg.attempt_timeout = d;
    }
    if let Some(d) = ms(ENV_TEST_CODEX_BACKOFF_MS) {
        cfg.backoff = d;
    }
    if let Some(d) = ms(ENV_TEST_CODEX_RETRY_MS) {
        cfg.retry_base = d;
    }
    if let Some(d) = ms(ENV_TEST_CODEX_RETRY_CAP_MS) {
        cfg.retry_cap = d;
    }
    cfg
}

/// Parses `--host`: `claude`, `codex` or `other`.
pub fn parse_host(text: &str) -> Result<HostKind, String> {
    match text.trim() {
        "claude" => Ok(HostKind::Claude),
        "codex" => Ok(HostKind::Codex),
        "other" => Ok(HostKind::Other),
        _ => Err(format!("{text:?}: expected claude, codex or other")),
    }
}

/// Runs the server until stdin closes or a signal arrives.
pub async fn run(
    home: interlink_store::paths::Home,
    session: Option<String>,
    summary: String,
    host: Option<HostKind>,
    config: interlink_net::Config,
    name: String,
) -> anyhow::Result<()> {
    let mut stop =
        crate::stop_signal::StopSignals::install().context("installing the signal handlers")?;
    let (session, source) = resolve_session(
        session.as_deref(),
        |k| std::env::var(k).ok(),
        &mut crate::os_rng(),
    )?;
    info!(%session, ?source, "session id");
    let channels = std::env::var(ENV_CHANNELS).is_ok_and(|v| v.trim() == "1");
    // Claude Code's own inbox socket, when it exported one that answers now (channel
    // mode, an explicit choice, keeps channels).
    let host_inbox = match interlink_mcp::cli::HostInbox::from_env(|k| std::env::var(k).ok()) {
        Some(mut inbox) if !channels => {
            if inbox.probe().await {
                info!(socket = %inbox.socket().display(), "delivering through the agent host's inbox socket");
                Some(inbox)
            } else {
                info!(socket = %inbox.socket().display(), "the agent host's inbox socket does not answer: Stop hook only");
                None
            }
        }
        _ => None,
    };
    let options = Options {
        home,
        session,
        summary,
        cwd: std::env::current_dir().context("reading the current directory")?,
        source,
        host: host.or(match source {
            SessionSource::ClaudeEnv => Some(HostKind::Claude),
            _ => None,
        }),
        channels,
        agent_pairing: std::env::var(ENV_AGENT_PAIRING).is_ok_and(|v| v.trim() == "1"),
        name,
        codex: codex_config(|k| std::env::var(k).ok()),
        host_inbox,
        config,
    };
    let shutdown = CancellationToken::new();
    let signals = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let signal = stop.recv().await;
            info!("{signal}: shutting down");
            shutdown.cancel();
        })
    };
    let result = interlink_mcp::cli::serve_stdio(options, shutdown).await;
    signals.abort();
    Ok(result?)
}

/// Serve MCP on stdio for one agent session (started by Claude Code or Codex).
///
/// Stdout carries only JSON-RPC; logs go to stderr. INTERLINK_CHANNELS=1 pushes each
/// message as a notifications/claude/channel notification. Stdin closing, SIGTERM
/// or SIGINT end the session (goodbye first).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  claude mcp add --scope user interlink -- interlink-p2p mcp   (or: interlink-p2p install claude)\n  interlink-p2p mcp --session reviewer --summary \"reviewing the parser\""
)]
pub struct Args {
    /// Session id [default: $INTERLINK_SESSION, else $CLAUDE_CODE_SESSION_ID, else random]
    #[arg(long)]
    session: Option<String>,
    /// The agent host: claude, codex or other [default: claude with
    /// $CLAUDE_CODE_SESSION_ID, else from the client's name at initialize]. A Codex
    /// server without --session/INTERLINK_SESSION waits for bind_codex_session.
    #[arg(long, value_name = "HOST", value_parser = parse_host)]
    host: Option<HostKind>,
    /// What this session is doing, as announced to peers.
    #[arg(long, default_value = "", hide_default_value = true)]
    summary: String,
    #[command(flatten)]
    net: crate::config::NetArgs,
}

/// `interlink-p2p mcp`.
pub fn command(args: Args, ctx: &crate::Ctx) -> anyhow::Result<std::process::ExitCode> {
    let config = args.net.config(&ctx.settings)?;
    let home = ctx.home()?;
    let rt = crate::ctx::session_runtime()?;
    let result = rt.block_on(run(
        home,
        args.session,
        args.summary,
        args.host,
        config,
        ctx.own_name(),
    ));
    // The stdin reader is a blocking read that only ends with stdin: after a
    // SIGTERM, waiting for it would keep the process alive.
    rt.shutdown_background();
    result?;
    Ok(std::process::ExitCode::SUCCESS)
}
