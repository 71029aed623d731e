//! The relay's configuration, built by the binary from its flags (or by a test).

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use interlink_core::names::Network;
use libp2p::Multiaddr;

use crate::store::Caps;

/// Addresses listened on when none is given: TCP and QUIC on port 4001, every interface.
pub const DEFAULT_LISTEN: [&str; 2] = ["/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"];
/// How often the store is swept of expired envelopes and acks.
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(10 * 60);
/// Shortest sweep interval accepted (a sweep scans every mailbox's summary row).
pub const MIN_SWEEP_INTERVAL: Duration = Duration::from_secs(1);
/// Most `--listen` or `--external` addresses.
pub const MAX_ADDRS: usize = 16;

/// Everything [`crate::start`] needs.
#[derive(Clone, Debug)]
pub struct Config {
    /// The identity key file (created with mode 0600 if missing).
    pub key_path: PathBuf,
    /// Addresses to listen on.
    pub listen: Vec<Multiaddr>,
    /// Addresses to advertise as the relay's own (public or tailnet addresses).
    pub external: Vec<Multiaddr>,
    /// The redb mailbox database.
    pub db_path: PathBuf,
    /// Where to serve `/metrics` and `/probe`; none serves nothing.
    pub metrics_addr: Option<SocketAddr>,
    /// The overlay network served.
    pub network: Network,
    /// Store bounds, including the envelope retention.
    pub caps: Caps,
    /// How often to sweep.
    pub sweep_interval: Duration,
    /// The clock the node stamps and checks with, and the sweeps expire by.
    pub clock: interlink_net::Clock,
}

/// A configuration that cannot run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Nothing to listen on.
    #[error("no listen address")]
    NoListenAddr,
    /// Too many addresses of one kind.
    #[error("more than {MAX_ADDRS} {0} addresses")]
    TooManyAddrs(&'static str),
    /// The sweep interval is shorter than [`MIN_SWEEP_INTERVAL`].
    #[error("sweep interval {0:?} is shorter than {MIN_SWEEP_INTERVAL:?}")]
    SweepTooOften(Duration),
}

impl Config {
    /// The defaults, with the key and database at the given paths.
    pub fn new(key_path: impl Into<PathBuf>, db_path: impl Into<PathBuf>) -> Self {
        Self {
            key_path: key_path.into(),
            listen: default_listen(),
            external: Vec::new(),
            db_path: db_path.into(),
            metrics_addr: None,
            network: Network::default(),
            caps: Caps::default(),
            sweep_interval: DEFAULT_SWEEP_INTERVAL,
            clock: interlink_net::Clock::system(),
        }
    }

    /// Listening on `addrs` instead.
    pub fn with_listen(mut self, addrs: Vec<Multiaddr>) -> Self {
        self.listen = addrs;
        self
    }

    /// Advertising `addrs`.
    pub fn with_external(mut self, addrs: Vec<Multiaddr>) -> Self {
        self.external = addrs;
        self
    }

    /// Serving metrics on `addr`.
    pub fn with_metrics(mut self, addr: SocketAddr) -> Self {
        self.metrics_addr = Some(addr);
        self
    }

    /// Serving `network`.
    pub fn with_network(mut self, network: Network) -> Self {
        self.network = network;
        self
    }

    /// With store caps `caps`.
    pub fn with_caps(mut self, caps: Caps) -> Self {
        self.caps = caps;
        self
    }

    /// Sweeping every `every`.
    pub fn with_sweep_interval(mut self, every: Duration) -> Self {
        self.sweep_interval = every;
        self
    }

    /// Checks the configuration can run (the store checks its caps when opened).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.listen.is_empty() {
            return Err(ConfigError::NoListenAddr);
        }
        if self.listen.len() > MAX_ADDRS {
            return Err(ConfigError::TooManyAddrs("listen"));
        }
        if self.external.len() > MAX_ADDRS {
            return Err(ConfigError::TooManyAddrs("external"));
        }
        if self.sweep_interval < MIN_SWEEP_INTERVAL {
            return Err(ConfigError::SweepTooOften(self.sweep_interval));
        }
        Ok(())
    }
}

/// [`DEFAULT_LISTEN`], parsed.
pub fn default_listen() -> Vec<Multiaddr> {
    DEFAULT_LISTEN
        .iter()
        .filter_map(|a| a.parse().ok())
        .collect()
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
