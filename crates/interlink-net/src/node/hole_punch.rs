//! Punching through again when this node learns a UDP address.
//!
//! Two sessions behind NATs meet through a relay, and DCUtR (libp2p's `dcutr`) then
//! punches through both NATs: over the relayed connection each side sends the
//! addresses others observed it at, and both dial them at once. dcutr takes this
//! node's observed addresses when the relayed connection opens, and only then. A
//! session's UDP address is observed over its QUIC connection to the relay
//! ([`Actor::reach_relay_over_quic`]), which is dialled after the TCP one its
//! reservation lives on; a peer that came through the relay before that (a busy
//! machine, UDP blocked for a while) was sent TCP addresses only, whose punches fail
//! (TCP dials leave from fresh ports, which a NAT maps anew), and dcutr gave up. So
//! when this node learns a QUIC address it did not know, it opens a fresh circuit to
//! each peer it reaches only through relays: dcutr runs again on the new connection,
//! with the new address.

use std::collections::{HashSet, VecDeque};

use libp2p::{
    Multiaddr, PeerId,
    core::ConnectedPoint,
    multiaddr::Protocol,
    swarm::dial_opts::{DialOpts, PeerCondition},
};
use tracing::debug;

use super::Actor;
use crate::behaviour::connection_caps::PER_PEER;

/// QUIC addresses remembered as observed; past it the set starts again (a node that
/// moved through this many networks gets one more punch per peer, not a leak).
const MAX_SEEN: usize = 16;
/// Most relayed connections a peer may have for a fresh circuit to be opened to it:
/// the new one and the direct one the punch makes must still fit under [`PER_PEER`].
const MAX_RELAYED_BEFORE: usize = PER_PEER as usize - 2;
/// Most fresh circuits waiting to be dialled (one per peer reached through relays;
/// past it a peer waits for the next new address).
const MAX_DIALS: usize = 256;

/// A fresh circuit to dial: through any of `circuits`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Dial {
    pub(super) peer: PeerId,
    pub(super) circuits: Vec<Multiaddr>,
}

/// The QUIC addresses this node was observed at, and the fresh circuits owed.
#[derive(Debug, Default)]
pub(super) struct HolePunch {
    seen: HashSet<Multiaddr>,
    dials: VecDeque<Dial>,
    /// Fresh circuits opened (shown in the diagnostics).
    again: u64,
}

impl HolePunch {
    /// Circuits dialled again to punch through.
    pub(super) fn again(&self) -> u64 {
        self.again
    }

    /// A peer observed this node at `addr`: if it is a QUIC address outside relays not
    /// seen before, each of `peers` (with its connections) reached only through relays
    /// is owed a fresh circuit — the one this node dialled, else one through each of
    /// `relay_circuits` (the peer came in through one of them).
    pub(super) fn on_candidate<'a>(
        &mut self,
        addr: &Multiaddr,
        peers: impl Iterator<Item = (PeerId, Vec<&'a ConnectedPoint>)>,
        relay_circuits: impl Fn(PeerId) -> Vec<Multiaddr>,
    ) {
        if !self.is_new_quic(addr) {
            return;
        }
        for (peer, connections) in peers {
            let relayed_only =
                !connections.is_empty() && connections.iter().all(|c| c.is_relayed());
            if !relayed_only || connections.len() > MAX_RELAYED_BEFORE {
                continue;
            }
            let circuits = match connections.iter().find_map(|c| dialled_circuit(c)) {
                Some(circuit) => vec![circuit.clone()],
                None => relay_circuits(peer),
            };
            if !circuits.is_empty() && self.dials.len() < MAX_DIALS {
                self.dials.push_back(Dial { peer, circuits });
            }
        }
    }

    pub(super) fn poll_output(&mut self) -> Option<Dial> {
        self.dials.pop_front()
    }

    /// Whether `addr` is a QUIC address outside relays that was not observed before.
    fn is_new_quic(&mut self, addr: &Multiaddr) -> bool {
        let quic = addr.iter().any(|p| p == Protocol::QuicV1)
            && addr.iter().all(|p| p != Protocol::P2pCircuit);
        if !quic || self.seen.contains(addr) {
            return false;
        }
        if self.seen.len() >= MAX_SEEN {
            self.seen.clear();
        }
        self.seen.insert(addr.clone())
    }
}

/// The circuit address a relayed connection was dialled at.
fn dialled_circuit(endpoint: &ConnectedPoint) -> Option<&Multiaddr> {
    match endpoint {
        ConnectedPoint::Dialer { address, .. } if endpoint.is_relayed() => Some(address),
        _ => None,
    }
}

impl Actor {
    /// Routes an address candidate (identify) to [`HolePunch`] and dials what it owes.
    pub(super) fn on_addr_candidate(&mut self, addr: &Multiaddr) {
        // Without DCUtR (no relays configured) a fresh circuit would punch nothing.
        if !matches!(self.role, crate::Role::Session(_))
            || !self.swarm.behaviour().dcutr.is_enabled()
        {
            return;
        }
        let peers = self
            .peers
            .iter()
            .map(|(peer, info)| (*peer, info.connections.values().collect()));
        let relays = &self.relays;
        self.hole_punch
            .on_candidate(addr, peers, |peer| relays.circuits_to(peer));
        while let Some(Dial { peer, circuits }) = self.hole_punch.poll_output() {
            debug!(%peer, %addr, "new UDP address: a fresh circuit to punch through again");
            let opts = DialOpts::peer_id(peer)
                .addresses(circuits)
                .condition(PeerCondition::Always)
                .build();
            match self.swarm.dial(opts) {
                Ok(()) => self.hole_punch.again += 1,
                Err(e) => debug!(%peer, %e, "fresh circuit not dialled"),
            }
        }
    }
}

#[cfg(test)]
#[path = "hole_punch_tests.rs"]
mod tests;
