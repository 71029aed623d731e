//! The Codex hand-over worker: for every verified message that reaches the inbox of a
//! session bound to a Codex thread, queue a notice into the thread
//! ([`crate::codex::queue`]), and retry the saved failures when due. How far the inbox
//! was handed over is kept in `codex.json`, saved per message, so a restart does not
//! queue a notice twice. Retrying one saved failure (`Context::retry_failure`) is
//! also what the `failed_deliveries` tool does on `retry`.

use std::{path::Path, sync::Arc, time::Duration};

use interlink_core::{IdentityKey, wire::EnvelopeKind};
use interlink_net::{
    Event,
    inbox::{INBOX_FILE, read_positioned_from},
};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    codex::{
        CodexConfig, FAILURES_FILE, Failure, MAX_FAILURES, load_failures, ms, notice, queue,
        queue_with_retries, retry_delay, save_failures,
    },
    context::{Context, ReadReceipt},
    files::write_atomically,
    policy, render,
};

/// File name of the hand-over position in the session's directory.
pub const POSITION_FILE: &str = "codex.json";
/// How often saved failures are checked for a due retry.
const RETRY_TICK: Duration = Duration::from_secs(1);

fn load_position(dir: &Path) -> u64 {
    std::fs::read(dir.join(POSITION_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["offset"].as_u64())
        .unwrap_or(0)
}

fn save_position(dir: &Path, offset: u64) {
    let bytes = serde_json::json!({ "offset": offset }).to_string();
    if let Err(e) = write_atomically(&dir.join(POSITION_FILE), bytes.as_bytes()) {
        warn!("saving {POSITION_FILE}: {e}");
    }
}

/// Hands every new message of the inbox to the bound Codex thread, and retries saved
/// failures when due, until `cancel` fires or the node stops.
pub async fn deliver(ctx: Arc<Context>, cfg: CodexConfig, cancel: CancellationToken) {
    let ready = tokio::select! {
        () = cancel.cancelled() => return,
        r = ctx.running() => match r { Some(r) => r, None => return },
    };
    let Ok(dir) = ctx.session_dir() else {
        return;
    };
    let mut events = ready.handle.events();
    let mut offset = load_position(&dir);
    let mut tick = tokio::time::interval(RETRY_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if let Some(thread) = ctx.thread() {
            offset = hand_over(&ctx, &cfg, &dir, &thread, offset).await;
            retry_due(&ctx, &cfg, &dir).await;
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = tick.tick() => {}
            ev = events.recv() => match ev {
                Ok(Event::Delivered { .. }) | Err(RecvError::Lagged(_)) => {}
                Ok(_) => {}
                Err(RecvError::Closed) => return,
            },
        }
    }
}

/// Queues a notice for each message after `offset`; returns the new offset.
async fn hand_over(ctx: &Context, cfg: &CodexConfig, dir: &Path, thread: &str, offset: u64) -> u64 {
    let (entries, end) = match read_positioned_from(&dir.join(INBOX_FILE), offset) {
        Ok(r) => r,
        Err(e) => {
            warn!("codex delivery: {e}");
            return offset;
        }
    };
    if entries.is_empty() {
        return end;
    }
    let policy = policy::load(&ctx.home).unwrap_or_default();
    for (e, line_end) in entries {
        if e.kind != EnvelopeKind::Message {
            continue;
        }
        let name = e
            .sender
            .parse::<IdentityKey>()
            .ok()
            .and_then(|k| render::petname(&policy, &ctx.key(), &k));
        let text = notice(&e, name.as_deref());
        match queue_with_retries(cfg, thread, &text).await {
            Ok(()) => {
                info!(msg_id = %e.msg_id, "notice queued into the Codex thread");
                ctx.queue_read_receipts(ReadReceipt::host_queued(&e));
            }
            Err(err) => {
                warn!(msg_id = %e.msg_id, "codex delivery failed, saved for retry: {err}");
                let now = interlink_net::now_ms();
                ctx.save_failure(
                    dir,
                    Failure {
                        id: e.msg_id.clone(),
                        thread: thread.to_owned(),
                        sender: e.sender_fingerprint.clone(),
                        notice: text,
                        attempts: cfg.attempts,
                        last_error: err,
                        failed_at: now,
                        next_retry_at: now + ms(retry_delay(cfg, 1)),
                        reply_to: Some(e.reply_to.clone()),
                    },
                )
                .await;
            }
        }
        // Saved per message: a restart does not queue a notice twice.
        save_position(dir, line_end);
    }
    end
}

async fn retry_due(ctx: &Context, cfg: &CodexConfig, dir: &Path) {
    let now = interlink_net::now_ms();
    let due: Vec<String> = load_failures(dir)
        .into_iter()
        .filter(|f| f.next_retry_at <= now)
        .map(|f| f.id)
        .collect();
    for id in due {
        if let Some(Ok(())) = ctx.retry_failure(cfg, dir, &id).await {
            info!(id, "saved codex delivery succeeded on retry");
        }
    }
}

impl Context {
    /// Runs one saved failure now: removes it on success, else counts the run and
    /// schedules the next. Returns the outcome.
    pub(crate) async fn retry_failure(
        &self,
        cfg: &CodexConfig,
        dir: &Path,
        id: &str,
    ) -> Option<Result<(), String>> {
        let _guard = self.codex_lock.lock().await;
        let failure = load_failures(dir).into_iter().find(|f| f.id == id)?;
        let outcome = queue(cfg, &failure.thread, &failure.notice).await;
        if outcome.is_ok() {
            self.queue_read_receipts(failure_receipt(&failure));
        }
        let mut all = load_failures(dir);
        match &outcome {
            Ok(()) => all.retain(|f| f.id != id),
            Err(e) => {
                if let Some(f) = all.iter_mut().find(|f| f.id == id) {
                    f.attempts = f.attempts.saturating_add(1);
                    f.last_error.clone_from(e);
                    let n = f.attempts.saturating_sub(cfg.attempts);
                    f.next_retry_at = interlink_net::now_ms() + ms(retry_delay(cfg, n.max(1)));
                }
            }
        }
        if let Err(e) = save_failures(dir, &all) {
            warn!("saving {FAILURES_FILE}: {e}");
        }
        Some(outcome)
    }

    /// Saves a failed notice, replacing one with its id; the oldest go beyond
    /// [`MAX_FAILURES`].
    pub(crate) async fn save_failure(&self, dir: &Path, failure: Failure) {
        let _guard = self.codex_lock.lock().await;
        let mut all = load_failures(dir);
        all.retain(|f| f.id != failure.id);
        all.push(failure);
        let excess = all.len().saturating_sub(MAX_FAILURES);
        all.drain(..excess);
        if let Err(e) = save_failures(dir, &all) {
            warn!("saving {FAILURES_FILE}: {e}");
        }
    }
}

/// The hand-over receipt for a saved failure that went through on a retry.
fn failure_receipt(f: &Failure) -> Option<ReadReceipt> {
    let (key, session) = f.reply_to.as_deref()?.split_once('#')?;
    Some(ReadReceipt {
        to: interlink_core::wire::SessionAddr {
            key: key.parse().ok()?,
            session: interlink_core::SessionId::new(session).ok()?,
        },
        msg_id: f.id.parse().ok()?,
        kind: EnvelopeKind::HostQueued,
    })
}
