//! The addresses others can reach this node on, behind a NAT or not.
//!
//! A session announces its listen addresses, which behind a NAT are private ones. An
//! address AutoNAT confirmed (a peer dialled it back from outside: a forwarded port, a
//! one-to-one NAT, a public host) goes into the announcement first, so a peer elsewhere
//! dials it directly instead of through a relay. A confirmation holds for the network it
//! was made on: when AutoNAT finds the node private again, or the node's own addresses
//! change (a laptop that moved), the confirmed addresses are dropped — the configured
//! ones (`Config::external_addrs`) are kept — and AutoNAT probes again.

use libp2p::{Multiaddr, autonat, multiaddr::Protocol};
use tracing::{debug, info};

use super::Actor;
use super::PresenceInput;

impl Actor {
    /// The addresses to announce, each once and without this node's `/p2p/` suffix (the
    /// PeerId travels beside them): confirmed external ones first (a cap on the count
    /// must not cut them), then the listen addresses — those on the host's well-known
    /// port first, the ones peers remember (`node::addresses`) — then relay circuits.
    pub(super) fn announced_addrs(&self) -> Vec<Multiaddr> {
        let me = *self.swarm.local_peer_id();
        let mut direct: Vec<Multiaddr> = Vec::new();
        let mut circuits: Vec<Multiaddr> = Vec::new();
        for a in self.swarm.external_addresses().chain(&self.listen_addrs) {
            let mut a = a.clone();
            if a.iter().last() == Some(Protocol::P2p(me)) {
                a.pop();
            }
            let list = if a.iter().any(|p| p == Protocol::P2pCircuit) {
                &mut circuits
            } else {
                &mut direct
            };
            if !list.contains(&a) {
                list.push(a);
            }
        }
        let externals = self.swarm.external_addresses().count().min(direct.len());
        direct[externals..].sort_by_key(|a| !self.well_known.is_held_addr(a));
        direct.extend(circuits);
        direct
    }

    /// An external address was confirmed or expired: the next announcement says so.
    pub(super) fn on_external_addr(&mut self, address: &Multiaddr, confirmed: bool) {
        info!(%address, confirmed, "external address changed");
        self.presence_input(PresenceInput::AnnouncementChanged);
    }

    pub(super) fn on_autonat(&mut self, event: autonat::Event) {
        match event {
            autonat::Event::StatusChanged { old, new } => {
                info!(?old, ?new, "NAT status changed");
                if !new.is_public() {
                    self.forget_confirmed_addrs();
                }
            }
            other => debug!(?other, "autonat"),
        }
    }

    /// Drops the external addresses AutoNAT confirmed (they belonged to the network the
    /// node was on), keeping the configured ones. A relay keeps all: it serves only
    /// while it has one ([`Actor::relay_listen_addr`]).
    pub(super) fn forget_confirmed_addrs(&mut self) {
        if self.config.relay_server {
            return;
        }
        let stale: Vec<Multiaddr> = self
            .swarm
            .external_addresses()
            .filter(|a| !self.config.external_addrs.contains(a))
            .cloned()
            .collect();
        for a in stale {
            // The swarm reports each as expired, which re-announces.
            self.swarm.remove_external_address(&a);
        }
    }
}
