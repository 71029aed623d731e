//! Store-and-forward, the sender's side: admitting a message into its recipient's
//! mailbox, confirming that a peer took a copy, and retrying the live path when the
//! recipient shows life again.
//!
//! A mailbox keeps the oldest envelopes and refuses what does not fit (see
//! `interlink_core::mailbox`), so a sender can tell from its own copy of the mailbox
//! whether a message will be kept — and say "mailbox full" instead of "queued". A node
//! that holds no copy yet (a short-lived `send`, or the first message to a session)
//! fetches the current one first, for at most [`PREFETCH_WAIT`]; a copy that says
//! "full" is fetched again before the sender is refused, because acks it has not seen
//! may have made room.
//!
//! A queued message stays on an "unconfirmed" list until the recipient receipts it.
//! When the recipient shows life (a fresh announcement, a reconnect, a ping), the list
//! is sent over the live path ahead of anything new, so the sender learns of the
//! delivery ([`Event::Receipted`]) and the recipient gets the messages in order even
//! before it fetches its mailbox. The inbox dedupes whichever copy comes second. A
//! recipient that collects the messages from its mailbox first receipts them itself
//! (`node::receipting`), which takes them off the list.

use std::{
    collections::{HashMap, VecDeque},
    time::{Duration, Instant},
};

use interlink_core::{
    IdentityKey,
    limits::LIVE_FRESHNESS_MS,
    mailbox::{self, Inserted, Mailbox},
    wire::SessionAddr,
};
use libp2p::{PeerId, kad, kad::RecordKey};
use tokio::sync::oneshot;
use tracing::debug;

use super::{
    Actor,
    delivery::{OUTBOX_PER_RECIPIENT, Queued},
    mailbox::key_of,
};
use crate::{Event, SendError, SendOutcome, Settled};

/// Longest a sender waits for the current copy of a mailbox before admitting into it.
/// Holders on a LAN answer in milliseconds; a stopped one never does.
pub(crate) const PREFETCH_WAIT: Duration = Duration::from_millis(300);
/// Mailboxes being fetched before a put at once.
const MAX_PREFETCHES: usize = 64;
/// A copy that says "full" is fetched again at most this often per mailbox.
const REFRESH_INTERVAL: Duration = Duration::from_secs(5);
/// Queued messages remembered for a live retry, over all recipients: everything the
/// durable outbox can hold.
const MAX_UNCONFIRMED: usize = crate::outbox::MAX_OUTBOX_ENTRIES;
/// A queued message older than this is left to the mailbox: the live path would refuse
/// it as stale (with a margin for clock skew).
pub(super) const RETRY_WINDOW_MS: u64 = LIVE_FRESHNESS_MS - 5 * 60 * 1000;
/// Mailbox publications tracked until a peer confirms one.
const MAX_PUBLICATIONS: usize = 1024;
/// Callers of [`crate::Handle::settle`] waiting at once.
const MAX_SETTLE_WAITERS: usize = 16;

/// The sender's store-and-forward state.
#[derive(Debug, Default)]
pub(crate) struct Queueing {
    prefetches: HashMap<RecordKey, Prefetch>,
    /// When each mailbox was last fetched before a put (bounded like the prefetches:
    /// entries older than [`REFRESH_INTERVAL`] are dropped when it fills).
    refreshed: HashMap<RecordKey, Instant>,
    /// Every queued message not receipted yet (the durable outbox's contents), per
    /// recipient, oldest first.
    pub(super) unconfirmed: HashMap<SessionAddr, VecDeque<Queued>>,
    unconfirmed_len: usize,
    /// Puts in flight (DHT queries, relay holds) → their publication.
    puts: HashMap<PutId, u64>,
    /// Publications not settled yet → put queries still running for each.
    publications: HashMap<u64, usize>,
    next_publication: u64,
    settled: Settled,
    settle_waiters: Vec<(Instant, oneshot::Sender<Settled>)>,
}

/// One way a mailbox publication reaches peers: a DHT put query, or a `hold` request
/// to a relay.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum PutId {
    /// A Kademlia put query.
    Kad(kad::QueryId),
    /// A mailbox-protocol `hold` request.
    Hold(libp2p::request_response::OutboundRequestId),
}

/// Messages waiting for the current copy of their recipient's mailbox.
#[derive(Debug)]
struct Prefetch {
    query: kad::QueryId,
    started: Instant,
    gathered: Mailbox,
    waiting: Vec<Queued>,
}

impl Queueing {
    /// The earliest moment a prefetch must be cut short.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let prefetch = self.prefetches.values().map(|p| p.started + PREFETCH_WAIT);
        let settle = self.settle_waiters.iter().map(|(d, _)| *d);
        prefetch.chain(settle).min()
    }

    /// Keeps a queued message until it is receipted, in timestamp order. Messages
    /// without a known node or too old for the live path stay too: they are published
    /// to the mailbox again, and they hold back newer messages to the same session
    /// (which would otherwise overtake them on the live path).
    pub(super) fn keep_unconfirmed(&mut self, mut q: Queued) {
        q.reply = None;
        if self.unconfirmed_len >= MAX_UNCONFIRMED {
            debug!(msg_id = %q.envelope.body().msg_id, "no room to retry it live; the mailbox has it");
            return;
        }
        let list = self
            .unconfirmed
            .entry(q.envelope.body().recipient_addr())
            .or_default();
        let id = q.envelope.body().msg_id;
        if list.iter().any(|k| k.envelope.body().msg_id == id) {
            return;
        }
        let at = list
            .iter()
            .position(|k| k.envelope.body().ts > q.envelope.body().ts)
            .unwrap_or(list.len());
        list.insert(at, q);
        self.unconfirmed_len += 1;
    }

    /// Whether every message kept for `to` can go over the live path now (a known
    /// node, young enough): only then may anything to `to` go live, or it would
    /// overtake what must travel through the mailbox.
    pub(super) fn all_live_eligible(&self, to: &SessionAddr, now_ms: u64) -> bool {
        self.unconfirmed.get(to).is_none_or(|list| {
            list.iter().all(|q| {
                q.peer.is_some() && now_ms.saturating_sub(q.envelope.body().ts) <= RETRY_WINDOW_MS
            })
        })
    }

    fn take_unconfirmed(&mut self, to: &SessionAddr) -> VecDeque<Queued> {
        let list = self.unconfirmed.remove(to).unwrap_or_default();
        self.unconfirmed_len -= list.len();
        list
    }

    /// Forgets the queued messages to `to` that `ids` names: they were delivered.
    pub(super) fn confirm(&mut self, to: &SessionAddr, ids: &[interlink_core::MsgId]) {
        let Some(list) = self.unconfirmed.get_mut(to) else {
            return;
        };
        let before = list.len();
        list.retain(|q| !ids.contains(&q.envelope.body().msg_id));
        self.unconfirmed_len -= before - list.len();
        if list.is_empty() {
            self.unconfirmed.remove(to);
        }
    }
}

impl Actor {
    /// Puts a message whose live attempt failed into its recipient's mailbox and answers
    /// its caller: queued, or refused because the mailbox is full. A live retry that
    /// failed again only goes back on the unconfirmed list: the mailbox already has it.
    pub(super) fn queue_in_mailbox(&mut self, q: Queued) {
        if q.reply.is_none() {
            self.queueing.keep_unconfirmed(q);
            return;
        }
        let to = q.envelope.body().recipient_addr();
        let key = key_of(&to);
        if let Some(prefetch) = self.queueing.prefetches.get_mut(&key) {
            if prefetch.waiting.len() < OUTBOX_PER_RECIPIENT {
                prefetch.waiting.push(q);
            } else if let Some(reply) = q.reply {
                let _ = reply.send(Err(SendError::Busy));
            }
            return;
        }
        if self.held_mailbox(&key).is_none() {
            self.start_prefetch(&to, vec![q]);
        } else {
            let base = self.held_or_empty(&to);
            self.admit(&to, base, vec![q], true);
        }
    }

    fn held_or_empty(&mut self, to: &SessionAddr) -> Mailbox {
        self.held_mailbox(&key_of(to))
            .cloned()
            .unwrap_or_else(|| Mailbox::new(to.key, to.session.clone()))
    }

    /// Starts fetching `to`'s mailbox, with `waiting` to admit when it is in. When no
    /// fetch can run (no peers, or too many fetches already) they are admitted into
    /// the copy at hand.
    fn start_prefetch(&mut self, to: &SessionAddr, waiting: Vec<Queued>) {
        if self.peers.is_empty() || self.queueing.prefetches.len() >= MAX_PREFETCHES {
            let base = self.held_or_empty(to);
            self.admit(to, base, waiting, false);
            return;
        }
        let key = key_of(to);
        let gathered = self.held_or_empty(to);
        let query = self.swarm.behaviour_mut().kad.get_record(key.clone());
        let now = Instant::now();
        if self.queueing.refreshed.len() >= MAX_PREFETCHES {
            self.queueing
                .refreshed
                .retain(|_, t| now.duration_since(*t) < REFRESH_INTERVAL);
        }
        if self.queueing.refreshed.len() < MAX_PREFETCHES {
            self.queueing.refreshed.insert(key.clone(), now);
        }
        self.queueing.prefetches.insert(
            key,
            Prefetch {
                query,
                started: now,
                gathered,
                waiting,
            },
        );
    }

    /// Admits `batch` into `base` (a copy of `to`'s mailbox), publishes what was kept
    /// and answers every caller. What does not fit is refused — after one more look at
    /// the current copy if `may_refresh` and the last look is old.
    fn admit(
        &mut self,
        to: &SessionAddr,
        mut base: Mailbox,
        batch: Vec<Queued>,
        may_refresh: bool,
    ) {
        let cfg = mailbox::Config::default();
        let now = crate::now_ms();
        let mut kept = Vec::new();
        let mut full = Vec::new();
        for q in batch {
            match base.insert(q.envelope.clone(), now, &cfg) {
                Ok(Inserted::Stored | Inserted::Duplicate) => kept.push(q),
                Ok(Inserted::Dropped) => full.push(q),
                Ok(_) => kept.push(q),
                Err(e) => {
                    if let Some(reply) = q.reply {
                        let _ = reply.send(Err(SendError::Invalid(e.to_string())));
                    }
                }
            }
        }
        // Durable before `queued`: a copy in memory (ours, or the DHT's) dies with a
        // process; the outbox does not.
        if let Err(e) = self.persist_queued(&kept) {
            for q in kept {
                if let Some(reply) = q.reply {
                    let _ = reply.send(Err(SendError::Outbox(e.to_string())));
                }
            }
            return;
        }
        if !kept.is_empty() {
            let held_by = crate::HeldBy {
                outbox: self.durable.is_some(),
                ..self.publish_mailbox(base.clone())
            };
            for mut q in kept {
                if let Some(reply) = q.reply.take() {
                    let _ = reply.send(Ok(SendOutcome::Queued {
                        msg_id: q.envelope.body().msg_id,
                        held_by,
                    }));
                }
                self.queueing.keep_unconfirmed(q);
            }
        }
        if full.is_empty() {
            return;
        }
        let key = key_of(to);
        let stale = self
            .queueing
            .refreshed
            .get(&key)
            .is_none_or(|t| t.elapsed() >= REFRESH_INTERVAL);
        if may_refresh && stale && !self.peers.is_empty() {
            self.start_prefetch(to, full);
            return;
        }
        let from = |sender: &IdentityKey| {
            base.pending()
                .filter(|e| e.body().sender == *sender)
                .count()
        };
        for q in full {
            let err = SendError::MailboxFull {
                waiting: base.len(),
                from_you: from(&q.envelope.body().sender),
            };
            if let Some(reply) = q.reply {
                let _ = reply.send(Err(err));
            }
        }
    }

    /// A holder's copy for a prefetch; `true` if `id` was one.
    pub(super) fn on_prefetch_record(
        &mut self,
        id: kad::QueryId,
        result: Result<kad::GetRecordOk, kad::GetRecordError>,
        last: bool,
    ) -> bool {
        let Some(key) = self
            .queueing
            .prefetches
            .iter()
            .find(|(_, p)| p.query == id)
            .map(|(k, _)| k.clone())
        else {
            return false;
        };
        if let (Ok(kad::GetRecordOk::FoundRecord(found)), Some(prefetch)) =
            (result, self.queueing.prefetches.get_mut(&key))
        {
            let cfg = mailbox::Config::default();
            let now = crate::now_ms();
            if let Ok((copy, _)) = Mailbox::decode(&found.record.value, now, &cfg)
                && copy.address() == prefetch.gathered.address()
            {
                let _ = prefetch.gathered.merge(&copy, now, &cfg);
            }
        }
        if last {
            self.finish_prefetch(&key);
        }
        true
    }

    fn finish_prefetch(&mut self, key: &RecordKey) {
        let Some(prefetch) = self.queueing.prefetches.remove(key) else {
            return;
        };
        if let Some(mut query) = self.swarm.behaviour_mut().kad.query_mut(&prefetch.query) {
            query.finish();
        }
        let to = prefetch.gathered.address();
        self.admit(&to, prefetch.gathered, prefetch.waiting, false);
    }

    /// Cuts short prefetches past [`PREFETCH_WAIT`] and answers settle calls past their
    /// deadline.
    pub(super) fn on_queueing_deadline(&mut self, now: Instant) {
        let due: Vec<RecordKey> = self
            .queueing
            .prefetches
            .iter()
            .filter(|(_, p)| now.duration_since(p.started) >= PREFETCH_WAIT)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            self.finish_prefetch(&key);
        }
        self.answer_settle_waiters(now);
    }

    /// Records the puts of one mailbox publication.
    pub(super) fn track_publication(&mut self, queries: Vec<PutId>) {
        if queries.is_empty() {
            self.queueing.settled.local_only += 1;
            return;
        }
        if self.queueing.publications.len() >= MAX_PUBLICATIONS {
            // Not followed: counted as unconfirmed rather than guessed.
            self.queueing.settled.local_only += 1;
            return;
        }
        let id = self.queueing.next_publication;
        self.queueing.next_publication += 1;
        self.queueing.publications.insert(id, queries.len());
        for q in queries {
            self.queueing.puts.insert(q, id);
        }
    }

    /// A put ended: the publication is confirmed by the first peer that took a copy,
    /// or left local when none of its puts reached one.
    pub(super) fn on_put_result(&mut self, id: PutId, ok: bool) {
        let Some(publication) = self.queueing.puts.remove(&id) else {
            return;
        };
        let Some(left) = self.queueing.publications.get_mut(&publication) else {
            return;
        };
        if ok {
            self.queueing.publications.remove(&publication);
            self.queueing.puts.retain(|_, p| *p != publication);
            self.queueing.settled.stored_remotely += 1;
        } else {
            *left -= 1;
            if *left == 0 {
                self.queueing.publications.remove(&publication);
                self.queueing.settled.local_only += 1;
            }
        }
        self.answer_settle_waiters(Instant::now());
    }

    /// Whether nothing queued is still on its way: no prefetch, no publication.
    fn queueing_idle(&self) -> bool {
        self.queueing.prefetches.is_empty()
            && self.queueing.publications.is_empty()
            && self.outbox_idle()
    }

    pub(super) fn settle(&mut self, timeout: Duration, reply: oneshot::Sender<Settled>) {
        if self.queueing_idle() || self.queueing.settle_waiters.len() >= MAX_SETTLE_WAITERS {
            let _ = reply.send(self.settled_now());
            return;
        }
        self.queueing
            .settle_waiters
            .push((Instant::now() + timeout, reply));
    }

    fn settled_now(&self) -> Settled {
        Settled {
            pending: self.queueing.publications.len() + self.queueing.prefetches.len(),
            ..self.queueing.settled
        }
    }

    fn answer_settle_waiters(&mut self, now: Instant) {
        if self.queueing.settle_waiters.is_empty() {
            return;
        }
        let idle = self.queueing_idle();
        let settled = self.settled_now();
        let waiters = std::mem::take(&mut self.queueing.settle_waiters);
        for (deadline, reply) in waiters {
            if idle || now >= deadline {
                let _ = reply.send(settled);
            } else {
                self.queueing.settle_waiters.push((deadline, reply));
            }
        }
    }

    /// `peer` showed life: it is worth a live attempt again, and the messages queued
    /// for its sessions go to it now.
    pub(super) fn peer_alive(&mut self, peer: PeerId) {
        self.mailboxes.alive(&peer);
        self.resend_kept_receipts(peer);
        let targets: Vec<SessionAddr> = self
            .queueing
            .unconfirmed
            .iter()
            .filter(|(_, list)| list.front().is_some_and(|q| q.peer == Some(peer)))
            .map(|(to, _)| to.clone())
            .collect();
        for to in targets {
            self.retry_unconfirmed(&to);
        }
    }

    /// Moves `to`'s unconfirmed messages to the front of its outbox queue (they are
    /// older than anything waiting there) and starts sending if nothing is in flight.
    pub(super) fn retry_unconfirmed(&mut self, to: &SessionAddr) {
        // Something that must go through the mailbox holds the rest back (order).
        if !self.queueing.all_live_eligible(to, crate::now_ms()) {
            return;
        }
        let list = self.queueing.take_unconfirmed(to);
        if list.is_empty() {
            return;
        }
        debug!(%to, count = list.len(), "recipient is back; retrying queued messages live");
        let queue = self.outbox_queue(to);
        let room = OUTBOX_PER_RECIPIENT.saturating_sub(queue.len());
        let mut list = list;
        // Beyond the room, the mailbox has them: they are not retried.
        list.truncate(room);
        for q in list.into_iter().rev() {
            queue.push_front(q);
        }
        self.kick(to);
    }

    /// Whether `to` has queued messages waiting for a live retry.
    pub(super) fn has_unconfirmed(&self, to: &SessionAddr) -> bool {
        self.queueing.unconfirmed.contains_key(to)
    }

    /// The recipient `to` receipted `ids` it collected from its mailbox: they need no
    /// live retry.
    pub(super) fn confirm_unconfirmed(&mut self, to: &SessionAddr, ids: &[interlink_core::MsgId]) {
        self.queueing.confirm(to, ids);
        self.forget_sent(ids);
    }

    /// A live retry of a queued message was receipted.
    pub(super) fn on_retry_receipted(&mut self, to: &SessionAddr, msg_id: interlink_core::MsgId) {
        self.forget_sent(&[msg_id]);
        self.emit(Event::Receipted {
            msg_id,
            to: to.clone(),
        });
    }
}
