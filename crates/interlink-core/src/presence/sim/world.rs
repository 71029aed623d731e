//! The simulated overlay: nodes, links, compact rosters, and the event loop.
//!
//! A session's messages are numbered from 1: in protocol 7 every one is a new
//! announcement version; in protocol 8 version 1 is its announcement and version
//! k ≥ 2 its (k - 1)th beacon, so a roster entry's number is the newest sign of life
//! the node holds, and any number from 1 on means it holds the announcement.
//!
//! Memory is what limits the size: three `u16` per (node, session) pair — the newest
//! version the node's roster holds (twice, in both orders), and the newest its
//! gossipsub has seen — are 600 MB at 10,000 nodes; everything else is per node, per
//! link or per message.
//! The roster rows are node-major (a summary scans one node's row), the seen rows
//! session-major (one message's spread touches one session's row, which stays in
//! cache while it propagates).

use std::collections::VecDeque;

use super::{
    gossip::Window,
    live::Live,
    params::{Params, Protocol},
    report::Counters,
    schedule::{Ev, Queue, Rng, Slab},
};
use crate::presence::{
    heartbeat::{MAX_HEARTBEAT_MS, live_window_ms},
    pacer::{Input, Output, Pacer},
};

/// Microseconds per millisecond: simulated time is kept in µs.
pub(super) const US: u64 = 1_000;

/// Where converged worlds start: late enough that every initial announcement, up to
/// one (longest) interval old, has a positive timestamp.
pub(super) const ORIGIN_US: u64 = (MAX_HEARTBEAT_MS + 1_000) * US;

/// One announcement version as published.
#[derive(Clone, Copy, Debug)]
pub(super) struct Msg {
    /// The announcing session (= its node's index).
    pub(super) session: u32,
    /// Its heartbeat counter, from 1.
    pub(super) version: u16,
    /// When it was published, µs.
    pub(super) at: u64,
    /// The interval its sender announced with, ms.
    pub(super) interval_ms: u64,
}

impl Msg {
    /// From when (µs) it no longer makes its session live: a receiver judges by whole
    /// milliseconds, live while the age is below the window the interval stretches
    /// ([`crate::presence::Config::presence`]).
    pub(super) fn live_until(&self) -> u64 {
        (self.at / US + live_window_ms(self.interval_ms)) * US
    }

    /// From when (µs) it is overdue: half its live window has passed, so a newer sign
    /// should have come; a roster request marks the session for its newest beacon.
    pub(super) fn overdue_from(&self) -> u64 {
        (self.at / US + live_window_ms(self.interval_ms) / 2) * US
    }
}

/// A connection: `a` dialled `b`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Link {
    pub(super) a: u32,
    pub(super) b: u32,
    /// One-way latency, µs.
    pub(super) lat: u64,
    pub(super) up: bool,
}

/// One end's view of a link.
#[derive(Clone, Copy, Debug)]
pub(super) struct Peer {
    pub(super) node: u32,
    pub(super) link: u32,
    pub(super) lat: u64,
    /// In this node's gossipsub mesh.
    pub(super) mesh: bool,
}

/// A mesh member, with what forwarding needs at hand.
#[derive(Clone, Copy, Debug)]
pub(super) struct MeshPeer {
    pub(super) node: u32,
    /// One-way latency, µs.
    pub(super) lat: u32,
    /// Its position in the node's `peers`.
    pub(super) pos: u32,
}

/// An IHAVE in flight: `from` holds `ids` of the messages `lo..hi`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ihave {
    pub(super) to: u32,
    pub(super) from: u32,
    pub(super) lo: u32,
    pub(super) hi: u32,
    pub(super) ids: u32,
}

/// What a roster request asks: the pacer's.
pub(super) use crate::presence::pacer::Ask;

/// A roster request in flight: it left at `sent`, the responder answered at
/// `answered`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sync {
    pub(super) requester: u32,
    pub(super) responder: u32,
    pub(super) link: u32,
    pub(super) sent: u64,
    pub(super) answered: u64,
    pub(super) ask: Ask,
    /// Protocol 8: its away bitmap is not empty (the requester judged some session
    /// away when it left).
    pub(super) away: bool,
}

/// Gossip copies a node received (all, duplicates, first copies, and those new
/// to the roster and so verified; of all, the beacons, and of the verified, the
/// beacons): kept apart from [`Counters`] in a dense array because every copy touches
/// them.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Copies {
    pub(super) all: u64,
    pub(super) dup: u64,
    pub(super) first: u64,
    pub(super) verified: u64,
    pub(super) beacons: u64,
    pub(super) verified_beacons: u64,
}

/// A roster entry's previous value, kept briefly so a summary can be read as it was
/// when its request left (see `sync.rs`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Change {
    pub(super) at: u64,
    pub(super) session: u32,
    pub(super) prev: u16,
}

/// One full node with one session.
#[derive(Clone, Debug, Default)]
pub(super) struct Node {
    pub(super) started: bool,
    /// Every link of this node, by peer index (the round-robin order).
    pub(super) peers: Vec<Peer>,
    /// Its session's newest version (0: not announced yet).
    pub(super) version: u16,
    pub(super) ticks: u64,
    pub(super) sync_turn: usize,
    /// Roster entries held (its own included).
    pub(super) held: usize,
    /// Sessions whose goal version it does not hold yet.
    pub(super) behind: usize,
    pub(super) done_at: Option<u64>,
    pub(super) log: VecDeque<Change>,
    /// Which side of a partition it is on.
    pub(super) half: u8,
    /// Protocol 8: the node's presence pacer, the state machine the node runs
    /// ([`crate::presence::pacer`]): heartbeats, roster requests, anti-entropy.
    pub(super) pacer: Option<Pacer<u32>>,
    /// Protocol 8: when a wake-up for the pacer's timer is queued, µs.
    pub(super) wake_at: Option<u64>,
    /// Protocol 8: the set of sessions whose announcement it holds, as the XOR of a
    /// 64-bit key per session: equal sets, equal digests (the roster digest names the
    /// held announcement versions; each session here has one).
    pub(super) digest: u64,
}

/// The whole simulated overlay.
#[derive(Debug)]
pub(super) struct World {
    pub(super) p: Params,
    pub(super) n: usize,
    pub(super) rng: Rng,
    pub(super) now: u64,
    pub(super) queue: Queue,
    pub(super) nodes: Vec<Node>,
    pub(super) links: Vec<Link>,
    pub(super) counters: Vec<Counters>,
    pub(super) copies: Vec<Copies>,
    /// Each node's mesh members (apart from [`Node`]: read on every forward).
    pub(super) mesh: Vec<Vec<MeshPeer>>,
    /// Roster requests in flight that involve each node: its roster changes are
    /// logged only meanwhile.
    pub(super) in_flight: Vec<u32>,
    pub(super) ihaves: Slab<Ihave>,
    pub(super) syncs: Slab<Sync>,
    /// Every announcement version, in publication order.
    pub(super) msgs: Vec<Msg>,
    /// Per session, the index in `msgs` of each version (version k at k - 1).
    pub(super) versions: Vec<Vec<u32>>,
    /// `roster[node * n + session]`: newest version the node's roster holds.
    pub(super) roster: Vec<u16>,
    /// The same, session-major: what a gossip copy is checked against (the
    /// node-major rows serve summaries).
    pub(super) roster_t: Vec<u16>,
    /// `seen[session * n + node]`: newest version the node's gossipsub has seen.
    pub(super) seen: Vec<u16>,
    pub(super) window: Window,
    /// Which sign of each session is the oldest still live (protocol 8's away
    /// bitmap and heal goal).
    pub(super) live: Live,
    /// Which sign of each session is the oldest not yet overdue (the bitmap).
    pub(super) fresh: Live,
    /// Protocol 8: re-announcements are beacons (a copy of [`Params::protocol`]
    /// read on every gossip copy).
    pub(super) beacons: bool,
    /// Per session, the version a convergence measurement waits for (0: none).
    pub(super) goal: Vec<u16>,
    /// Nodes still behind the goal.
    pub(super) incomplete: usize,
    pub(super) scratch: (Vec<u16>, Vec<u16>),
    /// How long roster changes are remembered, µs: longer than a request's round trip.
    pub(super) log_keep: u64,
    pub(super) events: u64,
    /// Announcements are published without gossip and anti-entropy is off (see
    /// [`Params::partition_full_ms`]).
    pub(super) quiet: bool,
}

impl World {
    fn empty(p: &Params) -> Self {
        let p = p.normalised();
        let n = p.nodes;
        let log_keep = 2 * p.latency_ms.1 * US + p.validation_us + 10 * US;
        Self {
            rng: Rng::new(p.seed),
            now: 0,
            queue: Queue::default(),
            nodes: vec![Node::default(); n],
            links: Vec::new(),
            counters: vec![Counters::default(); n],
            copies: vec![Copies::default(); n],
            mesh: vec![Vec::new(); n],
            in_flight: vec![0; n],
            ihaves: Slab::default(),
            syncs: Slab::default(),
            msgs: Vec::new(),
            versions: vec![Vec::new(); n],
            roster: vec![0; n * n],
            roster_t: vec![0; n * n],
            seen: vec![0; n * n],
            window: Window::new(n),
            live: Live::new(n, Msg::live_until),
            fresh: Live::new(n, Msg::overdue_from),
            beacons: p.protocol.beacons(),
            goal: vec![0; n],
            incomplete: 0,
            scratch: (vec![0; n], vec![0; n]),
            log_keep,
            events: 0,
            quiet: false,
            n,
            p,
        }
    }

    /// Adds the link `a` → `b` unless it exists or `b` is full; returns whether it did.
    fn dial(&mut self, a: usize, b: usize, inbound: &mut [usize]) -> bool {
        if a == b || inbound[b] >= self.p.max_inbound {
            return false;
        }
        if self.nodes[a].peers.iter().any(|x| x.node as usize == b) {
            return false;
        }
        let (lo, hi) = self.p.latency_ms;
        let lat = self.rng.between(lo * US, hi * US);
        let link = self.links.len() as u32;
        self.links.push(Link {
            a: a as u32,
            b: b as u32,
            lat,
            up: false,
        });
        inbound[b] += 1;
        let (a32, b32) = (a as u32, b as u32);
        self.nodes[a].peers.push(Peer {
            node: b32,
            link,
            lat,
            mesh: false,
        });
        self.nodes[b].peers.push(Peer {
            node: a32,
            link,
            lat,
            mesh: false,
        });
        true
    }

    /// Each node, in `order`, dials up to `max_dialed` random peers among those
    /// before it in `order` (`earlier_only`, a cold start: Kademlia only finds nodes
    /// that are running) or among all.
    fn build_topology(&mut self, order: &[usize], earlier_only: bool) {
        let mut inbound = vec![0usize; self.n];
        for (rank, &a) in order.iter().enumerate() {
            let pool = if earlier_only { rank } else { self.n };
            let want = self
                .p
                .max_dialed
                .min(pool.saturating_sub(usize::from(!earlier_only)));
            let mut dialled = 0;
            let mut attempts = 0;
            while dialled < want && attempts < want * 20 + 20 {
                attempts += 1;
                let b = if earlier_only {
                    order[self.rng.index(pool)]
                } else {
                    self.rng.index(pool)
                };
                if self.dial(a, b, &mut inbound) {
                    dialled += 1;
                }
            }
        }
        for node in &mut self.nodes {
            node.peers.sort_unstable_by_key(|x| x.node);
        }
    }

    /// A cold start: nodes start uniformly within the spread window and connect as
    /// they discover each other; every node waits for version 1 of every session.
    pub(super) fn cold(p: &Params) -> Self {
        let mut w = Self::empty(p);
        let spread = w.p.start_spread_ms * US;
        let starts: Vec<u64> = (0..w.n).map(|_| w.rng.between(0, spread)).collect();
        let mut order: Vec<usize> = (0..w.n).collect();
        order.sort_by_key(|&i| (starts[i], i));
        w.build_topology(&order, true);
        for (i, &at) in starts.iter().enumerate() {
            w.queue.push(at, Ev::Start(i as u32));
        }
        for l in 0..w.links.len() {
            let link = w.links[l];
            let at = starts[link.a as usize].max(starts[link.b as usize]);
            let delay = w.connect_delay(link.lat);
            w.queue.push(at + delay, Ev::Connect(l as u32));
        }
        w.set_goal(|_| 1);
        w
    }

    /// A converged overlay: every link up, every roster and gossipsub holding
    /// version 1 of every session, each published at a random point of its interval
    /// before [`ORIGIN_US`] (sessions of a long-lived overlay started at unrelated
    /// times, so their heartbeats are spread evenly).
    pub(super) fn converged(p: &Params) -> Self {
        let mut w = Self::empty(p);
        let order: Vec<usize> = (0..w.n).collect();
        w.build_topology(&order, false);
        w.now = ORIGIN_US;
        for link in &mut w.links {
            link.up = true;
        }
        let interval = w.p.heartbeat.interval_ms(w.n);
        let mut initial: Vec<(u64, usize)> = (0..w.n)
            .map(|s| (ORIGIN_US.saturating_sub(w.rng.between(1, interval * US)), s))
            .collect();
        initial.sort_unstable();
        for (at, s) in initial {
            let idx = w.msgs.len() as u32;
            w.msgs.push(Msg {
                session: s as u32,
                version: 1,
                at,
                interval_ms: interval,
            });
            w.versions[s].push(idx);
            if w.p.protocol == Protocol::V7 {
                let next = (at + w.jittered(interval)).max(ORIGIN_US);
                w.queue.push(next, Ev::Announce(s as u32));
            } else {
                // Protocol 8's heartbeats are the pacer's: it starts from this one.
                w.nodes[s].wake_at = Some(at);
            }
        }
        w.roster.fill(1);
        w.roster_t.fill(1);
        let seen = w.seen_value(0, 1);
        w.seen.fill(seen);
        w.window.start_after(w.msgs.len());
        w.live.start(&w.msgs, &w.versions);
        w.fresh.start(&w.msgs, &w.versions);
        let ticks_per_sync = w.ticks_per_sync();
        let all = (0..w.n).fold(0, |d, s| d ^ super::live::session_key(s));
        for (i, node) in w.nodes.iter_mut().enumerate() {
            node.started = true;
            node.version = 1;
            node.held = w.n;
            node.digest = all;
            // Spread the anti-entropy rounds over their period.
            node.ticks = w.rng.below(ticks_per_sync);
            node.sync_turn = w.rng.index(node.peers.len().max(1));
            if w.p.protocol == Protocol::V8 {
                // Its last anti-entropy round as if it was `ticks` heartbeats ago, its
                // last heartbeat when its version 1 was published (parked in
                // `wake_at` above), its round robin from `sync_turn`.
                let last_sync =
                    ORIGIN_US.saturating_sub(node.ticks * w.p.gossip.heartbeat_ms * US) / US;
                let announced = node.wake_at.take().unwrap_or(ORIGIN_US) / US;
                let mut pacer = Pacer::running(
                    w.p.pacer_config(),
                    node.sync_turn as u64,
                    last_sync,
                    (announced, interval),
                );
                for peer in &node.peers {
                    pacer.handle(Input::PeerConnected(peer.node), ORIGIN_US / US);
                }
                node.pacer = Some(pacer);
            }
            let at = ORIGIN_US + w.rng.below(w.p.gossip.heartbeat_ms * US);
            w.queue.push(at, Ev::Tick(i as u32));
        }
        w
    }

    /// Time from deciding to dial to an established connection, µs.
    pub(super) fn connect_delay(&mut self, lat: u64) -> u64 {
        self.rng.below(self.p.discovery_ms * US) + self.p.connect_rtts * 2 * lat
    }

    /// `interval_ms` with the heartbeat jitter applied, µs.
    pub(super) fn jittered(&mut self, interval_ms: u64) -> u64 {
        let j = self.p.jitter_ms * US;
        (interval_ms * US + self.rng.below(j + 1))
            .saturating_sub(j / 2)
            .max(1)
    }

    pub(super) fn ticks_per_sync(&self) -> u64 {
        (self.p.anti_entropy_ms / self.p.gossip.heartbeat_ms).max(1)
    }

    /// Sets the goal version of every session and recounts who is behind it.
    pub(super) fn set_goal(&mut self, goal: impl Fn(usize) -> u16) {
        let n = self.n;
        for s in 0..n {
            self.goal[s] = goal(s);
        }
        self.incomplete = 0;
        for v in 0..n {
            let row = &self.roster[v * n..(v + 1) * n];
            let behind = row.iter().zip(&self.goal).filter(|(r, g)| r < g).count();
            let node = &mut self.nodes[v];
            node.behind = behind;
            node.done_at = (behind == 0).then_some(self.now);
            if behind > 0 {
                self.incomplete += 1;
            }
        }
    }

    /// Runs every event due by `until`, then sets the clock to it.
    pub(super) fn run_until(&mut self, until: u64) {
        while let Some((at, ev)) = self.queue.pop_until(until) {
            self.now = at;
            self.events += 1;
            self.handle(ev);
        }
        self.now = self.now.max(until);
    }

    /// Runs until every node reached the goal or `deadline`; returns when it stopped.
    pub(super) fn run_until_converged(&mut self, deadline: u64) -> u64 {
        while self.incomplete > 0 {
            let Some((at, ev)) = self.queue.pop_until(deadline) else {
                self.now = deadline;
                return deadline;
            };
            self.now = at;
            self.events += 1;
            self.handle(ev);
        }
        self.now
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Start(v) => self.start(v as usize),
            Ev::Connect(l) => self.connect(l as usize),
            Ev::Gossip { to, from, msg } => self.receive(to as usize, from, msg),
            Ev::Tick(v) => self.tick(v as usize),
            Ev::Announce(v) => self.announce(v as usize),
            Ev::Ihave(i) => {
                if let Some(ihave) = self.ihaves.take(i) {
                    self.receive_ihave(ihave);
                }
            }
            Ev::Synced(i) => {
                if let Some(sync) = self.syncs.take(i) {
                    self.synced(sync);
                }
            }
            Ev::Wake(v) => self.wake(v as usize),
        }
    }

    fn start(&mut self, v: usize) {
        self.nodes[v].started = true;
        if self.p.protocol == Protocol::V8 {
            // The pacer counts its roster as growing from its start (fast
            // anti-entropy).
            let seed = self.rng.next_u64();
            self.nodes[v].pacer = Some(Pacer::new(self.p.pacer_config(), self.now / US, seed));
        }
        // gossipsub's first heartbeat comes after `heartbeat_initial_delay` (100 ms).
        self.queue.push(self.now + 100 * US, Ev::Tick(v as u32));
    }

    fn connect(&mut self, l: usize) {
        let link = self.links[l];
        self.links[l].up = true;
        // On the peer's subscription, gossipsub meshes it at once if its mesh is
        // below `mesh_n_low` (`handle_received_subscriptions`).
        self.graft_new_peer(link.a as usize, link.b);
        self.graft_new_peer(link.b as usize, link.a);
        if self.p.protocol == Protocol::V8 {
            for (end, other) in [(link.a, link.b), (link.b, link.a)] {
                let end = end as usize;
                // The session's first announcement waits for a subscribed peer.
                if self.nodes[end].version == 0 {
                    let interval_ms = self.pacer_of(end).heartbeat_interval_ms(1);
                    self.publish(end, interval_ms);
                    self.pace(end, Input::Announced { interval_ms });
                }
                // Each end fetches the other's roster, and takes a second look a moment
                // later (what reached the peer between its answer and this node joining
                // its mesh went to its mesh only).
                self.pace(end, Input::PeerConnected(other));
                self.pace(end, Input::PeerSubscribed(other));
            }
            return;
        }
        for end in [link.a as usize, link.b as usize] {
            // The session's first announcement waits for a subscribed peer.
            if self.nodes[end].version == 0 {
                self.announce(end);
            }
        }
        // Both ends fetch the other's roster on a new connection.
        self.request_roster(
            link.a as usize,
            link.b as usize,
            l as u32,
            link.lat,
            Ask::Connect,
        );
        self.request_roster(
            link.b as usize,
            link.a as usize,
            l as u32,
            link.lat,
            Ask::Connect,
        );
    }

    /// Protocol 7: the session publishes a new version and schedules the next one.
    pub(super) fn announce(&mut self, v: usize) {
        let interval = self.p.heartbeat.interval_ms(self.nodes[v].held.max(1));
        self.publish(v, interval);
        let next = self.now + self.jittered(interval);
        self.queue.push(next, Ev::Announce(v as u32));
    }

    fn tick(&mut self, v: usize) {
        self.maintain_mesh(v);
        let per_sync = self.ticks_per_sync();
        let node = &mut self.nodes[v];
        node.ticks += 1;
        let sync_due = node.ticks.is_multiple_of(per_sync);
        if !self.quiet {
            self.emit_ihave(v);
            if self.p.protocol == Protocol::V7 && sync_due {
                self.anti_entropy(v);
            }
        }
        if self.p.protocol == Protocol::V8 {
            let roster_len = self.nodes[v].held.max(1);
            self.pace(v, Input::Tick { roster_len });
        }
        let next = self.now + self.p.gossip.heartbeat_ms * US;
        self.queue.push(next, Ev::Tick(v as u32));
    }

    fn pacer_of(&mut self, v: usize) -> &mut Pacer<u32> {
        self.nodes[v]
            .pacer
            .get_or_insert_with(|| Pacer::new(self.p.pacer_config(), self.now / US, v as u64))
    }

    /// Protocol 8: node `v`'s pacer takes `input`, and the node does what it decides.
    pub(super) fn pace(&mut self, v: usize, input: Input<u32>) {
        let now_ms = self.now / US;
        self.pacer_of(v).handle(input, now_ms);
        self.run_pacer(v);
    }

    /// The pacer's timer (a second look is due).
    fn wake(&mut self, v: usize) {
        if self.nodes[v].wake_at == Some(self.now) {
            self.nodes[v].wake_at = None;
        }
        let now_ms = self.now / US;
        self.pacer_of(v).handle_timeout(now_ms);
        self.run_pacer(v);
    }

    /// Does what node `v`'s pacer decided, and queues a wake-up for its timer.
    fn run_pacer(&mut self, v: usize) {
        while let Some(out) = self.pacer_of(v).poll_output() {
            match out {
                Output::AskRoster { peer, ask } => {
                    if !self.quiet {
                        self.ask_roster(v, peer, ask);
                    }
                }
                Output::Announce { interval_ms } | Output::Beacon { interval_ms } => {
                    // The first announcement waits for a peer to take it (the node
                    // keeps it unpublished until one subscribes: `connect`).
                    if self.nodes[v].version == 0 {
                        continue;
                    }
                    self.publish(v, interval_ms);
                    let now_ms = self.now / US;
                    self.pacer_of(v)
                        .handle(Input::Announced { interval_ms }, now_ms);
                }
                // No DHT in the simulation: presence needs none.
                Output::JoinDht => {}
            }
        }
        if let Some(at) = self.pacer_of(v).poll_timeout() {
            let at = (at * US).max(self.now);
            if self.nodes[v].wake_at.is_none_or(|w| at < w) {
                self.nodes[v].wake_at = Some(at);
                self.queue.push(at, Ev::Wake(v as u32));
            }
        }
    }

    /// Each node's counters as of now (to subtract at the end of a window).
    pub(super) fn snapshot(&self) -> Vec<Counters> {
        let w = &self.p.wire;
        let signed = self.p.protocol.gossip_signed();
        let hashed = self.p.protocol == Protocol::V8;
        self.counters
            .iter()
            .zip(&self.copies)
            .map(|(c, copies)| {
                let anns = copies.all - copies.beacons;
                Counters {
                    gossip_msgs: copies.all,
                    beacon_msgs: copies.beacons,
                    dup_msgs: copies.dup,
                    decodes: c.decodes + copies.first,
                    // Protocol 7's gossipsub checks every copy's signature.
                    gossip_sigs: if signed { copies.all } else { 0 },
                    ann_sigs: c.ann_sigs + 2 * (copies.verified - copies.verified_beacons),
                    beacon_sigs: c.beacon_sigs + copies.verified_beacons,
                    // Protocol 8's gossipsub hashes every copy for its content id.
                    id_blocks: if hashed {
                        anns * w.id_blocks(w.announcement) + copies.beacons * w.id_blocks(w.beacon)
                    } else {
                        0
                    },
                    ..*c
                }
            })
            .collect()
    }
}
