//! Roster sync by summary (protocol v7) on the compact rosters: applying an
//! announcement, and roster requests on connect and for anti-entropy.
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
    schedule::Ev,
    world::{Change, Sync, World},
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
            self.nodes[v].held += 1;
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

    /// `requester` sends its summary to `responder` over `link`; the answer is
    /// computed and applied when it arrives, a round trip later.
    pub(super) fn request_roster(
        &mut self,
        requester: usize,
        responder: usize,
        link: u32,
        lat: u64,
    ) {
        self.in_flight[requester] += 1;
        self.in_flight[responder] += 1;
        let i = self.syncs.insert(Sync {
            requester: requester as u32,
            responder: responder as u32,
            link,
            sent: self.now,
            answered: self.now + lat,
        });
        self.queue.push(self.now + 2 * lat, Ev::Synced(i));
    }

    /// Anti-entropy: one connected peer's roster, round robin by peer order.
    pub(super) fn anti_entropy(&mut self, v: usize) {
        let up: Vec<usize> = (0..self.nodes[v].peers.len())
            .filter(|&k| self.links[self.nodes[v].peers[k].link as usize].up)
            .collect();
        if up.is_empty() {
            return;
        }
        let node = &mut self.nodes[v];
        let peer = node.peers[up[node.sync_turn % up.len()]];
        node.sync_turn = node.sync_turn.wrapping_add(1);
        self.request_roster(v, peer.node as usize, peer.link, peer.lat);
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

    /// The answer to `q`'s request arrives: `r` sends every version it held (when the
    /// request arrived) that `q`'s summary (when it left) did not name — including
    /// versions older than `q`'s, which the summary's opaque tags cannot reveal; `q`
    /// checks the signatures of those its roster does not know now and applies them.
    pub(super) fn synced(&mut self, sync: Sync) {
        let (q, r) = (sync.requester as usize, sync.responder as usize);
        let up = self.links[sync.link as usize].up;
        let (mut summary, mut held) = std::mem::take(&mut self.scratch);
        if up {
            self.row_at(q, sync.sent, &mut summary);
            self.row_at(r, sync.answered, &mut held);
        }
        for end in [q, r] {
            self.in_flight[end] -= 1;
            if self.in_flight[end] == 0 {
                self.nodes[end].log.clear();
            }
        }
        if !up {
            // The connection closed meanwhile: the request failed.
            self.scratch = (summary, held);
            return;
        }
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
        self.scratch = (summary, held);
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
