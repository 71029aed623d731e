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

use std::collections::HashSet;

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

/// The QUIC addresses this node was observed at.
#[derive(Debug, Default)]
pub(super) struct HolePunch {
    seen: HashSet<Multiaddr>,
    /// Fresh circuits opened (shown in the diagnostics).
    again: u64,
}

impl HolePunch {
    /// Circuits dialled again to punch through.
    pub(super) fn again(&self) -> u64 {
        self.again
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
    /// A peer observed this node at `addr` (identify): if it is a QUIC address this
    /// node did not have, peers reached only through relays are reached afresh.
    pub(super) fn on_addr_candidate(&mut self, addr: &Multiaddr) {
        // Without DCUtR (no relays configured) a fresh circuit would punch nothing.
        if !matches!(self.role, crate::Role::Session(_))
            || !self.swarm.behaviour().dcutr.is_enabled()
            || !self.hole_punch.is_new_quic(addr)
        {
            return;
        }
        let mut dials: Vec<(PeerId, Vec<Multiaddr>)> = Vec::new();
        for (peer, info) in &self.peers {
            let relayed_only = !info.connections.is_empty()
                && info.connections.values().all(ConnectedPoint::is_relayed);
            if !relayed_only || info.connections.len() > MAX_RELAYED_BEFORE {
                continue;
            }
            // The circuit this node dialled, else one through each of its relays (the
            // peer came in through one of them).
            let circuits = match info.connections.values().find_map(dialled_circuit) {
                Some(circuit) => vec![circuit.clone()],
                None => self.relays.circuits_to(*peer),
            };
            if !circuits.is_empty() {
                dials.push((*peer, circuits));
            }
        }
        for (peer, circuits) in dials {
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
mod tests {
    use super::*;

    #[test]
    fn only_a_quic_address_outside_relays_not_seen_before_is_new() {
        let mut hp = HolePunch::default();
        let quic: Multiaddr = "/ip4/198.51.100.12/udp/4242/quic-v1".parse().unwrap();
        let tcp: Multiaddr = "/ip4/198.51.100.12/tcp/4242".parse().unwrap();
        let circuit: Multiaddr =
            "/ip4/198.51.100.1/udp/4001/quic-v1/p2p/12D3KooWCggkRwDwPfyTwhmTUwf5PXVv99Y1ZKjJHAx68snbMLbz/p2p-circuit"
                .parse()
                .unwrap();
        assert!(!hp.is_new_quic(&tcp));
        assert!(!hp.is_new_quic(&circuit));
        assert!(hp.is_new_quic(&quic));
        assert!(!hp.is_new_quic(&quic), "the same address again");
    }

    #[test]
    fn the_seen_set_is_bounded() {
        let mut hp = HolePunch::default();
        for port in 0..(3 * MAX_SEEN as u16) {
            let a: Multiaddr = format!("/ip4/198.51.100.12/udp/{}/quic-v1", 1000 + port)
                .parse()
                .unwrap();
            assert!(hp.is_new_quic(&a));
            assert!(hp.seen.len() <= MAX_SEEN);
        }
    }
}
