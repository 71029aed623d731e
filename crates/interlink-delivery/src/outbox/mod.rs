//! The sender side: the outbox, live attempts, mailbox copies, receipts, expiry.
//!
//! Per outbox entry: `new` (live at once if it can go; the caller waits) →
//! `persisting` (it could not go live, or its attempt did not deliver it: written, not
//! yet durable; the caller waits) → `pending` (durable), and while pending either
//! `live in flight` or `held` (published to the recipient's mailbox, retried live when
//! the recipient shows life) → removed
//! when `delivered` (a verified receipt), `refused` (a final refusal) or `expired`
//! (the retention ended).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use interlink_core::{
    MsgId, collected,
    limits::{MAX_DELIVER_REQUEST_BYTES, MAX_FUTURE_SKEW_MS},
    mailbox::{Inserted, Mailbox},
    wire::{Receipt, ReceiptState, SessionAddr, Signed},
};

use crate::{
    config::{OUTBOX_CAPACITY, OUTBOX_PER_RECIPIENT, REQUESTS_IN_FLIGHT},
    engine::Ctx,
    routes::LIVE_PATIENCE_MS,
    types::{
        CallId, Event, HeldBy, NotKept, OutboxEntry, Outcome, Output, PeerRef, PutToken, Refusal,
        ReqId, Response, SendError, SendFailure, StoreError,
    },
};

mod confirm;

#[derive(Debug)]
struct Pending {
    entry: OutboxEntry,
    /// The outbox write is durable; until then `queued` is not said.
    stored: bool,
    /// The outbox write was asked for ([`Output::PersistOutbox`]). A message that can
    /// go live at once is not written unless its live attempt does not deliver it: on
    /// the happy path the outbox costs nothing.
    persisting: bool,
    /// A caller still waiting for its first answer.
    caller: Option<CallId>,
    in_flight: bool,
    /// The recipient called it too old for the live path: mailbox only.
    mailbox_only: bool,
    /// The outbox write failed while a live attempt was on its way: the caller is
    /// answered when the attempt ends (delivered, or the write error).
    write_failed: Option<StoreError>,
    /// A session without an outbox: the caller waits for a holder to answer that it
    /// keeps the message; this is the latest publication that carries it
    /// (`outbox::confirm`).
    awaiting: Option<PutToken>,
    /// Live attempts of it lost with their connection while the peer stayed connected
    /// ([`SendFailure::ConnectionLost`]), each sent again at once: at most
    /// [`MAX_LOST_RESENDS`].
    lost: u8,
}

/// How often a message's live attempt is sent again at once after its connection
/// closed under it while the peer stayed connected. The peer moving from TCP to QUIC
/// closes one under a request it did not know of; the bound keeps a peer that keeps
/// opening and closing connections from holding a message off the mailbox path.
const MAX_LOST_RESENDS: u8 = 2;

#[derive(Debug)]
struct Flight {
    to: SessionAddr,
    peer: PeerRef,
    ids: Vec<MsgId>,
    sent: u64,
    /// When the attempt is given up: the end of its window, or — while the shell is
    /// connected to the peer — later, up to [`LIVE_PATIENCE_MS`] after it was sent.
    deadline: u64,
    /// The end of its window (the live timeout when it was sent).
    window_end: u64,
}

/// Live attempts that ran out, remembered so a late answer still counts as a sign of
/// life and a measurement: one slow answer must not leave the node marked unreachable
/// (and every later message queued) until something else shows it alive.
const MAX_LATE_FLIGHTS: usize = 256;

/// The sender side of one session.
#[derive(Debug, Default)]
pub(crate) struct Sender {
    entries: BTreeMap<MsgId, Pending>,
    /// Per recipient session, its entries in send (timestamp) order.
    queues: BTreeMap<SessionAddr, VecDeque<MsgId>>,
    flights: BTreeMap<ReqId, Flight>,
    flight_of: BTreeMap<SessionAddr, ReqId>,
    /// Attempts that ran out → their node and when they were sent (at most
    /// [`MAX_LATE_FLIGHTS`], the oldest forgotten first).
    late: BTreeMap<ReqId, (PeerRef, u64)>,
    /// After a retryable refusal: no live attempt to this session before then.
    backoff: BTreeMap<SessionAddr, u64>,
    last_ts: u64,
    next_req: u64,
    next_republish: u64,
    /// A session without an outbox: publications whose holders' answers it waits for.
    followed: BTreeMap<PutToken, confirm::Followed>,
}

/// How a pending entry ends.
enum End {
    Delivered(SessionAddr),
    Refused(Refusal),
    Expired(NotKept),
}

impl Sender {
    /// A sender holding the durable `outbox`.
    pub(crate) fn restore(outbox: Vec<OutboxEntry>, now: u64) -> Self {
        let mut s = Sender {
            next_republish: now,
            ..Sender::default()
        };
        for entry in outbox {
            let b = entry.envelope.body();
            let id = b.msg_id;
            // A restore after a clock step back must not reuse timestamps.
            s.last_ts = s.last_ts.max(b.ts);
            let to = b.recipient_addr();
            if s.entries.contains_key(&id) {
                continue;
            }
            s.insert_queued(&to, id, b.ts);
            s.entries.insert(
                id,
                Pending {
                    entry,
                    stored: true,
                    persisting: false,
                    caller: None,
                    in_flight: false,
                    mailbox_only: false,
                    write_failed: None,
                    lost: 0,
                    awaiting: None,
                },
            );
        }
        s
    }

    /// Strictly increasing envelope timestamps, never behind what the outbox holds.
    pub(crate) fn next_ts(&mut self, now: u64) -> u64 {
        let ts = now.max(self.last_ts.saturating_add(1));
        self.last_ts = ts;
        ts
    }

    /// Publishes every recipient's copy (after a restore: other holders may have
    /// nothing) and tries the live path where a route is known.
    pub(crate) fn start(&mut self, ctx: &mut Ctx<'_>) {
        for to in self.recipients() {
            self.publish(ctx, &to);
            self.settle(ctx, &to, false);
        }
        self.next_republish = ctx.now.saturating_add(ctx.cfg.republish_interval_ms);
    }

    pub(crate) fn send(
        &mut self,
        ctx: &mut Ctx<'_>,
        caller: CallId,
        envelope: Signed<interlink_core::wire::Envelope>,
        route: Option<PeerRef>,
    ) {
        let b = envelope.body();
        let reply = |ctx: &mut Ctx<'_>, e| {
            ctx.out.push_back(Output::Reply {
                caller,
                outcome: Err(e),
            })
        };
        if b.sender_addr() != *ctx.me {
            return reply(ctx, SendError::NotMine);
        }
        if self.entries.contains_key(&b.msg_id) {
            return reply(ctx, SendError::DuplicateId);
        }
        let to = b.recipient_addr();
        let held = self.queues.get(&to).map_or(0, VecDeque::len);
        if held >= OUTBOX_PER_RECIPIENT {
            return reply(
                ctx,
                SendError::OutboxFull {
                    held,
                    limit: OUTBOX_PER_RECIPIENT,
                },
            );
        }
        if self.entries.len() >= OUTBOX_CAPACITY {
            return reply(
                ctx,
                SendError::OutboxFull {
                    held: self.entries.len(),
                    limit: OUTBOX_CAPACITY,
                },
            );
        }
        if let Some(p) = route {
            ctx.routes.set(to.clone(), Some(p));
        }
        self.last_ts = self.last_ts.max(b.ts);
        let id = b.msg_id;
        let entry = OutboxEntry { envelope };
        self.insert_queued(&to, id, entry.envelope.body().ts);
        self.entries.insert(
            id,
            Pending {
                entry,
                stored: false,
                persisting: false,
                caller: Some(caller),
                in_flight: false,
                mailbox_only: false,
                write_failed: None,
                lost: 0,
                awaiting: None,
            },
        );
        // Live at once if it can go; written to the outbox if it cannot (`settle`).
        self.settle(ctx, &to, false);
    }

    pub(crate) fn outbox_stored(
        &mut self,
        ctx: &mut Ctx<'_>,
        key: MsgId,
        result: Result<(), StoreError>,
    ) {
        let Some(p) = self.entries.get_mut(&key) else {
            return;
        };
        if p.stored {
            return;
        }
        let to = p.entry.envelope.body().recipient_addr();
        match result {
            Ok(()) => {
                p.stored = true;
                self.settle(ctx, &to, false);
            }
            Err(e) if p.in_flight => {
                // Its live attempt may still deliver it: the caller is answered when
                // the attempt ends, with the truth.
                p.write_failed = Some(e);
            }
            Err(e) => {
                // Nothing durable, nothing claimed: the caller learns it failed.
                let caller = p.caller.take();
                self.forget(&key);
                if let Some(caller) = caller {
                    ctx.out.push_back(Output::Reply {
                        caller,
                        outcome: Err(SendError::Store(e)),
                    });
                }
                // Mail behind it was waiting for this write to settle.
                self.settle(ctx, &to, false);
            }
        }
    }

    pub(crate) fn response(
        &mut self,
        ctx: &mut Ctx<'_>,
        req: ReqId,
        result: Result<Response, SendFailure>,
    ) {
        let at_cap = self.flights.len() >= REQUESTS_IN_FLIGHT;
        let Some(f) = self.flights.remove(&req) else {
            // An answer after the engine's own timeout: its messages went on by the
            // mailbox, but the node is alive and its answer time is known.
            if let (Some((peer, sent)), Ok(_)) = (self.late.remove(&req), &result) {
                ctx.routes.answered_in(peer, ctx.now.saturating_sub(sent));
                ctx.routes.alive(peer);
                self.alive(ctx, peer);
            }
            return;
        };
        match &result {
            Ok(_) => ctx
                .routes
                .answered_in(f.peer, ctx.now.saturating_sub(f.sent)),
            Err(SendFailure::Timeout) => {
                ctx.routes.timed_out(f.peer);
                if self.late.len() >= MAX_LATE_FLIGHTS {
                    self.late.pop_first();
                }
                self.late.insert(req, (f.peer, f.sent));
            }
            Err(_) => {}
        }
        if at_cap {
            // Others may have been waiting for a free slot, not for their own answer.
            for to in self.recipients() {
                if to != f.to {
                    self.settle(ctx, &to, false);
                }
            }
        }
        self.flight_of.remove(&f.to);
        for id in &f.ids {
            if let Some(p) = self.entries.get_mut(id) {
                p.in_flight = false;
            }
        }
        let resp = match result {
            Ok(r) if r.results.len() == f.ids.len() => r,
            Ok(_) => {
                // A malformed answer: the node is alive but odd; back off and hold.
                self.backoff
                    .insert(f.to.clone(), ctx.now + ctx.cfg.retry_interval_ms);
                self.publish(ctx, &f.to);
                self.fail_unwritten(ctx, &f.ids);
                return self.settle(ctx, &f.to, false);
            }
            Err(SendFailure::ConnectionLost) if self.resend_lost(&f.ids) => {
                // Not a failure of the peer: the same batch goes again on the
                // connection that is left (the recipient receipts a copy it stored).
                self.fail_unwritten(ctx, &f.ids);
                return self.settle(ctx, &f.to, false);
            }
            Err(_) => {
                ctx.routes.failed(f.peer);
                self.publish(ctx, &f.to);
                self.fail_unwritten(ctx, &f.ids);
                return self.settle(ctx, &f.to, false);
            }
        };
        let receipted = receipted_ids(resp.receipt.as_ref(), &f.to, ctx);
        let mut hold = false;
        for (id, result) in f.ids.iter().zip(resp.results) {
            match result {
                None if receipted.contains(id) => self.end(ctx, id, End::Delivered(f.to.clone())),
                // Said held but not receipted: not proof; try again later.
                None => hold = true,
                Some(r) if r.is_final() => self.end(ctx, id, End::Refused(r)),
                Some(Refusal::Stale) => {
                    if let Some(p) = self.entries.get_mut(id) {
                        p.mailbox_only = true;
                    }
                    hold = true;
                }
                Some(_) => hold = true,
            }
        }
        if hold {
            self.backoff
                .insert(f.to.clone(), ctx.now + ctx.cfg.retry_interval_ms);
            self.publish(ctx, &f.to);
        }
        self.fail_unwritten(ctx, &f.ids);
        self.settle(ctx, &f.to, false);
    }

    /// Whether a batch lost with its connection goes again at once: every message in
    /// it has a resend left (each is counted).
    fn resend_lost(&mut self, ids: &[MsgId]) -> bool {
        let left = ids.iter().all(|id| {
            self.entries
                .get(id)
                .is_none_or(|p| p.lost < MAX_LOST_RESENDS)
        });
        if left {
            for id in ids {
                if let Some(p) = self.entries.get_mut(id) {
                    p.lost += 1;
                }
            }
        }
        left
    }

    /// Answers the callers of messages whose outbox write failed during their live
    /// attempt and that were not delivered by it: nothing durable, nothing claimed.
    fn fail_unwritten(&mut self, ctx: &mut Ctx<'_>, ids: &[MsgId]) {
        for id in ids {
            let Some(p) = self.entries.get_mut(id) else {
                continue;
            };
            let Some(e) = p.write_failed.take() else {
                continue;
            };
            let caller = p.caller.take();
            self.forget(id);
            if let Some(caller) = caller {
                ctx.out.push_back(Output::Reply {
                    caller,
                    outcome: Err(SendError::Store(e)),
                });
            }
        }
    }

    /// Publishes every recipient's copy again (the node woke, or got its first peer
    /// after none: what it published alone reached nobody).
    pub(crate) fn republish(&mut self, ctx: &mut Ctx<'_>) {
        for to in self.recipients() {
            self.publish(ctx, &to);
        }
    }

    pub(crate) fn receipt_collected(&mut self, ctx: &mut Ctx<'_>, receipt: &Signed<Receipt>) {
        let Ok(from) = collected::check(receipt.body(), &ctx.me.key, ctx.now) else {
            return;
        };
        for id in &receipt.body().msg_ids {
            // Counts only for a message this session sent to the signing session.
            let ours = self
                .entries
                .get(id)
                .is_some_and(|p| p.stored && p.entry.envelope.body().recipient_addr() == from);
            if ours {
                self.end(ctx, id, End::Delivered(from.clone()));
            }
        }
        self.settle(ctx, &from, false);
    }

    /// The shell has no connection left to `peer`: an attempt waited for past its
    /// window only because the peer was connected ends now.
    pub(crate) fn disconnected(&mut self, ctx: &mut Ctx<'_>, peer: PeerRef) {
        let now = ctx.now;
        let over: Vec<ReqId> = self
            .flights
            .iter()
            .filter(|(_, f)| f.peer == peer && f.window_end <= now)
            .map(|(r, _)| *r)
            .collect();
        for req in over {
            self.response(ctx, req, Err(SendFailure::Timeout));
        }
    }

    pub(crate) fn alive(&mut self, ctx: &mut Ctx<'_>, peer: PeerRef) {
        for s in ctx.routes.sessions_of(peer) {
            self.backoff.remove(&s);
            if self.queues.contains_key(&s) {
                self.settle(ctx, &s, false);
            }
        }
    }

    pub(crate) fn timer(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        let late: Vec<ReqId> = self
            .flights
            .iter()
            .filter(|(_, f)| f.deadline <= now)
            .map(|(r, _)| *r)
            .collect();
        for req in late {
            // Past its window, but the connection to the peer is up: it is slow (loss
            // on the path, a connection being replaced), not gone. Given up now, the
            // peer would be marked unreachable and every message behind it answered
            // `queued` while the peer stayed connected (issue 51). The shell reports
            // the attempt's failure if its connection goes; the patience bounds the
            // wait on a peer that keeps a connection but does not answer.
            if let Some(f) = self.flights.get_mut(&req) {
                let patience = f.sent.saturating_add(LIVE_PATIENCE_MS);
                if ctx.routes.is_connected(f.peer) && now < patience {
                    f.deadline = patience;
                    continue;
                }
            }
            self.response(ctx, req, Err(SendFailure::Timeout));
        }
        let retention = ctx.cfg.retention_ms();
        let expired: Vec<(MsgId, u64)> = self
            .entries
            .iter()
            .filter(|(_, p)| p.stored)
            .map(|(id, p)| (*id, now.saturating_sub(p.entry.envelope.body().ts)))
            .filter(|(_, age)| *age >= retention)
            .collect();
        for (id, age_ms) in expired {
            self.end(ctx, &id, End::Expired(NotKept::RetentionEnded { age_ms }));
        }
        let due: Vec<SessionAddr> = self
            .backoff
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(s, _)| s.clone())
            .collect();
        for s in due {
            self.backoff.remove(&s);
            self.settle(ctx, &s, false);
        }
        self.end_late_puts(ctx);
        if now >= self.next_republish {
            for to in self.recipients() {
                self.publish(ctx, &to);
            }
            self.next_republish = now.saturating_add(ctx.cfg.republish_interval_ms);
        }
    }

    /// The earliest time [`Sender::timer`] has work.
    pub(crate) fn deadline(&self, retention: u64) -> Option<u64> {
        let flights = self.flights.values().map(|f| f.deadline);
        let backoff = self.backoff.values().copied();
        let expiry = self
            .entries
            .values()
            .filter(|p| p.stored)
            .map(|p| p.entry.envelope.body().ts.saturating_add(retention));
        let republish = (!self.entries.is_empty()).then_some(self.next_republish);
        let puts = self.followed.values().map(|f| f.deadline);
        flights
            .chain(backoff)
            .chain(expiry)
            .chain(republish)
            .chain(puts)
            .min()
    }

    /// Sizes, for the caps checks: entries, most for one recipient, flights,
    /// publications followed.
    pub(crate) fn sizes(&self) -> (usize, usize, usize, usize) {
        let per_recipient = self.queues.values().map(VecDeque::len).max().unwrap_or(0);
        (
            self.entries.len(),
            per_recipient,
            self.flights.len(),
            self.followed.len(),
        )
    }

    /// Sends the next live batch to `to` if it is reachable and nothing is in flight,
    /// and answers every waiting caller whose message will not go live now: those are
    /// published to the mailbox and told `queued`.
    fn settle(&mut self, ctx: &mut Ctx<'_>, to: &SessionAddr, force_publish: bool) {
        let Some(queue) = self.queues.get(to) else {
            return;
        };
        let now = ctx.now;
        let backed_off = self.backoff.get(to).is_some_and(|at| *at > now);
        let route = ctx.routes.reachable(to).filter(|_| !backed_off);
        // Too close to the live window's edge for the recipient's clock to take it.
        let live_cutoff = ctx
            .cfg
            .live_window_ms
            .saturating_sub(MAX_FUTURE_SKEW_MS + ctx.cfg.live_timeout_ms);
        let eligible = |p: &Pending| {
            !p.mailbox_only && now.saturating_sub(p.entry.envelope.body().ts) < live_cutoff
        };
        if let Some(peer) = route
            && !self.flight_of.contains_key(to)
            && self.flights.len() < REQUESTS_IN_FLIGHT
        {
            let mut batch = Vec::new();
            let mut bytes = 0usize;
            let limit = ctx.routes.batch_limit(peer);
            for id in queue {
                let Some(p) = self.entries.get(id) else { break };
                // FIFO: the batch is a prefix; an entry not for the live path stops it,
                // so nothing overtakes it. An entry not durable yet may go: a receipt
                // proves delivery whatever the outbox holds, and `queued` still waits
                // for the write.
                if p.write_failed.is_some() || !eligible(p) || batch.len() >= limit {
                    break;
                }
                let size = p.entry.envelope.to_bytes().len();
                if !batch.is_empty() && bytes + size > MAX_DELIVER_REQUEST_BYTES {
                    break;
                }
                bytes += size;
                batch.push(*id);
            }
            if !batch.is_empty() {
                let req = ReqId(self.next_req);
                self.next_req += 1;
                let mut envelopes = Vec::with_capacity(batch.len());
                for id in &batch {
                    if let Some(p) = self.entries.get_mut(id) {
                        p.in_flight = true;
                        envelopes.push(p.entry.envelope.clone());
                    }
                }
                ctx.out.push_back(Output::SendRequest {
                    req,
                    peer,
                    envelopes,
                });
                let window_end = now + ctx.routes.live_timeout(peer, ctx.cfg.live_timeout_ms);
                self.flights.insert(
                    req,
                    Flight {
                        to: to.clone(),
                        peer,
                        ids: batch,
                        sent: now,
                        deadline: window_end,
                        window_end,
                    },
                );
                self.flight_of.insert(to.clone(), req);
            }
        }
        // Messages not in flight that will not be soon are written to the outbox, and
        // their callers told `queued` once they are durable, in order: a caller is not
        // answered while an earlier message is not durable yet (the copy published
        // holds the durable prefix only).
        let mut blocked = route.is_none();
        let mut answer = Vec::new();
        let mut persist = Vec::new();
        let mut unstored_before = false;
        if let Some(queue) = self.queues.get(to) {
            for id in queue {
                let Some(p) = self.entries.get(id) else {
                    continue;
                };
                if !eligible(p) {
                    blocked = true;
                }
                if p.in_flight {
                    unstored_before |= !p.stored;
                    continue;
                }
                if !p.stored {
                    if blocked && !p.persisting && p.write_failed.is_none() {
                        persist.push(*id);
                    }
                    unstored_before = true;
                    continue;
                }
                if p.caller.is_some() && p.awaiting.is_none() && blocked && !unstored_before {
                    answer.push(*id);
                }
            }
        }
        for id in persist {
            if let Some(p) = self.entries.get_mut(&id) {
                p.persisting = true;
                ctx.out.push_back(Output::PersistOutbox {
                    entry: p.entry.clone(),
                });
            }
        }
        if answer.is_empty() && !force_publish {
            return;
        }
        let (put, held) = self.publish(ctx, to);
        for id in answer {
            if !ctx.cfg.keeps_outbox {
                // Nothing here keeps it: `queued` waits for a holder's word.
                let put = put.filter(|_| held.contains(&id));
                if !(ctx.cfg.bugs.queued_without_holder && put.is_some()) {
                    self.await_holders(ctx, id, put);
                    continue;
                }
            }
            if let Some(caller) = self.entries.get_mut(&id).and_then(|p| p.caller.take()) {
                let held_by = if held.contains(&id) {
                    HeldBy::OutboxAndMailbox
                } else {
                    HeldBy::Outbox
                };
                ctx.out.push_back(Output::Reply {
                    caller,
                    outcome: Ok(Outcome::Queued { held_by }),
                });
            }
        }
    }

    /// Publishes a copy of `to`'s mailbox holding every durable pending entry for it,
    /// so a holder that keeps a later message also has every earlier one (the merge
    /// keeps the oldest). Returns the publication, if one went out, and the ids the
    /// copy took.
    fn publish(
        &mut self,
        ctx: &mut Ctx<'_>,
        to: &SessionAddr,
    ) -> (Option<PutToken>, BTreeSet<MsgId>) {
        let mut taken = BTreeSet::new();
        let Some(queue) = self.queues.get(to) else {
            return (None, taken);
        };
        let mut mb = Mailbox::new(to.key, to.session.clone());
        for id in queue {
            // A prefix only: publishing a later message without an earlier one still
            // being written would let the mailbox deliver it first.
            let Some(p) = self.entries.get(id).filter(|p| p.stored) else {
                break;
            };
            if let Ok(Inserted::Stored | Inserted::Duplicate) =
                mb.insert(p.entry.envelope.clone(), ctx.now, &ctx.cfg.mailbox)
            {
                taken.insert(*id);
            }
        }
        if taken.is_empty() {
            return (None, taken);
        }
        let put = ctx.put(mb);
        if !ctx.cfg.keeps_outbox {
            self.follow(ctx, put, &taken);
        }
        (Some(put), taken)
    }

    fn end(&mut self, ctx: &mut Ctx<'_>, id: &MsgId, end: End) {
        let Some(p) = self.entries.get(id) else {
            return;
        };
        let to = p.entry.envelope.body().recipient_addr();
        let caller = p.caller;
        // Only what was written (or is being written) has anything to remove: a message
        // delivered on its first live attempt never touches the disk.
        let written = p.stored || p.persisting;
        self.forget(id);
        if written {
            ctx.out.push_back(Output::RemoveOutbox { key: *id });
        }
        let msg_id = *id;
        match (caller, end) {
            (Some(caller), End::Delivered(to)) => ctx.out.push_back(Output::Reply {
                caller,
                outcome: Ok(Outcome::Delivered { to }),
            }),
            (Some(caller), End::Refused(reason)) => ctx.out.push_back(Output::Reply {
                caller,
                outcome: Ok(Outcome::Refused { reason }),
            }),
            (Some(caller), End::Expired(why)) => ctx.out.push_back(Output::Reply {
                caller,
                outcome: Ok(Outcome::NotKept { why }),
            }),
            (None, End::Delivered(to)) => ctx
                .out
                .push_back(Output::Event(Event::Delivered { msg_id, to })),
            (None, End::Refused(reason)) => {
                ctx.out
                    .push_back(Output::Event(Event::Refused { msg_id, to, reason }))
            }
            (None, End::Expired(why)) => {
                ctx.out
                    .push_back(Output::Event(Event::Expired { msg_id, to, why }))
            }
        }
    }

    fn forget(&mut self, id: &MsgId) {
        let Some(p) = self.entries.remove(id) else {
            return;
        };
        let to = p.entry.envelope.body().recipient_addr();
        if let Some(q) = self.queues.get_mut(&to) {
            q.retain(|x| x != id);
            if q.is_empty() {
                self.queues.remove(&to);
                self.backoff.remove(&to);
            }
        }
    }

    fn insert_queued(&mut self, to: &SessionAddr, id: MsgId, ts: u64) {
        let entries = &self.entries;
        let q = self.queues.entry(to.clone()).or_default();
        // Send order is timestamp order; a restored outbox comes in any order.
        let pos = q
            .iter()
            .position(|x| {
                entries
                    .get(x)
                    .is_some_and(|p| (p.entry.envelope.body().ts, *x) > (ts, id))
            })
            .unwrap_or(q.len());
        q.insert(pos, id);
    }

    fn recipients(&self) -> Vec<SessionAddr> {
        self.queues.keys().cloned().collect()
    }
}

/// The ids a live receipt proves delivered: signed by the recipient session the request
/// went to, for this sender, saying `delivered`.
fn receipted_ids(
    receipt: Option<&Signed<Receipt>>,
    to: &SessionAddr,
    ctx: &Ctx<'_>,
) -> BTreeSet<MsgId> {
    let Some(r) = receipt.map(Signed::body) else {
        return BTreeSet::new();
    };
    if r.recipient != to.key
        || r.recipient_session != to.session
        || r.sender != ctx.me.key
        || r.state != ReceiptState::Delivered
    {
        return BTreeSet::new();
    }
    r.msg_ids.iter().copied().collect()
}
