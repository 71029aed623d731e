//! The Codex hand-over worker: for every verified message that reaches the inbox of a
//! session bound to a Codex thread, queue a notice into the thread
//! ([`crate::codex::queue`]), and retry the saved failures when due. How far the inbox
//! was handed over is kept in `codex.json`, saved per message, so a restart does not
//! queue a notice twice. Retrying one saved failure ([`Failures::retry`]) is
//! also what the `failed_deliveries` tool does on `retry`.

use std::{sync::Arc, time::Duration};

use interlink_core::{IdentityKey, wire::EnvelopeKind};
use interlink_net::Event;
use interlink_store::inbox::read_positioned_from;
use tokio::sync::{broadcast::error::RecvError, watch};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    codex::{
        CodexConfig, Failure, MAX_FAILURES, load_failures, ms, notice, queue, queue_with_retries,
        retry_delay, save_failures,
    },
    context::{Bound, Context, NodeStatus, ReadReceipt, ReceiptQueue, SharedState, running},
    files::write_atomically,
    paths::{CODEX_FAILURES_FILE as FAILURES_FILE, CODEX_POSITION_FILE, Home, SessionDir},
    policy, render,
};

/// How often saved failures are checked for a due retry.
const RETRY_TICK: Duration = Duration::from_secs(1);

fn load_position(dir: &SessionDir) -> u64 {
    std::fs::read(dir.codex_position())
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["offset"].as_u64())
        .unwrap_or(0)
}

fn save_position(dir: &SessionDir, offset: u64) {
    let bytes = serde_json::json!({ "offset": offset }).to_string();
    if let Err(e) = write_atomically(&dir.codex_position(), bytes.as_bytes()) {
        warn!("saving {CODEX_POSITION_FILE}: {e}");
    }
}

/// What the hand-over worker uses of the session, and nothing else.
#[derive(Clone, Debug)]
pub(crate) struct Codex {
    /// How notices are queued into Codex.
    pub cfg: CodexConfig,
    /// The home (the peers policy names the senders).
    pub home: Home,
    /// This user's key (its own messages are labelled `self`).
    pub key: IdentityKey,
    /// The node's status.
    pub node: watch::Receiver<NodeStatus>,
    /// The shared state, read for the bound Codex thread only.
    pub state: SharedState,
    /// The saved failures (in the session's directory, beside the inbox).
    pub failures: Failures,
}

impl Codex {
    /// The hand-over worker's part of `ctx`, bound to the session `bound`.
    pub(crate) fn of(ctx: &Context, bound: &Bound) -> Self {
        Self {
            cfg: ctx.codex.clone(),
            home: ctx.home.clone(),
            key: ctx.key(),
            node: ctx.node.clone(),
            state: ctx.shared_state(),
            failures: ctx.codex_failures(bound.session_dir.clone()),
        }
    }

    fn dir(&self) -> &SessionDir {
        &self.failures.dir
    }
}

/// Hands every new message of the inbox to the bound Codex thread, and retries saved
/// failures when due, until `cancel` fires or the node stops.
pub(crate) async fn deliver(w: Codex, cancel: CancellationToken) {
    let ready = tokio::select! {
        () = cancel.cancelled() => return,
        r = running(&w.node) => match r { Some(r) => r, None => return },
    };
    let mut events = ready.handle.events();
    let mut offset = load_position(w.dir());
    let mut tick = tokio::time::interval(RETRY_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let thread = w.state.lock().codex_thread.clone();
        if let Some(thread) = thread {
            offset = hand_over(&w, &thread, offset).await;
            retry_due(&w).await;
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = tick.tick() => {}
            ev = events.recv() => match ev {
                Ok(Event::Delivered { .. }) | Err(RecvError::Lagged(_)) => {
                    crate::context::after_the_network().await;
                }
                Ok(_) => {}
                Err(RecvError::Closed) => return,
            },
        }
    }
}

/// Queues a notice for each message after `offset`; returns the new offset.
async fn hand_over(w: &Codex, thread: &str, offset: u64) -> u64 {
    let (cfg, dir) = (&w.cfg, w.dir());
    let (entries, end) = match read_positioned_from(&dir.inbox(), offset) {
        Ok(r) => r,
        Err(e) => {
            warn!("codex delivery: {e}");
            return offset;
        }
    };
    if entries.is_empty() {
        return end;
    }
    let policy = policy::load(&w.home).unwrap_or_default();
    for (e, line_end) in entries {
        if e.kind != EnvelopeKind::Message {
            continue;
        }
        let name = render::petname_of(&policy, &w.key, &e.sender);
        let text = notice(&e, name.as_deref());
        match queue_with_retries(cfg, thread, &text).await {
            Ok(()) => {
                info!(msg_id = %e.msg_id, "notice queued into the Codex thread");
                w.failures.receipts.queue(ReadReceipt::host_queued(&e));
            }
            Err(err) => {
                warn!(msg_id = %e.msg_id, "codex delivery failed, saved for retry: {err}");
                let now = w.failures.clock.now_ms();
                w.failures
                    .save(Failure {
                        id: e.msg_id.clone(),
                        thread: thread.to_owned(),
                        sender: e.sender_fingerprint.clone(),
                        notice: text,
                        attempts: cfg.attempts,
                        last_error: err,
                        failed_at: now,
                        next_retry_at: now + ms(retry_delay(cfg, 1)),
                        reply_to: Some(e.reply_to.clone()),
                    })
                    .await;
            }
        }
        // Saved per message: a restart does not queue a notice twice.
        save_position(dir, line_end);
    }
    end
}

async fn retry_due(w: &Codex) {
    let now = w.failures.clock.now_ms();
    let due: Vec<String> = load_failures(w.dir())
        .into_iter()
        .filter(|f| f.next_retry_at <= now)
        .map(|f| f.id)
        .collect();
    for id in due {
        if let Some(Ok(())) = w.failures.retry(&w.cfg, &id).await {
            info!(id, "saved codex delivery succeeded on retry");
        }
    }
}

impl Context {
    /// The saved Codex delivery failures of the session in `dir`, under this context's
    /// lock over their changes.
    pub(crate) fn codex_failures(&self, dir: SessionDir) -> Failures {
        Failures {
            dir,
            lock: self.codex_lock.clone(),
            receipts: self.receipts.clone(),
            clock: self.clock,
        }
    }
}

/// A session's saved Codex delivery failures, and the one lock every change to them
/// takes (the worker's retries and the `failed_deliveries` tool share it).
#[derive(Clone, Debug)]
pub(crate) struct Failures {
    /// The session's directory, where the failures are saved.
    pub dir: SessionDir,
    lock: Arc<tokio::sync::Mutex<()>>,
    /// Where a notice that went through queues its hand-over receipt.
    receipts: ReceiptQueue,
    /// The session's clock, for the failures' times.
    clock: interlink_net::Clock,
}

impl Failures {
    /// Runs one saved failure now: removes it on success, else counts the run and
    /// schedules the next. Returns the outcome.
    pub(crate) async fn retry(&self, cfg: &CodexConfig, id: &str) -> Option<Result<(), String>> {
        let dir = &self.dir;
        let _guard = self.lock.lock().await;
        let failure = load_failures(dir).into_iter().find(|f| f.id == id)?;
        let outcome = queue(cfg, &failure.thread, &failure.notice).await;
        if outcome.is_ok() {
            self.receipts.queue(failure_receipt(&failure));
        }
        let mut all = load_failures(dir);
        match &outcome {
            Ok(()) => all.retain(|f| f.id != id),
            Err(e) => {
                if let Some(f) = all.iter_mut().find(|f| f.id == id) {
                    f.attempts = f.attempts.saturating_add(1);
                    f.last_error.clone_from(e);
                    let n = f.attempts.saturating_sub(cfg.attempts);
                    f.next_retry_at = self.clock.now_ms() + ms(retry_delay(cfg, n.max(1)));
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
    pub(crate) async fn save(&self, failure: Failure) {
        let dir = &self.dir;
        let _guard = self.lock.lock().await;
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
