//! A relay node's circuit relay server: what it serves, counted for diagnostics, and
//! the listen address it takes as external.

use std::collections::HashSet;

use libp2p::{Multiaddr, PeerId, multiaddr::Protocol, relay};
use tracing::{debug, info};

use super::Actor;

/// Peers counted as holding a reservation or circuit on this relay (each bounded by
/// the relay server's own limits; these only mirror them).
const MAX_SERVED: usize = 4096;

#[derive(Debug, Default)]
pub(crate) struct RelayServer {
    /// Peers holding a reservation here.
    reservations: HashSet<PeerId>,
    /// Circuits open through here.
    circuits: usize,
}

impl RelayServer {
    pub(crate) fn handle(&mut self, event: relay::Event) {
        match event {
            relay::Event::ReservationReqAccepted { src_peer_id, .. } => {
                debug!(peer = %src_peer_id, "reservation accepted");
                if self.reservations.len() < MAX_SERVED {
                    self.reservations.insert(src_peer_id);
                }
            }
            relay::Event::ReservationClosed { src_peer_id }
            | relay::Event::ReservationTimedOut { src_peer_id } => {
                self.reservations.remove(&src_peer_id);
            }
            relay::Event::CircuitReqAccepted {
                src_peer_id,
                dst_peer_id,
            } => {
                info!(src = %src_peer_id, dst = %dst_peer_id, "circuit accepted");
                self.circuits = (self.circuits + 1).min(MAX_SERVED);
            }
            relay::Event::CircuitClosed {
                src_peer_id,
                dst_peer_id,
                error,
            } => {
                // Shown with the accepted ones, so an operator sees what circuits are
                // open (a pair of sessions that punched through closes theirs:
                // `node::retire_circuits`).
                match error {
                    None => info!(src = %src_peer_id, dst = %dst_peer_id, "circuit closed"),
                    Some(e) => {
                        info!(src = %src_peer_id, dst = %dst_peer_id, error = %e, "circuit closed");
                    }
                }
                self.circuits = self.circuits.saturating_sub(1);
            }
            other => debug!(?other, "relay server"),
        }
    }

    /// Reservations and circuits served now.
    pub(crate) fn served(&self) -> (usize, usize) {
        (self.reservations.len(), self.circuits)
    }
}

impl Actor {
    /// A relay node listens on `address`: with no configured external address, a
    /// specific (not wildcard) listen address is taken as one, so the relay server —
    /// disabled by libp2p until it has an external address — serves on a LAN or
    /// loopback too.
    pub(super) fn relay_listen_addr(&mut self, address: &Multiaddr) {
        if !self.config.relay_server || !self.config.external_addrs.is_empty() {
            return;
        }
        let wildcard = address.iter().any(|p| match p {
            Protocol::Ip4(ip) => ip.is_unspecified(),
            Protocol::Ip6(ip) => ip.is_unspecified(),
            _ => false,
        });
        if !wildcard {
            self.swarm.add_external_address(address.clone());
        }
    }
}

#[cfg(test)]
#[path = "relay_server_tests.rs"]
mod tests;
