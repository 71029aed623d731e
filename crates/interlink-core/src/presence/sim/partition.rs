//! A partition and its heal: the links between two halves cut, each half brought up
//! to date in bulk before the simulated end of the partition, and the links restored.

use super::{params::Protocol, schedule::Ev, world::World};

impl World {
    /// Cuts every link between the lower and the upper half of the nodes.
    pub(super) fn partition(&mut self) {
        let half = self.n / 2;
        for (i, node) in self.nodes.iter_mut().enumerate() {
            node.half = u8::from(i >= half);
        }
        for l in 0..self.links.len() {
            let link = self.links[l];
            if self.nodes[link.a as usize].half != self.nodes[link.b as usize].half {
                self.links[l].up = false;
                self.leave_mesh(link.a as usize, link.b);
                self.leave_mesh(link.b as usize, link.a);
                if self.p.protocol == Protocol::V8 {
                    use crate::presence::pacer::Input::PeerDisconnected;
                    self.pace(link.a as usize, PeerDisconnected(link.b));
                    self.pace(link.b as usize, PeerDisconnected(link.a));
                }
            }
        }
    }

    /// Every node holds the newest version of every session on its side of the
    /// partition, as gossip within a converged half would have delivered.
    pub(super) fn converge_halves(&mut self) {
        let n = self.n;
        let newest: Vec<u16> = self.nodes.iter().map(|x| x.version).collect();
        let half: Vec<u8> = self.nodes.iter().map(|x| x.half).collect();
        // Node-major, then session-major: both passes stream through memory.
        for v in 0..n {
            for s in (0..n).filter(|&s| half[s] == half[v]) {
                let i = v * n + s;
                self.roster[i] = self.roster[i].max(newest[s]);
            }
        }
        for s in 0..n {
            for v in (0..n).filter(|&v| half[s] == half[v]) {
                let i = s * n + v;
                self.roster_t[i] = self.roster_t[i].max(newest[s]);
                self.seen[i] = self.seen_value(self.seen[i], newest[s]);
            }
        }
    }

    /// Restores the cut links (each after a redial and a handshake). Protocol 7:
    /// every node waits for every session's version as of now. Protocol 8, whose
    /// beacons reach a node that judges the session live only by gossip: every node
    /// waits to judge every session live, as of now (to hold a sign of it that is live
    /// now).
    pub(super) fn heal(&mut self) {
        for l in 0..self.links.len() {
            let link = self.links[l];
            if !link.up {
                let at = self.now + self.connect_delay(link.lat);
                self.queue.push(at, Ev::Connect(l as u32));
            }
        }
        let goal: Vec<u16> = match self.p.protocol {
            Protocol::V7 => self.nodes.iter().map(|n| n.version).collect(),
            Protocol::V8 => {
                self.live.refresh(self.now, &self.msgs, &self.versions);
                self.live.first.clone()
            }
        };
        self.set_goal(|s| goal[s]);
    }
}
