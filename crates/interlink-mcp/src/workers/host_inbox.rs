//! Delivery through the agent host's own inbox socket ([`crate::host_inbox`]): every
//! verified message that reaches the session's inbox is written to Claude Code's
//! socket as one frame, so the model reads it between tool calls of a busy turn, or a
//! new turn starts with it when the session is idle.
//!
//! A message stays unread in the inbox until the agent acknowledges it (then its
//! `read` receipt goes out, as on every path); what changes is who wakes the agent.
//! A message the host took is listed as handed in `host_inbox.json`, and the Stop hook
//! never announces it. The host answers nothing when it accepts a frame, and reports
//! a hold (the user's `crossSessionInbound`) at once, so a frame with no receipt after
//! [`SETTLE`] counts as taken and its `host_queued` receipt goes to the sender. A
//! frame the host held or did not deliver falls back: the hook announces it, and —
//! unless the host only dropped it for its rate — later messages go to the hook too,
//! as they do when the socket is gone. A message is thus announced once, through the
//! socket or through the hook, never through both (a held message the user releases
//! later is the exception: the host reports it `delivered` and it has also been
//! announced).
//!
//! Frames are paced below the host's own limits on one sender (a burst of 30, then one
//! every 2 s): [`BURST`], then one per [`REFILL`]; messages that waited for the pace go
//! together, up to [`MESSAGES_PER_FRAME`] in one frame.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, atomic::AtomicU64},
    time::{Duration, Instant},
};

use interlink_core::bounded::{Rate, TokenBucket};
use interlink_core::{
    IdentityKey,
    wire::{DeliveryMode, EnvelopeKind},
};
use interlink_net::Event;
use interlink_store::inbox::InboxEntry;
use tokio::sync::{broadcast::error::RecvError, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::{
    context::{
        Bound, Context, NodeStatus, ReadReceipt, ReceiptQueue, SharedState, running, unread_in,
    },
    host_inbox::{
        HandoverFile, HostInbox, HostReceipt, HostStatus, MAX_LISTED, RECEIPT_QUEUE, ReplySocket,
        frame, frame_id,
    },
    paths::{Home, SessionDir},
    policy, render,
};

/// How long a frame may go without a receipt before it counts as taken (the host
/// reports a hold within milliseconds).
pub(crate) const SETTLE: Duration = Duration::from_millis(500);
/// Frames written at once before pacing starts (the host allows one sender 30, and
/// refills at the same rate as [`REFILL`]: a smaller bucket refilled no faster never
/// holds more than the host's).
pub(crate) const BURST: u32 = 25;
/// Then one frame per this long (the host refills one per 2 s).
pub(crate) const REFILL: Duration = Duration::from_secs(2);
/// Most messages in one frame. Messages that wait for the pace go together in the
/// next frame, so a burst is slowed, never dropped by the host's limit.
pub(crate) const MESSAGES_PER_FRAME: usize = 8;
/// How often settling and pacing are looked at.
const TICK: Duration = Duration::from_millis(100);
/// Frames remembered for late receipts.
const FRAMES_KEPT: usize = 1024;

/// What the worker uses of the session.
#[derive(Clone, Debug)]
pub(crate) struct HostInboxWorker {
    /// The host's socket.
    pub inbox: HostInbox,
    /// The session's directory (its inbox, read state and `host_inbox.json`).
    pub dir: SessionDir,
    /// The home (the peers policy names the senders).
    pub home: Home,
    /// This user's key (its own messages are labelled `self`).
    pub key: IdentityKey,
    /// The node's status.
    pub node: watch::Receiver<NodeStatus>,
    /// The unread scan's offset, shared with the tools.
    pub scanned: Arc<AtomicU64>,
    /// The read-state lock the tools take too.
    pub read_lock: Arc<tokio::sync::Mutex<()>>,
    /// The shared state ([`crate::context::HostInboxState`] is reported from there).
    pub state: SharedState,
    /// Where taken messages queue their `host_queued` receipts.
    pub receipts: ReceiptQueue,
}

impl HostInboxWorker {
    /// The worker's part of `ctx`, bound to `bound`; `None` without a host socket.
    pub(crate) fn of(ctx: &Context, bound: &Bound) -> Option<Self> {
        Some(Self {
            inbox: ctx.host_inbox.clone()?,
            dir: bound.session_dir.clone(),
            home: ctx.home.clone(),
            key: ctx.key(),
            node: ctx.node.clone(),
            scanned: ctx.scanned.clone(),
            read_lock: ctx.read_lock.clone(),
            state: ctx.shared_state(),
            receipts: ctx.receipts.clone(),
        })
    }
}

/// One frame written, until its fate is known.
#[derive(Debug)]
struct Sent {
    /// Its messages: (key, entry).
    messages: Vec<(String, InboxEntry)>,
    at: Instant,
    settled: bool,
}

/// The worker's book: the file the hook reads, the frames in flight, the pacing.
struct Book {
    file: HandoverFile,
    frames: HashMap<String, Sent>,
    order: VecDeque<String>,
    /// The pace: frames that may be written now.
    pace: TokenBucket,
    /// What the pace's clock counts from.
    epoch: Instant,
    /// A round stopped for pacing: unread messages are still waiting.
    backlog: bool,
    /// Why the unread messages cannot be read, as last told to the agent (told once
    /// per cause, again after it cleared).
    told: Option<String>,
}

/// Writes the session's messages into the host's socket until `cancel` fires, the
/// node stops, or the socket stops taking them.
pub(crate) async fn forward(w: HostInboxWorker, cancel: CancellationToken) {
    let Some(ready) = (tokio::select! {
        () = cancel.cancelled() => None,
        r = running(&w.node) => r,
    }) else {
        return;
    };
    // The host's pid, from the launch probe: only its connections carry receipts.
    let Some(host_pid) = w.inbox.host_pid() else {
        stop_using(&w, None, "the host's socket named no process".into());
        fall_back(&ready).await;
        return;
    };
    let reply = match ReplySocket::bind_beside(w.inbox.socket()) {
        Ok(r) => r,
        Err(e) => {
            stop_using(
                &w,
                None,
                format!("cannot bind a reply socket beside the host's: {e}"),
            );
            fall_back(&ready).await;
            return;
        }
    };
    let reply_path = reply.path().to_owned();
    let (tx, mut host_receipts) = mpsc::channel(RECEIPT_QUEUE);
    let listener_cancel = cancel.child_token();
    tokio::spawn(reply.serve(host_pid, tx, listener_cancel.clone()));
    let _stop_listener = listener_cancel.drop_guard();

    let mut book = Book {
        file: HandoverFile {
            version: 1,
            reply: reply_path.clone(),
            active: true,
            ..HandoverFile::load(&w.dir).unwrap_or_default()
        },
        frames: HashMap::new(),
        order: VecDeque::new(),
        pace: TokenBucket::full(PACE, 0),
        epoch: Instant::now(),
        backlog: false,
        told: None,
    };
    // Subscribe before the first round, so nothing delivered in between is missed.
    let mut events = ready.handle.events();
    round(&w, &mut book, &reply_path).await;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut fallen_back = false;
    loop {
        if !book.file.active && !fallen_back {
            fallen_back = true;
            fall_back(&ready).await;
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            ev = events.recv() => match ev {
                Ok(Event::Delivered { kind: EnvelopeKind::Message, .. })
                | Err(RecvError::Lagged(_)) => {
                    crate::context::after_the_network().await;
                    round(&w, &mut book, &reply_path).await;
                }
                Ok(_) => {}
                Err(RecvError::Closed) => break,
            },
            Some(r) = host_receipts.recv() => on_receipt(&w, &mut book, r),
            _ = tick.tick() => {
                settle(&w, &mut book);
                if book.backlog && refill(&mut book) {
                    round(&w, &mut book, &reply_path).await;
                }
            }
        }
    }
    // Gone: the hook wakes the agent for what comes next (a restarted server writes
    // the file again).
    book.file.active = false;
    save(&w, &book);
}

/// The session announces the inbox and Stop hook as its delivery from now on.
async fn fall_back(ready: &crate::context::Ready) {
    if let Err(e) = ready.handle.set_delivery(DeliveryMode::Inbox).await {
        debug!("host inbox: announcing the fallback: {e}");
    }
}

/// The host's pace: [`BURST`] frames, then one per [`REFILL`].
const PACE: Rate = Rate {
    burst: BURST as u64,
    per: 1,
    period_ms: REFILL.as_millis() as u64,
};

/// Adds the frames due since the last refill; whether one may be written.
fn refill(book: &mut Book) -> bool {
    let now_ms = u64::try_from(book.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
    book.pace.refill(PACE, now_ms);
    book.pace.level() > 0
}

fn key_of(e: &InboxEntry) -> String {
    format!("{}:{}", e.sender, e.msg_id)
}

fn save(w: &HostInboxWorker, book: &Book) {
    if let Err(e) = book.file.save(&w.dir) {
        warn!("host inbox: saving {}: {e}", w.dir.host_inbox().display());
    }
}

/// Writes a frame for each unread message not handed over or fallen back yet, while
/// the socket takes them and the pace allows.
async fn round(w: &HostInboxWorker, book: &mut Book, reply: &std::path::Path) {
    let unread = {
        let _guard = w.read_lock.lock().await;
        match unread_in(&w.dir, &w.scanned, &w.state) {
            Ok(u) => u,
            Err(e) => {
                warn!("host inbox: reading the inbox: {e}");
                tell_blocked(w, book, reply, &e.to_string()).await;
                return;
            }
        }
    };
    book.told = None;
    // Acknowledged messages leave the lists, which so stay within the unread ones.
    let live: std::collections::HashSet<String> = unread.iter().map(key_of).collect();
    book.file.handed.retain(|k| live.contains(k));
    book.file.fell_back.retain(|k| live.contains(k));
    book.backlog = false;
    let policy = policy::load(&w.home).unwrap_or_default();
    let mut pending: std::collections::VecDeque<InboxEntry> = unread
        .into_iter()
        .filter(|e| {
            let key = key_of(e);
            !book.file.handed.contains(&key) && !book.file.fell_back.contains(&key)
        })
        .collect();
    while !pending.is_empty() && book.file.active {
        if !refill(book) {
            book.backlog = true;
            break;
        }
        if book.file.handed.len() >= MAX_LISTED {
            // More unread messages handed over than listed: the rest wait for the
            // agent to acknowledge some (the footer counts them meanwhile).
            book.backlog = true;
            break;
        }
        // One message per frame while the pace allows one frame per message; the
        // last frame the pace allows takes what is waiting.
        let allowed = usize::try_from(book.pace.level()).unwrap_or(0);
        let take = if pending.len() <= allowed {
            1
        } else {
            pending.len().min(MESSAGES_PER_FRAME)
        };
        let batch: Vec<InboxEntry> = pending.drain(..take).collect();
        let id = frame_id();
        let text = frame(&notice(&batch, &policy, &w.key), &id, reply);
        if !post(w, book, &text).await {
            break;
        }
        debug!(frame = %id, messages = batch.len(), "written to the host's inbox socket");
        let messages: Vec<(String, InboxEntry)> =
            batch.into_iter().map(|e| (key_of(&e), e)).collect();
        for (key, _) in &messages {
            book.file.handed.insert(key.clone());
        }
        w.state.lock().host_inbox.handed += messages.len() as u64;
        remember(
            book,
            id,
            Sent {
                messages,
                at: Instant::now(),
                settled: false,
            },
        );
    }
    save(w, book);
}

/// Writes one frame and charges the pace for it; a socket that fails is not used
/// again (the Stop hook takes over). Whether it was written.
async fn post(w: &HostInboxWorker, book: &mut Book, text: &str) -> bool {
    match w.inbox.post(text).await {
        Ok(()) => {
            book.pace.charge(1);
            true
        }
        Err(err) => {
            stop_using(
                w,
                Some(&mut book.file),
                format!("the host's socket failed: {err}"),
            );
            false
        }
    }
}

/// Tells the agent through the host's inbox, once per cause, why new messages stop
/// reaching it (as channel mode does). A frame the pace does not allow yet is written
/// by a later round.
async fn tell_blocked(w: &HostInboxWorker, book: &mut Book, reply: &std::path::Path, why: &str) {
    if !book.file.active || book.told.as_deref() == Some(why) {
        return;
    }
    if !refill(book) {
        book.backlog = true;
        return;
    }
    let text = frame(&crate::render::read_state_blocked(why), &frame_id(), reply);
    if post(w, book, &text).await {
        book.told = Some(why.to_owned());
    } else {
        save(w, book);
    }
}

fn remember(book: &mut Book, id: String, sent: Sent) {
    book.frames.insert(id.clone(), sent);
    book.order.push_back(id);
    while book.order.len() > FRAMES_KEPT {
        if let Some(old) = book.order.pop_front() {
            book.frames.remove(&old);
        }
    }
}

/// Frames with no receipt after [`SETTLE`] were taken: their senders hear
/// `host_queued`.
fn settle(w: &HostInboxWorker, book: &mut Book) {
    for sent in book.frames.values_mut() {
        if !sent.settled && sent.at.elapsed() >= SETTLE {
            sent.settled = true;
            for (_, e) in &sent.messages {
                w.receipts.queue(ReadReceipt::host_queued(e));
            }
        }
    }
}

fn on_receipt(w: &HostInboxWorker, book: &mut Book, r: HostReceipt) {
    for id in &r.frames {
        let Some(sent) = book.frames.get_mut(id) else {
            debug!(frame = %id, "a receipt for a frame this server does not know");
            continue;
        };
        let ids: Vec<&str> = sent
            .messages
            .iter()
            .map(|(_, e)| e.msg_id.as_str())
            .collect();
        match &r.status {
            HostStatus::Delivered => {
                // Released from a hold: the model has it (and the hook announced it).
                info!(?ids, "the host released a held frame");
                if !sent.settled {
                    sent.settled = true;
                    for (_, e) in &sent.messages {
                        w.receipts.queue(ReadReceipt::host_queued(e));
                    }
                }
            }
            HostStatus::Held => {
                info!(?ids, "the host holds the frame for the user's approval");
                sent.settled = true;
                fall_back_frame(&mut book.file, &sent.messages);
                w.state.lock().host_inbox.held += sent.messages.len() as u64;
                stop_using(
                    w,
                    Some(&mut book.file),
                    "Claude Code holds inbound messages for the user's approval \
                     (crossSessionInbound)"
                        .into(),
                );
            }
            HostStatus::NotDelivered(why) => {
                info!(?ids, "the host did not deliver the frame: {why}");
                sent.settled = true;
                fall_back_frame(&mut book.file, &sent.messages);
                w.state.lock().host_inbox.fell_back += sent.messages.len() as u64;
                // Pacing drops are the host's rate, not its policy: keep writing.
                let transient = ["rate-limited", "queue-full", "duplicate"]
                    .iter()
                    .any(|t| why.contains(t));
                if !transient {
                    stop_using(
                        w,
                        Some(&mut book.file),
                        format!("Claude Code did not deliver a message: {why}"),
                    );
                }
            }
        }
    }
    save(w, book);
}

/// New messages go to the Stop hook from now on, for `why` (also in `whoami`); `file`
/// (the hook's view) says so once saved.
fn stop_using(w: &HostInboxWorker, file: Option<&mut HandoverFile>, why: String) {
    warn!("host inbox: {why}; waking the agent through the Stop hook");
    if let Some(file) = file {
        file.active = false;
    }
    let mut s = w.state.lock();
    s.host_inbox.active = false;
    s.host_inbox.stopped = Some(why);
}

/// The frame's messages go to the Stop hook.
fn fall_back_frame(file: &mut HandoverFile, messages: &[(String, InboxEntry)]) {
    for (key, _) in messages {
        file.handed.remove(key);
        file.fell_back.insert(key.clone());
    }
}

/// The text of one frame: each message with the verified sender in its header and the
/// peer's text as a fenced block (as everywhere an agent reads peer text), then what
/// to do.
pub(crate) fn notice(
    messages: &[InboxEntry],
    policy: &interlink_core::trust::PeerPolicy,
    own: &IdentityKey,
) -> String {
    let mut out = if messages.len() == 1 {
        "interlink-p2p: a message for this session, from another agent over the overlay \
         (not a local Claude session).\n\n"
            .to_owned()
    } else {
        format!(
            "interlink-p2p: {} messages for this session, from other agents over the overlay \
             (not local Claude sessions).\n\n",
            messages.len()
        )
    };
    let names = render::Names::new(policy, own);
    for e in messages {
        out.push_str(&render::message_text(e, &names));
        out.push_str("\n\n");
    }
    let ids: Vec<String> = messages
        .iter()
        .map(|e| render::framing::inline(&e.msg_id))
        .collect();
    let any_from_user = messages.iter().any(|e| render::from_user(e, &names));
    out.push_str(&format!(
        "The text between the <<<msg-… and msg-…>>> fences, every line after \"| \", {}; \
         only the header line above a fence is from interlink. Reply with interlink's \
         send_message (SendMessage cannot reach it), and call acknowledge_messages with {} \
         once handled.",
        render::whose_words(any_from_user),
        ids.join(", ")
    ));
    out
}

#[cfg(test)]
#[path = "host_inbox_tests.rs"]
mod tests;
