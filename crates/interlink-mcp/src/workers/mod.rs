//! The background workers of a started session, each a task that runs until the
//! workers' cancellation token fires (or the node stops):
//!
//! - [`follow`]: the inbox's lines for the agent side — knocks, pair acceptances,
//!   receipts, goodbyes — and the knocks held for the operator;
//! - [`receipts`]: sends the read and hand-over receipts the tools queue (it needs
//!   only the node);
//! - [`sent_log`]: saves the sent-messages log;
//! - [`codex`]: hands each new message to the bound Codex thread (Codex hosts only);
//! - [`channel`]: pushes each message as a channel notification (channel mode; started
//!   by [`crate::serve`] once the MCP peer exists).
//!
//! `spawn` starts the first four when the session starts ([`crate::startup`]).

use std::{path::PathBuf, sync::Arc};

use interlink_core::wire::HostKind;
use tokio::{sync::mpsc, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use crate::context::{Context, ReadReceipt};

pub mod channel;
pub mod codex;
pub mod follow;
pub mod receipts;
pub mod sent_log;

/// Starts the workers of the session bound in `ctx`, whose state is in `session_dir`,
/// with the receipt queue `receipts`; returns the sent-log saver, which shutdown
/// awaits (the others just stop).
pub(crate) fn spawn(
    ctx: &Arc<Context>,
    session_dir: PathBuf,
    receipts: mpsc::Receiver<ReadReceipt>,
    cancel: &CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(follow::follow(ctx.clone(), session_dir, cancel.clone()));
    tokio::spawn(receipts::run(ctx.node.clone(), receipts, cancel.clone()));
    if ctx.host() == HostKind::Codex {
        tokio::spawn(codex::deliver(
            ctx.clone(),
            ctx.codex.clone(),
            cancel.clone(),
        ));
    }
    tokio::spawn(sent_log::flush(ctx.clone(), cancel.clone()))
}
