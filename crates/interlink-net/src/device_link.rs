//! The short-lived node of a device link (PROTOCOL.md §8.8): `invite --device` waits on
//! one, `join` dials one. It is not a session: a random transport key, no presence, no
//! mailboxes, no DHT — one request-response protocol, so a stranger who connects learns
//! nothing of the overlay and costs the Noise handshake and one HMAC per request.
//!
//! The exchange's rules live in [`interlink_core::device_link`]; this module only
//! carries its messages, bounded ([`MAX_LINK_REQUEST_BYTES`], [`MAX_LINK_RESPONSE_BYTES`],
//! [`MAX_CONNECTIONS`], [`MAX_STREAMS`]).

use std::{collections::HashSet, future::Future, time::Duration};

use futures::StreamExt as _;
use interlink_core::{
    device_link::CONFIRM_WINDOW_MS,
    names::Network,
    wire::{LinkRequest, LinkResponse, MAX_LINK_REQUEST_BYTES, MAX_LINK_RESPONSE_BYTES},
};
use libp2p::{
    Multiaddr, PeerId, StreamProtocol, Swarm,
    core::ConnectedPoint,
    identity::Keypair,
    noise,
    request_response::{self, OutboundRequestId, ProtocolSupport, ResponseChannel},
    swarm::{ConnectionId, SwarmEvent, dial_opts::DialOpts},
    tcp, yamux,
};
use tracing::debug;

use crate::{NetError, cbor};

/// Most connections the waiting node keeps at once: the joiner and a few strangers.
/// Past it the oldest connection of anyone but the joiner that spent the code
/// ([`LinkNode::protect`]) is closed, so strangers holding connections open cannot keep
/// the joiner out, nor cut it off once it is in.
pub const MAX_CONNECTIONS: usize = 8;
/// Most requests of one connection read at once.
pub const MAX_STREAMS: usize = 2;
/// How long a request may wait for its answer: the confirm's answer waits for the
/// waiting side's user, up to the confirmation window.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(CONFIRM_WINDOW_MS + 30_000);

type Behaviour = cbor::Behaviour<LinkRequest, LinkResponse>;

/// Why a request of the exchange got no answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// No connection, or it failed or closed, or the answer did not decode.
    #[error("the other machine did not answer: {0}")]
    NoAnswer(String),
    /// No answer within the time given.
    #[error("the other machine did not answer within {0:?}")]
    Timeout(Duration),
}

/// A request that reached the waiting node.
#[derive(Debug)]
pub struct Incoming {
    /// The requesting node.
    pub peer: PeerId,
    /// The request (decoded, not yet checked).
    pub request: LinkRequest,
    /// Where its answer goes.
    pub channel: ResponseChannel<LinkResponse>,
}

/// A device-link node.
pub struct LinkNode {
    swarm: Swarm<Behaviour>,
    /// The remote address of each connected peer (the first connection's).
    remotes: std::collections::HashMap<PeerId, Multiaddr>,
    /// Open connections, oldest first (at most [`MAX_CONNECTIONS`]).
    open: std::collections::VecDeque<(ConnectionId, PeerId)>,
    /// The peer whose connections are never closed for room.
    protected: Option<PeerId>,
}

impl std::fmt::Debug for LinkNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkNode")
            .field("peer", self.swarm.local_peer_id())
            .finish_non_exhaustive()
    }
}

impl LinkNode {
    /// A node on `network` with a fresh random key; `serve` makes it answer requests
    /// (the waiting side), otherwise it only sends them (the joiner).
    pub fn new(network: &Network, serve: bool) -> Result<Self, NetError> {
        let setup = |e: &dyn std::fmt::Display| NetError::Setup(e.to_string());
        let protocol = StreamProtocol::try_from_owned(network.device_link_protocol())
            .map_err(|e| setup(&e))?;
        let support = if serve {
            ProtocolSupport::Inbound
        } else {
            ProtocolSupport::Outbound
        };
        let swarm = libp2p::SwarmBuilder::with_existing_identity(Keypair::generate_ed25519())
            .with_tokio()
            .with_tcp(
                tcp::Config::default().nodelay(true),
                noise::Config::new,
                yamux::Config::default,
            )
            .map_err(|e| setup(&e))?
            .with_quic()
            .with_behaviour(|_| {
                request_response::Behaviour::with_codec(
                    cbor::Codec::new(MAX_LINK_REQUEST_BYTES, MAX_LINK_RESPONSE_BYTES),
                    [(protocol, support)],
                    request_response::Config::default()
                        .with_request_timeout(REQUEST_TIMEOUT)
                        .with_max_concurrent_streams(MAX_STREAMS),
                )
            })
            .map_err(|e| setup(&e))?
            .with_swarm_config(|c| c.with_idle_connection_timeout(REQUEST_TIMEOUT))
            .build();
        Ok(Self {
            swarm,
            remotes: Default::default(),
            open: Default::default(),
            protected: None,
        })
    }

    /// Its PeerId (random, for this link only).
    pub fn peer_id(&self) -> PeerId {
        *self.swarm.local_peer_id()
    }

    /// Listens on `addrs` and returns the addresses it listens at once each listener
    /// reported (or `settle` passed), each ending in `/p2p/<its peer id>`.
    pub async fn listen(
        &mut self,
        addrs: &[Multiaddr],
        settle: Duration,
    ) -> Result<Vec<Multiaddr>, NetError> {
        let mut pending = HashSet::new();
        for a in addrs {
            let id = self
                .swarm
                .listen_on(a.clone())
                .map_err(|e| NetError::Setup(format!("listening on {a}: {e}")))?;
            pending.insert(id);
        }
        let mut found = Vec::new();
        let deadline = tokio::time::Instant::now() + settle;
        // Every listener reports its first address promptly; a 0.0.0.0 one reports one
        // per interface in a burst, which the short settle after the last lets in.
        loop {
            let wait = if pending.is_empty() {
                deadline.min(tokio::time::Instant::now() + Duration::from_millis(100))
            } else {
                deadline
            };
            match tokio::time::timeout_at(wait, self.swarm.select_next_some()).await {
                Ok(SwarmEvent::NewListenAddr {
                    listener_id,
                    address,
                }) => {
                    pending.remove(&listener_id);
                    found.push(crate::dialable(&address, self.peer_id()));
                }
                Ok(SwarmEvent::ListenerError { error, .. }) => {
                    return Err(NetError::Setup(format!("listening: {error}")));
                }
                Ok(other) => debug!(?other, "device link: event while listening"),
                Err(_) => break,
            }
        }
        if found.is_empty() {
            return Err(NetError::Setup("no listen address came up".into()));
        }
        Ok(found)
    }

    /// Keeps `peer`'s connections when room is made for new ones (the joiner that
    /// spent the code).
    pub fn protect(&mut self, peer: PeerId) {
        self.protected = Some(peer);
    }

    /// The remote address `peer` connected from (its first connection's).
    pub fn remote_of(&self, peer: &PeerId) -> Option<&Multiaddr> {
        self.remotes.get(peer)
    }

    /// Waits for the next request (the waiting side), keeping the connection count
    /// within [`MAX_CONNECTIONS`].
    pub async fn next_request(&mut self) -> Incoming {
        loop {
            let event = self.swarm.select_next_some().await;
            if let Some(incoming) = self.step(event) {
                return incoming;
            }
        }
    }

    /// Answers a request; false when its stream is gone.
    pub fn respond(
        &mut self,
        channel: ResponseChannel<LinkResponse>,
        response: LinkResponse,
    ) -> bool {
        self.swarm
            .behaviour_mut()
            .send_response(channel, response)
            .is_ok()
    }

    /// Drives the node until `peer` closed its connections (the joiner hangs up once it
    /// read its last answer) or `wait` passed, so an answer already given leaves before
    /// the node stops: a response counted as sent may still sit in the multiplexer's
    /// buffers until the connection is polled again.
    pub async fn linger(&mut self, peer: PeerId, wait: Duration) {
        let deadline = tokio::time::Instant::now() + wait;
        while self.swarm.is_connected(&peer) {
            let Ok(event) = tokio::time::timeout_at(deadline, self.swarm.select_next_some()).await
            else {
                return;
            };
            // Requests arriving now are dropped unanswered: the exchange is over.
            let _ = self.step(event);
        }
    }

    /// Sends `request` to `peer` at `addrs` (dialling if needed) and waits up to
    /// `timeout` for its answer.
    pub async fn request(
        &mut self,
        peer: PeerId,
        addrs: &[Multiaddr],
        request: LinkRequest,
        timeout: Duration,
    ) -> Result<LinkResponse, RequestError> {
        if !self.swarm.is_connected(&peer) {
            let opts = DialOpts::peer_id(peer).addresses(addrs.to_vec()).build();
            self.swarm
                .dial(opts)
                .map_err(|e| RequestError::NoAnswer(e.to_string()))?;
        }
        let id = self.swarm.behaviour_mut().send_request(&peer, request);
        tokio::time::timeout(timeout, self.answer(id))
            .await
            .map_err(|_| RequestError::Timeout(timeout))?
    }

    async fn answer(&mut self, id: OutboundRequestId) -> Result<LinkResponse, RequestError> {
        loop {
            match self.swarm.select_next_some().await {
                SwarmEvent::Behaviour(request_response::Event::Message {
                    message:
                        request_response::Message::Response {
                            request_id,
                            response,
                        },
                    ..
                }) if request_id == id => return Ok(response),
                SwarmEvent::Behaviour(request_response::Event::OutboundFailure {
                    request_id,
                    error,
                    ..
                }) if request_id == id => return Err(RequestError::NoAnswer(error.to_string())),
                other => {
                    let _ = self.step(other);
                }
            }
        }
    }

    /// Keeps the node's connections served while `f` runs (a user reading the
    /// comparison string), then returns what `f` gave.
    pub async fn while_running<F: Future>(&mut self, f: F) -> F::Output {
        tokio::pin!(f);
        loop {
            tokio::select! {
                out = &mut f => return out,
                event = self.swarm.select_next_some() => {
                    // The joiner answers nothing; the waiting side's requests during
                    // this are not expected (its shell does not call this).
                    let _ = self.step(event);
                }
            }
        }
    }

    /// Book-keeping of one swarm event; a request is handed out.
    fn step(
        &mut self,
        event: SwarmEvent<request_response::Event<LinkRequest, LinkResponse>>,
    ) -> Option<Incoming> {
        match event {
            SwarmEvent::ConnectionEstablished {
                peer_id,
                connection_id,
                endpoint,
                ..
            } => {
                self.open.push_back((connection_id, peer_id));
                if self.open.len() > MAX_CONNECTIONS {
                    let protected = self.protected;
                    if let Some(i) = self.open.iter().position(|(_, p)| Some(*p) != protected)
                        && let Some((oldest, who)) = self.open.remove(i)
                    {
                        debug!(%who, "device link: oldest connection closed for room");
                        self.swarm.close_connection(oldest);
                    }
                }
                let remote = match endpoint {
                    ConnectedPoint::Dialer { address, .. } => address,
                    ConnectedPoint::Listener { send_back_addr, .. } => send_back_addr,
                };
                if self.remotes.len() < MAX_CONNECTIONS * 2 {
                    self.remotes.entry(peer_id).or_insert(remote);
                }
                None
            }
            SwarmEvent::ConnectionClosed {
                peer_id,
                connection_id,
                num_established,
                ..
            } => {
                self.open.retain(|(c, _)| *c != connection_id);
                if num_established == 0 {
                    self.remotes.remove(&peer_id);
                }
                None
            }
            SwarmEvent::Behaviour(request_response::Event::Message {
                peer,
                message:
                    request_response::Message::Request {
                        request, channel, ..
                    },
                ..
            }) => Some(Incoming {
                peer,
                request,
                channel,
            }),
            other => {
                debug!(?other, "device link: event");
                None
            }
        }
    }
}

#[cfg(test)]
#[path = "device_link_tests.rs"]
mod tests;
