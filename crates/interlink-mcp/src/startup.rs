//! Starting the session behind the MCP server, once its id is known.
//!
//! When that is depends on the host ([`StartAt`]):
//! - an id pinned by `--session` / `INTERLINK_SESSION`, or given by Claude Code
//!   (`CLAUDE_CODE_SESSION_ID`): at once;
//! - `--host codex` without a pinned id: at `bind_codex_session(thread_id)`, under the
//!   thread id — until then the session neither announces nor polls;
//! - otherwise: at `initialize`, where the client's name tells whether the host is
//!   Codex (then as above) or not (then under the random id).
//!
//! Starting binds the session ([`Context::bind`]), starts the node in the background
//! and the workers that follow it (`crate::workers::spawn`). What starting needs is
//! kept in the context's shared state (`crate::context::Starter`) until then.

use std::sync::Arc;

use interlink_core::{SessionId, wire::HostKind};
use interlink_net::{Config, Delivery, SessionSpec};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    context::{Context, NodeStatus, Ready, StartAt, Starter, ToolError},
    paths::Home,
    policy,
    session_node::{self as session, Describe},
};

/// Called at `initialize` with the client's name.
pub(crate) fn on_initialize(ctx: &Arc<Context>, client: &str) {
    let at = ctx.shared().starter.as_ref().map(|s| s.at);
    if at != Some(StartAt::Initialize) {
        return;
    }
    if client.to_ascii_lowercase().contains("codex") {
        info!(client, "Codex host: waiting for bind_codex_session");
        let mut shared = ctx.shared();
        shared.host = HostKind::Codex;
        if let Some(s) = shared.starter.as_mut() {
            s.at = StartAt::Bind;
        }
        return;
    }
    if let Err(e) = start(ctx, None) {
        warn!("starting the session: {}", e.0);
    }
}

/// Starts the session: under `thread` (a Codex thread id) when given and the id is
/// not pinned, else under the id chosen at launch. Does nothing if it has started.
pub(crate) fn start(ctx: &Arc<Context>, thread: Option<&str>) -> Result<(), ToolError> {
    let Some(starter) = ctx.shared().starter.take() else {
        return Ok(());
    };
    let session = match (starter.at, thread) {
        (StartAt::Bind, Some(t)) => SessionId::new(t).map_err(|e| ToolError(e.to_string()))?,
        _ => starter.session.clone(),
    };
    let result = start_with(ctx, starter, session);
    if let Err(e) = &result {
        warn!("the session did not start: {}", e.0);
    }
    result
}

fn start_with(ctx: &Arc<Context>, starter: Starter, session: SessionId) -> Result<(), ToolError> {
    let fail = |e: String| {
        let _ = starter.status.send(NodeStatus::Failed(e.clone()));
        ToolError(e)
    };
    let session_dir = ctx
        .home
        .session(&session)
        .map_err(|e| fail(e.to_string()))?;
    // Claimed before anything is bound: a session that another process runs stays
    // unstarted here, and every tool says who holds it.
    {
        let mut shared = ctx.shared();
        if shared.tasks.lock.is_none() {
            shared.tasks.lock = Some(session_dir.claim("mcp").map_err(|e| fail(e.to_string()))?);
        }
    }
    let summary = ctx.shared().summary.clone();
    let spec = session::session_spec(
        &ctx.home,
        session.clone(),
        Describe {
            summary,
            cwd: starter.cwd.clone(),
            host: ctx.host(),
            delivery: ctx.delivery(),
        },
    )
    .map_err(|e| fail(e.to_string()))?;
    // Ended sessions of this home that went idle past retention, with nothing unread,
    // leave now (off the runtime's thread: it walks directories).
    {
        let (home, keep) = (ctx.home.clone(), session.clone());
        tokio::task::spawn_blocking(move || {
            crate::retention::sweep(&home, &keep, std::time::SystemTime::now())
        });
    }
    ctx.bind(session, session_dir.clone());
    let _ = starter.status.send(NodeStatus::Starting);
    let mut config = starter.config;
    config.delivery.inbox_dir = Some(session_dir.path().to_owned());
    let node = tokio::spawn(run_node(
        ctx.home.clone(),
        spec,
        config,
        starter.status,
        starter.node_cancel,
    ));
    let flusher = crate::workers::spawn(ctx, starter.receipts, &starter.workers_cancel);
    let mut shared = ctx.shared();
    shared.tasks.node = Some(node);
    shared.tasks.flusher = Some(flusher);
    Ok(())
}

/// Starts the node, publishes its status, follows peers.json, and shuts the node down
/// (goodbye first) when `cancel` fires.
async fn run_node(
    home: Home,
    spec: SessionSpec,
    mut config: Config,
    status: watch::Sender<NodeStatus>,
    cancel: CancellationToken,
) {
    let fail = |e: String| {
        warn!("node failed to start: {e}");
        let _ = status.send(NodeStatus::Failed(e));
    };
    // Read the policy before the node exists: a malformed file stops the node rather
    // than letting it run with a policy nobody wrote.
    let watcher = policy::Watcher::new(&home);
    let policy = match policy::load(&home) {
        Ok(p) => p,
        Err(e) => return fail(e.to_string()),
    };
    config.delivery = Delivery {
        inbox_dir: config.delivery.inbox_dir.take(),
        policy,
        pins_file: Some(home.pins()),
    };
    let mut node = match session::start_node(spec, &config) {
        Ok(n) => n,
        Err(e) => return fail(e.to_string()),
    };
    let handle = node.handle();
    let early_events = node.take_events();
    let listening = tokio::select! {
        () = cancel.cancelled() => None,
        r = session::wait_listening(&handle, &config.listen) => Some(r),
    };
    match listening {
        None => {}
        Some(Err(e)) => fail(e.to_string()),
        Some(Ok(addrs)) => {
            let peer = handle.peer_id();
            let listen = addrs
                .into_iter()
                .map(|a| interlink_net::dialable(&a, peer))
                .collect();
            let _ = status.send(NodeStatus::Ready(Arc::new(Ready {
                handle: handle.clone(),
                listen,
                early_events: std::sync::Mutex::new(early_events),
                since: std::time::Instant::now(),
            })));
            session::follow_policy(watcher, handle, cancel.clone()).await;
        }
    }
    node.shutdown().await;
}
