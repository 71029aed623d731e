//! Building the real swarm: TCP and QUIC, noise, yamux, DNS and the relay client.
//!
//! The in-process memory transport (`/memory/<n>` addresses) is included too, with the
//! same noise and yamux upgrades: it cannot be reached from outside the process, and it
//! lets tests run many complete nodes in one process without sockets.

use libp2p::{
    Swarm, Transport as _,
    core::{transport::MemoryTransport, upgrade::Version},
    identity::Keypair,
    noise, tcp, yamux,
};

use crate::{Config, NetError, behaviour::Behaviour};

/// Builds the swarm a session or observer runs on.
pub fn build_swarm(key: Keypair, config: &Config) -> Result<Swarm<Behaviour>, NetError> {
    let setup = |e: &dyn std::fmt::Display| NetError::Setup(e.to_string());
    let swarm = libp2p::SwarmBuilder::with_existing_identity(key)
        .with_tokio()
        .with_tcp(
            tcp::Config::default().nodelay(true),
            noise::Config::new,
            yamux::Config::default,
        )
        .map_err(|e| setup(&e))?
        .with_quic()
        .with_other_transport(|key| {
            Ok(MemoryTransport::default()
                .upgrade(Version::V1)
                .authenticate(noise::Config::new(key)?)
                .multiplex(yamux::Config::default()))
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
        .with_swarm_config(|c| c.with_idle_connection_timeout(config.idle_connection_timeout))
        .build();
    Ok(swarm)
}
