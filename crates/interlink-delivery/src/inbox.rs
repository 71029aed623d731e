//! The recipient side: live requests, mailbox drains, the inbox index, receipts, acks.
//!
//! Nothing is marked held, receipted or acked before its inbox append is durable
//! ([`Input::InboxStored`](crate::Input::InboxStored) `Ok`). One append is in flight at a
//! time, in arrival order, and a failed append fails everything queued behind it: a
//! later message of a sender must never be stored ahead of an earlier one that failed.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use interlink_core::{
    IdentityKey, MsgId, collected,
    limits::{HOUR_MS, MAX_DELIVER_BATCH, MAX_FUTURE_SKEW_MS},
    mailbox::{Mailbox, record_key},
    trust::{Decision, Gate},
    wire::{Envelope, IssuedPasses, Receipt, ReceiptState, SessionAddr, Signed, VERSION},
};

use crate::{
    ack::make_acks,
    config::{
        APPEND_QUEUE, COLLECTED_RECEIPTS_PENDING, INBOUND_PER_PEER, INBOUND_WAITING,
        INBOX_INDEX_CAPACITY, RECEIPT_ATTEMPTS,
    },
    engine::Ctx,
    types::{
        EntryKey, Event, InboundId, Output, PeerRef, ReceiptId, Refusal, Response, SendFailure,
        StoreError, StoreToken,
    },
};

/// A collected-mail receipt is given up this long after it was made.
const RECEIPT_TTL_MS: u64 = HOUR_MS;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Held,
    Wait(EntryKey),
    Refused(Refusal),
}

#[derive(Debug)]
struct Waiting {
    req: InboundId,
    from: PeerRef,
    sender: Option<IdentityKey>,
    items: Vec<(MsgId, Item)>,
    /// The receipt signed while the append it waits on was being written
    /// ([`Input::Spare`](crate::Input::Spare)): used if it lists what is held at the
    /// answer, else signed again.
    presigned: Option<Signed<Receipt>>,
}

#[derive(Debug)]
struct Queued {
    key: EntryKey,
    env: Signed<Envelope>,
    from_mailbox: bool,
}

#[derive(Debug)]
struct Append {
    token: StoreToken,
    items: Vec<Queued>,
}

#[derive(Debug)]
struct OutReceipt {
    id: ReceiptId,
    to: SessionAddr,
    receipt: Signed<Receipt>,
    attempts: u32,
    created: u64,
    in_flight: bool,
}

enum Known {
    Held,
    Pending,
    New,
}

/// The recipient side of one session.
#[derive(Debug)]
pub(crate) struct Recipient {
    gate: Gate,
    /// What the inbox durably holds: (sender, id) → stored at.
    index: BTreeMap<EntryKey, u64>,
    index_order: VecDeque<(u64, EntryKey)>,
    appending: Option<Append>,
    queue: Vec<Queued>,
    /// Keys in `appending` or `queue`.
    pending: BTreeSet<EntryKey>,
    waiting: Vec<Waiting>,
    receipts: VecDeque<OutReceipt>,
    next_token: u64,
    next_receipt: u64,
    next_drain: u64,
    /// This session's mailbox passes for the senders it receipts: every receipt hands
    /// its sender the pass to write back while this session sleeps.
    passes: IssuedPasses,
}

impl Recipient {
    pub(crate) fn restore(
        gate: Gate,
        index: impl IntoIterator<Item = (IdentityKey, MsgId, u64)>,
        now: u64,
    ) -> Self {
        let mut order: Vec<(u64, EntryKey)> = index
            .into_iter()
            .map(|(sender, id, at)| (at, (sender, id)))
            .collect();
        order.sort();
        let mut r = Recipient {
            gate,
            index: BTreeMap::new(),
            index_order: VecDeque::new(),
            appending: None,
            queue: Vec::new(),
            pending: BTreeSet::new(),
            waiting: Vec::new(),
            receipts: VecDeque::new(),
            next_token: 0,
            next_receipt: 0,
            next_drain: now,
            passes: IssuedPasses::default(),
        };
        for (at, key) in order {
            r.index_insert(key, at);
        }
        r
    }

    pub(crate) fn gate(&self) -> &Gate {
        &self.gate
    }

    pub(crate) fn gate_mut(&mut self) -> &mut Gate {
        &mut self.gate
    }

    /// Asks for this session's mailbox now.
    pub(crate) fn drain(&mut self, ctx: &mut Ctx<'_>) {
        ctx.out.push_back(Output::DhtGet {
            key: record_key(&ctx.me.key, &ctx.me.session),
        });
        self.next_drain = ctx.now.saturating_add(ctx.cfg.drain_interval_ms);
    }

    pub(crate) fn deliver_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: PeerRef,
        req: InboundId,
        envelopes: Vec<Signed<Envelope>>,
    ) {
        let from_peer = self.waiting.iter().filter(|w| w.from == from).count();
        if self.waiting.len() >= INBOUND_WAITING || from_peer >= INBOUND_PER_PEER {
            let results = envelopes.iter().map(|_| Some(Refusal::Busy)).collect();
            ctx.out.push_back(Output::Respond {
                req,
                response: Response {
                    receipt: None,
                    results,
                },
            });
            return;
        }
        let first = envelopes.first().map(|e| e.body().sender_addr());
        let mut blocked = false;
        let mut items = Vec::with_capacity(envelopes.len());
        for (i, env) in envelopes.into_iter().enumerate() {
            let b = env.body();
            let id = b.msg_id;
            if i >= MAX_DELIVER_BATCH || Some(b.sender_addr()) != first {
                items.push((id, Item::Refused(Refusal::Malformed)));
                continue;
            }
            if blocked {
                items.push((id, Item::Refused(Refusal::Behind)));
                continue;
            }
            let key = (b.sender, id);
            let item = match self.known(ctx, &key) {
                // A retry of something stored is receipted again.
                Known::Held => Item::Held,
                Known::Pending => Item::Wait(key),
                Known::New => match self
                    .gate
                    .decide(&env, ctx.me, ctx.cfg.live_window_ms, ctx.now)
                {
                    Decision::Deliver if self.queue.len() >= APPEND_QUEUE => {
                        blocked = true;
                        Item::Refused(Refusal::Busy)
                    }
                    Decision::Deliver => {
                        self.enqueue(ctx, key, env, false);
                        Item::Wait(key)
                    }
                    Decision::HoldKnock(k) => {
                        // Holding it is its store; it is receipted, never in the inbox.
                        ctx.out.push_back(Output::Event(Event::KnockHeld(k)));
                        Item::Held
                    }
                    Decision::Drop(reason) => {
                        let r = Refusal::from_drop(&reason);
                        if !r.is_final() {
                            blocked = true;
                        }
                        ctx.out.push_back(Output::Event(Event::Dropped {
                            from: env.body().sender_addr(),
                            msg_id: id,
                            reason: r,
                        }));
                        Item::Refused(r)
                    }
                },
            };
            items.push((id, item));
        }
        self.waiting.push(Waiting {
            req,
            from,
            sender: first.map(|a| a.key),
            items,
            presigned: None,
        });
        self.flush(ctx);
        self.answer_ready(ctx);
    }

    pub(crate) fn mailbox_fetched(&mut self, ctx: &mut Ctx<'_>, copy: &Mailbox) {
        if copy.address() != *ctx.me {
            return;
        }
        let window = ctx.cfg.retention_ms();
        let mut blocked: BTreeSet<IdentityKey> = BTreeSet::new();
        let mut ack = Vec::new();
        let mut again = Vec::new();
        for env in copy.pending() {
            let b = env.body();
            if blocked.contains(&b.sender) {
                continue;
            }
            let key = (b.sender, b.msg_id);
            match self.known(ctx, &key) {
                Known::Held => {
                    // Already stored: ack it again so holders drop it, and receipt it
                    // again (the sender may have missed the first receipt).
                    ack.push(key);
                    again.push(b.clone());
                }
                Known::Pending => {}
                Known::New => match self.gate.decide(env, ctx.me, window, ctx.now) {
                    Decision::Deliver if self.queue.len() >= APPEND_QUEUE => {
                        blocked.insert(b.sender);
                    }
                    Decision::Deliver => self.enqueue(ctx, key, env.clone(), true),
                    Decision::HoldKnock(k) => {
                        ctx.out.push_back(Output::Event(Event::KnockHeld(k)));
                        ack.push(key);
                    }
                    Decision::Drop(reason) => {
                        let r = Refusal::from_drop(&reason);
                        if r.is_final() {
                            // Never deliverable here: let holders drop it.
                            ack.push(key);
                        } else {
                            // Later mail of this sender waits behind it (order).
                            blocked.insert(b.sender);
                        }
                    }
                },
            }
        }
        self.publish_acks(ctx, &ack);
        self.queue_receipts(ctx, &again);
        self.flush(ctx);
    }

    pub(crate) fn inbox_stored(
        &mut self,
        ctx: &mut Ctx<'_>,
        token: StoreToken,
        result: Result<(), StoreError>,
        refused: &[(EntryKey, Refusal)],
    ) {
        if self.appending.as_ref().map(|a| a.token) != Some(token) {
            return;
        }
        let Some(app) = self.appending.take() else {
            return;
        };
        match result {
            Ok(()) => {
                let mut keys = Vec::with_capacity(app.items.len());
                let mut collected = Vec::new();
                let refusal_of =
                    |k: &EntryKey| refused.iter().find(|(r, _)| r == k).map(|(_, r)| *r);
                for q in &app.items {
                    self.pending.remove(&q.key);
                    if let Some(r) = refusal_of(&q.key) {
                        // The store refused its content (a body that does not open):
                        // final, never in the inbox; a mailbox copy is acked so
                        // holders drop it.
                        ctx.out.push_back(Output::Event(Event::Dropped {
                            from: q.env.body().sender_addr(),
                            msg_id: q.key.1,
                            reason: r,
                        }));
                        if q.from_mailbox {
                            keys.push(q.key);
                        }
                        continue;
                    }
                    self.index_insert(q.key, ctx.now);
                    self.gate.record_delivered(&q.key.0, &q.key.1, ctx.now);
                    // Acks tell holders to drop their copies: only what came from the
                    // mailbox has any. A message that came live and is also held
                    // somewhere (its sender published it before) is acked when a drain
                    // finds it there; a DHT put per live message would cost more than
                    // the delivery itself.
                    if q.from_mailbox {
                        keys.push(q.key);
                        collected.push(q.env.body().clone());
                    }
                }
                for w in &mut self.waiting {
                    for (_, item) in &mut w.items {
                        if let Item::Wait(k) = *item
                            && let Some(r) = refusal_of(&k)
                        {
                            *item = Item::Refused(r);
                        }
                    }
                }
                self.resolve(ctx);
                self.publish_acks(ctx, &keys);
                self.queue_receipts(ctx, &collected);
                self.flush(ctx);
            }
            Err(_) => {
                // Nothing of it is durable, and nothing queued behind it may overtake
                // it: everything waiting fails and is retried by its sender (live) or
                // by the next drain (mailbox).
                let mut failed: BTreeSet<EntryKey> = BTreeSet::new();
                for q in app.items.iter().chain(self.queue.iter()) {
                    failed.insert(q.key);
                }
                self.queue.clear();
                for k in &failed {
                    self.pending.remove(k);
                }
                for w in &mut self.waiting {
                    for (_, item) in &mut w.items {
                        if let Item::Wait(k) = item
                            && failed.contains(k)
                        {
                            *item = Item::Refused(Refusal::StoreFailed);
                        }
                    }
                }
                self.resolve(ctx);
            }
        }
    }

    pub(crate) fn receipt_sent(&mut self, id: ReceiptId, result: Result<(), SendFailure>) {
        let Some(pos) = self.receipts.iter().position(|r| r.id == id) else {
            return;
        };
        match result {
            Ok(()) => {
                self.receipts.remove(pos);
            }
            Err(_) => {
                if let Some(r) = self.receipts.get_mut(pos) {
                    r.in_flight = false;
                    if r.attempts >= RECEIPT_ATTEMPTS {
                        self.receipts.remove(pos);
                    }
                }
            }
        }
    }

    /// A node showed life: receipts waiting for it go out.
    pub(crate) fn alive(&mut self, ctx: &mut Ctx<'_>, peer: PeerRef) {
        self.send_receipts(ctx, Some(peer));
    }

    pub(crate) fn timer(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        self.receipts
            .retain(|r| r.in_flight || now.saturating_sub(r.created) < RECEIPT_TTL_MS);
        self.index_expire(ctx.cfg.retention_ms(), now);
        if now >= self.next_drain {
            self.drain(ctx);
        }
    }

    pub(crate) fn deadline(&self) -> Option<u64> {
        Some(self.next_drain)
    }

    /// Sizes, for the caps checks: index, waiting, queued for append, receipts.
    pub(crate) fn sizes(&self) -> (usize, usize, usize, usize) {
        (
            self.index.len(),
            self.waiting.len(),
            self.queue.len(),
            self.receipts.len(),
        )
    }

    /// Whether the inbox is known to hold this entry.
    fn known(&self, ctx: &Ctx<'_>, key: &EntryKey) -> Known {
        if ctx.cfg.bugs.id_only_acks {
            // The old bug: any sender's copy of an id counts as this message.
            if self.index.keys().any(|k| k.1 == key.1) {
                return Known::Held;
            }
            if self.pending.iter().any(|k| k.1 == key.1) {
                return Known::Pending;
            }
            return Known::New;
        }
        if self.index.contains_key(key) {
            Known::Held
        } else if self.pending.contains(key) {
            Known::Pending
        } else {
            Known::New
        }
    }

    fn enqueue(&mut self, ctx: &mut Ctx<'_>, key: EntryKey, env: Signed<Envelope>, mb: bool) {
        if ctx.cfg.bugs.replay_before_append {
            // The old bug: recorded as held before the write is durable.
            self.index_insert(key, ctx.now);
            self.gate.record_delivered(&key.0, &key.1, ctx.now);
        }
        self.pending.insert(key);
        self.queue.push(Queued {
            key,
            env,
            from_mailbox: mb,
        });
    }

    fn flush(&mut self, ctx: &mut Ctx<'_>) {
        if self.appending.is_some() || self.queue.is_empty() {
            return;
        }
        let token = StoreToken(self.next_token);
        self.next_token += 1;
        let items = std::mem::take(&mut self.queue);
        let entries = items.iter().map(|q| q.env.clone()).collect();
        ctx.out.push_back(Output::AppendInbox { token, entries });
        self.appending = Some(Append { token, items });
    }

    /// Turns waits on stored entries into holds and answers every complete request.
    fn resolve(&mut self, ctx: &mut Ctx<'_>) {
        for w in &mut self.waiting {
            for (_, item) in &mut w.items {
                if let Item::Wait(k) = *item
                    && !self.pending.contains(&k)
                {
                    *item = if self.index.contains_key(&k) {
                        Item::Held
                    } else {
                        Item::Refused(Refusal::StoreFailed)
                    };
                }
            }
        }
        self.answer_ready(ctx);
    }

    fn answer_ready(&mut self, ctx: &mut Ctx<'_>) {
        let (ready, rest): (Vec<Waiting>, Vec<Waiting>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|w| !w.items.iter().any(|(_, i)| matches!(i, Item::Wait(_))));
        self.waiting = rest;
        for w in ready {
            let held = held_ids(w.items.iter().map(|(id, item)| (*id, *item == Item::Held)));
            let receipt = match w.presigned {
                Some(r) if r.body().msg_ids == held => Some(r),
                _ => w
                    .sender
                    .filter(|_| !held.is_empty())
                    .and_then(|sender| sign_receipt(&mut self.passes, ctx, sender, held)),
            };
            // Without a receipt nothing counts as held: the sender retries.
            let results = w
                .items
                .iter()
                .map(|(_, i)| match i {
                    Item::Held if receipt.is_some() => None,
                    Item::Held | Item::Wait(_) => Some(Refusal::StoreFailed),
                    Item::Refused(r) => Some(*r),
                })
                .collect();
            ctx.out.push_back(Output::Respond {
                req: w.req,
                response: Response { receipt, results },
            });
        }
    }

    /// Signs, for each request waiting on the append being written and on nothing
    /// else, the receipt it gets if that append is durable ([`Input::Spare`]).
    ///
    /// [`Input::Spare`]: crate::Input::Spare
    pub(crate) fn presign(&mut self, ctx: &Ctx<'_>) {
        let Some(app) = &self.appending else {
            return;
        };
        let writing: BTreeSet<EntryKey> = app.items.iter().map(|q| q.key).collect();
        for w in self.waiting.iter_mut().filter(|w| w.presigned.is_none()) {
            let Some(sender) = w.sender else { continue };
            // Also waiting on a later append: this one's outcome does not settle it.
            if w.items
                .iter()
                .any(|(_, i)| matches!(i, Item::Wait(k) if !writing.contains(k)))
            {
                continue;
            }
            let held = held_ids(
                w.items
                    .iter()
                    .map(|(id, i)| (*id, matches!(i, Item::Held | Item::Wait(_)))),
            );
            if !held.is_empty() {
                w.presigned = sign_receipt(&mut self.passes, ctx, sender, held);
            }
        }
    }

    fn publish_acks(&mut self, ctx: &mut Ctx<'_>, keys: &[EntryKey]) {
        if keys.is_empty() {
            return;
        }
        let Ok(acks) = make_acks(ctx.identity, ctx.me, keys, ctx.now) else {
            return;
        };
        let mut mb = Mailbox::new(ctx.me.key, ctx.me.session.clone());
        for a in acks {
            // Our own fresh ack for our own mailbox always applies.
            let _ = mb.apply_ack(a, ctx.now, &ctx.cfg.mailbox);
        }
        ctx.put(mb);
    }

    fn queue_receipts(&mut self, ctx: &mut Ctx<'_>, stored: &[Envelope]) {
        if stored.is_empty() {
            return;
        }
        for mut p in collected::plan(ctx.me, stored.iter(), ctx.now) {
            p.receipt.pass = Some(self.passes.get(ctx.identity, &p.receipt.sender));
            let Ok(receipt) = Signed::sign(p.receipt, ctx.identity) else {
                continue;
            };
            // Replace an older receipt for the same ids rather than queue twice.
            self.receipts.retain(|r| {
                r.in_flight || r.to != p.to || r.receipt.body().msg_ids != receipt.body().msg_ids
            });
            if self.receipts.len() >= COLLECTED_RECEIPTS_PENDING {
                self.receipts.pop_front();
            }
            let id = ReceiptId(self.next_receipt);
            self.next_receipt += 1;
            self.receipts.push_back(OutReceipt {
                id,
                to: p.to,
                receipt,
                attempts: 0,
                created: ctx.now,
                in_flight: false,
            });
        }
        self.send_receipts(ctx, None);
    }

    fn send_receipts(&mut self, ctx: &mut Ctx<'_>, only: Option<PeerRef>) {
        for r in &mut self.receipts {
            if r.in_flight || r.attempts >= RECEIPT_ATTEMPTS {
                continue;
            }
            let Some(peer) = ctx.routes.get(&r.to) else {
                continue;
            };
            if only.is_some_and(|p| p != peer) {
                continue;
            }
            r.in_flight = true;
            r.attempts += 1;
            ctx.out.push_back(Output::SendReceipt {
                id: r.id,
                peer,
                receipt: r.receipt.clone(),
            });
        }
    }

    fn index_insert(&mut self, key: EntryKey, at: u64) {
        if self.index.contains_key(&key) {
            return;
        }
        while self.index.len() >= INBOX_INDEX_CAPACITY {
            match self.index_order.pop_front() {
                Some((_, old)) => {
                    self.index.remove(&old);
                }
                None => break,
            }
        }
        self.index.insert(key, at);
        self.index_order.push_back((at, key));
    }

    /// Forgets entries that can no longer arrive again: the gate refuses anything older
    /// than the retention, and a stored envelope was at most the skew ahead.
    fn index_expire(&mut self, retention: u64, now: u64) {
        let keep = retention.saturating_add(2 * MAX_FUTURE_SKEW_MS);
        while let Some(&(at, key)) = self.index_order.front() {
            if at.saturating_add(keep) > now {
                break;
            }
            self.index_order.pop_front();
            self.index.remove(&key);
        }
    }
}

/// The signed receipt of a live request: `held` reached this inbox from `sender`, with
/// this session's mailbox pass for it.
fn sign_receipt(
    passes: &mut IssuedPasses,
    ctx: &Ctx<'_>,
    sender: IdentityKey,
    held: Vec<MsgId>,
) -> Option<Signed<Receipt>> {
    let pass = Some(passes.get(ctx.identity, &sender));
    Signed::sign(
        Receipt {
            v: VERSION,
            recipient: ctx.me.key,
            recipient_session: ctx.me.session.clone(),
            sender,
            msg_ids: held,
            state: ReceiptState::Delivered,
            ts: ctx.now,
            pass,
        },
        ctx.identity,
    )
    .ok()
}

/// The ids of the items held, each once, in the request's order.
fn held_ids(items: impl Iterator<Item = (MsgId, bool)>) -> Vec<MsgId> {
    let mut held: Vec<MsgId> = Vec::new();
    for (id, is_held) in items {
        if is_held && !held.contains(&id) {
            held.push(id);
        }
    }
    held
}
