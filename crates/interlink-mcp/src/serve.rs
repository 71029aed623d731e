//! Running the MCP server of one session over stdio, with its node in the background.
//!
//! The order matters for the agent host: the server answers `initialize` at once
//! while the node starts (tools wait for it, bounded by [`crate::context::NODE_WAIT`]);
//! stdout carries only JSON-RPC (the caller sends logs to stderr). When the session
//! starts is decided by [`crate::startup`]. When stdin closes or the caller's shutdown
//! token fires (SIGTERM), the background work stops, the node publishes its goodbye,
//! and [`serve_stdio`] returns — within [`SHUTDOWN_BUDGET`].

use std::{path::PathBuf, sync::Arc, time::Duration};

use interlink_core::{SessionId, session::SessionIdError, wire::HostKind};
use interlink_net::Config;
use interlink_store::env;
use rand_core::CryptoRng;
use rmcp::ServiceExt as _;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    codex::CodexConfig,
    context::{Context, NodeStatus, RECEIPT_QUEUE, Settings, StartAt, Starter},
    paths::{Home, SessionDirError},
    server::Server,
    session_node::{self as session, StartError},
    startup,
};

/// Longest time from a shutdown request to [`serve_stdio`] returning.
pub(crate) const SHUTDOWN_BUDGET: Duration = Duration::from_millis(900);

/// What the session is and how it runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Home directory (identity, peers.json, sessions/).
    pub home: Home,
    /// The session id (resolved by the caller: flag, environment, random).
    pub session: SessionId,
    /// Where the id came from: a pinned or host-given id starts the session at once.
    pub source: SessionSource,
    /// Initial summary.
    pub summary: String,
    /// Working directory announced.
    pub cwd: PathBuf,
    /// Agent host, if known at launch (`--host`, or Claude Code's environment);
    /// `None`: learnt from the client's name at `initialize`.
    pub host: Option<HostKind>,
    /// Channel mode: push messages as `notifications/claude/channel`.
    pub channels: bool,
    /// The agent may accept pair requests and add peers without asking the human
    /// (`INTERLINK_AGENT_PAIRING=1`, for unattended setups; [`crate::consent`]).
    pub agent_pairing: bool,
    /// The name this user suggests for itself when pairing
    /// ([`crate::pairing::own_name`]).
    pub name: String,
    /// Delivery into a Codex thread.
    pub codex: CodexConfig,
    /// The agent host's inbox socket, if it has one that answers
    /// ([`crate::host_inbox::HostInbox::from_env`], probed): messages are written there.
    pub host_inbox: Option<crate::host_inbox::HostInbox>,
    /// Node configuration (its `delivery` is filled here).
    pub config: Config,
}

/// The server could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The session id names no state directory.
    #[error(transparent)]
    SessionDir(#[from] SessionDirError),
    /// The session cannot be announced (identity, summary, cwd).
    #[error(transparent)]
    Start(#[from] StartError),
    /// Another process runs this session (same id and home).
    #[error(transparent)]
    Locked(#[from] interlink_store::SessionLockError),
    /// The MCP handshake failed (or the client went away before it).
    #[error("MCP handshake failed: {0}")]
    Handshake(String),
}

/// Where a resolved session id came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionSource {
    /// The `--session` flag.
    Flag,
    /// `INTERLINK_SESSION`.
    InterlinkEnv,
    /// `CLAUDE_CODE_SESSION_ID`.
    ClaudeEnv,
    /// Generated at random.
    Random,
}

impl SessionSource {
    /// True when the id was pinned by the user or the host, so it survives restarts.
    pub fn is_pinned(self) -> bool {
        !matches!(self, SessionSource::Random)
    }
}

/// Resolves this session's id: `flag`, then `INTERLINK_SESSION`, then
/// `CLAUDE_CODE_SESSION_ID` (read through `env`; Claude Code injects it, and it is
/// stable across the server restarts Claude performs within one session), else random.
/// Empty variables count as unset; a set but invalid value is an error rather than a
/// silent fallback, so a typo never detaches a session from its mailbox.
pub fn resolve_session(
    flag: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
    rng: &mut impl CryptoRng,
) -> Result<(SessionId, SessionSource), SessionIdError> {
    if let Some(f) = flag {
        return Ok((agent_session(SessionId::new(f)?)?, SessionSource::Flag));
    }
    for (var, source) in [
        (env::SESSION, SessionSource::InterlinkEnv),
        (env::CLAUDE_SESSION, SessionSource::ClaudeEnv),
    ] {
        match env(var) {
            Some(v) if !v.trim().is_empty() => {
                let id = SessionId::new(v.trim())
                    .and_then(agent_session)
                    .map_err(|e| SessionIdError::InvalidEnv {
                        var,
                        source: Box::new(e),
                    })?;
                return Ok((id, source));
            }
            _ => {}
        }
    }
    Ok((SessionId::random(rng), SessionSource::Random))
}

/// An agent session's id, never one of the ids the user's own page writes from
/// ([`crate::render::USER_SESSION_PREFIX`]): what arrives from those is shown to agents
/// as their user's words.
pub(crate) fn agent_session(id: SessionId) -> Result<SessionId, SessionIdError> {
    if id.as_str().starts_with(crate::render::USER_SESSION_PREFIX) {
        return Err(SessionIdError::Reserved(id.as_str().to_owned()));
    }
    Ok(id)
}

/// When a session with these options starts ([`crate::startup`]).
pub(crate) fn start_at(source: SessionSource, host: Option<HostKind>) -> StartAt {
    let pinned = matches!(source, SessionSource::Flag | SessionSource::InterlinkEnv);
    match (host, source) {
        (Some(HostKind::Codex), _) if !pinned => StartAt::Bind,
        (_, SessionSource::Random) if host.is_none() => StartAt::Initialize,
        _ => StartAt::Now,
    }
}

/// Serves MCP on stdin/stdout until stdin closes or `shutdown` fires.
pub async fn serve_stdio(options: Options, shutdown: CancellationToken) -> Result<(), ServeError> {
    // Checked now, so a bad id or summary fails at launch rather than at start.
    let session_dir = options.home.session(&options.session)?;
    session::check_summary(&options.summary)?;
    let (identity, _) =
        session::load_identity(&options.home).map_err(|source| StartError::Identity {
            path: options.home.identity(),
            source,
        })?;
    let at = start_at(options.source, options.host);
    let host = match (options.host, at) {
        (Some(h), _) => h,
        (None, StartAt::Bind) => HostKind::Codex,
        (None, _) => HostKind::Other,
    };
    let clock = options.config.clock;
    let (status_tx, status_rx) = watch::channel(NodeStatus::Unbound);
    let (receipts_tx, receipts_rx) = tokio::sync::mpsc::channel(RECEIPT_QUEUE);
    let node_cancel = CancellationToken::new();
    let workers_cancel = CancellationToken::new();
    // A session that starts now is claimed now: a second process under the same id and
    // home exits here, naming the first, before it touches the inbox or the overlay.
    let lock = match at {
        StartAt::Now => Some(session_dir.claim("mcp", clock.now_ms())?),
        StartAt::Initialize | StartAt::Bind => None,
    };
    let starter = Starter {
        at,
        session: options.session.clone(),
        cwd: options.cwd.clone(),
        config: options.config,
        status: Arc::new(status_tx),
        receipts: Some(receipts_rx),
        node_cancel: node_cancel.clone(),
        workers_cancel: workers_cancel.clone(),
    };
    let ctx = Arc::new(Context::new(
        Settings {
            home: options.home.clone(),
            identity: identity.public(),
            cwd: options.cwd.to_string_lossy().into_owned(),
            git_label: session::git_label(&options.cwd),
            summary: options.summary.clone(),
            host,
            channels: options.channels,
            agent_pairing: options.agent_pairing,
            name: options.name.clone(),
            codex: options.codex,
            host_inbox: options.host_inbox,
            clock,
        },
        status_rx,
        receipts_tx,
    ));
    {
        let mut shared = ctx.shared();
        shared.tasks.lock = lock;
        shared.starter = Some(starter);
        shared.pinned = matches!(
            options.source,
            SessionSource::Flag | SessionSource::InterlinkEnv
        );
    }
    if at == StartAt::Now
        && let Err(e) = startup::start(&ctx, None)
    {
        warn!("the session did not start: {}", e.0);
    }

    let service_ct = shutdown.child_token();
    let served = Server::new(ctx.clone())
        .serve_with_ct(
            {
                let (input, output) = crate::stdio::stdio();
                crate::jsonrpc_lines::LineTransport::new(input, output)
            },
            service_ct,
        )
        .await;
    let result = match served {
        Ok(service) => {
            if options.channels {
                tokio::spawn(crate::workers::channel::forward(
                    crate::workers::channel::Channel::of(&ctx),
                    service.peer().clone(),
                    workers_cancel.clone(),
                ));
            }
            match service.waiting().await {
                Ok(reason) => info!(?reason, "MCP service ended"),
                Err(e) => warn!("MCP service task failed: {e}"),
            }
            Ok(())
        }
        Err(e) if shutdown.is_cancelled() => {
            info!("shut down before the MCP handshake: {e}");
            Ok(())
        }
        Err(e) => Err(ServeError::Handshake(e.to_string())),
    };
    // The presence goodbye first: it is what takes the session off every roster, and
    // a host that closes stdin may kill the process soon after. The goodbyes to
    // sticky peers, the flusher and the node's own shutdown follow.
    leave_rosters(&ctx).await;
    crate::startup::say_goodbye(&ctx).await;
    workers_cancel.cancel();
    let (node_task, flusher) = {
        let mut shared = ctx.shared();
        (shared.tasks.node.take(), shared.tasks.flusher.take())
    };
    if let Some(f) = flusher {
        let _ = tokio::time::timeout(SHUTDOWN_BUDGET / 3, f).await;
    }
    node_cancel.cancel();
    if let Some(node_task) = node_task
        && tokio::time::timeout(SHUTDOWN_BUDGET, node_task)
            .await
            .is_err()
    {
        warn!("the node did not stop within {SHUTDOWN_BUDGET:?}");
    }
    // A host's health check (initialize, maybe tools/list, then exit: no tool called)
    // leaves no session directory behind if it kept nothing; the lock goes with it.
    // A session that was used keeps its directory.
    let health_check = ctx.tool_calls.load(std::sync::atomic::Ordering::Relaxed) == 0;
    if health_check && let Ok(dir) = ctx.session_dir() {
        match dir.remove_if_unused() {
            Ok(true) => info!(dir = %dir.path().display(), "removed the unused session directory"),
            Ok(false) => {}
            Err(e) => warn!("checking the session directory for removal: {e}"),
        }
    }
    drop(ctx.shared().tasks.lock.take());
    result
}

/// How long asking the node for its goodbye may take at shutdown (it only queues it).
const LEAVE_BUDGET: Duration = Duration::from_millis(100);

/// Has the node publish this session's goodbye on the presence topic now, ahead of
/// the rest of the shutdown ([`interlink_net::Handle::say_goodbye`]).
async fn leave_rosters(ctx: &Context) {
    let ready = match &*ctx.node.borrow() {
        NodeStatus::Ready(r) => r.clone(),
        _ => return,
    };
    match tokio::time::timeout(LEAVE_BUDGET, ready.handle.say_goodbye()).await {
        Ok(Ok(true)) => info!("goodbye published"),
        Ok(Ok(false)) => info!("no goodbye published (no peer subscribed)"),
        Ok(Err(e)) => warn!("goodbye not published: {e}"),
        Err(_) => warn!("the node did not publish the goodbye within {LEAVE_BUDGET:?}"),
    }
}

#[cfg(test)]
#[path = "serve_tests.rs"]
mod tests;
