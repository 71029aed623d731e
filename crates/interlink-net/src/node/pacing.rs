//! The node's side of `interlink_core::presence::pacer`: what the pacer decides
//! (heartbeats, roster requests, joining the DHT) done on the swarm.

use interlink_core::presence::pacer::{self, Ask, Input, Output, Pacer};
use libp2p::PeerId;

use super::{Actor, discovery};
use crate::{Config, Role};

/// The pacer of a node with `config` in `role`. Anti-entropy's round robin starts at
/// the last byte of the node's `PeerId`, so nodes do not all begin with the same peer.
pub(super) fn new(config: &Config, role: &Role, local: &PeerId, now_ms: u64) -> Pacer<PeerId> {
    let seed = local.to_bytes().last().copied().map_or(0, u64::from);
    let config = pacer::Config {
        // A sender session is on no roster: it never announces, as an observer.
        announces: matches!(role, Role::Session(s) if s.visibility == crate::Visibility::Announced),
        heartbeat_ms: u64::try_from(config.heartbeat.as_millis()).unwrap_or(u64::MAX),
        ..pacer::Config::default()
    };
    Pacer::new(config, now_ms, seed)
}

impl Actor {
    /// The pacer takes `input` now, and the node does what it decides.
    pub(super) fn pace(&mut self, input: Input<PeerId>) {
        self.presence.pacer.handle(input, self.now_ms());
        self.run_pacer();
    }

    /// The pacer's timer: the second looks that are due.
    pub(super) fn pace_timeout(&mut self) {
        self.presence.pacer.handle_timeout(self.now_ms());
        self.run_pacer();
    }

    /// When the pacer's timer is due, on the task's clock.
    pub(super) fn pacer_deadline(&self) -> Option<std::time::Instant> {
        self.presence.pacer.poll_timeout().map(|at| {
            std::time::Instant::now()
                + std::time::Duration::from_millis(at.saturating_sub(self.now_ms()))
        })
    }

    fn run_pacer(&mut self) {
        while let Some(output) = self.presence.pacer.poll_output() {
            match output {
                Output::AskRoster {
                    peer,
                    ask: Ask::Digest,
                } => self.sync_roster(peer),
                Output::AskRoster { peer, ask } => self.fetch_roster(peer, ask),
                // Both report `Announced` themselves once signed and published; the
                // interval they promise is the pacer's for the roster held then.
                Output::Announce { .. } => self.announce(),
                Output::Beacon { .. } => self.beacon(),
                Output::JoinDht => discovery::join_dht(self),
            }
        }
    }
}
