//! Finding peers: bootstrap addresses with backoff, mDNS, identify-fed Kademlia.

use std::time::{Duration, Instant};

use libp2p::{
    Multiaddr, PeerId, Swarm, identify, kad, mdns,
    multiaddr::Protocol,
    ping,
    swarm::dial_opts::{DialOpts, PeerCondition},
};
use tracing::{debug, warn};

use super::Actor;
use crate::behaviour::{Behaviour, BehaviourEvent};

/// First redial delay of a bootstrap peer; doubles up to [`MAX_BACKOFF`].
pub(super) const MIN_BACKOFF: Duration = Duration::from_secs(1);
/// Longest redial delay.
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How often the node walks the DHT to find more peers.
const KAD_BOOTSTRAP_INTERVAL: Duration = Duration::from_secs(60);
/// Addresses of peers identified before the node joined the DHT, kept to seed its
/// routing table.
const MAX_DHT_PENDING: usize = 1024;
/// How long a peer of another network stays connected after identify.
const FOREIGN_GRACE: Duration = Duration::from_millis(500);
/// Address changes closer together than this are one change of network.
const NETWORK_CHANGE_SETTLE: Duration = Duration::from_secs(1);
/// Most mDNS-discovered peers remembered for redialling.
const MAX_MDNS_PEERS: usize = 256;

/// One configured bootstrap address.
#[derive(Debug)]
struct Entry {
    addr: Multiaddr,
    /// Known from the `/p2p/` suffix, or learned on first connection.
    peer: Option<PeerId>,
    connected: bool,
    next_dial: Instant,
    backoff: Duration,
}

/// The bootstrap peers and their redial state, and the peers mDNS found.
#[derive(Debug)]
pub(super) struct Bootstrap {
    entries: Vec<Entry>,
    last_kad_bootstrap: Option<Instant>,
    /// Peers mDNS found and we are not connected to: addresses, next dial, backoff.
    /// Two nodes that find each other at the same instant dial each other at once and
    /// both handshakes can fail; without a redial they would never meet.
    mdns: std::collections::HashMap<PeerId, (Vec<Multiaddr>, Instant, Duration)>,
    /// Peers of another network, to be disconnected at the given time.
    foreign: std::collections::HashMap<PeerId, Instant>,
    /// Peers identified before the node joined the DHT (the pacer decides when),
    /// added to the routing table when it does.
    dht_pending: Vec<(PeerId, Multiaddr)>,
    /// When the host's addresses last changed ([`Bootstrap::redial_now`]).
    last_change: Option<Instant>,
}

impl Bootstrap {
    pub(super) fn new(addrs: &[Multiaddr]) -> Self {
        let now = Instant::now();
        Self {
            entries: addrs
                .iter()
                .map(|addr| Entry {
                    peer: peer_of(addr),
                    addr: addr.clone(),
                    connected: false,
                    next_dial: now,
                    backoff: MIN_BACKOFF,
                })
                .collect(),
            last_kad_bootstrap: None,
            mdns: Default::default(),
            foreign: Default::default(),
            dht_pending: Vec::new(),
            last_change: None,
        }
    }

    /// Dials every disconnected bootstrap peer whose backoff has passed.
    pub(super) fn dial_due(&mut self, swarm: &mut Swarm<Behaviour>, now: Instant) {
        for e in &mut self.entries {
            if e.connected || now < e.next_dial {
                continue;
            }
            if let Some(peer) = e.peer
                && swarm.is_connected(&peer)
            {
                e.connected = true;
                continue;
            }
            let opts = match e.peer {
                Some(peer) => DialOpts::peer_id(peer)
                    .addresses(vec![e.addr.clone()])
                    .condition(PeerCondition::DisconnectedAndNotDialing)
                    .build(),
                None => DialOpts::unknown_peer_id().address(e.addr.clone()).build(),
            };
            if let Err(err) = swarm.dial(opts) {
                debug!(addr = %e.addr, ?err, "bootstrap dial not started");
            }
            e.next_dial = now + e.backoff;
            e.backoff = (e.backoff * 2).min(MAX_BACKOFF);
        }
    }

    pub(super) fn on_connected(&mut self, peer: PeerId, remote: &Multiaddr) {
        self.mdns.remove(&peer);
        for e in &mut self.entries {
            let matches = match e.peer {
                Some(p) => p == peer,
                None => strip_p2p(&e.addr) == strip_p2p(remote),
            };
            if matches {
                e.peer = Some(peer);
                e.connected = true;
                e.backoff = MIN_BACKOFF;
            }
        }
    }

    /// The host's addresses changed: every bootstrap and mDNS peer not connected is
    /// dialled at once, and the backoffs start over. `false` when that was done less
    /// than [`NETWORK_CHANGE_SETTLE`] ago: one change reports several addresses (TCP
    /// and QUIC, each interface), and is acted on once.
    pub(super) fn redial_now(&mut self, now: Instant) -> bool {
        if self
            .last_change
            .is_some_and(|at| now.duration_since(at) < NETWORK_CHANGE_SETTLE)
        {
            return false;
        }
        self.last_change = Some(now);
        for e in &mut self.entries {
            e.next_dial = now;
            e.backoff = MIN_BACKOFF;
        }
        for (_, next, backoff) in self.mdns.values_mut() {
            *next = now;
            *backoff = MIN_BACKOFF;
        }
        true
    }

    pub(super) fn on_disconnected(&mut self, peer: PeerId, now: Instant) {
        for e in &mut self.entries {
            if e.peer == Some(peer) {
                e.connected = false;
                e.next_dial = now + e.backoff;
            }
        }
    }
}

fn peer_of(addr: &Multiaddr) -> Option<PeerId> {
    addr.iter().find_map(|p| match p {
        Protocol::P2p(id) => Some(id),
        _ => None,
    })
}

fn strip_p2p(addr: &Multiaddr) -> Multiaddr {
    addr.iter()
        .filter(|p| !matches!(p, Protocol::P2p(_)))
        .collect()
}

/// Periodic discovery work.
pub(super) fn periodic(actor: &mut Actor, now: Instant) {
    // Redial mDNS peers we are still not connected to.
    redial_mdns(actor, now);
    // Drop peers of other networks whose grace has passed.
    let gone: Vec<PeerId> = actor
        .bootstrap
        .foreign
        .iter()
        .filter(|(_, t)| **t <= now)
        .map(|(p, _)| *p)
        .collect();
    for peer in gone {
        actor.bootstrap.foreign.remove(&peer);
        let _ = actor.swarm.disconnect_peer_id(peer);
    }
    let due = actor.presence.dht_joined()
        && actor
            .bootstrap
            .last_kad_bootstrap
            .is_none_or(|t| now.duration_since(t) >= KAD_BOOTSTRAP_INTERVAL);
    if due && !actor.peers.is_empty() {
        actor.bootstrap.last_kad_bootstrap = Some(now);
        // Fails only with no known peers; then there is nothing to walk.
        let _ = actor.swarm.behaviour_mut().kad.bootstrap();
    }
}

/// Joins the DHT, as the pacer decided (`presence::pacer`: once presence has settled,
/// or at once when a mailbox copy must be placed): the routing table gets the peers
/// identified so far, and from then on every peer identified.
pub(super) fn join_dht(actor: &mut Actor) {
    for (peer, addr) in std::mem::take(&mut actor.bootstrap.dht_pending) {
        actor.swarm.behaviour_mut().kad.add_address(&peer, addr);
    }
}

/// Dials the mDNS peers whose first dial is due now.
fn redial_mdns(actor: &mut Actor, now: Instant) {
    let due: Vec<(PeerId, Vec<Multiaddr>)> = actor
        .bootstrap
        .mdns
        .iter_mut()
        .filter(|(_, (_, next, _))| *next <= now)
        .map(|(peer, (addrs, next, backoff))| {
            *next = now + *backoff;
            *backoff = (*backoff * 2).min(MAX_BACKOFF);
            (*peer, addrs.clone())
        })
        .collect();
    for (peer, addrs) in due {
        dial_discovered(actor, peer, addrs);
    }
}

/// Dials a discovered peer unless connected already or at the dial limit.
fn dial_discovered(actor: &mut Actor, peer: PeerId, addrs: Vec<Multiaddr>) {
    if peer == *actor.swarm.local_peer_id()
        || actor.swarm.is_connected(&peer)
        || actor.peers.len() >= actor.config.max_dialed_peers
    {
        return;
    }
    let opts = DialOpts::peer_id(peer)
        .addresses(addrs)
        .condition(PeerCondition::DisconnectedAndNotDialing)
        .build();
    if let Err(e) = actor.swarm.dial(opts) {
        debug!(%peer, %e, "discovered peer not dialled");
    }
}

pub(super) fn on_behaviour_event(actor: &mut Actor, event: BehaviourEvent) {
    match event {
        BehaviourEvent::Identify(identify::Event::Received {
            peer_id,
            info,
            connection_id,
        }) => {
            let expected = actor.config.network.identify_version();
            if info.protocol_version != expected {
                // Another overlay (or not interlink at all): presence and mailboxes
                // must never mix, so don't keep the connection.
                debug!(%peer_id, theirs = %info.protocol_version, "different network; disconnecting");
                // A moment's grace lets the other side finish its own identify, so it
                // can tell "other network" from "not an interlink node" (probe).
                if actor.bootstrap.foreign.len() < MAX_MDNS_PEERS {
                    actor
                        .bootstrap
                        .foreign
                        .insert(peer_id, Instant::now() + FOREIGN_GRACE);
                } else {
                    let _ = actor.swarm.disconnect_peer_id(peer_id);
                }
                return;
            }
            if let Some(p) = actor.peers.get_mut(&peer_id) {
                p.agent = Some(info.agent_version.clone());
            }
            actor.book_identified(peer_id, &info.listen_addrs);
            if actor.relays.is_relay(&peer_id) {
                if let Some(over_quic) = actor
                    .peers
                    .get(&peer_id)
                    .map(|p| p.transports().contains(&"quic"))
                {
                    actor.feed_relay_client(super::relay_client::Input::Identified {
                        peer: peer_id,
                        listen: &info.listen_addrs,
                        over_quic,
                    });
                }
            } else {
                actor.on_upgrade_identified(peer_id, connection_id, &info.listen_addrs);
                actor.on_retire_identified(peer_id, connection_id);
            }
            let kad_proto = actor.config.network.kad_protocol();
            if info.protocols.iter().any(|p| p.as_ref() == kad_proto) {
                for addr in info
                    .listen_addrs
                    .into_iter()
                    .take(interlink_core::limits::MAX_LISTEN_ADDRS)
                {
                    if actor.presence.dht_joined() {
                        actor.swarm.behaviour_mut().kad.add_address(&peer_id, addr);
                    } else if actor.bootstrap.dht_pending.len() < MAX_DHT_PENDING {
                        actor.bootstrap.dht_pending.push((peer_id, addr));
                    }
                }
            }
        }
        BehaviourEvent::Mdns(mdns::Event::Discovered(list)) => {
            let mut by_peer: std::collections::BTreeMap<PeerId, Vec<Multiaddr>> =
                Default::default();
            for (peer, addr) in list {
                by_peer.entry(peer).or_default().push(addr);
            }
            let local = *actor.swarm.local_peer_id();
            let now = Instant::now();
            for (peer, addrs) in by_peer {
                if peer == local || actor.swarm.is_connected(&peer) {
                    continue;
                }
                // Tie-break simultaneous discovery: the lower PeerId dials at once, the
                // other a second later if still unconnected; both keep redialling.
                let first = if local < peer { now } else { now + MIN_BACKOFF };
                if actor.bootstrap.mdns.len() < MAX_MDNS_PEERS
                    || actor.bootstrap.mdns.contains_key(&peer)
                {
                    actor
                        .bootstrap
                        .mdns
                        .insert(peer, (addrs, first, MIN_BACKOFF));
                }
            }
            redial_mdns(actor, now);
        }
        BehaviourEvent::Kad(kad::Event::InboundRequest {
            request: kad::InboundRequest::PutRecord { source, .. },
        }) => actor.on_inbound_put(source),
        BehaviourEvent::Kad(kad::Event::InboundRequest {
            request: kad::InboundRequest::FindNode { .. },
        }) => {
            // A peer is walking the DHT through us, to place a mailbox copy or fetch
            // one: kad answered from a routing table that is empty until we join, so
            // join now and its next step (or next placement) finds our peers. Without
            // this a sender in an overlay less than a second old placed its copy at its
            // bootstrap peer alone (the delivery tests' short-lived senders).
            actor.presence_input(interlink_core::presence::node::Input::DhtNeeded);
        }
        BehaviourEvent::Kad(kad::Event::OutboundQueryProgressed {
            id,
            result: kad::QueryResult::GetClosestPeers(result),
            step,
            ..
        }) => {
            actor.on_closest_peers(id, result, step.last);
            actor.run_outputs();
        }
        BehaviourEvent::Mdns(mdns::Event::Expired(list)) => {
            for (peer, _) in list {
                actor.bootstrap.mdns.remove(&peer);
            }
        }
        BehaviourEvent::Kad(kad::Event::RoutingUpdated {
            peer, addresses, ..
        }) => {
            dial_discovered(actor, peer, addresses.into_vec());
            // A fetch owed since start or wake waits for the routing table's first
            // entry; run it now rather than on the next tick.
            actor.fetch_own_mailbox();
            actor.run_outputs();
        }
        BehaviourEvent::Ping(ping::Event {
            peer,
            connection,
            result,
        }) => match result {
            Ok(rtt) => {
                // A ping answered is a sign of life too.
                actor.peer_alive(peer);
                if let Some(p) = actor.peers.get_mut(&peer) {
                    p.rtt = Some(rtt);
                }
            }
            // A peer that does not speak ping (the JS interop probe) is not dead.
            Err(e) if crate::swarm::ping_unsupported(&e) => {
                debug!(%peer, "peer does not answer pings")
            }
            Err(e) => actor.on_ping_failed(peer, connection, &e),
        },
        BehaviourEvent::RelayClient(ev) => debug!(?ev, "relay client"),
        BehaviourEvent::Dcutr(ev) => debug!(?ev, "dcutr"),
        BehaviourEvent::Autonat(ev) => actor.on_autonat(ev),
        BehaviourEvent::Gossipsub(_) | BehaviourEvent::Roster(_) | BehaviourEvent::Deliver(_) => {
            warn!("presence event routed to discovery")
        }
        _ => {}
    }
}
