//! Sessionless probing: is there an interlink node at an address, and whose session is it?
//!
//! [`probe`] builds a throwaway swarm (random key, the project behaviour, mDNS off, no
//! topic subscription, Kademlia in client mode) and drives it directly, without a
//! [`crate::Node`]: it dials the address, waits for identify, checks the overlay's
//! protocol version, then fetches the peer's roster once and picks the announcement
//! the peer signed for itself. Nothing is announced, so the probe never appears on any
//! roster.

use std::{error::Error as StdError, io, time::Duration};

use futures::StreamExt;
use interlink_core::{
    Fingerprint, IdentityKey, SessionId,
    names::Network,
    wire::{Announcement, RosterRequest, RosterResponse, Signed},
};
use libp2p::{
    Multiaddr, PeerId, Swarm,
    core::upgrade::NegotiationError,
    identify, kad,
    multiaddr::Protocol,
    request_response,
    swarm::{DialError, StreamUpgradeError, SwarmEvent, dial_opts::DialOpts},
};
use tracing::debug;

use crate::{
    Config,
    behaviour::{Behaviour, BehaviourEvent},
};

/// An interlink session answered the probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The session's identity key.
    pub identity: IdentityKey,
    /// Its fingerprint, as shown to people.
    pub fingerprint: Fingerprint,
    /// The session id it announces.
    pub session: SessionId,
    /// The agent version its identify reported (e.g. `interlink-p2p/0.1.0`).
    pub version: String,
    /// The PeerId that answered.
    pub peer_id: PeerId,
}

/// Why a probe found no interlink session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The probe's own swarm could not be built.
    #[error("probe setup failed: {0}")]
    Setup(String),
    /// Nothing answered, the connection failed, or it closed before an answer.
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// Something answered, but not an interlink node (what it said is included).
    #[error("not an interlink node: {0}")]
    NotInterlink(String),
    /// An interlink node of another overlay.
    #[error("interlink node of another network: it says {theirs:?}, this node uses {ours:?}")]
    OtherNetwork {
        /// The identify protocol version it reported.
        theirs: String,
        /// The one expected.
        ours: String,
    },
    /// An interlink node on this overlay that announces no session of its own (an
    /// observer such as `interlink-p2p peers`, or a relay).
    #[error("interlink node {peer_id} ({agent}) without a session")]
    NoSession {
        /// The PeerId that answered.
        peer_id: PeerId,
        /// Its identify agent version.
        agent: String,
    },
    /// No conclusive answer within the time limit.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// Probes `addr` (with or without a `/p2p/<id>` suffix) for an interlink session on
/// `network`, giving up after `timeout`.
pub async fn probe(addr: Multiaddr, network: &Network, timeout: Duration) -> Result<Found, Error> {
    let config = Config {
        network: network.clone(),
        listen: Vec::new(),
        bootstrap: Vec::new(),
        mdns: false,
        // One connection, dialled by the probe itself: the memory cap guards a
        // long-running node against connections others open, and would only refuse
        // this one inside a process that is large for another reason (a test binary).
        max_process_memory: Some(usize::MAX),
        ..Config::default()
    };
    let key = libp2p::identity::Keypair::generate_ed25519();
    let mut swarm = crate::build_swarm(key, &config).map_err(|e| Error::Setup(e.to_string()))?;
    // A client takes no part in the DHT: peers do not add the probe to their tables.
    swarm.behaviour_mut().kad.set_mode(Some(kad::Mode::Client));
    let expected = network.identify_version();
    match tokio::time::timeout(timeout, drive(&mut swarm, addr, &expected)).await {
        Ok(result) => result,
        Err(_) => Err(Error::Timeout(timeout)),
    }
}

/// How many connections the probe opens at most. A node of another overlay closes the
/// connection as soon as it has read the probe's identify, which can beat its own
/// identify to the probe; a second connection then usually gets the answer.
const MAX_ATTEMPTS: u32 = 4;

/// Where the probe is.
struct State {
    addr: Multiaddr,
    /// The peer being probed: from the `/p2p/` suffix, else the first connection.
    target: Option<PeerId>,
    /// Its agent version, once identify matched the network.
    agent: Option<String>,
    /// Connections opened so far.
    attempts: u32,
}

impl State {
    fn dial(&mut self, swarm: &mut Swarm<Behaviour>) -> Result<(), Error> {
        self.attempts += 1;
        let opts = match self.target {
            Some(peer) => DialOpts::peer_id(peer)
                .addresses(vec![self.addr.clone()])
                .build(),
            None => DialOpts::unknown_peer_id()
                .address(self.addr.clone())
                .build(),
        };
        swarm
            .dial(opts)
            .map_err(|e| Error::Unreachable(dial_error_text(&e)))
    }
}

async fn drive(
    swarm: &mut Swarm<Behaviour>,
    addr: Multiaddr,
    expected: &str,
) -> Result<Found, Error> {
    let mut state = State {
        target: peer_of(&addr),
        addr,
        agent: None,
        attempts: 0,
    };
    state.dial(swarm)?;
    loop {
        let event = swarm.select_next_some().await;
        if let Some(result) = on_event(swarm, &mut state, event, expected) {
            return result;
        }
    }
}

/// Handles one swarm event; `Some` ends the probe.
fn on_event(
    swarm: &mut Swarm<Behaviour>,
    state: &mut State,
    event: SwarmEvent<BehaviourEvent>,
    expected: &str,
) -> Option<Result<Found, Error>> {
    let is_target = |p: &PeerId| state.target.as_ref() == Some(p);
    match event {
        SwarmEvent::ConnectionEstablished { peer_id, .. } => {
            debug!(%peer_id, "probe connected");
            state.target.get_or_insert(peer_id);
            None
        }
        SwarmEvent::OutgoingConnectionError { error, .. } => Some(Err(classify_dial(&error))),
        SwarmEvent::ConnectionClosed { peer_id, cause, .. } if is_target(&peer_id) => {
            if state.agent.is_none() && state.attempts < MAX_ATTEMPTS {
                debug!(%peer_id, "closed before identify; dialling again");
                return state.dial(swarm).err().map(Err);
            }
            let why = cause.map(|c| format!(": {c}")).unwrap_or_default();
            Some(Err(Error::Unreachable(format!(
                "{peer_id} closed the connection before answering{why}"
            ))))
        }
        SwarmEvent::Behaviour(BehaviourEvent::Identify(ev)) => {
            on_identify(swarm, state, ev, expected)
        }
        SwarmEvent::Behaviour(BehaviourEvent::Roster(ev)) => on_roster(swarm, state, ev),
        _ => None,
    }
}

fn on_identify(
    swarm: &mut Swarm<Behaviour>,
    state: &mut State,
    event: identify::Event,
    expected: &str,
) -> Option<Result<Found, Error>> {
    match event {
        identify::Event::Received { peer_id, info, .. }
            if state.target == Some(peer_id) && state.agent.is_none() =>
        {
            let theirs = info.protocol_version;
            if theirs != expected {
                return Some(Err(if theirs.starts_with("interlink-p2p/") {
                    Error::OtherNetwork {
                        theirs,
                        ours: expected.to_owned(),
                    }
                } else {
                    Error::NotInterlink(format!(
                        "identify says protocol {theirs:?}, agent {:?}",
                        info.agent_version
                    ))
                }));
            }
            state.agent = Some(info.agent_version);
            swarm
                .behaviour_mut()
                .roster
                .send_request(&peer_id, RosterRequest::default());
            None
        }
        identify::Event::Error { peer_id, error, .. } if state.target == Some(peer_id) => {
            Some(Err(match error {
                StreamUpgradeError::NegotiationFailed => Error::NotInterlink(format!(
                    "{peer_id} is a libp2p node that does not answer identify"
                )),
                other => Error::Unreachable(format!("identify failed: {other}")),
            }))
        }
        _ => None,
    }
}

fn on_roster(
    swarm: &mut Swarm<Behaviour>,
    state: &State,
    event: request_response::Event<RosterRequest, RosterResponse>,
) -> Option<Result<Found, Error>> {
    match event {
        // The probed node fetches our roster on connect; it is empty.
        request_response::Event::Message {
            message: request_response::Message::Request { channel, .. },
            ..
        } => {
            let empty = RosterResponse::empty();
            let _ = swarm.behaviour_mut().roster.send_response(channel, empty);
            None
        }
        request_response::Event::Message {
            peer,
            message: request_response::Message::Response { response, .. },
            ..
        } if state.target == Some(peer) => {
            let agent = state.agent.clone().unwrap_or_default();
            Some(own_session(peer, &agent, response))
        }
        request_response::Event::OutboundFailure { peer, error, .. }
            if state.target == Some(peer) =>
        {
            Some(Err(match crate::swarm::declined_as_unsupported(error) {
                request_response::OutboundFailure::UnsupportedProtocols => {
                    Error::NotInterlink(format!(
                        "{peer} identifies as {:?} but does not serve the roster",
                        state.agent
                    ))
                }
                other => Error::Unreachable(format!("roster fetch failed: {other}")),
            }))
        }
        _ => None,
    }
}

/// Picks, from a roster response, the verified announcement made by `peer` itself.
fn own_session(peer: PeerId, agent: &str, response: RosterResponse) -> Result<Found, Error> {
    response
        .announcements
        .iter()
        .filter_map(|bytes| Signed::<Announcement>::decode(bytes).ok())
        .filter(|a| a.body().peer_id() == Some(peer))
        .max_by_key(|a| (a.body().ts, a.body().seq))
        .map(|a| {
            let body = a.body();
            Found {
                identity: body.identity,
                fingerprint: body.identity.fingerprint(),
                session: body.session_id.clone(),
                version: agent.to_owned(),
                peer_id: peer,
            }
        })
        .ok_or_else(|| Error::NoSession {
            peer_id: peer,
            agent: agent.to_owned(),
        })
}

fn peer_of(addr: &Multiaddr) -> Option<PeerId> {
    addr.iter().find_map(|p| match p {
        Protocol::P2p(id) => Some(id),
        _ => None,
    })
}

/// Sorts a failed dial into "nothing there" and "something that is not libp2p".
fn classify_dial(error: &DialError) -> Error {
    if let DialError::Transport(attempts) = error {
        for (_, e) in attempts {
            if let libp2p::TransportError::Other(io) = e
                && speaks_something_else(io)
            {
                return Error::NotInterlink(format!(
                    "it does not complete a libp2p handshake (noise, yamux): {}",
                    dial_error_text(error)
                ));
            }
        }
    }
    Error::Unreachable(dial_error_text(error))
}

/// True when the error chain shows the remote accepted the connection and then failed
/// protocol negotiation or the noise handshake, as opposed to refusing the connection
/// or not answering. A reset or an early end of stream during the handshake counts:
/// that is how a server of another protocol typically reacts to libp2p's opening bytes.
fn speaks_something_else(error: &io::Error) -> bool {
    let mut current: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(e) = current {
        if e.downcast_ref::<NegotiationError>().is_some() {
            return true;
        }
        // noise's `Io` variant is transparent: its io::Error is not in the source chain.
        let io = match e.downcast_ref::<libp2p::noise::Error>() {
            Some(libp2p::noise::Error::Io(io)) => Some(io),
            Some(_) => return true,
            None => e.downcast_ref::<io::Error>(),
        };
        current = match io {
            Some(io) if cut_off_during_handshake(io.kind()) => return true,
            Some(io) => io.get_ref().map(|e| e as _).or_else(|| e.source()),
            None => e.source(),
        };
    }
    false
}

/// Error kinds of a connection the remote accepted and then dropped or answered with
/// bytes libp2p could not read.
fn cut_off_during_handshake(kind: io::ErrorKind) -> bool {
    matches!(
        kind,
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::UnexpectedEof
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::InvalidData
    )
}

/// A dial error with its whole source chain, on one line.
fn dial_error_text(error: &DialError) -> String {
    match error {
        DialError::Transport(attempts) => attempts
            .iter()
            .map(|(addr, e)| format!("{addr}: {}", chain_text(e)))
            .collect::<Vec<_>>()
            .join("; "),
        DialError::WrongPeerId { obtained, address } => {
            format!("{address} is {obtained}, not the peer asked for")
        }
        other => chain_text(other),
    }
}

fn chain_text(error: &dyn StdError) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut current = Some(error);
    while let Some(e) = current {
        let text = tidy(&e.to_string());
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        current = e.source();
    }
    parts.join(": ")
}

/// One line per error: the DNS transport's "Multiple dial errors occurred:" list
/// becomes its items (just the item when there is one).
fn tidy(text: &str) -> String {
    let mut items = text.split("\n - ").map(str::trim);
    let head = items.next().unwrap_or_default();
    let items: Vec<&str> = items.filter(|i| !i.is_empty()).collect();
    if items.is_empty() {
        head.replace('\n', " ")
    } else if head.starts_with("Multiple dial errors") && items.len() == 1 {
        items[0].replace('\n', " ")
    } else {
        format!("{head} {}", items.join("; ")).replace('\n', " ")
    }
}
