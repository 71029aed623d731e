//! Follows the session's inbox for the lines addressed to the agent side rather than
//! to the agent — a peer's repeated knock (answered), a pair acceptance (the
//! other side accepted this user's request: pin it) and a receipt (mark the sent
//! message read or handed to the host), a goodbye — and the knocks the node holds for
//! the operator (copied into `pairing.json`).
//!
//! Those lines are never shown to the agent. How far they were handled is kept in
//! `follow.json` next to the inbox, saved at most once a second and at shutdown, so a
//! restart never misses one and at worst handles the last second's lines again — which
//! is harmless, as every step is idempotent (a knock decided once, an acceptance
//! without a pending request, a receipt for an unknown or further-on message are
//! ignored).

use std::{collections::HashSet, time::Duration};

use interlink_core::{
    IdentityKey, SessionId,
    limits::KNOCK_QUEUE_CAPACITY,
    wire::{EnvelopeKind, SessionAddr},
};
use interlink_net::Event;
use interlink_store::{
    inbox::{InboxEntry, read_positioned_from},
    knocks::HeldKnock,
};
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast::error::RecvError, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::{
    context::{Bound, Context, NodeStatus, SharedState, refresh_policy, wait_ready},
    files::write_atomically,
    pairing,
    paths::{FOLLOW_FILE, Home, SessionDir},
    policy,
};

/// How often the inbox is checked without a delivery event.
const FOLLOW_POLL: Duration = Duration::from_secs(1);

/// Held knocks remembered as handled: the node's file holds at most
/// [`KNOCK_QUEUE_CAPACITY`], and the set keeps only knocks still in it.
const HANDLED_KNOCKS: usize = KNOCK_QUEUE_CAPACITY;

/// The held knocks this follower already decided — admitted, recorded for the
/// operator, or found to be a peer's or this user's — by (sender, knock id), so each
/// costs its file work (policy, invites, `pairing.json`) once, not again on every knock
/// that arrives while it is held. Soft state: after a restart each held knock is
/// decided once more, which every step allows (it is idempotent).
#[derive(Debug, Default)]
struct Handled {
    knocks: HashSet<(String, String)>,
}

impl Handled {
    /// Forgets the knocks no longer held (`held`), so the set stays within the file's
    /// bound; `true` if any of `held` is still to be decided.
    fn prune(&mut self, held: &[HeldKnock]) -> bool {
        let key = |k: &HeldKnock| (k.sender.clone(), k.msg_id.clone());
        let live: HashSet<(String, String)> = held.iter().map(key).collect();
        self.knocks.retain(|k| live.contains(k));
        held.iter().any(|k| !self.knocks.contains(&key(k)))
    }

    fn contains(&self, k: &HeldKnock) -> bool {
        self.knocks.contains(&(k.sender.clone(), k.msg_id.clone()))
    }

    fn insert(&mut self, k: &HeldKnock) {
        // The file is bounded, so this is only reached with a file breaking its bound
        // (written by something else): then decide its knocks again rather than grow.
        if self.knocks.len() >= HANDLED_KNOCKS {
            return;
        }
        self.knocks.insert((k.sender.clone(), k.msg_id.clone()));
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Position {
    offset: u64,
}

/// What the follower uses of the session, and nothing else.
#[derive(Clone, Debug)]
pub(crate) struct Follow {
    /// The session's directory (its inbox, held knocks, the follower's position).
    pub dir: SessionDir,
    /// The home (peers policy, pairing state).
    pub home: Home,
    /// This session's address: the user's key (its own knocks are ignored) and the
    /// session a held knock came through.
    pub own: SessionAddr,
    /// The name this user suggests for itself in pair acceptances.
    pub name: String,
    /// The node's status.
    pub node: watch::Receiver<NodeStatus>,
    /// The sent log (receipts move its entries) and routes (goodbyes close them).
    pub state: SharedState,
    /// The session's clock.
    pub clock: interlink_net::Clock,
}

impl Follow {
    /// The follower's part of `ctx`, bound to the session `bound`.
    pub(crate) fn of(ctx: &Context, bound: &Bound) -> Self {
        Self {
            dir: bound.session_dir.clone(),
            home: ctx.home.clone(),
            own: bound.own.clone(),
            name: ctx.name.clone(),
            node: ctx.node.clone(),
            state: ctx.shared_state(),
            clock: ctx.clock,
        }
    }

    fn key(&self) -> IdentityKey {
        self.own.key
    }
}

fn load_offset(dir: &SessionDir) -> u64 {
    std::fs::read(dir.follow_position())
        .ok()
        .and_then(|b| serde_json::from_slice::<Position>(&b).ok())
        .map_or(0, |p| p.offset)
}

fn save_offset(dir: &SessionDir, offset: u64) {
    let bytes = serde_json::to_vec(&Position { offset }).unwrap_or_default();
    if let Err(e) = write_atomically(&dir.follow_position(), &bytes) {
        warn!("saving {FOLLOW_FILE}: {e}");
    }
}

/// Runs until `cancel` fires or the node stops.
pub(crate) async fn follow(ctx: Follow, cancel: CancellationToken) {
    let session_dir = ctx.dir.clone();
    let ready = tokio::select! {
        () = cancel.cancelled() => return,
        r = wait_ready(&ctx.node) => match r {
            Ok(r) => r,
            Err(e) => { debug!("inbox follower off: {}", e.0); return; }
        },
    };
    let mut events = ready.events_since_start();
    let mut offset = load_offset(&session_dir);
    let mut saved = offset;
    let mut poll = tokio::time::interval(FOLLOW_POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The position is saved on the poll tick, not after every line: each step is
    // idempotent, so a crash only means handling up to a second of lines again, while
    // saving per receipt cost two fsyncs per message sent. The write runs off the
    // runtime's thread (the session runs on one), one at a time.
    let mut writing: Option<tokio::task::JoinHandle<()>> = None;
    // Whether there may be lines to handle: after a tick, or an event that adds them.
    let mut due = true;
    let mut handled = Handled::default();
    loop {
        if due {
            offset = step(&ctx, &session_dir, offset, &mut handled).await;
        }
        due = true;
        tokio::select! {
            () = cancel.cancelled() => break,
            _ = poll.tick() => {
                if offset != saved {
                    if let Some(w) = writing.take() {
                        let _ = w.await;
                    }
                    let dir = session_dir.clone();
                    writing = Some(tokio::task::spawn_blocking(move || save_offset(&dir, offset)));
                    saved = offset;
                }
            }
            ev = events.recv() => match ev {
                // A message or pass has nothing for this worker (the lines it handles
                // come with events of their own, and the tick steps over the rest):
                // reading the inbox for it cost a scan on every message's path.
                Ok(Event::Delivered {
                    kind: EnvelopeKind::Message | EnvelopeKind::Pass,
                    ..
                }) => due = false,
                Ok(Event::Delivered { .. } | Event::Knock { .. }) | Err(RecvError::Lagged(_)) => {}
                Ok(Event::Receipted { msg_id, to }) => {
                    // A queued message reached its recipient after all.
                    ctx.state
                        .lock()
                        .sent
                        .mark_delivered(&msg_id.to_string(), &to, ctx.clock.now_ms());
                    due = false;
                }
                Ok(Event::NotKept { msg_id, to, reason }) => {
                    ctx.state
                        .lock()
                        .sent
                        .mark_not_kept(&msg_id.to_string(), &to, &reason);
                    due = false;
                }
                Ok(_) => due = false,
                Err(RecvError::Closed) => break,
            },
        }
    }
    if let Some(w) = writing.take() {
        let _ = w.await;
    }
    if offset != saved {
        save_offset(&session_dir, offset);
    }
}

/// Handles the lines after `offset`; returns the new offset.
async fn step(ctx: &Follow, dir: &SessionDir, offset: u64, handled: &mut Handled) -> u64 {
    let (entries, end) = match read_positioned_from(&dir.inbox(), offset) {
        Ok(r) => r,
        Err(e) => {
            warn!("inbox follower: {e}");
            return offset;
        }
    };
    record_held_knocks(ctx, dir, handled).await;
    for (e, _) in &entries {
        let Ok(sender) = e.sender.parse::<IdentityKey>() else {
            continue;
        };
        match e.kind {
            EnvelopeKind::Knock => on_knock(ctx, e, sender).await,
            EnvelopeKind::PairAccept => on_accept(ctx, e, sender).await,
            EnvelopeKind::Read | EnvelopeKind::HostQueued => on_receipt(ctx, e, sender),
            EnvelopeKind::Goodbye => {
                // The peer's session closed: stop routing replies to it.
                if let Ok(session) = SessionId::new(&e.sender_session) {
                    ctx.state.lock().routes.closed(&sender, &session);
                }
            }
            // The node took the pass; nothing for the agent.
            EnvelopeKind::Message | EnvelopeKind::Pass => {}
        }
    }
    end
}

/// A knock from a peer (it reached the inbox: peers pass the gate): the other side lost
/// this user and asks again. Confirm, so its node pins this user (it does so only for
/// a request its user made).
async fn on_knock(ctx: &Follow, e: &InboxEntry, sender: IdentityKey) {
    if sender == ctx.key() {
        return;
    }
    let policy = policy::load(&ctx.home).unwrap_or_default();
    if !policy.contains(&sender) {
        return;
    }
    let Ok(session) = SessionId::new(&e.sender_session) else {
        return;
    };
    if let Ok(ready) = wait_ready(&ctx.node).await {
        let to = SessionAddr {
            key: sender,
            session,
        };
        if let Err(err) =
            crate::sender::send_pairing(&ready.handle, &ctx.name, to, EnvelopeKind::PairAccept)
                .await
        {
            debug!("confirming a peer's repeated knock: {err}");
        }
    }
}

/// Copies the knocks the node holds for the operator into `pairing.json` (strangers'
/// only: a peer's knock is answered, see [`on_knock`]) — except a knock that needs no
/// operator ([`pairing::auto_admit`]: it carries an invite of this user's, or this user
/// knocked that identity too), which pairs at once and is confirmed.
///
/// Each held knock is decided once ([`Handled`]): a knock arriving while 63 others are
/// held costs reading the knocks file and its own decision, not 64 decisions' file
/// work. A knock whose decision failed (a file error) is tried again on the next step.
async fn record_held_knocks(ctx: &Follow, dir: &SessionDir, handled: &mut Handled) {
    let held = interlink_store::knocks::load(dir.path());
    if !handled.prune(&held) {
        return;
    }
    let via = &ctx.own.session;
    let policy = policy::load(&ctx.home).unwrap_or_default();
    for k in &held {
        if handled.contains(k) {
            continue;
        }
        let stranger = k
            .sender
            .parse::<IdentityKey>()
            .is_ok_and(|key| key != ctx.key() && !policy.contains(&key));
        if !stranger {
            handled.insert(k);
            continue;
        }
        let mut decided = false;
        match pairing::auto_admit(&ctx.home, k, ctx.clock.now_ms()) {
            Ok(Some((accepted, why))) => {
                info!(peer = %k.sender_fingerprint, ?why, "pair request admitted without the operator");
                handled.insert(k);
                confirm(ctx, &accepted).await;
                continue;
            }
            Ok(None) => decided = true,
            // Still for the operator, and decided again next step (as before the set).
            Err(err) => warn!("deciding a pair request: {err}"),
        }
        match pairing::record_knock(&ctx.home, k, via) {
            Ok(true) => info!(from = %k.sender_fingerprint, "pair request held for the operator"),
            Ok(false) => {}
            Err(err) => {
                warn!("recording a pair request: {err}");
                decided = false;
            }
        }
        if decided {
            handled.insert(k);
        }
    }
}

/// Sends the `pair_accept` for a knock admitted here, once every session of this home
/// admits the new peer.
async fn confirm(ctx: &Follow, accepted: &pairing::Accepted) {
    refresh_policy(&ctx.node, &ctx.home).await;
    let Ok(session) = SessionId::new(&accepted.request.session) else {
        return;
    };
    tokio::time::sleep(crate::session_node::POLICY_PICKUP).await;
    if let Ok(ready) = wait_ready(&ctx.node).await {
        let to = SessionAddr {
            key: accepted.key,
            session,
        };
        if let Err(err) =
            crate::sender::send_pairing(&ready.handle, &ctx.name, to, EnvelopeKind::PairAccept)
                .await
        {
            warn!("confirming an admitted pair request: {err}");
        }
    }
}

/// A receipt: the messages it names (`in_reply_to` and `also_about`) were read, or
/// handed to the agent host — each if it went to the receipt's signer.
fn on_receipt(ctx: &Follow, e: &InboxEntry, sender: IdentityKey) {
    let now = ctx.clock.now_ms();
    let log = &mut ctx.state.lock().sent;
    for id in e.in_reply_to.iter().chain(&e.also_about) {
        let moved = match e.kind {
            EnvelopeKind::Read => log.mark_read(id, &sender, now),
            _ => log.mark_host_queued(id, &sender, now),
        };
        if moved {
            debug!(msg_id = %id, kind = ?e.kind, "receipt");
        }
    }
}

async fn on_accept(ctx: &Follow, e: &InboxEntry, sender: IdentityKey) {
    let request = match pairing::take_outgoing(&ctx.home, &sender) {
        Ok(Some(r)) => r,
        Ok(None) => return,
        Err(err) => {
            warn!("reading the pair requests sent: {err}");
            return;
        }
    };
    let result = policy::edit(&ctx.home, |p| {
        if p.contains(&sender) {
            return Ok::<_, pairing::PairingError>(());
        }
        let name = pairing::free_name(p, request.petname.as_deref().or(e.name.as_deref()), &sender);
        p.add(name, sender)?;
        Ok(())
    });
    match result {
        Ok(()) => {
            info!(peer = %e.sender_fingerprint, "pair request accepted; peer added");
            refresh_policy(&ctx.node, &ctx.home).await;
        }
        Err(err) => warn!("adding the peer that accepted: {err}"),
    }
}

#[cfg(test)]
#[path = "follow_tests.rs"]
mod tests;
