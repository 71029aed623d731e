//! Delivery: the libp2p shell around the IO-free engine ([`interlink_delivery`]).
//!
//! The engine decides everything delivery promises — what is durable before `queued`
//! is said, what goes live and in which order, what is published to a mailbox, what is
//! stored, receipted and acked. This module only translates:
//!
//! - swarm events and handle commands become [`Input`]s (a delivery request decoded
//!   and verified, a response, a mailbox copy fetched, a sign of life, a route);
//! - [`Output`]s become requests (live deliveries, mailbox holds, signed fetches),
//!   responses, and writes for the store thread (`node::store`), whose answers come
//!   back as inputs;
//! - the engine's opaque handles map to libp2p's: [`PeerRef`] ↔ `PeerId`, [`ReqId`] ↔
//!   the outbound request id, [`InboundId`] → the response channel, [`CallId`] → the
//!   caller's oneshot.
//!
//! Top-level entry points call [`Actor::drive`], which drains every output; inside an
//! output's handling, follow-up inputs go through [`Actor::feed`] (no re-entrant
//! drain), and the outer drain picks up what they produce.

use std::collections::HashMap;

use interlink_core::{MsgId, mailbox::Mailbox, wire::SessionAddr};
use interlink_delivery::{
    CallId, Engine, Event as EngineEvent, HeldBy as EngineHeldBy, InboundId, Input, NotKept,
    Outcome, Output, PeerRef, ReceiptId, ReqId, SendError as EngineSendError, SendFailure,
    StoreError,
};
use libp2p::{
    Multiaddr, PeerId, kad,
    multiaddr::Protocol,
    request_response::{OutboundRequestId, ResponseChannel},
};
use tokio::sync::{mpsc, oneshot};
use tracing::debug;

use super::{
    Actor,
    store::{Done, Op, Store},
};
use crate::{Event, HeldBy, SendError, SendOutcome, Sent};

/// Most remote nodes given a [`PeerRef`]. Refs are handed out for connected peers and
/// for the nodes of announced sessions, both bounded; past this, a node gets none and
/// is treated as unknown (its sessions are reached through their mailboxes).
const MAX_PEER_REFS: usize = 16_384;

/// A caller of `send` waiting for the engine's answer. The engine answers every
/// [`Input::Send`] exactly once and refuses beyond its outbox capacity at once, so
/// these are bounded by it.
#[derive(Debug)]
struct Call {
    msg_id: MsgId,
    reply: oneshot::Sender<Result<SendOutcome, SendError>>,
}

/// An inbound delivery request waiting for the engine's [`Output::Respond`] (bounded
/// by the engine's inbound limits, which answer `busy` beyond them at once).
#[derive(Debug)]
pub(super) struct Inbound {
    pub(super) channel: Answer,
    /// Per envelope of the request: refused before the engine saw it, or `None` for
    /// the engine's answer (in order).
    pub(super) pre: Vec<Option<interlink_core::wire::Refusal>>,
}

/// Where the answer to an inbound live request goes: its request-response stream, or
/// the kept stream it came on (`node::live_stream`).
#[derive(Debug)]
pub(super) enum Answer {
    Request(ResponseChannel<interlink_core::wire::DeliverResponse>),
    Stream(tokio::sync::oneshot::Sender<interlink_core::wire::DeliverResponse>),
}

/// PeerId ↔ PeerRef, both ways.
#[derive(Debug, Default)]
struct PeerRefs {
    by_id: HashMap<PeerId, PeerRef>,
    by_ref: HashMap<PeerRef, PeerId>,
    next: u64,
}

impl PeerRefs {
    fn get_or_insert(&mut self, id: PeerId) -> Option<PeerRef> {
        if let Some(r) = self.by_id.get(&id) {
            return Some(*r);
        }
        if self.by_id.len() >= MAX_PEER_REFS {
            return None;
        }
        let r = PeerRef(self.next);
        self.next += 1;
        self.by_id.insert(id, r);
        self.by_ref.insert(r, id);
        Some(r)
    }
}

/// A session node's delivery state: the engine and the tables that pair its handles
/// with libp2p's.
#[derive(Debug)]
pub(crate) struct Delivery {
    engine: Engine,
    /// Answers of the store thread. Declared before `store` so it is dropped first
    /// (see `Store`'s drop).
    done: Option<mpsc::Receiver<Done>>,
    /// The store thread; none for a session without an inbox (`interlink-p2p send`
    /// and `pair`: they take no messages, and what they queue is held by the copies
    /// they publish, which they wait for with `settle` before exiting).
    store: Option<Store>,
    peers: PeerRefs,
    calls: HashMap<CallId, Call>,
    next_call: u64,
    /// Live requests on their way → the engine's id.
    live: HashMap<OutboundRequestId, ReqId>,
    /// The kept live-delivery streams (none when the config turns them off).
    streams: Option<super::live_stream::Streams>,
    /// Live requests on their way on a kept stream → the peer and the engine's id.
    live_streamed: HashMap<u64, (PeerId, ReqId)>,
    /// Inbound live requests waiting for the engine (bounded by the engine).
    inbound: HashMap<InboundId, Inbound>,
    next_inbound: u64,
    /// Collected-mail receipts on their way → the engine's id.
    receipts: HashMap<OutboundRequestId, ReceiptId>,
    /// When the engine wants [`Input::Timer`] (ms since the epoch).
    timer: Option<u64>,
    /// Where the last mailbox copy published in this drain went (for `held_by`).
    last_put: Option<HeldBy>,
    /// The DHT query finding the closest peers of this session's own mailbox, to fetch
    /// it from them (`node::fetching`).
    own_query: Option<kad::QueryId>,
    /// A fetch of the own mailbox is owed: from the connected peers and relays at once,
    /// from the key's closest peers once the DHT has a peer.
    fetch_due: bool,
    /// The owed fetch already asked the connected peers and relays (the DHT had no
    /// peer yet); the closest peers are still to be asked.
    fetch_started: bool,
    /// An inbox append went to the store thread in this drain: the engine may sign
    /// its receipts while the disk writes ([`Input::Spare`]).
    spare: bool,
    /// Strangers' knock budgets, charged before a knock is verified.
    knock_budgets: super::knock_budget::KnockBudgets,
    /// The held-knocks file: opened invites, and when it is next written.
    held_file: super::pairing::HeldKnocksFile,
    /// Requests of knocks refused by their budgets, answered late (`node::inbound`).
    knock_tarpit: super::tarpit::Tarpit<(Answer, Vec<Option<interlink_core::wire::Refusal>>)>,
}

impl Delivery {
    pub(super) fn new(
        engine: Engine,
        store: Option<(Store, mpsc::Receiver<Done>)>,
        now_ms: u64,
    ) -> Self {
        let (store, done) = store.unzip();
        Self {
            engine,
            done,
            store,
            peers: PeerRefs::default(),
            calls: HashMap::new(),
            next_call: 0,
            live: HashMap::new(),
            streams: None,
            live_streamed: HashMap::new(),
            inbound: HashMap::new(),
            next_inbound: 0,
            receipts: HashMap::new(),
            timer: None,
            last_put: None,
            own_query: None,
            fetch_due: false,
            fetch_started: false,
            spare: false,
            knock_budgets: super::knock_budget::KnockBudgets::new(now_ms),
            held_file: super::pairing::HeldKnocksFile::default(),
            knock_tarpit: super::tarpit::Tarpit::new(
                super::inbound::KNOCK_TARPIT_DELAY,
                super::inbound::MAX_KNOCK_TARPIT,
            ),
        }
    }

    /// When the engine wants [`Input::Timer`] (ms since the epoch).
    pub(super) fn timer(&self) -> Option<u64> {
        self.timer
    }

    /// The held-knocks file's state (`node::pairing`).
    pub(super) fn held_file(&mut self) -> &mut super::pairing::HeldKnocksFile {
        &mut self.held_file
    }

    /// When the held-knocks file is next written.
    pub(super) fn held_file_due(&self) -> Option<u64> {
        self.held_file.due_at()
    }

    /// The kept live-delivery streams, if on.
    pub(super) fn streams(&mut self) -> Option<&mut super::live_stream::Streams> {
        self.streams.as_mut()
    }

    pub(super) fn keep_streams(&mut self, streams: super::live_stream::Streams) {
        self.streams = Some(streams);
    }

    /// What the node task waits on besides the swarm: the store thread's answers and
    /// the kept streams' events.
    pub(super) fn receivers(
        &mut self,
    ) -> (
        Option<&mut mpsc::Receiver<Done>>,
        Option<&mut super::live_stream::Streams>,
    ) {
        (self.done.as_mut(), self.streams.as_mut())
    }

    /// Sends `request` to `peer` on its kept stream if there is one that takes it;
    /// gives it back otherwise.
    pub(super) fn send_streamed(
        &mut self,
        peer: PeerId,
        req: ReqId,
        request: interlink_core::wire::DeliverRequest,
    ) -> Result<(), interlink_core::wire::DeliverRequest> {
        let Some(streams) = self.streams.as_mut() else {
            return Err(request);
        };
        let id = streams.send(peer, request)?;
        self.live_streamed.insert(id, (peer, req));
        Ok(())
    }

    /// The engine's id of a live request answered on a kept stream.
    pub(super) fn streamed_answered(&mut self, id: u64) -> Option<(PeerId, ReqId)> {
        self.live_streamed.remove(&id)
    }

    pub(super) fn live_sent(&mut self, id: OutboundRequestId, req: ReqId) {
        self.live.insert(id, req);
    }

    /// The engine's id of a live request answered as a request.
    pub(super) fn live_answered(&mut self, id: &OutboundRequestId) -> Option<ReqId> {
        self.live.remove(id)
    }

    /// Whether a live delivery waits on `peer`: on a kept stream, or as a request
    /// `pending` says is on its way to it.
    pub(super) fn waits_on(
        &self,
        peer: PeerId,
        pending: impl Fn(&OutboundRequestId) -> bool,
    ) -> bool {
        self.live.keys().any(pending) || self.live_streamed.values().any(|(to, _)| *to == peer)
    }

    /// Keeps an inbound live request for the engine's answer.
    pub(super) fn track_inbound(&mut self, inbound: Inbound) -> InboundId {
        let id = InboundId(self.next_inbound);
        self.next_inbound += 1;
        self.inbound.insert(id, inbound);
        id
    }

    pub(super) fn take_inbound(&mut self, id: &InboundId) -> Option<Inbound> {
        self.inbound.remove(id)
    }

    pub(super) fn receipt_sent(&mut self, rid: OutboundRequestId, id: ReceiptId) {
        self.receipts.insert(rid, id);
    }

    pub(super) fn receipt_answered(&mut self, rid: &OutboundRequestId) -> Option<ReceiptId> {
        self.receipts.remove(rid)
    }

    /// Keeps a knock refusal until it is due; gives it back when too many wait.
    pub(super) fn answer_knocks_late(
        &mut self,
        answer: (Answer, Vec<Option<interlink_core::wire::Refusal>>),
        now: std::time::Instant,
    ) -> Result<(), (Answer, Vec<Option<interlink_core::wire::Refusal>>)> {
        self.knock_tarpit.hold(answer, now)
    }

    pub(super) fn knocks_due(
        &mut self,
        now: std::time::Instant,
    ) -> Option<(Answer, Vec<Option<interlink_core::wire::Refusal>>)> {
        self.knock_tarpit.poll_due(now)
    }

    /// Whether a fetch of the own mailbox is owed and none is running; `Some(true)`
    /// when it already asked the connected peers and waits for the DHT.
    pub(super) fn fetch_owed(&self) -> Option<bool> {
        (self.fetch_due && self.own_query.is_none()).then_some(self.fetch_started)
    }

    /// The owed fetch asked the peers it could; the DHT has none yet.
    pub(super) fn fetch_waits_for_dht(&mut self) {
        self.fetch_started = true;
    }

    /// The owed fetch now runs as `query`.
    pub(super) fn fetch_running(&mut self, query: kad::QueryId) {
        self.own_query = Some(query);
        self.fetch_due = false;
        self.fetch_started = false;
    }

    pub(super) fn own_query(&self) -> Option<kad::QueryId> {
        self.own_query
    }

    /// The running fetch's query ended (or is abandoned).
    pub(super) fn take_own_query(&mut self) -> Option<kad::QueryId> {
        self.own_query.take()
    }

    /// Charges a knock claiming to be from `sender`, arriving from `peer` on `network`,
    /// to the knock budgets if `sender` is a stranger: neither `me` nor a peer in the
    /// gate's policy (a peer's knock is mail, bounded by its byte budget).
    pub(super) fn charge_knock(
        &mut self,
        me: &interlink_core::IdentityKey,
        sender: &interlink_core::IdentityKey,
        peer: PeerId,
        network: Option<std::net::IpAddr>,
        now: u64,
    ) -> Result<(), super::knock_budget::Over> {
        if sender == me || self.engine.gate().policy().contains(sender) {
            return Ok(());
        }
        self.knock_budgets.spend(peer, network, now)
    }

    /// The engine's handle for `peer` (none past [`MAX_PEER_REFS`]).
    pub(super) fn peer_ref(&mut self, peer: PeerId) -> Option<PeerRef> {
        self.peers.get_or_insert(peer)
    }

    /// The PeerId behind an engine handle.
    pub(super) fn peer_id(&self, peer: PeerRef) -> Option<PeerId> {
        self.peers.by_ref.get(&peer).copied()
    }

    /// Registers a `send` caller; the engine's reply for the returned id goes to it.
    pub(super) fn call(
        &mut self,
        msg_id: MsgId,
        reply: oneshot::Sender<Result<SendOutcome, SendError>>,
    ) -> CallId {
        let id = CallId(self.next_call);
        self.next_call += 1;
        self.calls.insert(id, Call { msg_id, reply });
        id
    }

    /// The next envelope timestamp (see [`Engine::next_ts`]).
    pub(super) fn next_ts(&mut self, now: u64) -> u64 {
        self.engine.next_ts(now)
    }

    /// The engine, for the gate and diagnostics.
    pub(super) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The engine, to note a pair request.
    pub(super) fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    /// Whether nothing sent is on its way: no caller waiting, no live request the
    /// engine still waits for (one it gave up on may linger in `live` until libp2p's
    /// own timeout; its answer is ignored).
    pub(super) fn idle(&self) -> bool {
        self.calls.is_empty() && self.engine.sizes().requests_in_flight == 0
    }

    /// Queues a write for the store thread.
    pub(super) fn store(&self, op: Op) -> Result<(), Op> {
        match &self.store {
            Some(store) => store.send(op),
            None => Err(op),
        }
    }

    /// Whether this session has an inbox and an outbox (see [`Delivery::store`]).
    pub(super) fn has_store(&self) -> bool {
        self.store.is_some()
    }
}

impl Actor {
    /// Hands `input` to the engine and carries out everything it asks for.
    pub(super) fn drive(&mut self, input: Input) {
        if let Some(d) = self.parts.delivery_mut() {
            d.last_put = None;
        }
        self.feed(input);
        self.run_outputs();
    }

    /// Hands `input` to the engine without carrying out its outputs (for use while
    /// they are being carried out: the running drain takes them).
    pub(super) fn feed(&mut self, input: Input) {
        let now = self.now_ms();
        if let Some(d) = self.parts.delivery_mut() {
            d.engine.handle(input, now);
        }
    }

    /// Carries out the engine's outputs until there are none; then, if an inbox append
    /// went to the store thread, lets the engine use the time the disk takes.
    pub(super) fn run_outputs(&mut self) {
        loop {
            let now = self.now_ms();
            while let Some(out) = self
                .parts
                .delivery_mut()
                .and_then(|d| d.engine.poll_output())
            {
                self.on_output(out);
            }
            match self.parts.delivery_mut() {
                Some(d) if d.spare => {
                    d.spare = false;
                    // The store thread was just woken, and the scheduler mostly puts
                    // it on this CPU: it would wait for the signing below (40 µs p50
                    // from its wake to its write, in the `mcp` bench). Given the CPU
                    // now, it writes and is in fdatasync before the signing starts.
                    std::thread::yield_now();
                    d.engine.handle(Input::Spare, now);
                }
                _ => return,
            }
        }
    }

    fn on_output(&mut self, out: Output) {
        match out {
            Output::PersistOutbox { entry } => {
                let key = entry.key();
                let Some(d) = self.parts.delivery() else {
                    return;
                };
                if !d.has_store() {
                    // Nothing to keep it in: `held_by.outbox` stays false, and the
                    // command waits for a peer to take a copy before it exits.
                    self.feed(Input::OutboxStored {
                        key,
                        result: Ok(()),
                    });
                } else if d.store(Op::Persist(Box::new(entry.envelope))).is_err() {
                    self.feed(Input::OutboxStored {
                        key,
                        result: Err(StoreError::Other("the store is busy".into())),
                    });
                }
            }
            Output::RemoveOutbox { key } => {
                // A lost remove only means one more (deduplicated) retry later.
                if let Some(d) = self.parts.delivery() {
                    let _ = d.store(Op::Remove(key));
                }
            }
            Output::SendRequest {
                req,
                peer,
                envelopes,
            } => {
                debug!(req = req.0, envelopes = envelopes.len(), "live request");
                self.send_live(req, peer, &envelopes);
            }
            Output::DhtPut { put, mailbox } => {
                let held = self.publish_mailbox(mailbox, Some(put));
                if let Some(d) = self.parts.delivery_mut() {
                    d.last_put = Some(held);
                }
            }
            Output::DhtGet { .. } => {
                // A session without an inbox has no mail to collect.
                if let Some(d) = self.parts.delivery_mut().filter(|d| d.has_store()) {
                    d.fetch_due = true;
                    self.fetch_own_mailbox();
                }
            }
            Output::AppendInbox { token, entries } => {
                let queued = self.parts.delivery_mut().map(|d| {
                    let queued = d.store(Op::Append { token, entries }).map_err(|_| ());
                    d.spare |= queued.is_ok();
                    queued
                });
                if let Some(Err(())) = queued {
                    self.feed(Input::InboxStored {
                        token,
                        result: Err(StoreError::Other("the store is busy".into())),
                        refused: Vec::new(),
                    });
                }
            }
            Output::Respond { req, response } => self.respond_live(req, response),
            Output::SendReceipt { id, peer, receipt } => {
                self.send_collected_receipt(id, peer, &receipt);
            }
            Output::SetTimer { at } => {
                if let Some(d) = self.parts.delivery_mut() {
                    d.timer = Some(at);
                }
            }
            Output::Reply { caller, outcome } => {
                debug!(?outcome, "send answered");
                self.answer_call(caller, outcome);
            }
            Output::Event(event) => self.on_engine_event(event),
            other => debug!(?other, "engine output not handled"),
        }
    }

    /// Answers a `send` caller with what the engine says became of its message.
    fn answer_call(&mut self, caller: CallId, outcome: Result<Outcome, EngineSendError>) {
        let Some(d) = self.parts.delivery_mut() else {
            return;
        };
        let Some(Call { msg_id, reply }) = d.calls.remove(&caller) else {
            return;
        };
        let result = match outcome {
            Ok(Outcome::Delivered { to }) => {
                Ok(SendOutcome::Delivered(Box::new(Sent { msg_id, to })))
            }
            Ok(Outcome::Queued { held_by }) => {
                let copies = match held_by {
                    EngineHeldBy::OutboxAndMailbox => d.last_put.unwrap_or_default(),
                    _ => HeldBy::default(),
                };
                Ok(SendOutcome::Queued {
                    msg_id,
                    held_by: HeldBy {
                        outbox: d.has_store(),
                        confirmed: held_by == EngineHeldBy::Mailbox,
                        ..copies
                    },
                })
            }
            Ok(Outcome::Refused { reason }) => Err(SendError::Refused(reason.to_wire())),
            Ok(Outcome::NotKept { why }) => Err(SendError::NotKept(not_kept_reason(why))),
            Ok(other) => Err(SendError::Invalid(format!("unexpected outcome {other:?}"))),
            Err(EngineSendError::OutboxFull { held, limit }) => {
                Err(SendError::OutboxFull { held, limit })
            }
            Err(EngineSendError::Store(e)) => Err(SendError::Outbox(e.to_string())),
            Err(e) => Err(SendError::Invalid(e.to_string())),
        };
        let _ = reply.send(result);
    }

    fn on_engine_event(&mut self, event: EngineEvent) {
        match event {
            EngineEvent::Delivered { msg_id, to } => self.emit(Event::Receipted { msg_id, to }),
            EngineEvent::Expired { msg_id, to, why } => self.emit(Event::NotKept {
                msg_id,
                to,
                reason: not_kept_reason(why),
            }),
            EngineEvent::Refused { msg_id, to, reason } => self.emit(Event::NotKept {
                msg_id,
                to,
                reason: format!("refused by the recipient: {reason}"),
            }),
            EngineEvent::KnockHeld(knock) => {
                self.on_knock_held(&knock);
                self.emit(Event::Knock {
                    from: knock.sender,
                    session: knock.sender_session,
                });
            }
            EngineEvent::Dropped {
                from,
                msg_id,
                reason,
            } => debug!(%from, %msg_id, %reason, "inbound envelope refused"),
            other => debug!(?other, "engine event"),
        }
    }

    /// The store thread finished something.
    pub(super) fn on_store_done(&mut self, done: Done) {
        match done {
            Done::OutboxStored { key, result } => self.drive(Input::OutboxStored { key, result }),
            Done::InboxStored {
                token,
                result,
                refused,
                new,
            } => {
                // The engine answers first: its receipt goes to the connection's task
                // before the agent side's tasks are woken to read the inbox, so a
                // sender waiting for it does not wait for them too.
                self.drive(Input::InboxStored {
                    token,
                    result,
                    refused,
                });
                // Durable now: the agent side may read them.
                for (msg_id, from, kind) in new {
                    self.emit(Event::Delivered { msg_id, from, kind });
                }
            }
        }
    }

    /// `peer` showed life (connected, announced, answered a ping).
    pub(super) fn peer_alive(&mut self, peer: PeerId) {
        if let Some(r) = self.parts.delivery_mut().and_then(|d| d.peer_ref(peer)) {
            self.drive(Input::PeerAlive { peer: r });
        }
    }

    /// The swarm has a connection to `peer` (its first, or another), or none left. The
    /// engine waits for a live attempt past its window while the peer is connected:
    /// slow or being moved to another connection is not gone.
    pub(super) fn peer_connected(&mut self, peer: PeerId, connected: bool) {
        if let Some(r) = self.parts.delivery_mut().and_then(|d| d.peer_ref(peer)) {
            self.drive(Input::Connected { peer: r, connected });
        }
    }

    /// The roster's view of `addr` changed: its node (from its announcement, whose
    /// addresses are handed to the swarm for dialling) or none (it left).
    pub(super) fn route_session(&mut self, addr: &SessionAddr) {
        if self.parts.delivery().is_none() {
            return;
        }
        let peer = self.presence.roster().get(addr).and_then(|ann| {
            let peer = ann.body().peer_id()?;
            let mut relayed = false;
            for a in &ann.body().addrs {
                if let Ok(a) = a.parse::<Multiaddr>() {
                    relayed |= a.iter().any(|p| p == Protocol::P2pCircuit);
                    self.swarm.add_peer_address(peer, a);
                }
            }
            // A session announces before its relay reservation is accepted, and behind a
            // NAT nothing else of it is reachable: until it announces a circuit, try it
            // through each of our relays (one that holds no reservation for it refuses).
            if !relayed {
                for a in self.relays.circuits_to(peer) {
                    self.swarm.add_peer_address(peer, a);
                }
            }
            Some(peer)
        });
        let peer = peer.and_then(|p| self.parts.delivery_mut().and_then(|d| d.peer_ref(p)));
        self.drive(Input::Route {
            session: addr.clone(),
            peer,
        });
    }

    /// The engine's timer, if it is due.
    pub(super) fn on_engine_timer(&mut self) {
        let now = self.now_ms();
        let due = self
            .parts
            .delivery_mut()
            .and_then(|d| d.timer.take_if(|at| *at <= now));
        if due.is_some() {
            self.drive(Input::Timer);
        }
    }

    /// A holder's copy of our own mailbox (a holder's answer to our fetch, or pushed):
    /// decoded, verified, and handed to the engine. The valid entries of a copy that
    /// also carries invalid ones are still ours.
    pub(super) fn on_own_copy(&mut self, value: &[u8]) {
        let cfg = interlink_core::mailbox::Config::default();
        if let Ok((copy, _)) = Mailbox::decode(value, self.now_ms(), &cfg) {
            self.own_copy(copy);
        }
    }

    /// An already verified copy of our own mailbox.
    pub(super) fn own_copy(&mut self, copy: Mailbox) {
        if Some(copy.address()) == self.own_addr() {
            self.learn_reply_passes(copy.pending());
            self.drive(Input::MailboxFetched { copy });
        }
    }
}

fn not_kept_reason(why: NotKept) -> String {
    match why {
        NotKept::RetentionEnded { age_ms } => format!(
            "not collected within the mailbox retention ({} days; sent {} hours ago)",
            interlink_core::limits::MAILBOX_RETENTION_MS / interlink_core::limits::DAY_MS,
            age_ms / interlink_core::limits::HOUR_MS
        ),
        NotKept::MailboxFull => format!(
            "the recipient is not reachable and its mailbox takes at most {} messages from \
             one sender, all taken by older mail; this command has no outbox to keep more — \
             send it again once the recipient has collected its mail",
            interlink_core::limits::MAILBOX_SENDER_QUOTA
        ),
        NotKept::NotAdmitted => "the recipient is not reachable, and its mailbox keeps only \
             a little mail from senders it has not admitted yet — this session has no mailbox \
             pass from it, which comes with the recipient's first receipt or message; this \
             command has no outbox to keep it — send it again once the recipient is back"
            .to_owned(),
        NotKept::Unconfirmed => "the recipient is not reachable and no holder you have reason \
             to trust (a relay you use, a session of yours or of a peer) answered that it \
             keeps the message (their mailbox copies may be full of this sender's older mail, \
             or none is connected); this command has no outbox to keep it — send it again \
             once the recipient is back or has collected its mail"
            .to_owned(),
        other => format!("{other:?}"),
    }
}

impl Actor {
    /// Whether a live request failure means the peer did not answer in time.
    pub(super) fn live_failure(error: &libp2p::request_response::OutboundFailure) -> SendFailure {
        use libp2p::request_response::OutboundFailure as F;
        match error {
            F::Timeout => SendFailure::Timeout,
            F::DialFailure | F::ConnectionClosed => SendFailure::Unreachable,
            other => SendFailure::Other(other.to_string()),
        }
    }
}
