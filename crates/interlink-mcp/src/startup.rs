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

use std::{sync::Arc, time::Duration};

use interlink_core::{SessionId, wire::HostKind};
use interlink_net::{Config, Delivery, SessionSpec};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    context::{Context, NodeStatus, Ready, Restart, StartAt, Starter, ToolError},
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
        (StartAt::Bind, Some(t)) => SessionId::new(t)
            .and_then(crate::serve::agent_session)
            .map_err(|e| ToolError(e.to_string()))?,
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
            shared.tasks.lock = Some(
                session_dir
                    .claim("mcp", ctx.clock.now_ms())
                    .map_err(|e| fail(e.to_string()))?,
            );
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
        let (home, keep, clock) = (ctx.home.clone(), session.clone(), ctx.clock);
        tokio::task::spawn_blocking(move || {
            crate::retention::sweep(&home, &keep, std::time::SystemTime::now(), clock)
        });
    }
    ctx.bind(session, session_dir.clone());
    let _ = starter.status.send(NodeStatus::Starting);
    let mut config = starter.config.clone();
    config.delivery.inbox_dir = Some(session_dir.path().to_owned());
    // This session's node and workers stop with the process, or alone at a rebind.
    let node_cancel = starter.node_cancel.child_token();
    let workers_cancel = starter.workers_cancel.child_token();
    let node = tokio::spawn(run_node(
        ctx.home.clone(),
        spec,
        config,
        starter.status.clone(),
        node_cancel.clone(),
    ));
    if let Some(receipts) = starter.receipts {
        crate::workers::spawn_receipts(ctx, receipts, &starter.workers_cancel);
    }
    let flusher = crate::workers::spawn(ctx, &workers_cancel);
    let mut shared = ctx.shared();
    shared.tasks.node = Some(node);
    shared.tasks.flusher = Some(flusher);
    shared.tasks.node_cancel = Some(node_cancel);
    shared.tasks.workers_cancel = Some(workers_cancel);
    shared.tasks.restart = Some(Restart {
        cwd: starter.cwd,
        config: starter.config,
        status: starter.status,
        node_cancel: starter.node_cancel,
        workers_cancel: starter.workers_cancel,
    });
    Ok(())
}

/// How long stopping one session for another may take (its sent log saved, its node's
/// goodbye published).
const STOP_BUDGET: std::time::Duration = std::time::Duration::from_millis(900);

/// Moves the server to session `to` — the host started another conversation in the
/// same process (Claude Code's `/clear`, or a resume) — or, with `None`, stops the
/// bound session (the host ended its conversation). The session running until now
/// says goodbye (to its sticky peers, then on the overlay) and keeps its directory, so
/// its mail waits for it and a resume reopens it; the new one starts as at launch,
/// fetching its own mailbox. Returns whether anything changed.
pub(crate) async fn rebind(ctx: &Arc<Context>, to: Option<SessionId>) -> Result<bool, ToolError> {
    let current = ctx.bound.get().map(|b| b.own.session);
    if current == to {
        return Ok(false);
    }
    // Not started yet: start under the host's id right away.
    let pending = ctx.shared().starter.take();
    if let Some(starter) = pending {
        let Some(session) = to else {
            ctx.shared().starter = Some(starter);
            return Ok(false);
        };
        start_with(ctx, starter, session)?;
        return Ok(true);
    }
    if current.is_some() {
        stop_bound(ctx).await;
    }
    let Some(session) = to else {
        return Ok(true);
    };
    let starter = {
        let shared = ctx.shared();
        let Some(r) = shared.tasks.restart.as_ref() else {
            return Err(ToolError(
                "the session cannot be restarted: it never started".into(),
            ));
        };
        Starter {
            at: StartAt::Now,
            session: session.clone(),
            cwd: r.cwd.clone(),
            config: r.config.clone(),
            status: r.status.clone(),
            receipts: None,
            node_cancel: r.node_cancel.clone(),
            workers_cancel: r.workers_cancel.clone(),
        }
    };
    start_with(ctx, starter, session)?;
    Ok(true)
}

/// Stops the bound session: goodbyes, then its workers (the sent log saved), then
/// its node; releases its lock and unbinds.
async fn stop_bound(ctx: &Arc<Context>) {
    if let Some(bound) = ctx.bound.get() {
        info!(session = %bound.own.session, "the host left this conversation: stopping its session");
    }
    say_goodbye(ctx).await;
    let (workers, flusher, node_cancel, node) = {
        let mut shared = ctx.shared();
        (
            shared.tasks.workers_cancel.take(),
            shared.tasks.flusher.take(),
            shared.tasks.node_cancel.take(),
            shared.tasks.node.take(),
        )
    };
    if let Some(w) = workers {
        w.cancel();
    }
    if let Some(f) = flusher {
        let _ = tokio::time::timeout(STOP_BUDGET / 3, f).await;
    }
    if let Some(n) = node_cancel {
        n.cancel();
    }
    if let Some(n) = node
        && tokio::time::timeout(STOP_BUDGET, n).await.is_err()
    {
        warn!("the node did not stop within {STOP_BUDGET:?}");
    }
    ctx.unbind();
    let mut shared = ctx.shared();
    shared.tasks.lock = None;
    if let Some(r) = shared.tasks.restart.as_ref() {
        let _ = r.status.send(NodeStatus::Unbound);
    }
}

/// Starts the node, publishes its status, follows peers.json, and shuts the node down
/// (goodbye first) when `cancel` fires.
async fn run_node(
    home: Home,
    spec: SessionSpec,
    mut config: Config,
    status: Arc<watch::Sender<NodeStatus>>,
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
    let session_dir = config
        .delivery
        .inbox_dir
        .as_deref()
        .map(interlink_store::paths::SessionDir::at);
    config.delivery = Delivery {
        inbox_dir: config.delivery.inbox_dir.take(),
        policy,
        pins_file: Some(home.pins()),
        address_book: Some(home.addresses()),
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
            let network = session_dir.map(|dir| {
                tokio::spawn(crate::network_view::keep_written(
                    handle.clone(),
                    home.clone(),
                    dir,
                    config.clock,
                    cancel.clone(),
                ))
            });
            session::follow_policy(watcher, handle, cancel.clone()).await;
            if let Some(task) = network {
                task.abort();
            }
        }
    }
    node.shutdown().await;
}

/// Most sticky peers told that this session closed.
const MAX_GOODBYES: usize = 16;
/// How long the goodbyes to sticky peers may take at shutdown.
const GOODBYE_BUDGET: Duration = Duration::from_millis(300);

/// Tells the peers that last wrote to this session (its sticky peers) that it closed,
/// with a signed `goodbye` envelope each — best effort, within [`GOODBYE_BUDGET`], so
/// an idle peer learns it before its next send. (The node's goodbye on the presence
/// topic follows.)
pub(crate) async fn say_goodbye(ctx: &Context) {
    let ready = match &*ctx.node.borrow() {
        NodeStatus::Ready(r) => r.clone(),
        _ => return,
    };
    let targets = ctx.shared().routes.sticky(MAX_GOODBYES);
    if targets.is_empty() {
        return;
    }
    let mut sends = tokio::task::JoinSet::new();
    for (key, session) in targets {
        let handle = ready.handle.clone();
        sends.spawn(async move {
            let msg = interlink_net::OutgoingMessage {
                to: interlink_core::wire::SessionAddr { key, session },
                kind: interlink_core::wire::EnvelopeKind::Goodbye,
                text: None,
                task_id: None,
                status: None,
                in_reply_to: None,
                also_about: Vec::new(),
                name: None,
                group: None,
                invite: None,
            };
            let _ = handle.send(msg).await;
        });
    }
    if tokio::time::timeout(GOODBYE_BUDGET, sends.join_all())
        .await
        .is_err()
    {
        info!("goodbyes to sticky peers did not all finish in time");
    }
}
