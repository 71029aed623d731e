//! The background workers of a started session, each a task that runs until the
//! workers' cancellation token fires (or the node stops):
//!
//! - [`follow`]: the inbox's lines for the agent side — knocks, pair acceptances,
//!   receipts, goodbyes — and the knocks held for the operator;
//! - [`receipts`]: sends the read and hand-over receipts the tools queue;
//! - [`sent_log`]: saves the sent-messages log;
//! - [`codex`]: hands each new message to the bound Codex thread (Codex hosts only);
//! - [`channel`]: pushes each message as a channel notification (channel mode; started
//!   by [`crate::serve`] once the MCP peer exists);
//! - [`host_inbox`]: writes each message into the agent host's own inbox socket
//!   (under a Claude Code that has one);
//! - [`claims`]: puts the saved claims back on the network, keeps the project's board
//!   written for the hooks and the guard, and tells the agent of new conflicts.
//!
//! Each takes only what it uses of the session — its [`crate::paths::SessionDir`], the
//! node's status, the receipt queue, a [`crate::context::SharedState`] handle — in an
//! argument struct built from the [`Context`] ([`follow::Follow::of`],
//! [`codex::Codex::of`], [`channel::Channel::of`]), never the context itself. `spawn`
//! starts the first four when the session starts ([`crate::startup`]).

use std::sync::Arc;

use interlink_core::wire::HostKind;
use tokio::{sync::mpsc, task::JoinHandle};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::context::{Context, ReadReceipt};

pub(crate) mod channel;
pub(crate) mod claims;
pub(crate) mod codex;
pub(crate) mod follow;
pub(crate) mod host_inbox;
pub(crate) mod receipts;
pub(crate) mod sent_log;

/// Starts the receipts worker, which serves every session the process binds: it sends
/// through whichever node is ready.
pub(crate) fn spawn_receipts(
    ctx: &Arc<Context>,
    receipts: mpsc::Receiver<ReadReceipt>,
    cancel: &CancellationToken,
) {
    tokio::spawn(receipts::run(ctx.node.clone(), receipts, cancel.clone()));
}

/// Starts the workers of the session bound in `ctx`; returns the sent-log saver,
/// which shutdown and a rebind await (the others just stop). Each worker gets only
/// its part of the context, taken here.
pub(crate) fn spawn(ctx: &Arc<Context>, cancel: &CancellationToken) -> JoinHandle<()> {
    // The session is bound before its workers start ([`crate::startup`]); were it
    // not, say so rather than start them on no directory.
    let Some(bound) = ctx.bound.get() else {
        warn!("the session's workers did not start: the session is not bound");
        return tokio::spawn(async {});
    };
    tokio::spawn(follow::follow(
        follow::Follow::of(ctx, &bound),
        cancel.clone(),
    ));
    tokio::spawn(claims::keep(
        claims::ClaimsWorker::of(ctx, &bound),
        cancel.clone(),
    ));
    if let Some(w) = host_inbox::HostInboxWorker::of(ctx, &bound) {
        tokio::spawn(host_inbox::forward(w, cancel.clone()));
    }
    if ctx.host() == HostKind::Codex {
        tokio::spawn(codex::deliver(
            codex::Codex::of(ctx, &bound),
            cancel.clone(),
        ));
    }
    tokio::spawn(sent_log::flush(
        ctx.shared_state(),
        bound.session_dir.clone(),
        cancel.clone(),
    ))
}
