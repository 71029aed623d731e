//! Channel mode (`INTERLINK_CHANNELS=1`): every verified message is pushed to the
//! agent host as a `notifications/claude/channel` notification, then marked consumed,
//! so the inbox path (footer, `receive_messages`, the Stop hook) does not deliver it a
//! second time. A message whose push fails stays unread and is tried again with the
//! next delivery. The mark is not synced to disk ([`Durability::Lazy`]): a crash of
//! the machine right after a push can push the message again after the restart (at
//! least once), never lose it.

use std::sync::{Arc, atomic::AtomicU64};

use interlink_core::{IdentityKey, bounded::LruMap, wire::EnvelopeKind};
use interlink_net::Event;
use interlink_store::inbox::InboxEntry;
use rmcp::{
    Peer, RoleServer,
    model::{CustomNotification, ServerNotification},
};
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast::error::RecvError, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::{
    context::{
        BoundSlot, Context, NodeStatus, ReadReceipt, ReceiptQueue, SharedState, unread_in,
        wait_ready,
    },
    paths::Home,
    policy,
    read_state::{Durability, ReadState},
    render,
};

/// The custom notification method of channel mode.
pub(crate) const CHANNEL_METHOD: &str = "notifications/claude/channel";

/// The notification for one inbox message: `content` is the peer's text as a framed
/// body ([`render::framing::body`]: a fresh fence, every line prefixed, hidden
/// characters escaped), so nothing in it can pass for the end of the channel event or
/// for another one; `meta` the verified sender and the message's fields (strings;
/// absent fields left out), and for a group message the group, its thread and its
/// recipients as this user names them (`group_to`, comma-separated).
pub(crate) fn notification(e: &InboxEntry, names: &render::Names<'_>) -> CustomNotification {
    let user = render::from_user(e, names);
    let name = if user {
        Some("your user".to_owned())
    } else {
        names.of_hex(&e.sender)
    };
    let mut meta = Map::new();
    let mut put = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            meta.insert(k.to_owned(), Value::String(v));
        }
    };
    put("sender", name);
    put("sender_key", Some(e.sender.clone()));
    put("sender_fingerprint", Some(e.sender_fingerprint.clone()));
    put("session", Some(e.sender_session.clone()));
    put("msg_id", Some(e.msg_id.clone()));
    put("task_id", e.task_id.clone());
    put(
        "status",
        e.status
            .and_then(|s| serde_json::to_value(s).ok())
            .and_then(|v| v.as_str().map(str::to_owned)),
    );
    put("in_reply_to", e.in_reply_to.clone());
    // The user's own words, from their page: the one sender that is not another agent.
    put("from_user", user.then(|| "true".to_owned()));
    if let Some(g) = &e.group {
        put("group", Some(g.name.clone()));
        put("group_thread", Some(g.thread.clone()));
        let to: Vec<String> = g.members.iter().map(|m| names.member(m)).collect();
        put("group_to", Some(to.join(", ")));
    }
    CustomNotification::new(
        CHANNEL_METHOD,
        Some(json!({
            "content": render::framing::body(e.text.as_deref().unwrap_or("")),
            "meta": meta,
        })),
    )
}

/// What the channel forwarder uses of the session, and nothing else. It starts with
/// the MCP peer, before the session may be bound, so it holds the session's slot
/// rather than its directory.
#[derive(Clone, Debug)]
pub(crate) struct Channel {
    /// The session, once bound (its directory holds the inbox and read state).
    pub bound: Arc<BoundSlot>,
    /// The home (the peers policy names the senders).
    pub home: Home,
    /// This user's key (its own messages are labelled `self`).
    pub key: IdentityKey,
    /// The node's status.
    pub node: watch::Receiver<NodeStatus>,
    /// The read-state lock the tools take too ([`Context::read_lock`]).
    pub read_lock: Arc<tokio::sync::Mutex<()>>,
    /// The unread scan's offset, shared with the tools ([`Context::scanned`]).
    pub scanned: Arc<AtomicU64>,
    /// The shared state: reading the unread messages notes their senders' routes.
    pub state: SharedState,
    /// Where pushed messages queue their hand-over receipts.
    pub receipts: ReceiptQueue,
    /// Messages pushed whose mark as consumed failed (a full disk): not pushed again,
    /// though the read state still calls them unread.
    pub pushed: Arc<std::sync::Mutex<Pushed>>,
    /// Why the unread messages cannot be read, as last told to the agent (told once
    /// per cause, again after it cleared).
    pub told: Arc<std::sync::Mutex<Option<String>>>,
}

/// Most pushed-but-unmarked messages remembered; past it the oldest may be pushed
/// again, once.
const MAX_PUSHED_UNMARKED: usize = 4096;

/// The messages pushed to the agent whose read-state mark has not been written yet,
/// by (sender, id): the agent sees each message once whatever fails on disk.
#[derive(Debug)]
pub(crate) struct Pushed(LruMap<(String, String), ()>);

impl Default for Pushed {
    fn default() -> Self {
        Self(LruMap::new(MAX_PUSHED_UNMARKED))
    }
}

impl Pushed {
    fn key(e: &InboxEntry) -> (String, String) {
        (e.sender.clone(), e.msg_id.clone())
    }

    /// Whether `e` was pushed already.
    fn contains(&self, e: &InboxEntry) -> bool {
        self.0.contains_key(&Self::key(e))
    }

    /// `e` was pushed.
    fn insert(&mut self, e: &InboxEntry) {
        let _ = self.0.entry(Self::key(e), || ());
    }

    /// The mark of `entries` as consumed is written: they are no longer unread.
    fn marked(&mut self, entries: &[&InboxEntry]) {
        for e in entries {
            self.0.remove(&Self::key(e));
        }
    }
}

impl Channel {
    /// The forwarder's part of `ctx`.
    pub(crate) fn of(ctx: &Context) -> Self {
        Self {
            bound: ctx.bound.clone(),
            home: ctx.home.clone(),
            key: ctx.key(),
            node: ctx.node.clone(),
            read_lock: ctx.read_lock.clone(),
            scanned: ctx.scanned.clone(),
            state: ctx.shared_state(),
            receipts: ctx.receipts.clone(),
            pushed: Arc::default(),
            told: Arc::default(),
        }
    }
}

/// Pushes unread messages to `peer` until `cancel` fires or the node stops: the ones
/// waiting at start, then each new delivery.
pub(crate) async fn forward(ctx: Channel, peer: Peer<RoleServer>, cancel: CancellationToken) {
    let ready = tokio::select! {
        () = cancel.cancelled() => return,
        r = wait_ready(&ctx.node) => match r {
            Ok(r) => r,
            Err(e) => { warn!("channel mode off: {}", e.0); return; }
        },
    };
    // Subscribe before the first push, so nothing delivered in between is missed.
    let mut events = ready.handle.events();
    push_unread(&ctx, &peer).await;
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            ev = events.recv() => match ev {
                // Receipts and notices for the session are not for the agent: reading
                // the inbox for them would cost a scan per message this session sends.
                Ok(Event::Delivered { kind: EnvelopeKind::Message, .. })
                | Err(RecvError::Lagged(_)) => {
                    crate::context::after_the_network().await;
                    push_unread(&ctx, &peer).await;
                }
                Ok(_) => {}
                Err(RecvError::Closed) => return,
            },
        }
    }
}

async fn push_unread(ctx: &Channel, peer: &Peer<RoleServer>) {
    let _guard = ctx.read_lock.lock().await;
    // Unbound: no inbox yet, so nothing unread (as `Context::unread` answers).
    let Some(dir) = ctx.bound.get().map(|b| b.session_dir) else {
        return;
    };
    let unread = match unread_in(&dir, &ctx.scanned, &ctx.state) {
        Ok(u) => {
            *ctx.told
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
            u
        }
        Err(e) => {
            warn!("channel mode: reading the inbox: {e}");
            tell_blocked(ctx, peer, &e.to_string()).await;
            return;
        }
    };
    let policy = policy::load(&ctx.home).unwrap_or_default();
    let names = render::Names::new(&policy, &ctx.key);
    let mut sent: Vec<&InboxEntry> = Vec::new();
    // Pushed before but their mark failed: the agent has them, and their mark is owed.
    let (fresh, owed): (Vec<&InboxEntry>, Vec<&InboxEntry>) = {
        let done = ctx
            .pushed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        unread.iter().partition(|e| !done.contains(e))
    };
    for e in fresh {
        let n = notification(e, &names);
        if let Err(err) = peer
            .send_notification(ServerNotification::CustomNotification(n))
            .await
        {
            warn!("channel notification failed: {err}");
            break;
        }
        debug!(msg_id = %e.msg_id, "pushed as a channel notification");
        sent.push(e);
        ctx.receipts.queue(ReadReceipt::host_queued(e));
    }
    // With its sender: another sender's unread message may share the id.
    let marks: Vec<crate::read_state::AckId> = sent
        .iter()
        .chain(&owed)
        .filter_map(|e| {
            Some(crate::read_state::AckId {
                sender: e.sender.parse().ok(),
                id: e.msg_id.parse().ok()?,
            })
        })
        .collect();
    if marks.is_empty() {
        return;
    }
    let written = ReadState::load(&dir)
        .map_err(|e| e.to_string())
        .and_then(|mut s| {
            s.acknowledge_with(&marks, Durability::Lazy)
                .map_err(|e| e.to_string())
        });
    let mut remembered = ctx
        .pushed
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match written {
        Ok(_) => remembered.marked(&owed),
        // Remembered as pushed: the next pass does not push them again and writes
        // their mark with its own (or the agent's own ack does).
        Err(e) => {
            warn!("channel mode: marking pushed messages consumed: {e}");
            for e in &sent {
                remembered.insert(e);
            }
        }
    }
}

/// The notification that says why messages cannot be pushed (a read state that cannot
/// be read or is damaged): without it, delivery to the agent would stop in silence.
pub(crate) fn blocked_notification(why: &str) -> CustomNotification {
    CustomNotification::new(
        CHANNEL_METHOD,
        Some(json!({
            "content": render::read_state_blocked(why),
            "meta": {"interlink": "read_state_error"},
        })),
    )
}

/// Tells the agent once per cause why messages stop being pushed.
async fn tell_blocked(ctx: &Channel, peer: &Peer<RoleServer>, why: &str) {
    {
        let mut told = ctx
            .told
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if told.as_deref() == Some(why) {
            return;
        }
        *told = Some(why.to_owned());
    }
    let n = blocked_notification(why);
    if let Err(err) = peer
        .send_notification(ServerNotification::CustomNotification(n))
        .await
    {
        warn!("channel notification failed: {err}");
    }
}

#[cfg(test)]
#[path = "channel_tests.rs"]
mod tests;
