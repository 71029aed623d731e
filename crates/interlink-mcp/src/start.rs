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
//! Starting binds the session ([`crate::server::Bound`]), starts the node in the
//! background and the workers that follow it: the inbox follower ([`crate::follow`]),
//! the read-receipt sender ([`crate::receipts`]), the sent-log saver, and for Codex the
//! thread delivery ([`crate::codex`]).

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use interlink_core::{SessionId, wire::HostKind};
use interlink_net::{Config, Delivery, SessionSpec};
use tokio::{sync::watch, task::JoinHandle};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    paths, policy,
    receipts::ReadReceipt,
    sent::SentLog,
    server::{Bound, Context, NodeStatus, Ready, ToolError},
    session::{self, Describe},
};

/// How soon after a change the sent-messages log is saved.
pub const SENT_FLUSH: Duration = Duration::from_millis(500);

/// When the session starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartAt {
    /// At once.
    Now,
    /// At `initialize`, once the client's name tells the host.
    Initialize,
    /// At `bind_codex_session`.
    Bind,
}

/// What starting the session needs, kept until it starts.
#[derive(Debug)]
pub(crate) struct Starter {
    pub(crate) at: StartAt,
    /// The id to start under unless bound to a Codex thread.
    pub(crate) session: SessionId,
    pub(crate) cwd: PathBuf,
    pub(crate) config: Config,
    pub(crate) status: watch::Sender<NodeStatus>,
    pub(crate) receipts: tokio::sync::mpsc::Receiver<ReadReceipt>,
    /// Stops the node (after the workers).
    pub(crate) node_cancel: CancellationToken,
    /// Stops the workers.
    pub(crate) workers_cancel: CancellationToken,
    /// Where the tasks started go, for shutdown.
    pub(crate) tasks: Arc<Mutex<Tasks>>,
}

/// The background tasks of a started session, awaited at shutdown.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    /// This process's claim on the session (one process per session id and home),
    /// held until the process ends.
    pub(crate) lock: Option<interlink_net::SessionLock>,
    pub(crate) node: Option<JoinHandle<()>>,
    pub(crate) flusher: Option<JoinHandle<()>>,
}

/// Called at `initialize` with the client's name.
pub(crate) fn on_initialize(ctx: &Arc<Context>, client: &str) {
    let at = match ctx.starter.lock() {
        Ok(s) => s.as_ref().map(|s| s.at),
        Err(_) => None,
    };
    if at != Some(StartAt::Initialize) {
        return;
    }
    if client.to_ascii_lowercase().contains("codex") {
        info!(client, "Codex host: waiting for bind_codex_session");
        if let Ok(mut h) = ctx.host.lock() {
            *h = HostKind::Codex;
        }
        if let Ok(mut s) = ctx.starter.lock()
            && let Some(s) = s.as_mut()
        {
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
    let Some(starter) = ctx.starter.lock().ok().and_then(|mut s| s.take()) else {
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
    let session_dir = paths::session_dir(&ctx.home, &session).map_err(|e| fail(e.to_string()))?;
    // Claimed before anything is bound: a session that another process runs stays
    // unstarted here, and every tool says who holds it.
    {
        let mut tasks = starter
            .tasks
            .lock()
            .map_err(|_| fail("task list poisoned".into()))?;
        if tasks.lock.is_none() {
            tasks.lock = Some(
                interlink_net::SessionLock::acquire(&session_dir, "mcp", interlink_net::now_ms())
                    .map_err(|e| fail(e.to_string()))?,
            );
        }
    }
    let summary = ctx.summary.lock().map(|s| s.clone()).unwrap_or_default();
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
    let bound = Bound {
        own: interlink_core::wire::SessionAddr {
            key: ctx.key(),
            session,
        },
        session_dir: session_dir.clone(),
    };
    let _ = ctx.bound.set(bound);
    if let Ok(mut log) = ctx.sent.lock() {
        *log = SentLog::load(&session_dir);
    }
    let _ = starter.status.send(NodeStatus::Starting);
    let mut config = starter.config;
    config.delivery.inbox_dir = Some(session_dir.clone());
    let node = tokio::spawn(run_node(
        ctx.home.clone(),
        spec,
        config,
        starter.status,
        starter.node_cancel,
    ));
    let cancel = starter.workers_cancel;
    tokio::spawn(crate::follow::follow(
        ctx.clone(),
        session_dir,
        cancel.clone(),
    ));
    tokio::spawn(crate::receipts::run(
        ctx.clone(),
        starter.receipts,
        cancel.clone(),
    ));
    if ctx.host() == HostKind::Codex {
        tokio::spawn(crate::codex::deliver(
            ctx.clone(),
            ctx.codex.clone(),
            cancel.clone(),
        ));
    }
    let flusher = tokio::spawn(flush_sent_log(ctx.clone(), cancel));
    if let Ok(mut tasks) = starter.tasks.lock() {
        tasks.node = Some(node);
        tasks.flusher = Some(flusher);
    }
    Ok(())
}

/// Saves the sent-messages log a moment after it changed (sending stays cheap: no
/// file write per message) and once more when `cancel` fires.
async fn flush_sent_log(ctx: Arc<Context>, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(SENT_FLUSH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let stop = tokio::select! {
            () = cancel.cancelled() => true,
            _ = tick.tick() => false,
        };
        // Encode under the lock, write outside it and off the runtime's thread (the
        // session runs on one): a send never waits for an fsync.
        let snapshot = ctx.sent.lock().ok().and_then(|mut l| l.take_snapshot());
        let (Some(bytes), Ok(dir)) = (snapshot, ctx.session_dir()) else {
            if stop {
                return;
            }
            continue;
        };
        let written = tokio::task::spawn_blocking(move || SentLog::write(&dir, &bytes))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        if let Err(e) = written {
            warn!("saving the sent-messages log: {e}");
            if let Ok(mut log) = ctx.sent.lock() {
                log.mark_dirty();
            }
        }
        if stop {
            return;
        }
    }
}

/// Starts the node, publishes its status, follows peers.json, and shuts the node down
/// (goodbye first) when `cancel` fires.
async fn run_node(
    home: PathBuf,
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
        pins_file: Some(home.join(interlink_net::pins::PINS_FILE)),
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
