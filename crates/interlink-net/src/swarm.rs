//! Building the real swarm: TCP (dialling from fresh ports, dead connections closed by
//! the kernel) and QUIC, noise, yamux, DNS and the relay client.
//!
//! The in-process memory transport (`/memory/<n>` addresses) is included too, with the
//! same noise and yamux upgrades: it cannot be reached from outside the process, and it
//! lets tests run many complete nodes in one process without sockets.

use std::{
    io,
    pin::Pin,
    task::{Context, Poll},
};

use futures::{TryFutureExt as _, future::MapOk};

use libp2p::{
    Multiaddr, Swarm, Transport,
    core::{
        muxing::StreamMuxerBox,
        transport::{
            DialOpts, ListenerId, MemoryTransport, PortUse, TransportError, TransportEvent,
        },
        upgrade::{NegotiationError, Version},
    },
    identity::Keypair,
    noise, tcp, yamux,
};

use crate::{Config, NetError, behaviour::Behaviour};

/// Builds the swarm a session or observer runs on.
pub fn build_swarm(key: Keypair, config: &Config) -> Result<Swarm<Behaviour>, NetError> {
    let setup = |e: &dyn std::fmt::Display| NetError::Setup(e.to_string());
    let swarm = libp2p::SwarmBuilder::with_existing_identity(key)
        .with_tokio()
        .with_quic()
        .with_other_transport(|key| {
            // The upgrade libp2p's own `with_tcp` builds (V1Lazy: the dialler sends its
            // first message with the protocol proposal, saving a round trip), over TCP
            // that dials from fresh ports.
            let tcp = FreshPortTcp(tcp::tokio::Transport::new(
                tcp::Config::default().nodelay(true),
            ))
            .upgrade(Version::V1Lazy)
            .authenticate(noise::Config::new(key)?)
            .multiplex(yamux::Config::default())
            .map(|(peer, muxer), _| (peer, StreamMuxerBox::new(muxer)));
            let memory = MemoryTransport::default()
                .upgrade(Version::V1)
                .authenticate(noise::Config::new(key)?)
                .multiplex(yamux::Config::default())
                .map(|(peer, muxer), _| (peer, StreamMuxerBox::new(muxer)));
            Ok(tcp
                .or_transport(memory)
                .map(|either, _| either.into_inner()))
        })
        .map_err(|e| setup(&e))?
        .with_dns()
        .map_err(|e| setup(&e))?
        .with_relay_client(noise::Config::new, yamux::Config::default)
        .map_err(|e| setup(&e))?
        .with_behaviour(|key, relay_client| {
            Behaviour::new(key, config, Some(relay_client))
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
        })
        .map_err(|e| setup(&e))?
        .with_swarm_config(|c| {
            c.with_idle_connection_timeout(config.idle_connection_timeout)
                // Every stream the node opens proposes one protocol (gossipsub proposes
                // its versions in turn, and only the last lazily), so the dialler can send
                // its first message with the proposal instead of waiting a round trip
                // for the confirmation: a live delivery is one round trip, not two.
                .with_substream_upgrade_protocol_override(Version::V1Lazy)
        })
        .build();
    Ok(swarm)
}

/// Whether a stream failed because the peer declined its protocol. With lazy
/// negotiation the dialler learns it only when it reads the answer, so libp2p reports it
/// as an I/O error (request-response: `OutboundFailure::Io`, not
/// `UnsupportedProtocols`; ping: `Failure::Other`, not `Unsupported`).
pub(crate) fn protocol_declined(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(NegotiationError::Failed) = error.downcast_ref::<NegotiationError>() {
            return true;
        }
        // An `io::Error` made from another error hides it from `source()`.
        if let Some(inner) = error
            .downcast_ref::<io::Error>()
            .and_then(|e| e.get_ref())
            .and_then(|e| e.downcast_ref::<NegotiationError>())
        {
            return matches!(inner, NegotiationError::Failed);
        }
        cause = error.source();
    }
    false
}

/// A request the peer declined by protocol, as `UnsupportedProtocols` whichever way
/// libp2p reported it.
pub(crate) fn declined_as_unsupported(
    error: libp2p::request_response::OutboundFailure,
) -> libp2p::request_response::OutboundFailure {
    use libp2p::request_response::OutboundFailure;
    match error {
        OutboundFailure::Io(e) if protocol_declined(&e) => OutboundFailure::UnsupportedProtocols,
        other => other,
    }
}

/// Whether a ping failed because the peer does not speak ping, whichever way libp2p
/// reported it.
pub(crate) fn ping_unsupported(failure: &libp2p::ping::Failure) -> bool {
    match failure {
        libp2p::ping::Failure::Unsupported => true,
        libp2p::ping::Failure::Other { error } => protocol_declined(&**error),
        _ => false,
    }
}

/// How long data sent on a TCP connection may stay unacknowledged before the kernel
/// closes it (`TCP_USER_TIMEOUT`, Linux). A peer that moved to another network leaves
/// its connections ESTABLISHED, retransmitting into nothing for about 16 minutes; the
/// node's pings every few seconds (`node::roaming`) give every connection data in
/// flight, so a dead one is closed within this time. A slow link that still
/// acknowledges is never closed by it, however long its queue.
#[cfg(target_os = "linux")]
const TCP_USER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

type TcpStream = <tcp::tokio::Transport as Transport>::Output;

/// `stream` with [`TCP_USER_TIMEOUT`] set where the system has it.
fn with_user_timeout(stream: TcpStream) -> TcpStream {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Err(e) = socket2::SockRef::from(&stream.0).set_tcp_user_timeout(Some(TCP_USER_TIMEOUT)) {
        tracing::debug!("TCP_USER_TIMEOUT not set: {e}");
    }
    stream
}

/// TCP that dials from a fresh port, never from a listening one, and whose connections
/// carry [`TCP_USER_TIMEOUT`].
///
/// libp2p's TCP binds a dial to the node's listening port by default (`PortUse::Reuse`,
/// for NAT hole punching). Two nodes that dial each other at the same instant — a
/// shell `send`'s live attempt crossing the recipient's pass offer, say — then make
/// one TCP connection by simultaneous open, on which both act as the Noise initiator:
/// both handshakes fail ("input error") and neither dial connects (half of such
/// crossings on loopback, `tests/transport.rs`). From a fresh port the two dials are
/// two connections and both succeed. Hole punching through NAT is left to QUIC, whose
/// one socket serves listening and dialling alike.
struct FreshPortTcp(tcp::tokio::Transport);

impl Transport for FreshPortTcp {
    type Output = TcpStream;
    type Error = io::Error;
    type ListenerUpgrade =
        MapOk<<tcp::tokio::Transport as Transport>::ListenerUpgrade, fn(TcpStream) -> TcpStream>;
    type Dial = MapOk<<tcp::tokio::Transport as Transport>::Dial, fn(TcpStream) -> TcpStream>;

    fn listen_on(
        &mut self,
        id: ListenerId,
        addr: Multiaddr,
    ) -> Result<(), TransportError<Self::Error>> {
        self.0.listen_on(id, addr)
    }

    fn remove_listener(&mut self, id: ListenerId) -> bool {
        self.0.remove_listener(id)
    }

    fn dial(
        &mut self,
        addr: Multiaddr,
        opts: DialOpts,
    ) -> Result<Self::Dial, TransportError<Self::Error>> {
        let dial = self.0.dial(
            addr,
            DialOpts {
                port_use: PortUse::New,
                ..opts
            },
        )?;
        Ok(dial.map_ok(with_user_timeout as fn(TcpStream) -> TcpStream))
    }

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<TransportEvent<Self::ListenerUpgrade, Self::Error>> {
        Pin::new(&mut self.0).poll(cx).map(|event| {
            event.map_upgrade(|upgrade| {
                upgrade.map_ok(with_user_timeout as fn(TcpStream) -> TcpStream)
            })
        })
    }
}

#[cfg(test)]
#[path = "swarm_tests.rs"]
mod tests;
