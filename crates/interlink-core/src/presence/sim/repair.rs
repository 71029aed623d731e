//! Protocol 8's roster answers (PROTOCOL.md §8.2): digest requests, full requests
//! with the away bitmap, and what a repair fetch makes the requester publish again.
//!
//! In these scenarios a session has one announcement (version 1) and nothing else
//! changes, so a summary names exactly the sessions whose announcement the requester
//! holds, and two digests are equal when the two nodes hold the same sessions.

use super::{
    live::session_key,
    world::{Ask, Sync, World},
};

impl World {
    /// Node `v`'s digest and the number of announcements it held at `at` (µs): now's,
    /// with the sessions it learned since taken out again (the change log of a node
    /// with a request in flight covers its round trip).
    pub(super) fn digest_at(&self, v: usize, at: u64) -> (u64, u64) {
        let node = &self.nodes[v];
        let (mut digest, mut held) = (node.digest, node.held as u64);
        for c in node.log.iter().rev() {
            if c.at <= at {
                break;
            }
            if c.prev == 0 {
                digest ^= session_key(c.session as usize);
                held -= 1;
            }
        }
        (digest, held)
    }

    /// The answer to a digest request arrives: `same` (or not), framing only. Both
    /// ends hashed their tags for their digest; on a difference the requester sends
    /// a full request at once, a repair.
    pub(super) fn digest_answered(&mut self, sync: &Sync, asked: (u64, u64), had: (u64, u64)) {
        let (q, r) = (sync.requester as usize, sync.responder as usize);
        let w = &self.p.wire;
        let (request_bytes, response_bytes) = (w.sync_framing + w.digest, w.sync_framing);
        let c = &mut self.counters[r];
        c.sync_msgs += 1;
        c.sync_bytes += request_bytes;
        c.decodes += 1;
        c.digest_tags += had.1;
        let differs = asked.0 != had.0;
        let c = &mut self.counters[q];
        c.sync_msgs += 1;
        c.sync_bytes += response_bytes;
        c.decodes += 1;
        c.digest_tags += asked.1;
        c.digest_requests += 1;
        c.digest_differs += u64::from(differs);
        // The pacer follows a difference with a full request at once, a repair.
        self.pace(
            q,
            crate::presence::pacer::Input::DigestAnswered {
                peer: r as u32,
                same: !differs,
            },
        );
    }

    /// The answer to `q`'s full request arrives. `r` sends every announcement the
    /// summary does not name, each with its newest beacon if it holds one, and for each
    /// session `q` marked (away or overdue) that `r` judges live, its newest beacon (a
    /// newer sign than `q`'s, or `q` would not have marked it: they judge by the same
    /// clock). `q` checks what is new to it now (an
    /// announcement two signatures, a beacon one) and applies it; a repair publishes
    /// it again.
    pub(super) fn answer_v8(&mut self, sync: &Sync, summary: &[u16], held: &[u16]) {
        let (q, r) = (sync.requester as usize, sync.responder as usize);
        let n = self.n;
        let repair = sync.ask == Ask::Repair;
        let (mut tags_q, mut tags_r, mut entries, mut beacons) = (0u64, 0u64, 0u64, 0u64);
        let (mut new_anns, mut new_beacons) = (0u64, 0u64);
        let mut again = (Vec::new(), Vec::new());
        for s in 0..n {
            let (have, has) = (summary[s], held[s]);
            tags_q += u64::from(have != 0);
            tags_r += u64::from(has != 0);
            if has == 0 {
                continue;
            }
            let sent = if have == 0 {
                entries += 1;
                true
            } else {
                has > have
                    && sync.away
                    && self.sign_overdue(s, have, sync.sent)
                    && self.sign_live(s, has, sync.answered)
            };
            if !sent {
                continue;
            }
            beacons += u64::from(has > 1);
            let now = self.roster[q * n + s];
            if has <= now {
                // Learned meanwhile (gossip, another fetch): dropped unverified.
                continue;
            }
            if now == 0 {
                new_anns += 1;
                if repair && again.0.len() < self.p.max_republish {
                    again.0.push(self.versions[s][0]);
                }
            }
            if has > 1 {
                new_beacons += 1;
                if repair && again.1.len() < self.p.max_republish {
                    again.1.push(self.versions[s][usize::from(has) - 1]);
                }
            }
            self.apply_roster(q, s, has, now);
        }
        let w = &self.p.wire;
        let bitmap = if sync.away { tags_q.div_ceil(8) } else { 0 };
        let request_bytes = w.sync_framing + tags_q * w.tag + bitmap;
        let response_bytes = w.sync_framing
            + entries * (w.announcement + w.entry_framing)
            + beacons * (w.beacon + w.entry_framing);
        let c = &mut self.counters[r];
        c.sync_msgs += 1;
        c.sync_bytes += request_bytes;
        c.decodes += 1;
        c.tags += tags_r;
        let c = &mut self.counters[q];
        c.tags += tags_q;
        c.sync_msgs += 1;
        c.sync_bytes += response_bytes;
        c.sync_entries += entries;
        c.sync_beacons += beacons;
        c.decodes += entries + beacons;
        c.ann_sigs += 2 * new_anns;
        c.beacon_sigs += new_beacons;
        // Announcements first, then beacons, as the node publishes them.
        let max = self.p.max_republish;
        for msg in again.0.into_iter().chain(again.1).take(max) {
            self.republish(q, msg);
        }
    }
}
