//! Gossipsub as the node runs it: flood publishing, mesh forwarding after
//! validation, mesh upkeep at each heartbeat, and IHAVE/IWANT gossip.

use super::{
    schedule::Ev,
    world::{Ihave, MeshPeer, Msg, US, World},
};

/// Protocol 8: the bit of a `seen` entry that says gossipsub has seen the session's
/// announcement. The rest holds the newest beacon seen: an announcement and its
/// beacons are distinct messages (distinct content ids), and a node that has seen a
/// beacon must still take the announcement when it comes.
const SEEN_ANNOUNCEMENT: u16 = 0x8000;

/// Which recent messages each node's gossipsub holds: one bit per (node, message)
/// for the messages of the last few heartbeats, in a ring of `words × 64` message
/// slots. It answers "which ids would this node put in an IHAVE, and which of them
/// does that peer lack" with a few word operations. Stored word-major — the bits of
/// 64 consecutive messages for every node side by side — so a message spreading
/// through the overlay keeps writing to one hot row.
#[derive(Debug)]
pub(super) struct Window {
    nodes: usize,
    /// Rows in the ring (a power of two); row `r` holds messages `64 r..64 r + 64`.
    words: usize,
    /// Messages held (seen by gossipsub or published).
    held: Vec<u64>,
    /// Messages asked for by IWANT and not yet received (gossipsub's promises).
    asked: Vec<u64>,
    /// Messages below this index have no bits any more (their slots were reused).
    pub(super) valid_from: usize,
    /// First message inside the gossip history (published within its heartbeats).
    pub(super) cursor: usize,
}

impl Window {
    /// Room for `nodes` messages and a word to spare: a history of three heartbeats
    /// never holds more than one announcement per session under a 30 s heartbeat, nor
    /// more than the whole cold start.
    pub(super) fn new(nodes: usize) -> Self {
        let words = ((nodes + 128).next_power_of_two() / 64).max(64);
        Self {
            nodes,
            words,
            held: vec![0; nodes * words],
            asked: vec![0; nodes * words],
            valid_from: 0,
            cursor: 0,
        }
    }

    /// Messages before `len` were published before the run and carry no bits.
    pub(super) fn start_after(&mut self, len: usize) {
        self.valid_from = len;
        self.cursor = len;
    }

    fn at(&self, node: usize, word: usize) -> usize {
        (word % self.words) * self.nodes + node
    }

    /// Makes room for message `msg` about to be published: starting a new word of
    /// the ring clears its row.
    fn recycle(&mut self, msg: usize) {
        if !msg.is_multiple_of(64) {
            return;
        }
        let row = self.at(0, msg / 64);
        self.held[row..row + self.nodes].fill(0);
        self.asked[row..row + self.nodes].fill(0);
        self.valid_from = self
            .valid_from
            .max((msg / 64 + 1).saturating_sub(self.words) * 64);
    }

    fn set_held(&mut self, node: usize, msg: usize) {
        if msg >= self.valid_from {
            let i = self.at(node, msg / 64);
            self.held[i] |= 1 << (msg % 64);
        }
    }

    /// `node` sent an IWANT for `msg` (a promise: it asks nobody else meanwhile).
    fn mark_asked(&mut self, node: usize, msg: usize) {
        if msg >= self.valid_from {
            let i = self.at(node, msg / 64);
            self.asked[i] |= 1 << (msg % 64);
        }
    }

    /// The words covering `lo..hi`, each with the mask of its messages in range.
    fn words_of(&self, lo: usize, hi: usize) -> impl Iterator<Item = (usize, u64)> + use<> {
        let lo = lo.max(self.valid_from);
        let last = hi.saturating_sub(1) / 64;
        let first = lo / 64;
        let empty = lo >= hi;
        (first..=last).filter(move |_| !empty).map(move |gw| {
            let mut mask = u64::MAX;
            if gw == first {
                mask &= u64::MAX << (lo % 64);
            }
            if gw == last {
                mask &= u64::MAX >> (63 - (hi - 1) % 64);
            }
            (gw, mask)
        })
    }

    /// How many of the messages `lo..hi` the node holds.
    fn count(&self, node: usize, lo: usize, hi: usize) -> usize {
        self.words_of(lo, hi)
            .map(|(gw, mask)| (self.held[self.at(node, gw)] & mask).count_ones() as usize)
            .sum()
    }

    /// Messages of `lo..hi` that `from` holds and `to` neither holds nor has asked
    /// for.
    fn wanted(&self, from: usize, to: usize, lo: usize, hi: usize) -> Vec<usize> {
        let mut out = Vec::new();
        for (gw, mask) in self.words_of(lo, hi) {
            let (f, t) = (self.at(from, gw), self.at(to, gw));
            let mut want = self.held[f] & !self.held[t] & !self.asked[t] & mask;
            while want != 0 {
                out.push(gw * 64 + want.trailing_zeros() as usize);
                want &= want - 1;
            }
        }
        out
    }
}

impl World {
    /// A `seen` entry that held `prev` once gossipsub has seen `version` too.
    pub(super) fn seen_value(&self, prev: u16, version: u16) -> u16 {
        if !self.beacons {
            // Protocol 7: each version replaces the last, and an older one is ignored.
            return prev.max(version);
        }
        let beacon = (prev & !SEEN_ANNOUNCEMENT).max(version);
        let announcement = if version == 1 {
            SEEN_ANNOUNCEMENT
        } else {
            prev & SEEN_ANNOUNCEMENT
        };
        beacon | announcement
    }

    /// Whether gossipsub has seen `version` of a session, by its `seen` entry. (An
    /// older beacon than one seen counts as seen: the node would ignore it anyway.)
    fn has_seen(&self, seen: u16, version: u16) -> bool {
        if !self.beacons {
            seen >= version
        } else if version == 1 {
            seen & SEEN_ANNOUNCEMENT != 0
        } else {
            seen & !SEEN_ANNOUNCEMENT >= version
        }
    }

    /// The session of node `v` publishes its next version, carrying `interval_ms`.
    pub(super) fn publish(&mut self, v: usize, interval_ms: u64) {
        let prev = self.nodes[v].version;
        // Versions are u16 (protocol 8: 15 bits of them): a run of 32,767 heartbeats
        // (11 days at 30 s) ends here.
        let last = if self.beacons {
            !SEEN_ANNOUNCEMENT
        } else {
            u16::MAX
        };
        if prev >= last {
            return;
        }
        let version = prev + 1;
        self.nodes[v].version = version;
        let msg = self.msgs.len();
        self.window.recycle(msg);
        self.msgs.push(Msg {
            session: v as u32,
            version,
            at: self.now,
            interval_ms,
        });
        self.versions[v].push(msg as u32);
        let sign = self.msgs[msg];
        self.live.published(v, version, &sign);
        self.fresh.published(v, version, &sign);
        self.apply_roster(v, v, version, prev);
        let i = v * self.n + v;
        self.seen[i] = self.seen_value(self.seen[i], version);
        self.window.set_held(v, msg);
        if self.quiet {
            return;
        }
        let flood = self.p.gossip.flood_publish;
        for k in 0..self.nodes[v].peers.len() {
            let peer = self.nodes[v].peers[k];
            if self.links[peer.link as usize].up && (flood || peer.mesh) {
                self.send_copy(v, peer.node as usize, peer.lat, msg as u32);
            }
        }
    }

    /// Node `v` publishes `msg`, which a roster fetch brought, again (protocol 8):
    /// the same bytes, so the same content id. Gossipsub refuses it if it has seen it
    /// (gossip brought it meanwhile); else it floods it like its own.
    pub(super) fn republish(&mut self, v: usize, msg: u32) {
        let m = self.msgs[msg as usize];
        let i = m.session as usize * self.n + v;
        if self.has_seen(self.seen[i], m.version) {
            return;
        }
        self.seen[i] = self.seen_value(self.seen[i], m.version);
        self.counters[v].republished += 1;
        // (Advertised in IHAVEs only if it was first published within the gossip
        // history: the window goes by publication time.)
        self.window.set_held(v, msg as usize);
        let flood = self.p.gossip.flood_publish;
        for k in 0..self.nodes[v].peers.len() {
            let peer = self.nodes[v].peers[k];
            if self.links[peer.link as usize].up && (flood || peer.mesh) {
                self.send_copy(v, peer.node as usize, peer.lat, msg);
            }
        }
    }

    /// Sends `from`'s copy of `msg` to `to`, arriving after `delay` µs. A copy of what
    /// `to` has already seen is counted at once instead of queued (it can change
    /// nothing at `to`); only copies that may be `to`'s first become events. Every
    /// copy costs `to` a decode, and in protocol 7 a libp2p signature check (gossipsub
    /// verifies before it looks at the id), in protocol 8 a hash for its content id.
    fn send_copy(&mut self, from: usize, to: usize, delay: u64, msg: u32) {
        let m = self.msgs[msg as usize];
        if self.has_seen(self.seen[m.session as usize * self.n + to], m.version) {
            let c = &mut self.copies[to];
            c.all += 1;
            c.dup += 1;
            c.beacons += u64::from(self.beacons && m.version > 1);
        } else {
            self.queue.push(
                self.now + delay,
                Ev::Gossip {
                    to: to as u32,
                    from: from as u32,
                    msg,
                },
            );
        }
    }

    /// A gossip copy arrives at `v` from `from`.
    pub(super) fn receive(&mut self, v: usize, from: u32, msg: u32) {
        let m = self.msgs[msg as usize];
        let (s, n) = (m.session as usize, self.n);
        let beacon = self.beacons && m.version > 1;
        let seen = self.seen[s * n + v];
        let dup = self.has_seen(seen, m.version);
        let c = &mut self.copies[v];
        c.all += 1;
        c.beacons += u64::from(beacon);
        if dup {
            c.dup += 1;
            return;
        }
        self.seen[s * n + v] = self.seen_value(seen, m.version);
        // New to gossipsub: the node decodes the presence message and validates it.
        let c = &mut self.copies[v];
        c.first += 1;
        let held = self.roster_t[s * n + v];
        if self.beacons {
            if !self.validate_v8(v, s, m.version, held) {
                return;
            }
            // Gossipsub keeps (and advertises) only what validation accepted.
            self.window.set_held(v, msg as usize);
        } else {
            // (The protocol 7 model advertises ignored copies too; kept as it was.)
            self.window.set_held(v, msg as usize);
            if held > m.version {
                // Older than what the roster holds: ignored, not forwarded.
                return;
            }
            if held < m.version {
                // New to the roster: the announcement's signature and its sealing
                // binding.
                self.copies[v].verified += 1;
                self.apply_roster(v, s, m.version, held);
            }
        }
        // New, or a byte-identical copy of what a roster fetch brought: forwarded to
        // the mesh once validated, except to its source and its publisher. (Copies
        // arriving during validation would be spared too; at 1,000 nodes that was
        // 0.6 % of all copies, not worth an event per message.)
        let delay = self.p.validation_us;
        for k in 0..self.mesh[v].len() {
            let peer = self.mesh[v][k];
            if peer.node != from && peer.node != m.session {
                self.send_copy(v, peer.node as usize, delay + u64::from(peer.lat), msg);
            }
        }
    }

    /// Protocol 8's validation of `version` of session `s` at `v`, whose roster holds
    /// `held` (PROTOCOL.md §8.1); returns whether it is forwarded.
    fn validate_v8(&mut self, v: usize, s: usize, version: u16, held: u16) -> bool {
        if held == 0 {
            if version > 1 {
                // A beacon of an announcement not held cannot be checked: ignored.
                return false;
            }
            // A new announcement: its signature and its sealing binding.
            self.copies[v].verified += 1;
            self.apply_roster(v, s, version, held);
            return true;
        }
        if version == 1 || version == held {
            // The announcement held, or the newest beacon held: a current copy,
            // forwarded without a check (it was verified when it was applied).
            return true;
        }
        if version < held {
            // At or below the newest sign of life held: nothing new.
            return false;
        }
        // A newer beacon: one signature.
        let c = &mut self.copies[v];
        c.verified += 1;
        c.verified_beacons += 1;
        self.apply_roster(v, s, version, held);
        true
    }

    fn position_of(&self, v: usize, peer: u32) -> Option<usize> {
        self.nodes[v]
            .peers
            .binary_search_by_key(&peer, |p| p.node)
            .ok()
    }

    /// Removes `peer` from `v`'s mesh (the connection closed: no PRUNE is sent).
    pub(super) fn leave_mesh(&mut self, v: usize, peer: u32) {
        self.mesh[v].retain(|m| m.node != peer);
        let node = &mut self.nodes[v];
        if let Ok(pos) = node.peers.binary_search_by_key(&peer, |p| p.node) {
            node.peers[pos].mesh = false;
        }
    }

    fn add_mesh(&mut self, v: usize, pos: usize) {
        let peer = &mut self.nodes[v].peers[pos];
        if !peer.mesh {
            peer.mesh = true;
            self.mesh[v].push(MeshPeer {
                node: peer.node,
                lat: u32::try_from(peer.lat).unwrap_or(u32::MAX),
                pos: pos as u32,
            });
        }
    }

    fn count_control(&mut self, v: usize, ids: u64) {
        let bytes = self.p.wire.control(ids);
        let c = &mut self.counters[v];
        c.control_msgs += 1;
        c.control_bytes += bytes;
    }

    /// Positions in `v`'s peers of connected peers outside its mesh.
    fn outside_mesh(&self, v: usize) -> Vec<usize> {
        let node = &self.nodes[v];
        (0..node.peers.len())
            .filter(|&k| !node.peers[k].mesh && self.links[node.peers[k].link as usize].up)
            .collect()
    }

    /// Picks `k` of `items` at random (a partial Fisher-Yates shuffle).
    fn pick(&mut self, items: &mut Vec<usize>, k: usize) {
        let k = k.min(items.len());
        for i in 0..k {
            let j = i + self.rng.index(items.len() - i);
            items.swap(i, j);
        }
        items.truncate(k);
    }

    /// The heartbeat's mesh upkeep: graft up to `mesh_n` below `mesh_n_low`, prune at
    /// random down to `mesh_n` above `mesh_n_high`. (The real node keeps its best
    /// scored and two outbound peers when pruning; scores are flat here.)
    pub(super) fn maintain_mesh(&mut self, v: usize) {
        let (low, target, high) = {
            let g = &self.p.gossip;
            (g.mesh_n_low, g.mesh_n, g.mesh_n_high)
        };
        let len = self.mesh[v].len();
        if len < low {
            let mut candidates = self.outside_mesh(v);
            self.pick(&mut candidates, target - len);
            for pos in candidates {
                self.graft(v, pos, high);
            }
        } else if len > high {
            while self.mesh[v].len() > target {
                let k = self.rng.index(self.mesh[v].len());
                let gone = self.mesh[v].swap_remove(k);
                self.nodes[v].peers[gone.pos as usize].mesh = false;
                self.leave_mesh(gone.node as usize, v as u32);
                self.count_control(gone.node as usize, 0);
            }
        }
    }

    /// A peer of `v` just connected and subscribed: meshed at once if `v` needs
    /// peers (gossipsub's `handle_received_subscriptions`).
    pub(super) fn graft_new_peer(&mut self, v: usize, peer: u32) {
        if self.mesh[v].len() < self.p.gossip.mesh_n_low
            && let Some(pos) = self.position_of(v, peer)
            && !self.nodes[v].peers[pos].mesh
        {
            self.graft(v, pos, self.p.gossip.mesh_n_high);
        }
    }

    /// `v` sends GRAFT to the peer at `pos`. It accepts unless its mesh is full and
    /// `v` is not its outbound peer (as in gossipsub's `handle_graft`); a refusal is a
    /// PRUNE back.
    fn graft(&mut self, v: usize, pos: usize, mesh_n_high: usize) {
        let peer = self.nodes[v].peers[pos];
        let w = peer.node as usize;
        self.count_control(w, 0);
        let Some(back) = self.position_of(w, v as u32) else {
            return;
        };
        let w_dialled = self.links[peer.link as usize].a as usize == w;
        if self.mesh[w].len() < mesh_n_high || w_dialled {
            self.add_mesh(v, pos);
            self.add_mesh(w, back);
        } else {
            self.count_control(v, 0);
        }
    }

    /// The heartbeat's gossip: an IHAVE with the ids of the last `history_gossip`
    /// heartbeats to `max(gossip_lazy, gossip_factor × non-mesh peers)` random
    /// non-mesh peers.
    pub(super) fn emit_ihave(&mut self, v: usize) {
        let history = self.p.gossip.history_gossip * self.p.gossip.heartbeat_ms * US;
        let w = &mut self.window;
        while w.cursor < self.msgs.len() && self.msgs[w.cursor].at + history <= self.now {
            w.cursor += 1;
        }
        let (lo, hi) = (w.cursor.max(w.valid_from), self.msgs.len());
        let held = w.count(v, lo, hi);
        if held == 0 {
            return;
        }
        let mut targets = self.outside_mesh(v);
        let g = &self.p.gossip;
        let k = g
            .gossip_lazy
            .max((g.gossip_factor * targets.len() as f64) as usize);
        let ids = held.min(g.max_ihave_ids) as u32;
        self.pick(&mut targets, k);
        for pos in targets {
            let peer = self.nodes[v].peers[pos];
            let i = self.ihaves.insert(Ihave {
                to: peer.node,
                from: v as u32,
                lo: lo as u32,
                hi: hi as u32,
                ids,
            });
            self.queue.push(self.now + peer.lat, Ev::Ihave(i));
        }
    }

    /// An IHAVE arrives: its receiver asks (IWANT) for what it lacks and is not
    /// already waiting for, and gets each after a round trip. An IHAVE larger than
    /// the RPC limit fails to decode and is dropped.
    pub(super) fn receive_ihave(&mut self, ihave: Ihave) {
        let (v, u) = (ihave.to as usize, ihave.from as usize);
        let bytes = self.p.wire.control(u64::from(ihave.ids));
        let c = &mut self.counters[v];
        c.control_msgs += 1;
        c.control_bytes += bytes;
        if bytes > self.p.gossip.max_rpc_bytes as u64 {
            c.ihave_dropped += 1;
            return;
        }
        c.id_lookups += u64::from(ihave.ids);
        let Some(pos) = self.position_of(v, ihave.from) else {
            return;
        };
        let peer = self.nodes[v].peers[pos];
        if !self.links[peer.link as usize].up {
            return;
        }
        let (lo, hi) = (ihave.lo as usize, ihave.hi as usize);
        let mut wanted = self.window.wanted(u, v, lo, hi);
        // A list cut to `max_ihave_ids` names a random part of what `u` holds.
        let holds = self.window.count(u, lo, hi);
        if holds > ihave.ids as usize {
            let keep = f64::from(ihave.ids) / holds as f64;
            wanted.retain(|_| self.rng.chance(keep));
        }
        if wanted.is_empty() {
            return;
        }
        self.count_control(u, wanted.len() as u64);
        self.counters[v].iwant_msgs += wanted.len() as u64;
        for msg in wanted {
            self.window.mark_asked(v, msg);
            self.queue.push(
                self.now + 2 * peer.lat,
                Ev::Gossip {
                    to: v as u32,
                    from: u as u32,
                    msg: msg as u32,
                },
            );
        }
    }
}
