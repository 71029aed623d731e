//! A host that moves: dead connections found in seconds, and a changed address acted on
//! at once.
//!
//! When a laptop changes networks, its TCP connections — and its peers' connections to
//! it — stay ESTABLISHED, retransmitting into nothing until the kernel gives up (about
//! 16 minutes); meanwhile every request sent on them is lost, and a peer dialled only
//! while disconnected is never dialled again. So:
//! - every connection is pinged every [`PING_INTERVAL`], so each always has data in
//!   flight: on TCP the kernel closes a connection whose data stays unacknowledged
//!   for `swarm::TCP_USER_TIMEOUT` (Linux), QUIC's idle timeout does the same for
//!   QUIC, and where neither applies two pings in a row unanswered within
//!   [`PING_TIMEOUT`] close it here (libp2p's ping reports the second); the peer is
//!   then redialled or dials back;
//! - an interface address going away (the transports watch the interfaces) closes the
//!   connections that were bound to it, and a changed address — gone or new — makes the
//!   node act as if it had just woken: bootstrap peers and relays are dialled at once,
//!   the own mailbox is fetched, the new addresses are announced.

use std::{net::IpAddr, time::Instant};

use interlink_delivery::Input;
use libp2p::{Multiaddr, core::ConnectedPoint, multiaddr::Protocol, swarm::ConnectionId};
use tracing::{debug, info};

use super::Actor;

/// How often each connection is pinged.
pub(crate) const PING_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3);
/// How long a ping may wait for its answer. Long: a slow link with a long queue is
/// alive, and on TCP the kernel's timeout finds a dead connection first.
pub(crate) const PING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);
/// After start, how long the listen addresses that appear are the node's first ones
/// rather than a change of network.
const STARTUP: std::time::Duration = std::time::Duration::from_secs(5);

/// The IP a listen address is on, when it is a non-loopback IP address of this host
/// (not a relayed one).
fn host_ip(addr: &Multiaddr) -> Option<IpAddr> {
    if addr.iter().any(|p| p == Protocol::P2pCircuit) {
        return None;
    }
    let ip = match addr.iter().next()? {
        Protocol::Ip4(a) => IpAddr::V4(a),
        Protocol::Ip6(a) => IpAddr::V6(a),
        _ => return None,
    };
    (!ip.is_loopback()).then_some(ip)
}

/// Whether a connection may have been bound to `gone`: a listener's connection on it,
/// or any connection this node dialled to a non-loopback address (the system picked its
/// source address, which libp2p does not report).
fn bound_to(endpoint: &ConnectedPoint, gone: IpAddr) -> bool {
    match endpoint {
        ConnectedPoint::Listener { local_addr, .. } => host_ip(local_addr) == Some(gone),
        ConnectedPoint::Dialer { address, .. } => host_ip(address).is_some(),
    }
}

impl Actor {
    /// A ping on `connection` was not answered: the connection is dead (or too slow to
    /// count as alive); closed, its peer is redialled or dials back.
    pub(super) fn on_ping_failed(
        &mut self,
        peer: libp2p::PeerId,
        connection: ConnectionId,
        error: &dyn std::fmt::Display,
    ) {
        info!(%peer, %error, "a ping went unanswered: closing the connection");
        self.close_dead(peer, connection);
    }

    /// Closes a dead connection, once: forgotten at once, so a second reason to close it
    /// (the TCP and QUIC listen addresses of one IP expire one after the other) neither
    /// closes nor counts it again.
    fn close_dead(&mut self, peer: libp2p::PeerId, connection: ConnectionId) {
        if self
            .peers
            .get_mut(&peer)
            .and_then(|p| p.connections.remove(&connection))
            .is_some()
        {
            self.dead_connections += 1;
            self.swarm.close_connection(connection);
        }
    }

    /// A listen address appeared.
    pub(super) fn on_listen_addr_new(&mut self, address: &Multiaddr) {
        // Taking the host's well-known port over from a session that exited is not a
        // change of the host's network.
        if self.well_known.is_held_addr(address) {
            return;
        }
        if host_ip(address).is_some() && self.started.elapsed() > STARTUP {
            info!(%address, "a new address: acting as on waking");
            self.network_changed(Instant::now());
        }
    }

    /// A listen address went away: the connections bound to it are dead.
    pub(super) fn on_listen_addr_expired(&mut self, address: &Multiaddr) {
        let Some(gone) = host_ip(address) else {
            return;
        };
        // The other listeners on the IP still run: it is the well-known port being
        // given up (its listener failed), not the address going away.
        if self.well_known.is_held_addr(address) {
            return;
        }
        let dead: Vec<(libp2p::PeerId, ConnectionId)> = self
            .peers
            .iter()
            .flat_map(|(peer, p)| p.connections.iter().map(move |c| (*peer, c)))
            .filter(|(_, (_, endpoint))| bound_to(endpoint, gone))
            .map(|(peer, (id, _))| (peer, *id))
            .collect();
        info!(%address, closed = dead.len(), "an address went away: closing its connections");
        for (peer, id) in dead {
            self.close_dead(peer, id);
        }
        self.network_changed(Instant::now());
    }

    /// The host's addresses changed: dial the bootstrap peers and relays (bootstrap
    /// peers too) and the address book now, fetch the own mailbox, and announce the
    /// addresses (the pacer already knows they changed).
    fn network_changed(&mut self, now: Instant) {
        if !self.bootstrap.redial_now(now) {
            return;
        }
        self.abandon_own_fetch();
        self.forget_confirmed_addrs();
        self.bootstrap.dial_due(&mut self.swarm, now);
        self.tailnet_network_changed();
        self.addresses.network_changed(now);
        self.dial_book(now);
        debug!("network changed");
        self.drive(Input::Wake);
    }
}

#[cfg(test)]
#[path = "roaming_tests.rs"]
mod tests;
