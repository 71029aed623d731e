//! The sent-log saver: writes `sent.json` ([`crate::sent_log`]) a moment after it
//! changed, so sending stays cheap (no file write per message), and once more at
//! shutdown.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::{context::SharedState, paths::SessionDir, sent_log::SentLog};

/// How soon after a change the sent-messages log is saved.
pub(crate) const SENT_FLUSH: Duration = Duration::from_millis(500);

/// Saves the sent-messages log in `state` to `dir` a moment after it changed and once
/// more when `cancel` fires.
pub(crate) async fn flush(state: SharedState, dir: SessionDir, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(SENT_FLUSH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let stop = tokio::select! {
            () = cancel.cancelled() => true,
            _ = tick.tick() => false,
        };
        // Encode under the lock, write outside it and off the runtime's thread (the
        // session runs on one): a send never waits for an fsync.
        let snapshot = state.lock().sent.take_snapshot();
        let Some(bytes) = snapshot else {
            if stop {
                return;
            }
            continue;
        };
        let to = dir.clone();
        let written = tokio::task::spawn_blocking(move || SentLog::write(&to, &bytes))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        if let Err(e) = written {
            warn!("saving the sent-messages log: {e}");
            state.lock().sent.mark_dirty();
        }
        if stop {
            return;
        }
    }
}

#[cfg(test)]
#[path = "sent_log_tests.rs"]
mod tests;
