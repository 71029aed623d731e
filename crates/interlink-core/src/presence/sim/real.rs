//! The presence simulator at small sizes, running the real node: every simulated
//! session is a [`PresenceNode`] — the node's roster, sync answers, announce rules
//! and pacer — on simulated time, and only the network is modelled: links of
//! per-link latency between nodes that dial a few random running peers, gossip as a
//! flood (a node forwards what it accepts to every connected peer but the sender, and
//! drops a copy whose content id it has seen, as gossipsub's duplicate cache does),
//! and request-response for roster requests (the parent module says what the
//! compact model runs at sizes a real roster per node would not fit).

use std::{
    collections::{BTreeMap, BTreeSet, HashSet},
    rc::Rc,
    sync::Arc,
};

use rand_chacha::{ChaCha20Rng, rand_core::SeedableRng};

use super::{Convergence, Params, schedule::Rng};
use crate::{
    identity::Identity,
    presence::{
        Presence, Roster,
        node::{Input, Kind, Output, Own, PresenceNode, Verdict},
        pacer::{Ask, Pacer},
    },
    session::SessionId,
    wire::{
        DeliveryMode, Details, HostKind, RosterRequest, RosterResponse, SessionAddr,
        gossip_message_id,
    },
};

/// Where simulated time starts, ms since the Unix epoch: the roster judges stamps
/// against it.
const EPOCH_MS: u64 = 1_700_000_000_000;

/// How often convergence is looked at, ms.
const CHECK_MS: u64 = 50;

/// What happens to the overlay besides its start: a partition into two halves
/// (`at` ms after the last start, for `ms`), and sessions that leave with a goodbye
/// after the heal.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// The partition: when (ms after the first start) and how long.
    pub partition: Option<(u64, u64)>,
    /// How many sessions say goodbye once the overlay has healed.
    pub departures: usize,
}

/// What a run found, per phase: when every node judged every running session live
/// (and every departed one gone), from the phase's start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// From the first start.
    pub cold: Option<Convergence>,
    /// From the heal; `behind_at_start` is the sessions each node judged away at the
    /// partition's end.
    pub heal: Option<Convergence>,
    /// From the goodbyes, for the nodes still running.
    pub departed: Option<Convergence>,
    /// Each running node's final view of every session, as (live, away, gone).
    pub views: Vec<(usize, usize, usize)>,
    /// Presence messages verified, mean per node.
    pub verified: f64,
}

#[derive(Clone, Debug)]
enum Ev {
    Start(u32),
    /// A departed node stops, its goodbye flushed.
    Stop(u32),
    Tick(u32),
    Timer(u32),
    /// A dial completed: both ends connected, then subscribed one latency later.
    Connected(u32, u32),
    Subscribed {
        to: u32,
        peer: u32,
    },
    Gossip {
        to: u32,
        from: u32,
        bytes: Rc<Vec<u8>>,
    },
    Request {
        to: u32,
        from: u32,
        ask: Ask,
        request: Box<RosterRequest>,
    },
    Response {
        to: u32,
        from: u32,
        ask: Ask,
        response: Box<RosterResponse>,
    },
    Check,
}

struct Sim {
    p: Params,
    rng: Rng,
    now: u64,
    seq: u64,
    /// Events by (time, order of queueing): deterministic.
    queue: BTreeMap<(u64, u64), Ev>,
    nodes: Vec<PresenceNode<u32, ChaCha20Rng>>,
    addrs: Vec<SessionAddr>,
    running: Vec<bool>,
    left: Vec<bool>,
    links: Vec<BTreeSet<u32>>,
    /// Content ids each node has seen (gossipsub's duplicate cache; never expired in
    /// a run of a few minutes).
    seen: Vec<HashSet<[u8; 16]>>,
    wake: Vec<Option<u64>>,
    /// Which half of a partition each node is on, while it lasts.
    half: Option<Vec<bool>>,
}

impl Sim {
    fn new(p: &Params) -> Self {
        let mut rng = Rng::new(p.seed);
        let n = p.nodes;
        let mut nodes = Vec::with_capacity(n);
        let mut addrs = Vec::with_capacity(n);
        let mut keys = ChaCha20Rng::seed_from_u64(p.seed);
        let config = p.pacer_config();
        for i in 0..n {
            let identity = Arc::new(Identity::generate(&mut keys));
            let session = SessionId::random(&mut keys);
            let peer_id = identity
                .transport_keypair(&session)
                .map(|k| k.public().to_peer_id().to_bytes())
                .unwrap_or_default();
            addrs.push(SessionAddr {
                key: identity.public(),
                session: session.clone(),
            });
            let own = Own {
                identity,
                session,
                peer_id,
                details: Details {
                    cwd: format!("/sim/{i}"),
                    git_label: None,
                    summary: String::new(),
                    host: HostKind::Claude,
                    delivery: DeliveryMode::Inbox,
                    project: None,
                    claims: Vec::new(),
                },
            };
            let roster = Roster::default();
            let pacer = Pacer::new(config, EPOCH_MS, rng.next_u64());
            let mut node = PresenceNode::new(
                roster,
                pacer,
                Some(own),
                ChaCha20Rng::seed_from_u64(rng.next_u64()),
                EPOCH_MS,
            );
            node.set_addresses(
                vec![format!("/ip4/10.0.{}.{}/tcp/4001", i / 256, i % 256)],
                true,
            );
            nodes.push(node);
        }
        Self {
            p: p.clone(),
            rng,
            now: 0,
            seq: 0,
            queue: BTreeMap::new(),
            nodes,
            addrs,
            running: vec![false; n],
            left: vec![false; n],
            links: vec![BTreeSet::new(); n],
            seen: vec![HashSet::new(); n],
            wake: vec![None; n],
            half: None,
        }
    }

    fn push(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.queue.insert((at, self.seq), ev);
    }

    fn lat(&mut self) -> u64 {
        let (lo, hi) = self.p.latency_ms;
        self.rng.between(lo, hi.max(lo))
    }

    /// From deciding to dial a peer to the connection: finding it (uniform in
    /// `0..discovery_ms`), then the handshake's round trips — as the compact model
    /// dials, at a start and after a heal.
    fn dial_delay(&mut self) -> u64 {
        let find = self.rng.below(self.p.discovery_ms);
        find + self.p.connect_rtts * 2 * self.lat()
    }

    fn apart(&self, a: u32, b: u32) -> bool {
        self.half
            .as_ref()
            .is_some_and(|h| h[a as usize] != h[b as usize])
    }

    fn up(&self, a: u32, b: u32) -> bool {
        self.running[a as usize] && self.running[b as usize] && self.links[a as usize].contains(&b)
    }

    /// Runs the queue until `until` (sim ms), calling `check` every [`CHECK_MS`].
    fn run_until(&mut self, until: u64, check: &mut dyn FnMut(&Sim) -> bool) -> bool {
        self.push(self.now, Ev::Check);
        while let Some(entry) = self.queue.first_entry() {
            if entry.key().0 > until {
                break;
            }
            let ((at, _), ev) = entry.remove_entry();
            self.now = at;
            if let Ev::Check = ev {
                if check(self) {
                    self.queue.retain(|_, e| !matches!(e, Ev::Check));
                    return true;
                }
                self.push(at + CHECK_MS, Ev::Check);
                continue;
            }
            self.event(ev);
        }
        self.queue.retain(|_, e| !matches!(e, Ev::Check));
        self.now = until;
        false
    }

    fn clock(&self) -> u64 {
        EPOCH_MS + self.now
    }

    fn event(&mut self, ev: Ev) {
        let now = self.clock();
        match ev {
            Ev::Start(i) => {
                self.running[i as usize] = true;
                let started: Vec<u32> = (0..self.nodes.len() as u32)
                    .filter(|&j| j != i && self.running[j as usize])
                    .collect();
                for _ in 0..self.p.max_dialed.min(started.len()) {
                    let j = started[self.rng.index(started.len())];
                    let at = self.now + self.dial_delay();
                    self.push(at, Ev::Connected(i, j));
                }
                let phase = self.rng.below(1_000);
                self.push(self.now + phase, Ev::Tick(i));
                self.handle(i, Input::Tick, now);
            }
            Ev::Stop(i) => self.running[i as usize] = false,
            Ev::Tick(i) => {
                if self.running[i as usize] {
                    self.handle(i, Input::Tick, now);
                    self.push(self.now + 1_000, Ev::Tick(i));
                }
            }
            Ev::Timer(i) => {
                self.wake[i as usize] = None;
                if self.running[i as usize] {
                    self.nodes[i as usize].handle_timeout(now);
                    self.drain(i);
                }
            }
            Ev::Connected(a, b) => {
                if self.apart(a, b)
                    || !self.running[a as usize]
                    || !self.running[b as usize]
                    || self.links[a as usize].contains(&b)
                    || self.links[b as usize].len() >= self.p.max_inbound
                {
                    return;
                }
                self.links[a as usize].insert(b);
                self.links[b as usize].insert(a);
                let lat = self.lat();
                for (x, y) in [(a, b), (b, a)] {
                    self.handle(x, Input::PeerConnected(y), now);
                    self.push(self.now + lat, Ev::Subscribed { to: x, peer: y });
                }
            }
            Ev::Subscribed { to, peer } => {
                if self.up(to, peer) {
                    self.handle(to, Input::PeerSubscribed(peer), now);
                }
            }
            Ev::Gossip { to, from, bytes } => {
                if !self.up(to, from) || !self.seen[to as usize].insert(gossip_message_id(&bytes)) {
                    return;
                }
                let verdict = self.nodes[to as usize].receive(&bytes, now);
                self.drain(to);
                if verdict == Verdict::Accept {
                    self.flood(to, Some(from), bytes);
                }
            }
            Ev::Request {
                to,
                from,
                ask,
                request,
            } => {
                if !self.up(to, from) {
                    return;
                }
                let response = self.nodes[to as usize]
                    .answer(&request, now)
                    .unwrap_or_else(|_| RosterResponse::empty());
                let lat = self.lat();
                self.push(
                    self.now + lat,
                    Ev::Response {
                        to: from,
                        from: to,
                        ask,
                        response: Box::new(response),
                    },
                );
            }
            Ev::Response {
                to,
                from,
                ask,
                response,
            } => {
                if self.up(to, from) {
                    let response = *response;
                    self.handle(
                        to,
                        Input::RosterAnswered {
                            peer: from,
                            ask,
                            response,
                        },
                        now,
                    );
                }
            }
            Ev::Check => {}
        }
    }

    fn handle(&mut self, i: u32, input: Input<u32>, now: u64) {
        self.nodes[i as usize].handle(input, now);
        self.drain(i);
    }

    /// Carries out a node's outputs, and queues its timer.
    fn drain(&mut self, i: u32) {
        let now = self.clock();
        while let Some(out) = self.nodes[i as usize].poll_output() {
            match out {
                Output::Publish { kind, bytes } => {
                    if kind == Kind::Announcement && self.links[i as usize].is_empty() {
                        self.nodes[i as usize].handle(Input::NotPublished(bytes), now);
                        continue;
                    }
                    let bytes = Rc::new(bytes);
                    // A republished copy the node has seen is a duplicate to gossipsub.
                    if self.seen[i as usize].insert(gossip_message_id(&bytes)) {
                        self.flood(i, None, bytes);
                    }
                }
                Output::AskRoster { peer, ask, request } => {
                    let lat = self.lat();
                    self.push(
                        self.now + lat,
                        Ev::Request {
                            to: peer,
                            from: i,
                            ask,
                            request: Box::new(request),
                        },
                    );
                }
                Output::JoinDht
                | Output::Learned { .. }
                | Output::Heard(_)
                | Output::Departed(_)
                | Output::RosterChanged
                | Output::Rejected { .. }
                | Output::Failed(_) => {}
            }
        }
        if let Some(at) = self.nodes[i as usize].poll_timeout() {
            let at = at.saturating_sub(EPOCH_MS);
            if self.wake[i as usize].is_none_or(|w| at < w) {
                self.wake[i as usize] = Some(at);
                self.push(at.max(self.now), Ev::Timer(i));
            }
        }
    }

    fn flood(&mut self, i: u32, except: Option<u32>, bytes: Rc<Vec<u8>>) {
        let peers: Vec<u32> = self.links[i as usize].iter().copied().collect();
        for j in peers {
            if Some(j) != except {
                let lat = self.lat();
                self.push(
                    self.now + lat,
                    Ev::Gossip {
                        to: j,
                        from: i,
                        bytes: bytes.clone(),
                    },
                );
            }
        }
    }

    /// Node `i`'s view of every session now: (live, away, gone).
    fn view(&self, i: usize) -> (usize, usize, usize) {
        let now = self.clock();
        let roster = self.nodes[i].roster();
        let mut v = (0, 0, 0);
        for a in &self.addrs {
            match roster.presence_of(a, now) {
                Presence::Live => v.0 += 1,
                Presence::Away => v.1 += 1,
                Presence::Gone => v.2 += 1,
            }
        }
        v
    }

    /// Whether node `i` judges every running session live and every departed gone.
    fn agrees(&self, i: usize) -> bool {
        let now = self.clock();
        let roster = self.nodes[i].roster();
        self.addrs.iter().enumerate().all(|(j, a)| {
            let want = if self.left[j] {
                Presence::Gone
            } else {
                Presence::Live
            };
            roster.presence_of(a, now) == want
        })
    }

    /// Runs until every node that has not left agrees, or `deadline`; each node's
    /// time from `from`. A node not started yet has not converged: at a cold start
    /// none runs at first.
    fn converge(&mut self, from: u64, deadline: u64, behind_at_start: f64) -> Convergence {
        let n = self.nodes.len();
        let mut done: Vec<Option<u64>> = vec![None; n];
        self.run_until(deadline, &mut |s: &Sim| {
            for (i, d) in done.iter_mut().enumerate() {
                if d.is_none() && (s.left[i] || (s.running[i] && s.agrees(i))) {
                    *d = Some(s.now.saturating_sub(from));
                }
            }
            done.iter().all(Option::is_some)
        });
        let running = done.into_iter().enumerate().filter(|&(i, _)| !self.left[i]);
        Convergence::of(running.map(|(_, d)| d), behind_at_start)
    }
}

/// Runs `p.nodes` real presence nodes through a cold start and `plan`.
pub fn run(p: &Params, plan: &Plan) -> Outcome {
    let mut s = Sim::new(p);
    let n = s.nodes.len();
    for i in 0..n as u32 {
        let at = s.rng.below(p.start_spread_ms + 1);
        s.push(at, Ev::Start(i));
    }
    let mut out = Outcome {
        cold: Some(s.converge(0, p.start_spread_ms + p.timeout_ms, n as f64)),
        ..Outcome::default()
    };
    if let Some((at, ms)) = plan.partition {
        s.run_until(at.max(s.now), &mut |_| false);
        let half: Vec<bool> = (0..n).map(|i| i < n / 2).collect();
        let mut cut = Vec::new();
        for a in 0..n as u32 {
            let peers: Vec<u32> = s.links[a as usize].iter().copied().collect();
            for b in peers {
                if half[a as usize] != half[b as usize] {
                    s.links[a as usize].remove(&b);
                    if a < b {
                        cut.push((a, b));
                    }
                    let now = s.clock();
                    s.handle(a, Input::PeerDisconnected(b), now);
                }
            }
        }
        s.half = Some(half);
        let healed = s.now + ms;
        s.run_until(healed, &mut |_| false);
        let away = (0..n).map(|i| s.view(i).1 as f64).sum::<f64>() / n as f64;
        s.half = None;
        // The cut links are dialled again.
        for (a, b) in cut {
            let at = s.now + s.dial_delay();
            s.push(at, Ev::Connected(a, b));
        }
        out.heal = Some(s.converge(healed, healed + p.timeout_ms, away));
    }
    if plan.departures > 0 {
        let start = s.now;
        for i in 0..plan.departures.min(n) {
            let now = s.clock();
            s.handle(i as u32, Input::Leave, now);
            s.left[i] = true;
            // The goodbye is flushed before the node stops (as the node does).
            s.push(start + 1_000, Ev::Stop(i as u32));
        }
        let departures = plan.departures.min(n) as f64;
        out.departed = Some(s.converge(start, start + p.timeout_ms, departures));
    }
    out.views = (0..n)
        .filter(|&i| s.running[i])
        .map(|i| s.view(i))
        .collect();
    out.verified = s.nodes.iter().map(|x| x.verified() as f64).sum::<f64>() / n as f64;
    out
}
