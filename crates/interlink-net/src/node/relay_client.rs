//! A session's side of its relays, as an IO-free component.
//!
//! A session configured with relays (`Config::relays`) dials them like bootstrap peers
//! and listens through each one it reaches (a circuit reservation, announced with its
//! other addresses). A relay reached over TCP only — RELAY.md's recipe gives one TCP
//! address — is also dialled over QUIC, at the configured host and the port the relay
//! listens on for QUIC: hole punching (DCUtR) needs a UDP address observed from
//! outside, and this node's TCP dials leave from fresh ports (`swarm`), so without a
//! QUIC connection to someone outside it has none. A QUIC dial that brings nothing
//! (UDP blocked for a while, a handshake lost on a busy machine) is tried again on a
//! doubling timer: identify runs again only every few minutes.
//!
//! The node feeds connection and identify events in ([`RelayClient::handle`]) and
//! carries out what comes back ([`RelayClient::poll_output`]).

use std::{
    collections::{HashMap, HashSet, VecDeque},
    time::{Duration, Instant},
};

use libp2p::{Multiaddr, PeerId, multiaddr::Protocol};
use tracing::warn;

/// Most relays a session uses.
pub(crate) const MAX_RELAYS: usize = 8;
/// The first wait before a relay still reached over TCP only is dialled over QUIC
/// again…
const QUIC_RETRY_FIRST: Duration = Duration::from_secs(10);
/// …doubled after each dial that brought no QUIC connection, up to this.
const QUIC_RETRY_MAX: Duration = Duration::from_secs(300);
/// Most outputs waiting: each input yields at most one per relay.
const MAX_OUTPUTS: usize = 2 * MAX_RELAYS;

/// What the node tells the client.
#[derive(Debug)]
pub(crate) enum Input<'a> {
    /// A connection to `peer` opened.
    Connected(PeerId),
    /// The last connection to `peer` closed: its circuit listener closed with it.
    Disconnected(PeerId),
    /// Identify gave `peer`'s listen addresses; `over_quic`: some connection to it is
    /// QUIC.
    Identified {
        peer: PeerId,
        listen: &'a [Multiaddr],
        over_quic: bool,
    },
    /// Listening through `relay` failed (the swarm refused the circuit address).
    ListenFailed(PeerId),
    /// A QUIC dial to `relay` could not start (no QUIC address): nothing to retry.
    Undialable(PeerId),
}

/// What the node carries out.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Output {
    /// Listen through `relay` on this circuit address.
    Listen { relay: PeerId, circuit: Multiaddr },
    /// Dial `relay` over QUIC at the host of `configured`, on the QUIC ports among
    /// `listen`.
    DialQuic {
        relay: PeerId,
        configured: Multiaddr,
        listen: Vec<Multiaddr>,
    },
}

/// A relay reached over TCP only, to be dialled over QUIC again.
#[derive(Debug)]
struct QuicRetry {
    /// The relay's listen addresses, as identify gave them.
    listen: Vec<Multiaddr>,
    next: Instant,
    wait: Duration,
}

#[derive(Debug, Default)]
pub(crate) struct RelayClient {
    /// Whether this node is a session (only sessions listen through relays).
    session: bool,
    /// The relays this session uses: PeerId → address (with its `/p2p/`).
    configured: HashMap<PeerId, Multiaddr>,
    /// Relays a circuit listener was opened through.
    listening: HashSet<PeerId>,
    /// Relays reached over TCP only, to dial over QUIC again (at most the configured).
    quic_retry: HashMap<PeerId, QuicRetry>,
    outputs: VecDeque<Output>,
}

impl RelayClient {
    /// The relays of `addrs` that name their PeerId; the others are logged and skipped.
    pub(crate) fn new(addrs: &[Multiaddr], session: bool) -> Self {
        let mut configured = HashMap::new();
        for addr in addrs.iter().take(MAX_RELAYS) {
            match addr.iter().last() {
                Some(Protocol::P2p(peer)) => {
                    configured.insert(peer, addr.clone());
                }
                _ => warn!(%addr, "relay address without /p2p/<peer id>; ignored"),
            }
        }
        Self {
            session,
            configured,
            ..Self::default()
        }
    }

    pub(crate) fn is_relay(&self, peer: &PeerId) -> bool {
        self.configured.contains_key(peer)
    }

    /// The relays this session uses, with their addresses.
    pub(crate) fn relays(&self) -> impl Iterator<Item = (&PeerId, &Multiaddr)> {
        self.configured.iter()
    }

    /// `target`'s address through each configured relay.
    pub(crate) fn circuits_to(&self, target: PeerId) -> Vec<Multiaddr> {
        self.configured
            .values()
            .map(|relay| {
                relay
                    .clone()
                    .with(Protocol::P2pCircuit)
                    .with(Protocol::P2p(target))
            })
            .collect()
    }

    pub(crate) fn handle(&mut self, input: Input<'_>, now: Instant) {
        if !self.session {
            return;
        }
        match input {
            Input::Connected(peer) => {
                if self.listening.contains(&peer) {
                    return;
                }
                if let Some(addr) = self.configured.get(&peer) {
                    self.listening.insert(peer);
                    self.push(Output::Listen {
                        relay: peer,
                        circuit: addr.clone().with(Protocol::P2pCircuit),
                    });
                }
            }
            Input::Disconnected(peer) => {
                self.listening.remove(&peer);
                self.quic_retry.remove(&peer);
            }
            Input::ListenFailed(peer) => {
                self.listening.remove(&peer);
            }
            Input::Undialable(peer) => {
                self.quic_retry.remove(&peer);
            }
            Input::Identified {
                peer,
                listen,
                over_quic,
            } => {
                let Some(configured) = self.configured.get(&peer) else {
                    return;
                };
                if over_quic {
                    self.quic_retry.remove(&peer);
                    return;
                }
                let listen: Vec<Multiaddr> = listen
                    .iter()
                    .take(interlink_core::limits::MAX_LISTEN_ADDRS)
                    .cloned()
                    .collect();
                self.push(Output::DialQuic {
                    relay: peer,
                    configured: configured.clone(),
                    listen: listen.clone(),
                });
                let retry = self.quic_retry.entry(peer).or_insert(QuicRetry {
                    listen: Vec::new(),
                    next: now + QUIC_RETRY_FIRST,
                    wait: QUIC_RETRY_FIRST,
                });
                retry.listen = listen;
            }
        }
    }

    /// Dials over QUIC again the relays still reached over TCP only (`tcp_only`) whose
    /// wait is over; a relay reached over QUIC meanwhile, or gone, is dropped (identify
    /// starts it again on the next connection).
    pub(crate) fn handle_timeout(&mut self, now: Instant, tcp_only: impl Fn(&PeerId) -> bool) {
        let mut due = Vec::new();
        self.quic_retry.retain(|relay, retry| {
            if now < retry.next {
                return true;
            }
            if !tcp_only(relay) {
                return false;
            }
            retry.wait = (retry.wait * 2).min(QUIC_RETRY_MAX);
            retry.next = now + retry.wait;
            due.push((*relay, retry.listen.clone()));
            true
        });
        for (relay, listen) in due {
            if let Some(configured) = self.configured.get(&relay) {
                let configured = configured.clone();
                self.push(Output::DialQuic {
                    relay,
                    configured,
                    listen,
                });
            }
        }
    }

    pub(crate) fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    fn push(&mut self, output: Output) {
        if self.outputs.len() < MAX_OUTPUTS {
            self.outputs.push_back(output);
        }
    }
}

impl super::Actor {
    /// Hands `input` to the relay client and carries out what it asks.
    pub(super) fn feed_relay_client(&mut self, input: Input<'_>) {
        self.relays.handle(input, Instant::now());
        self.carry_out_relay_client();
    }

    /// Every tick: the QUIC dials to relays still reached over TCP only that are due.
    pub(super) fn relay_client_tick(&mut self, now: Instant) {
        let peers = &self.peers;
        let tcp_only = |relay: &PeerId| {
            peers
                .get(relay)
                .is_some_and(|info| !info.transports().contains(&"quic"))
        };
        self.relays.handle_timeout(now, tcp_only);
        self.carry_out_relay_client();
    }

    fn carry_out_relay_client(&mut self) {
        while let Some(output) = self.relays.poll_output() {
            match output {
                Output::Listen { relay, circuit } => match self.swarm.listen_on(circuit.clone()) {
                    Ok(_) => tracing::info!(%circuit, "listening through relay"),
                    Err(e) => {
                        warn!(%circuit, "cannot listen through relay: {e}");
                        self.relays
                            .handle(Input::ListenFailed(relay), Instant::now());
                    }
                },
                Output::DialQuic {
                    relay,
                    configured,
                    listen,
                } => {
                    tracing::debug!(%relay, "relay reached over TCP only: dialling QUIC");
                    if !self.dial_quic(relay, &configured, &listen) {
                        self.relays.handle(Input::Undialable(relay), Instant::now());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "relay_client_tests.rs"]
mod tests;
