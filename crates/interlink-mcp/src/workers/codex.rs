//! The Codex hand-over worker: for every verified message that reaches the inbox of a
//! session bound to a Codex thread, queue a notice into the thread
//! ([`crate::codex::queue`]), and retry the saved failures when due. How far the inbox
//! was handed over is kept in `codex.json`, saved per message, so a restart does not
//! queue a notice twice.

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
    codex::{CodexConfig, Failure, load_failures, ms, notice, queue_with_retries, retry_delay},
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
