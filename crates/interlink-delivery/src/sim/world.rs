//! The simulated world: nodes, storage, network, DHT, and the event queue.

use std::collections::BTreeMap;

use interlink_core::{
    Identity, IdentityKey, MsgId, SessionId,
    limits::SECOND_MS,
    mailbox::Mailbox,
    seal::Sealed,
    trust::PeerPolicy,
    wire::{Envelope, EnvelopeKind, MailboxPass, Receipt, SessionAddr, Signed, VERSION},
};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use serde_bytes::{ByteArray, ByteBuf};

use super::schedule::{Fault, Schedule, chance};
use crate::{
    Config, Engine,
    types::{
        CallId, EntryKey, InboundId, Input, OutboxEntry, Outcome, PeerRef, PutToken, ReceiptId,
        ReqId, Response, SendError, StoreToken,
    },
};

/// The simulated epoch: every run starts here.
pub(crate) const T0: u64 = 1_790_000_000_000;
const HEARTBEAT_MS: u64 = 30 * SECOND_MS;

/// One durable inbox line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// Signed sender.
    pub sender: IdentityKey,
    /// Sending session.
    pub sender_session: SessionId,
    /// Message id.
    pub msg_id: MsgId,
    /// Envelope timestamp.
    pub ts: u64,
}

/// One honest send and what its sender was told.
#[derive(Clone, Debug)]
pub struct Sent {
    /// Sending node.
    pub from: usize,
    /// Receiving node.
    pub to: usize,
    #[allow(missing_docs)]
    pub msg_id: MsgId,
    /// Its timestamp.
    pub ts: u64,
    /// The reply, if one came.
    pub reply: Option<Result<Outcome, SendError>>,
    /// The sender crashed before replying.
    pub sender_crashed: bool,
    /// An `Expired` event or outcome came.
    pub expired: bool,
    /// A `Refused` event came.
    pub refused: bool,
    /// The sender's run, for a shell command (each run is its own session); 0 else.
    pub run: u64,
    /// Holders that answered the sender (a shell command) that they keep it, and when
    /// they merged it.
    pub held_at: Vec<(usize, u64)>,
}

/// What a run produced.
#[derive(Clone, Debug)]
pub struct Report {
    /// Every honest send, in send order.
    pub sent: Vec<Sent>,
    /// (sender key, id) → index in `sent`.
    pub index: BTreeMap<(IdentityKey, MsgId), usize>,
    /// Each node's durable inbox at the end.
    pub inboxes: Vec<Vec<Line>>,
    /// Violations seen while running.
    pub violations: Vec<String>,
    /// Retryable refusals senders received on the live path.
    pub retryable_refusals: u64,
    /// Live-path refusals by kind (hostile senders' included): what the run exercised.
    pub refusals: BTreeMap<String, u64>,
    /// Events processed.
    pub events: u64,
    /// Every fault that costs a node mailbox copies it held, (node, when): a crash
    /// (they were in memory) and a clock step back past the skew tolerance (what it
    /// holds then looks future-dated and is normalised away).
    pub holder_losses: Vec<(usize, u64)>,
}

#[derive(Debug)]
pub(crate) enum StoreOp {
    Outbox(Box<OutboxEntry>),
    Inbox(StoreToken, Vec<Signed<Envelope>>),
}

#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // simulated packets, short-lived
pub(crate) enum Net {
    Request {
        from: usize,
        from_inc: u64,
        req: ReqId,
        envelopes: Vec<Signed<Envelope>>,
    },
    Response {
        inc: u64,
        req: ReqId,
        response: Response,
    },
    Receipt {
        receipt: Signed<Receipt>,
    },
    ReceiptAck {
        inc: u64,
        id: ReceiptId,
        ok: bool,
    },
    Fetched {
        inc: u64,
        copy: Mailbox,
    },
    /// A holder's answer to a put: what of the copy it keeps.
    Held {
        inc: u64,
        put: PutToken,
        kept: Vec<EntryKey>,
        holder: usize,
        /// When the holder merged the copy.
        at: u64,
    },
    /// Every holder of a put answered (or its answer was lost).
    PutEnded {
        inc: u64,
        put: PutToken,
    },
}

#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // queued events; boxing each costs more than it saves
pub(crate) enum Ev {
    Send(usize),
    FaultStart(usize),
    FaultEnd(usize),
    Attack(usize),
    Heartbeat,
    Restart {
        node: usize,
        skew: i64,
    },
    /// A shell command's run ends: every message of it was answered.
    Exit {
        node: usize,
        inc: u64,
    },
    Timer {
        node: usize,
        inc: u64,
        tgen: u64,
    },
    Store {
        node: usize,
        inc: u64,
        op: StoreOp,
    },
    /// A packet; lost if the link is down when it arrives (a partition mid-flight).
    Net {
        from: usize,
        to: usize,
        msg: Net,
    },
}

pub(crate) struct Node {
    pub(crate) seed: [u8; 32],
    pub(crate) addr: SessionAddr,
    pub(crate) engine: Option<Engine>,
    pub(crate) inc: u64,
    pub(crate) tgen: u64,
    pub(crate) paused_until: u64,
    pub(crate) skew: i64,
    /// A clock step in force (see [`Fault::ClockStep`]), on top of `skew`.
    pub(crate) step: i64,
    pub(crate) outbox: BTreeMap<MsgId, OutboxEntry>,
    pub(crate) inbox: Vec<Line>,
    pub(crate) holder: BTreeMap<[u8; 32], Mailbox>,
    pub(crate) disk_full: u32,
    pub(crate) inbound: BTreeMap<InboundId, (usize, u64, ReqId)>,
    pub(crate) next_inbound: u64,
    pub(crate) callers: BTreeMap<CallId, usize>,
    pub(crate) next_call: u64,
    /// A shell command's runs so far (each a fresh session).
    pub(crate) runs: u64,
}

/// The world of one run.
#[allow(missing_debug_implementations)] // engines and rngs: too large to print usefully
pub struct World {
    pub(crate) sched: Schedule,
    pub(crate) cfg: Config,
    pub(crate) rng: ChaCha8Rng,
    pub(crate) now: u64,
    pub(crate) seq: u64,
    pub(crate) queue: BTreeMap<(u64, u64), Ev>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) cut: BTreeMap<(usize, usize), u32>,
    pub(crate) sent: Vec<Sent>,
    pub(crate) index: BTreeMap<(IdentityKey, MsgId), usize>,
    pub(crate) violations: Vec<String>,
    pub(crate) retryable_refusals: u64,
    pub(crate) refusals: BTreeMap<String, u64>,
    pub(crate) events: u64,
    pub(crate) holder_losses: Vec<(usize, u64)>,
    /// Print what every node is fed and does (debugging a failing seed).
    pub trace: bool,
}

fn session(i: usize) -> SessionId {
    SessionId::new(format!("node-{i}")).unwrap_or_else(|_| unreachable!("a valid session id"))
}

/// A placeholder body: the engine never opens bodies, and real sealing costs time.
pub(crate) fn dummy_sealed() -> Sealed {
    Sealed {
        enc: ByteArray::new([7; 32]),
        ct: ByteBuf::from(vec![0; 40]),
    }
}

impl World {
    /// A world for `sched`; every honest node trusts every other node (the hostile one
    /// too: it is a paired peer gone bad).
    pub fn new(sched: Schedule, cfg: Config) -> Self {
        let n = sched.nodes();
        let seeds: Vec<[u8; 32]> = (0..n).map(|i| [i as u8 + 1; 32]).collect();
        let keys: Vec<IdentityKey> = seeds
            .iter()
            .map(|s| Identity::from_seed(s).public())
            .collect();
        let mut nodes = Vec::with_capacity(n);
        for i in 0..n {
            let addr = SessionAddr {
                key: keys[i],
                session: session(i),
            };
            let mut policy = PeerPolicy::new();
            for (j, k) in keys.iter().enumerate() {
                if j != i {
                    let _ = policy.add(format!("n{j}"), *k);
                }
            }
            let skew = sched.skew[i];
            let local = (T0 as i64 + skew) as u64;
            // A shell command starts at its first send.
            let engine = (i < sched.honest && !sched.is_shell(i)).then(|| {
                Engine::new(
                    cfg.clone().with_policy(policy),
                    Identity::from_seed(&seeds[i]),
                    addr.clone(),
                    local,
                )
            });
            nodes.push(Node {
                seed: seeds[i],
                addr,
                engine,
                inc: 0,
                tgen: 0,
                paused_until: 0,
                skew,
                step: 0,
                outbox: BTreeMap::new(),
                inbox: Vec::new(),
                holder: BTreeMap::new(),
                disk_full: 0,
                inbound: BTreeMap::new(),
                next_inbound: 0,
                callers: BTreeMap::new(),
                next_call: 0,
                runs: 0,
            });
        }
        let rng = ChaCha8Rng::seed_from_u64(sched.seed);
        let mut w = World {
            sched,
            cfg,
            rng,
            now: T0,
            seq: 0,
            queue: BTreeMap::new(),
            nodes,
            cut: BTreeMap::new(),
            sent: Vec::new(),
            index: BTreeMap::new(),
            violations: Vec::new(),
            retryable_refusals: 0,
            refusals: BTreeMap::new(),
            events: 0,
            holder_losses: Vec::new(),
            trace: false,
        };
        for i in 0..w.sched.sends.len() {
            w.push(T0 + w.sched.sends[i].at, Ev::Send(i));
        }
        for i in 0..w.sched.faults.len() {
            let (at, for_ms) = fault_times(&w.sched.faults[i]);
            w.push(T0 + at, Ev::FaultStart(i));
            w.push(T0 + at + for_ms, Ev::FaultEnd(i));
        }
        for i in 0..w.sched.attacks.len() {
            w.push(
                T0 + super::hostile::attack_at(&w.sched.attacks[i]),
                Ev::Attack(i),
            );
        }
        w.push(T0 + HEARTBEAT_MS, Ev::Heartbeat);
        for i in 0..w.sched.honest {
            if !w.sched.is_shell(i) {
                w.introduce(i);
                w.pump(i);
            }
        }
        w
    }

    /// Plays the schedule to its end.
    pub fn run(mut self) -> Report {
        let end = T0 + self.sched.end_ms;
        while let Some(((at, _), ev)) = self.queue.pop_first() {
            if at > end {
                break;
            }
            self.now = at;
            self.events += 1;
            if let Some(t) = self.target(&ev)
                && self.nodes[t].paused_until > at
            {
                // A stopped process handles nothing; its input waits in the socket.
                let until = self.nodes[t].paused_until;
                self.push(until, ev);
                continue;
            }
            self.step(ev);
        }
        Report {
            sent: self.sent,
            index: self.index,
            inboxes: self.nodes.into_iter().map(|n| n.inbox).collect(),
            violations: self.violations,
            retryable_refusals: self.retryable_refusals,
            refusals: self.refusals,
            events: self.events,
            holder_losses: self.holder_losses,
        }
    }

    pub(crate) fn push(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.queue.insert((at.max(self.now), self.seq), ev);
    }

    pub(crate) fn local(&self, node: usize) -> u64 {
        (self.now as i64 + self.nodes[node].skew + self.nodes[node].step) as u64
    }

    pub(crate) fn latency(&self, a: usize, b: usize) -> u64 {
        self.sched.latency[a][b]
    }

    /// Whether `node` is up: hostile nodes always are; a shell command while it runs.
    fn is_up(&self, node: usize) -> bool {
        node >= self.sched.honest || self.nodes[node].engine.is_some()
    }

    /// Whether bytes sent now from `a` reach `b` (a stopped `b` still takes them).
    pub(crate) fn link_up(&self, a: usize, b: usize) -> bool {
        a != b && self.is_up(a) && self.is_up(b) && !self.cut.contains_key(&(a.min(b), a.max(b)))
    }

    fn target(&self, ev: &Ev) -> Option<usize> {
        match ev {
            Ev::Send(i) => Some(self.sched.sends[*i].from),
            Ev::Timer { node, .. } | Ev::Store { node, .. } | Ev::Exit { node, .. } => Some(*node),
            Ev::Net { to, .. } => Some(*to),
            _ => None,
        }
    }

    /// Feeds `input` to `node`'s engine (if it is up) and carries out its outputs.
    pub(crate) fn feed(&mut self, node: usize, input: Input) {
        let local = self.local(node);
        if self.trace {
            eprintln!(
                "{} n{node} <- {}",
                self.now - T0,
                super::trace::brief_in(&input)
            );
        }
        let Some(e) = self.nodes[node].engine.as_mut() else {
            return;
        };
        e.handle(input, local);
        self.pump(node);
    }

    fn step(&mut self, ev: Ev) {
        match ev {
            Ev::Send(i) => self.send(i),
            Ev::FaultStart(i) => self.fault(i, true),
            Ev::FaultEnd(i) => self.fault(i, false),
            Ev::Attack(i) => super::hostile::attack(self, i),
            Ev::Heartbeat => {
                for a in 0..self.sched.honest {
                    if self.nodes[a].paused_until > self.now || !self.is_up(a) {
                        continue;
                    }
                    for b in 0..self.sched.honest {
                        if self.link_up(a, b) && self.nodes[b].paused_until <= self.now {
                            self.feed(
                                b,
                                Input::PeerAlive {
                                    peer: PeerRef(a as u64),
                                },
                            );
                        }
                    }
                }
                self.push(self.now + HEARTBEAT_MS, Ev::Heartbeat);
            }
            Ev::Restart { node, skew } => self.restart(node, skew),
            Ev::Exit { node, inc } => {
                if self.nodes[node].inc == inc && self.nodes[node].callers.is_empty() {
                    self.crash(node);
                }
            }
            Ev::Timer { node, inc, tgen } => {
                if self.nodes[node].inc == inc && self.nodes[node].tgen == tgen {
                    self.feed(node, Input::Timer);
                }
            }
            Ev::Store { node, inc, op } => {
                if self.nodes[node].inc == inc {
                    self.store(node, op);
                }
            }
            Ev::Net { from, to, msg } => {
                if from == to || self.link_up(from, to) {
                    self.net(to, msg);
                }
            }
        }
    }

    fn send(&mut self, i: usize) {
        let plan = self.sched.sends[i].clone();
        if self.sched.is_shell(plan.from) && self.nodes[plan.from].engine.is_none() {
            self.start_run(plan.from);
        }
        let local = self.local(plan.from);
        let to_addr = self.nodes[plan.to].addr.clone();
        let me = self.nodes[plan.from].addr.clone();
        let mut id = [0u8; 16];
        self.rng.fill_bytes(&mut id);
        let msg_id = MsgId::from_bytes(id);
        let Some(e) = self.nodes[plan.from].engine.as_mut() else {
            return;
        };
        let ts = e.next_ts(local);
        let body = Envelope {
            v: VERSION,
            sender: me.key,
            sender_session: me.session.clone(),
            recipient: to_addr.key,
            recipient_session: to_addr.session.clone(),
            msg_id,
            ts,
            kind: EnvelopeKind::Message,
            in_reply_to: None,
            also_about: Vec::new(),
            name: None,
            sealed: Some(dummy_sealed()),
            // Every sender of the world is paired with its recipient and holds its
            // pass, as a real peer does after their first exchange.
            pass: Some(MailboxPass::issue(
                &Identity::from_seed(&self.nodes[plan.to].seed),
                &me.key,
            )),
            reply_pass: None,
        };
        let Ok(envelope) = Signed::sign(body, &Identity::from_seed(&self.nodes[plan.from].seed))
        else {
            return self.violations.push("could not sign an envelope".into());
        };
        let n = &mut self.nodes[plan.from];
        let caller = CallId(n.next_call);
        n.next_call += 1;
        n.callers.insert(caller, self.sent.len());
        self.index.insert((me.key, msg_id), self.sent.len());
        self.sent.push(Sent {
            from: plan.from,
            to: plan.to,
            msg_id,
            ts,
            reply: None,
            sender_crashed: false,
            expired: false,
            refused: false,
            run: self.nodes[plan.from].runs,
            held_at: Vec::new(),
        });
        if plan.raced {
            super::hostile::race(self, &envelope);
        }
        let route = plan.routed.then_some(PeerRef(plan.to as u64));
        self.feed(
            plan.from,
            Input::Send {
                caller,
                envelope,
                route,
            },
        );
    }

    fn fault(&mut self, i: usize, start: bool) {
        match self.sched.faults[i].clone() {
            Fault::Pause { node, for_ms, .. } => {
                if start {
                    let n = &mut self.nodes[node];
                    n.paused_until = n.paused_until.max(self.now + for_ms);
                }
            }
            Fault::Crash {
                node,
                for_ms,
                new_skew,
                ..
            } => {
                if start && self.nodes[node].engine.is_some() {
                    self.crash(node);
                    self.push(
                        self.now + for_ms,
                        Ev::Restart {
                            node,
                            skew: new_skew,
                        },
                    );
                }
            }
            Fault::Partition { a, b, .. } => {
                let key = (a.min(b), a.max(b));
                if start {
                    let up = self.link_up(a, b);
                    *self.cut.entry(key).or_default() += 1;
                    if up {
                        self.connection(a, b, false);
                    }
                } else if let Some(c) = self.cut.get_mut(&key) {
                    *c -= 1;
                    if *c == 0 {
                        self.cut.remove(&key);
                        if self.link_up(a, b) {
                            self.connection(a, b, true);
                        }
                        // Reconnected: each side sees the other alive.
                        self.feed(
                            a,
                            Input::PeerAlive {
                                peer: PeerRef(b as u64),
                            },
                        );
                        self.feed(
                            b,
                            Input::PeerAlive {
                                peer: PeerRef(a as u64),
                            },
                        );
                    }
                }
            }
            Fault::ClockStep { node, by_ms, .. } => {
                if start {
                    self.holder_losses.push((node, self.now));
                }
                self.nodes[node].step = if start { by_ms } else { 0 };
            }
            Fault::DiskFull { node, .. } => {
                let n = &mut self.nodes[node];
                if start {
                    n.disk_full += 1;
                } else {
                    n.disk_full = n.disk_full.saturating_sub(1);
                }
            }
        }
    }

    fn crash(&mut self, node: usize) {
        self.holder_losses.push((node, self.now));
        let inc = self.nodes[node].inc;
        // Writes under way: each made it to disk or not, all or nothing.
        let pending: Vec<(u64, u64)> = self
            .queue
            .iter()
            .filter(|(_, ev)| matches!(ev, Ev::Store { node: n, inc: i, .. } if *n == node && *i == inc))
            .map(|(k, _)| *k)
            .collect();
        for k in pending {
            if let Some(Ev::Store { op, .. }) = self.queue.remove(&k)
                && chance(&mut self.rng, 50)
            {
                self.apply(node, op);
            }
        }
        // Its connections close with it.
        for j in 0..self.sched.honest {
            if self.link_up(node, j) {
                self.feed(
                    j,
                    Input::Connected {
                        peer: PeerRef(node as u64),
                        connected: false,
                    },
                );
            }
        }
        let n = &mut self.nodes[node];
        n.engine = None;
        n.inc += 1;
        n.holder.clear();
        n.inbound.clear();
        let lost: Vec<usize> = n.callers.values().copied().collect();
        n.callers.clear();
        for m in lost {
            self.sent[m].sender_crashed = true;
        }
    }

    /// A shell command starts: a fresh session of its identity, with no outbox.
    fn start_run(&mut self, node: usize) {
        let local = self.local(node);
        let n = &mut self.nodes[node];
        n.runs += 1;
        n.addr.session = SessionId::new(format!("node-{node}-run-{}", n.runs))
            .unwrap_or_else(|_| unreachable!("a valid session id"));
        let mut policy = PeerPolicy::new();
        for (j, other) in self.nodes.iter().enumerate() {
            if j != node {
                let _ = policy.add(format!("n{j}"), other.addr.key);
            }
        }
        let n = &self.nodes[node];
        let engine = Engine::new(
            self.cfg.clone().with_policy(policy).without_outbox(),
            Identity::from_seed(&n.seed),
            n.addr.clone(),
            local,
        );
        self.nodes[node].engine = Some(engine);
        self.introduce(node);
        self.pump(node);
    }

    fn restart(&mut self, node: usize, skew: i64) {
        // A killed shell command is not restarted: the next send starts a new run.
        if self.nodes[node].engine.is_some() || self.sched.is_shell(node) {
            return;
        }
        self.nodes[node].skew = skew;
        let local = self.local(node);
        let n = &self.nodes[node];
        let mut policy = PeerPolicy::new();
        for (j, other) in self.nodes.iter().enumerate() {
            if j != node {
                let _ = policy.add(format!("n{j}"), other.addr.key);
            }
        }
        let outbox: Vec<OutboxEntry> = n.outbox.values().cloned().collect();
        let index: Vec<(IdentityKey, MsgId, u64)> = n
            .inbox
            .iter()
            .map(|l| (l.sender, l.msg_id, local))
            .collect();
        let engine = Engine::restore(
            self.cfg.clone().with_policy(policy),
            Identity::from_seed(&n.seed),
            n.addr.clone(),
            outbox,
            index,
            local,
        );
        self.nodes[node].engine = Some(engine);
        self.introduce(node);
        self.pump(node);
        // Its announcement: everyone sees it alive.
        for b in 0..self.sched.honest {
            if self.link_up(node, b) {
                self.feed(
                    b,
                    Input::PeerAlive {
                        peer: PeerRef(node as u64),
                    },
                );
            }
        }
    }

    /// Tells `a` and `b` that their connection is up or gone (as the shell does).
    fn connection(&mut self, a: usize, b: usize, connected: bool) {
        self.feed(
            a,
            Input::Connected {
                peer: PeerRef(b as u64),
                connected,
            },
        );
        self.feed(
            b,
            Input::Connected {
                peer: PeerRef(a as u64),
                connected,
            },
        );
    }

    /// Gives `node` the roster: every other honest session's node; and connects it to
    /// every honest node it can reach.
    fn introduce(&mut self, node: usize) {
        for j in 0..self.sched.honest {
            if self.link_up(node, j) {
                self.connection(node, j, true);
            }
        }
        for j in 0..self.sched.honest {
            if j != node && self.sched.roster[node][j] {
                let session = self.nodes[j].addr.clone();
                self.feed(
                    node,
                    Input::Route {
                        session,
                        peer: Some(PeerRef(j as u64)),
                    },
                );
            }
        }
    }
}

fn fault_times(f: &Fault) -> (u64, u64) {
    match f {
        Fault::Pause { at, for_ms, .. }
        | Fault::Crash { at, for_ms, .. }
        | Fault::Partition { at, for_ms, .. }
        | Fault::DiskFull { at, for_ms, .. }
        | Fault::ClockStep { at, for_ms, .. } => (*at, *for_ms),
    }
}
