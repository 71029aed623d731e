//! Running the MCP server of one session over stdio, with its node in the background.
//!
//! The order matters for the agent host: the server answers `initialize` at once
//! while the node starts (tools wait for it, bounded by [`crate::server::NODE_WAIT`]);
//! stdout carries only JSON-RPC (the caller sends logs to stderr). When stdin closes or
//! the caller's shutdown token fires (SIGTERM), the background work stops, the node
//! publishes its goodbye, and [`serve_stdio`] returns — within [`SHUTDOWN_BUDGET`].

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use interlink_core::{
    SessionId,
    wire::{DeliveryMode, HostKind, SessionAddr},
};
use interlink_net::{Config, Delivery, SessionSpec};
use libp2p::multiaddr::Protocol;
use rmcp::ServiceExt as _;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    paths::{self, SessionDirError},
    policy,
    routes::Routes,
    sent::SentLog,
    server::{Context, NodeStatus, Ready, Server},
    session::{self, Describe, StartError},
};

/// How soon after a change the sent-messages log is saved.
pub const SENT_FLUSH: Duration = Duration::from_millis(500);

/// Longest time from a shutdown request to [`serve_stdio`] returning.
pub const SHUTDOWN_BUDGET: Duration = Duration::from_millis(900);

/// What the session is and how it runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Home directory (identity, peers.json, sessions/).
    pub home: PathBuf,
    /// The session id (resolved by the caller: flag, environment, random).
    pub session: SessionId,
    /// Initial summary.
    pub summary: String,
    /// Working directory announced.
    pub cwd: PathBuf,
    /// Agent host.
    pub host: HostKind,
    /// Channel mode: push messages as `notifications/claude/channel`.
    pub channels: bool,
    /// The name this user suggests for itself when pairing
    /// ([`crate::pairing::own_name`]).
    pub name: String,
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
    /// The MCP handshake failed (or the client went away before it).
    #[error("MCP handshake failed: {0}")]
    Handshake(String),
}

/// Serves MCP on stdin/stdout until stdin closes or `shutdown` fires.
pub async fn serve_stdio(options: Options, shutdown: CancellationToken) -> Result<(), ServeError> {
    let delivery = if options.channels {
        DeliveryMode::Channel
    } else {
        DeliveryMode::Inbox
    };
    let session_dir = paths::session_dir(&options.home, &options.session)?;
    let spec = session::session_spec(
        &options.home,
        options.session.clone(),
        Describe {
            summary: options.summary.clone(),
            cwd: options.cwd.clone(),
            host: options.host,
            delivery,
        },
    )?;
    let own = SessionAddr {
        key: spec.identity.public(),
        session: options.session.clone(),
    };
    let (status_tx, status_rx) = watch::channel(NodeStatus::Starting);
    let (receipts_tx, receipts_rx) = tokio::sync::mpsc::channel(crate::receipts::RECEIPT_QUEUE);
    let ctx = Arc::new(Context {
        home: options.home.clone(),
        session_dir: session_dir.clone(),
        own,
        cwd: spec.cwd.clone(),
        git_label: spec.git_label.clone(),
        summary: Mutex::new(options.summary.clone()),
        host: options.host,
        delivery,
        node: status_rx,
        routes: Mutex::new(Routes::default()),
        read_lock: tokio::sync::Mutex::new(()),
        name: options.name.clone(),
        sent: Mutex::new(SentLog::load(&session_dir)),
        receipts: receipts_tx,
    });

    let node_cancel = CancellationToken::new();
    let mut config = options.config;
    config.delivery.inbox_dir = Some(session_dir);
    let node_task = tokio::spawn(run_node(
        options.home.clone(),
        spec,
        config,
        status_tx,
        node_cancel.clone(),
    ));

    let service_ct = shutdown.child_token();
    let served = Server::new(ctx.clone())
        .serve_with_ct(rmcp::transport::stdio(), service_ct)
        .await;
    let channel_cancel = CancellationToken::new();
    tokio::spawn(crate::follow::follow(
        ctx.clone(),
        ctx.session_dir.clone(),
        channel_cancel.clone(),
    ));
    tokio::spawn(crate::receipts::run(
        ctx.clone(),
        receipts_rx,
        channel_cancel.clone(),
    ));
    let flusher = tokio::spawn(flush_sent_log(ctx.clone(), channel_cancel.clone()));
    let result = match served {
        Ok(service) => {
            if options.channels {
                tokio::spawn(crate::channel::forward(
                    ctx.clone(),
                    service.peer().clone(),
                    channel_cancel.clone(),
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
    channel_cancel.cancel();
    let _ = flusher.await;
    node_cancel.cancel();
    if tokio::time::timeout(SHUTDOWN_BUDGET, node_task)
        .await
        .is_err()
    {
        warn!("the node did not stop within {SHUTDOWN_BUDGET:?}");
    }
    result
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
        // Encode under the lock, write outside it: a send never waits for an fsync.
        let snapshot = ctx.sent.lock().ok().and_then(|mut l| l.take_snapshot());
        if let (Some(bytes), Ok(dir)) = (snapshot, ctx.session_dir())
            && let Err(e) = SentLog::write(&dir, &bytes)
        {
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
    };
    let node = match session::start_node(spec, &config) {
        Ok(n) => n,
        Err(e) => return fail(e.to_string()),
    };
    let handle = node.handle();
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
                .map(|a| a.with(Protocol::P2p(peer)))
                .collect();
            let _ = status.send(NodeStatus::Ready(Arc::new(Ready {
                handle: handle.clone(),
                listen,
            })));
            session::follow_policy(watcher, handle, cancel.clone()).await;
        }
    }
    node.shutdown().await;
}
