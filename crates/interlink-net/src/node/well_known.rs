//! The host's well-known port: held by one session of the host at a time, taken over
//! by another within seconds when that one exits.
//!
//! Every session listens on random ports, so an address remembered yesterday names a
//! session that is gone. The well-known port ([`crate::config::WELL_KNOWN_PORT`] unless
//! configured) makes one address per host stable: whichever agent session of the host
//! runs listens on it too, TCP and QUIC, beside its random ports. Whether it is free is
//! checked by binding it without `SO_REUSEPORT` first (`crate::ports`), so a second
//! session sees it taken and goes on with its random ports only — it never fails to
//! start for it. A session that does not hold the port tries again every
//! [`RETRY_BASE`] plus a per-node offset below [`RETRY_SPREAD`] (so that two waiting
//! sessions do not try in the same instant), at the cost of two `bind` calls per try.
//!
//! Sessions of one host meet through it too: a node that does not hold the port dials
//! it on this host (loopback for a wildcard listener), with the bootstrap addresses'
//! backoff; when that connection closes (its holder exited) it dials again about when
//! the next holder has taken the port.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    time::{Duration, Instant},
};

use libp2p::{
    Multiaddr, PeerId, Swarm, core::transport::ListenerId, multiaddr::Protocol, swarm::ConnectionId,
};
use tracing::{debug, info};

use crate::behaviour::Behaviour;

/// Least time between two tries to take the port.
pub(super) const RETRY_BASE: Duration = Duration::from_secs(1);
/// A node's offset on top of [`RETRY_BASE`] is below this (derived from its peer id).
pub(super) const RETRY_SPREAD: Duration = Duration::from_secs(1);
/// Most IP addresses the port is held on (one per address family the listen
/// addresses use).
const MAX_IPS: usize = 2;
/// First redial delay of the same-host dial; doubles up to [`MAX_LOCAL_BACKOFF`].
const MIN_LOCAL_BACKOFF: Duration = Duration::from_secs(1);
/// Longest redial delay of the same-host dial.
const MAX_LOCAL_BACKOFF: Duration = Duration::from_secs(60);

/// The well-known port's state in one node.
#[derive(Debug)]
pub(super) struct WellKnown {
    /// The port; `0`: none.
    port: u16,
    /// Whether this node tries to hold it.
    hold: bool,
    /// The IPs it is held on: those of the node's own IP listen addresses.
    ips: Vec<IpAddr>,
    /// This node's listeners on it, while it holds it.
    held: Vec<ListenerId>,
    /// When to try to take it next.
    next_try: Instant,
    /// This node's pause between tries.
    retry: Duration,
    /// Where another session of this host holding it is dialled.
    local: Option<Multiaddr>,
    local_next: Instant,
    local_backoff: Duration,
    local_dial: Option<ConnectionId>,
    local_conn: Option<ConnectionId>,
}

/// The pause between tries of the node `peer`: [`RETRY_BASE`] plus an offset below
/// [`RETRY_SPREAD`] that differs between nodes.
pub(super) fn retry_interval(peer: &PeerId) -> Duration {
    let bytes = peer.to_bytes();
    let spread = u64::try_from(RETRY_SPREAD.as_millis())
        .unwrap_or(1000)
        .max(1);
    let n = bytes.iter().rev().take(8).fold(0u64, |acc, b| {
        acc.wrapping_mul(256).wrapping_add(u64::from(*b))
    });
    RETRY_BASE + Duration::from_millis(n % spread)
}

/// The IPs of `listen` (IP addresses with a TCP or UDP port, not relayed), each once,
/// at most [`MAX_IPS`].
fn listen_ips(listen: &[Multiaddr]) -> Vec<IpAddr> {
    let mut ips = Vec::new();
    for addr in listen {
        if addr.iter().any(|p| p == Protocol::P2pCircuit) {
            continue;
        }
        let ip = match addr.iter().next() {
            Some(Protocol::Ip4(a)) => IpAddr::V4(a),
            Some(Protocol::Ip6(a)) => IpAddr::V6(a),
            _ => continue,
        };
        if !ips.contains(&ip) && ips.len() < MAX_IPS {
            ips.push(ip);
        }
    }
    ips
}

fn ip_proto(ip: IpAddr) -> Protocol<'static> {
    match ip {
        IpAddr::V4(a) => Protocol::Ip4(a),
        IpAddr::V6(a) => Protocol::Ip6(a),
    }
}

/// The TCP and QUIC addresses of `port` on `ip`.
pub(super) fn addrs_on(ip: IpAddr, port: u16) -> [Multiaddr; 2] {
    let tcp = Multiaddr::empty()
        .with(ip_proto(ip))
        .with(Protocol::Tcp(port));
    let quic = Multiaddr::empty()
        .with(ip_proto(ip))
        .with(Protocol::Udp(port))
        .with(Protocol::QuicV1);
    [tcp, quic]
}

/// Where a session of this host holding `port` on `ip` is dialled: the loopback
/// address of the family for a wildcard listener, else `ip` itself.
fn local_target(ip: IpAddr, port: u16) -> Multiaddr {
    let to = match ip {
        IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        other => other,
    };
    let [tcp, _] = addrs_on(to, port);
    tcp
}

/// The TCP or UDP port of `addr`.
pub(super) fn port_of(addr: &Multiaddr) -> Option<u16> {
    addr.iter().find_map(|p| match p {
        Protocol::Tcp(port) | Protocol::Udp(port) => Some(port),
        _ => None,
    })
}

impl WellKnown {
    /// `port` (`0`: none) on the IPs of `listen`; held by this node if `hold`.
    pub(super) fn new(
        port: u16,
        hold: bool,
        listen: &[Multiaddr],
        peer: &PeerId,
        now: Instant,
    ) -> Self {
        let ips = if port == 0 {
            Vec::new()
        } else {
            listen_ips(listen)
        };
        let local = ips.first().map(|ip| local_target(*ip, port));
        Self {
            port,
            hold: hold && !ips.is_empty(),
            ips,
            held: Vec::new(),
            next_try: now,
            retry: retry_interval(peer),
            local,
            local_next: now,
            local_backoff: MIN_LOCAL_BACKOFF,
            local_dial: None,
            local_conn: None,
        }
    }

    /// The port, `0` when there is none.
    pub(super) fn port(&self) -> u16 {
        self.port
    }

    /// Whether this node holds it now.
    pub(super) fn holds(&self) -> bool {
        !self.held.is_empty()
    }

    /// Whether `addr` is one of this node's listen addresses on the port (its
    /// appearing or going is not a change of the host's network).
    pub(super) fn is_held_addr(&self, addr: &Multiaddr) -> bool {
        self.holds() && port_of(addr) == Some(self.port)
    }

    /// Whether it is time to try to take the port.
    fn take_due(&self, now: Instant) -> bool {
        self.hold && !self.holds() && now >= self.next_try
    }

    /// Tries to take the port if that is due: listens on it (TCP and QUIC, each IP) if
    /// every one of those sockets is free. Returns whether it took it.
    pub(super) fn try_take(&mut self, swarm: &mut Swarm<Behaviour>, now: Instant) -> bool {
        if !self.take_due(now) {
            return false;
        }
        self.next_try = now + self.retry;
        let addrs: Vec<Multiaddr> = self
            .ips
            .iter()
            .flat_map(|ip| addrs_on(*ip, self.port))
            .collect();
        if let Some(reason) = addrs.iter().find_map(|a| crate::ports::check_free(a).err()) {
            debug!(port = self.port, %reason, "well-known port held elsewhere");
            return false;
        }
        let mut ids = Vec::with_capacity(addrs.len());
        for addr in &addrs {
            match swarm.listen_on(addr.clone()) {
                Ok(id) => ids.push(id),
                Err(e) => {
                    debug!(%addr, %e, "well-known port not taken");
                    for id in ids {
                        swarm.remove_listener(id);
                    }
                    return false;
                }
            }
        }
        info!(port = self.port, "holding the host's well-known port");
        self.held = ids;
        true
    }

    /// A listener closed (or failed): if it was one on the port, the others are
    /// removed and the port is tried again after the usual pause.
    pub(super) fn on_listener_closed(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        id: ListenerId,
        now: Instant,
    ) {
        if !self.held.contains(&id) {
            return;
        }
        for other in std::mem::take(&mut self.held) {
            if other != id {
                swarm.remove_listener(other);
            }
        }
        self.next_try = now + self.retry;
    }

    /// The same-host address to dial now, if due: the port is on, this node does not
    /// hold it, is not connected or dialling there, and the backoff has passed.
    pub(super) fn local_dial_due(&mut self, now: Instant) -> Option<Multiaddr> {
        if self.holds()
            || self.local_conn.is_some()
            || self.local_dial.is_some()
            || now < self.local_next
        {
            return None;
        }
        let target = self.local.clone()?;
        self.local_next = now + self.local_backoff;
        self.local_backoff = (self.local_backoff * 2).min(MAX_LOCAL_BACKOFF);
        Some(target)
    }

    /// The same-host dial started as `id`.
    pub(super) fn local_dialled(&mut self, id: ConnectionId) {
        self.local_dial = Some(id);
    }

    /// A connection was established.
    pub(super) fn on_established(&mut self, id: ConnectionId) {
        if self.local_dial == Some(id) {
            self.local_dial = None;
            self.local_conn = Some(id);
            self.local_backoff = MIN_LOCAL_BACKOFF;
        }
    }

    /// A dial failed.
    pub(super) fn on_dial_failed(&mut self, id: ConnectionId) {
        if self.local_dial == Some(id) {
            self.local_dial = None;
        }
    }

    /// A connection closed: when it was the one to the holder, the holder probably
    /// exited, and the next one takes the port within one pause — dial again then.
    pub(super) fn on_closed(&mut self, id: ConnectionId, now: Instant) {
        if self.local_conn == Some(id) {
            self.local_conn = None;
            self.local_backoff = MIN_LOCAL_BACKOFF;
            self.local_next = now + RETRY_BASE + RETRY_SPREAD;
        }
    }
}

#[cfg(test)]
#[path = "well_known_tests.rs"]
mod tests;
