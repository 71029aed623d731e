//! Roster sync by summary on the compact rosters: applying an announcement, roster
//! requests on connect and for anti-entropy (when each protocol sends them), and the
//! protocol 7 answer. Protocol 8's answers are in `repair.rs`.
//!
//! A request carries the requester's summary as it was when it left, and the
//! responder answers from its roster as it was when the request arrived; between
//! those instants and the answer's arrival both rosters change (several fetches are
//! in flight at once on a new node, and gossip keeps arriving). Copying a 20 kB row
//! per request in flight would cost gigabytes at a 10,000-node heal, so each node
//! instead keeps the previous value of every roster entry it changed in the last
//! round trip or so, and the answer is computed on arrival from the rows as they
//! were. What it brings that the requester learned meanwhile arrives, is counted, and
//! is recognised without a signature check ([`crate::presence::Roster::knows`]).

use super::{
    live::session_key,
    params::Protocol,
    schedule::Ev,
    world::{Ask, Change, Peer, Sync, US, World},
};

impl World {
    /// Node `v`'s roster, holding `prev` of `session`, now holds the newer
    /// `version`. (Callers know `prev` from whichever copy of the roster they read:
    /// reading the other would be a cache miss.)
    pub(super) fn apply_roster(&mut self, v: usize, session: usize, version: u16, prev: u16) {
        debug_assert!(version > prev && self.roster[v * self.n + session] == prev);
        self.roster[v * self.n + session] = version;
        self.roster_t[session * self.n + v] = version;
        if prev == 0 {
            let node = &mut self.nodes[v];
            node.held += 1;
            node.digest ^= session_key(session);
            if session != v
                && let Some(pacer) = &mut node.pacer
            {
                // A session new to the roster: the node's anti-entropy goes fast.
                pacer.handle(crate::presence::pacer::Input::RosterGrew, self.now / US);
            }
        }
        if self.in_flight[v] > 0 {
            self.log_change(v, session, prev);
        }
        let goal = self.goal[session];
        if goal > 0 && prev < goal && version >= goal {
            let node = &mut self.nodes[v];
            node.behind -= 1;
            if node.behind == 0 {
                node.done_at = Some(self.now);
                self.incomplete -= 1;
            }
        }
    }

    fn log_change(&mut self, v: usize, session: usize, prev: u16) {
        let (now, keep) = (self.now, self.log_keep);
        let log = &mut self.nodes[v].log;
        while log.front().is_some_and(|c| c.at + keep < now) {
            log.pop_front();
        }
        // A heal or a late start logs thousands at once; give the memory back.
        if log.capacity() > 4096 && log.len() < log.capacity() / 8 {
            log.shrink_to(log.len() * 2);
        }
        log.push_back(Change {
            at: now,
            session: session as u32,
            prev,
        });
    }

    /// `requester` sends `responder` a request over `link` (its summary, or its
    /// digest); the answer is computed and applied when it arrives, a round trip later.
    pub(super) fn request_roster(
        &mut self,
        requester: usize,
        responder: usize,
        link: u32,
        lat: u64,
        ask: Ask,
    ) {
        // Protocol 8's full request marks what the requester judges away as it leaves.
        let away =
            self.p.protocol == Protocol::V8 && ask != Ask::Digest && self.any_marked(requester);
        self.in_flight[requester] += 1;
        self.in_flight[responder] += 1;
        let i = self.syncs.insert(Sync {
            requester: requester as u32,
            responder: responder as u32,
            link,
            sent: self.now,
            answered: self.now + lat,
            ask,
            away,
        });
        self.queue.push(self.now + 2 * lat, Ev::Synced(i));
    }

    /// The connected peer whose turn it is for `v`'s anti-entropy, round robin by peer
    /// order.
    fn next_sync_peer(&mut self, v: usize) -> Option<Peer> {
        let up: Vec<usize> = (0..self.nodes[v].peers.len())
            .filter(|&k| self.links[self.nodes[v].peers[k].link as usize].up)
            .collect();
        if up.is_empty() {
            return None;
        }
        let node = &mut self.nodes[v];
        let peer = node.peers[up[node.sync_turn % up.len()]];
        node.sync_turn = node.sync_turn.wrapping_add(1);
        Some(peer)
    }

    /// Protocol 7's anti-entropy: a full request to one connected peer.
    pub(super) fn anti_entropy(&mut self, v: usize) {
        if let Some(peer) = self.next_sync_peer(v) {
            self.request_roster(v, peer.node as usize, peer.link, peer.lat, Ask::Repair);
        }
    }

    /// Protocol 8: node `v` sends the roster request its pacer decided on to `peer`,
    /// over their link if it is up.
    pub(super) fn ask_roster(&mut self, v: usize, peer: u32, ask: Ask) {
        let peers = &self.nodes[v].peers;
        let Ok(k) = peers.binary_search_by_key(&peer, |p| p.node) else {
            return;
        };
        let Peer { link, lat, .. } = peers[k];
        if self.links[link as usize].up {
            self.request_roster(v, peer as usize, link, lat, ask);
        }
    }

    /// Writes `v`'s roster row as it was at `at` into `row`.
    fn row_at(&self, v: usize, at: u64, row: &mut [u16]) {
        let n = self.n;
        row.copy_from_slice(&self.roster[v * n..(v + 1) * n]);
        // Newest first, so each entry ends at the value before its oldest later change.
        for c in self.nodes[v].log.iter().rev() {
            if c.at <= at {
                break;
            }
            row[c.session as usize] = c.prev;
        }
    }

    /// The request is over: the two ends stop logging their changes for it.
    fn end_flight(&mut self, q: usize, r: usize) {
        for end in [q, r] {
            self.in_flight[end] -= 1;
            if self.in_flight[end] == 0 {
                self.nodes[end].log.clear();
            }
        }
    }

    /// The answer to `q`'s request arrives, from the rosters as they were (`q`'s when
    /// the request left, `r`'s when it arrived). If the connection closed meanwhile,
    /// the request failed.
    pub(super) fn synced(&mut self, sync: Sync) {
        let (q, r) = (sync.requester as usize, sync.responder as usize);
        let up = self.links[sync.link as usize].up;
        if sync.ask == Ask::Digest {
            // Read before the logs may be cleared.
            let asked = self.digest_at(q, sync.sent);
            let had = self.digest_at(r, sync.answered);
            self.end_flight(q, r);
            if up {
                self.digest_answered(&sync, asked, had);
            }
            return;
        }
        let (mut summary, mut held) = std::mem::take(&mut self.scratch);
        if up {
            self.row_at(q, sync.sent, &mut summary);
            self.row_at(r, sync.answered, &mut held);
        }
        self.end_flight(q, r);
        if up {
            match self.p.protocol {
                Protocol::V7 => self.answer_v7(q, r, &summary, &held),
                Protocol::V8 => self.answer_v8(&sync, &summary, &held),
            }
        }
        self.scratch = (summary, held);
    }

    /// Protocol 7's answer: `r` sends every version it held that `q`'s summary did not
    /// name — including versions older than `q`'s, which the summary's opaque tags
    /// cannot reveal; `q` checks the signatures of those its roster does not know now
    /// and applies them.
    fn answer_v7(&mut self, q: usize, r: usize, summary: &[u16], held: &[u16]) {
        let n = self.n;
        let (mut tags_q, mut tags_r, mut entries, mut new) = (0u64, 0u64, 0u64, 0u64);
        let mut stale = 0u64;
        for s in 0..n {
            let (have, has) = (summary[s], held[s]);
            tags_q += u64::from(have != 0);
            tags_r += u64::from(has != 0);
            // A tag names one exact version and hides its stamp, so the responder
            // sends every version the summary does not name: older ones too.
            if has != 0 && has != have {
                entries += 1;
                stale += u64::from(has < have);
                let now = self.roster[q * n + s];
                if has > now {
                    new += 1;
                    self.apply_roster(q, s, has, now);
                }
            }
        }
        let w = &self.p.wire;
        let request_bytes = w.sync_framing + tags_q * w.tag;
        let response_bytes = w.sync_framing + entries * (w.announcement + w.entry_framing);
        let c = &mut self.counters[r];
        c.sync_msgs += 1;
        c.sync_bytes += request_bytes;
        c.decodes += 1;
        // `missing_from` tags every held announcement to compare with the summary.
        c.tags += tags_r;
        let c = &mut self.counters[q];
        // `Summary::of` tagged every announcement the requester held.
        c.tags += tags_q;
        c.sync_msgs += 1;
        c.sync_bytes += response_bytes;
        c.sync_entries += entries;
        c.sync_stale += stale;
        c.decodes += entries;
        c.ann_sigs += 2 * new;
    }
}
