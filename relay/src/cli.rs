//! The command line of `interlink-relay`.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use clap::Parser;
use interlink_core::{
    limits::{DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS},
    names::Network,
};
use libp2p::Multiaddr;

use crate::{
    config::{Config, DEFAULT_LISTEN, default_listen},
    store::Caps,
};

/// interlink-relay: the optional always-on relay of interlink-p2p — durable
/// keep-until-ack mailboxes, circuit relay, bootstrap point, metrics.
///
/// On start it prints its dialable multiaddrs to stdout, one per line; logs go to
/// stderr (RUST_LOG sets the level, default info).
#[derive(Debug, Parser)]
#[command(name = "interlink-relay", version)]
pub struct Args {
    /// Identity key file; created (mode 0600) if missing.
    #[arg(
        long,
        value_name = "PATH",
        env = "INTERLINK_RELAY_KEY",
        default_value = "relay.key"
    )]
    pub key: PathBuf,
    /// Address to listen on (repeatable).
    /// Default: /ip4/0.0.0.0/tcp/4001 and /ip4/0.0.0.0/udp/4001/quic-v1.
    #[arg(long, value_name = "MULTIADDR")]
    pub listen: Vec<Multiaddr>,
    /// Address to advertise as the relay's own, e.g. its tailnet address (repeatable).
    #[arg(long, value_name = "MULTIADDR")]
    pub external: Vec<Multiaddr>,
    /// The mailbox database (one redb file, owned by this process).
    #[arg(
        long,
        value_name = "PATH",
        env = "INTERLINK_RELAY_DB",
        default_value = "mailboxes.redb"
    )]
    pub db: PathBuf,
    /// Serve GET /metrics and GET /probe on this address, e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// The overlay network served.
    #[arg(
        long,
        value_name = "NAME",
        env = interlink_store::env::NETWORK,
        default_value = "default"
    )]
    pub network: String,
    /// How long a queued message stays deliverable (units ms, s, m, h, d). Keep the
    /// protocol's 7d unless every session agrees: holders must normalise alike.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "7d")]
    pub retention: Duration,
    /// How often expired messages and acks are swept.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10m")]
    pub sweep_interval: Duration,
    /// Most mailboxes held.
    #[arg(long, value_name = "N", default_value_t = crate::store::DEFAULT_MAX_MAILBOXES)]
    pub max_mailboxes: usize,
    /// Most bytes of mailbox records held.
    #[arg(long, value_name = "BYTES", default_value_t = crate::store::DEFAULT_MAX_TOTAL_BYTES)]
    pub max_store_bytes: u64,
    /// Most bytes of mailbox records held for one identity (all its sessions).
    #[arg(long, value_name = "BYTES", default_value_t = crate::store::DEFAULT_MAX_OWNER_BYTES)]
    pub max_identity_bytes: u64,
    /// Hold mail only for this identity (64 hex digits; repeatable): the team the
    /// relay serves. Without it the relay holds mail for anyone, bounded per identity
    /// and in all, so a swarm of fresh identities can still fill it to its caps.
    #[arg(long, value_name = "KEY")]
    pub serve: Vec<interlink_core::IdentityKey>,
}

/// A flag that does not make a configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArgsError {
    /// The network name is invalid.
    #[error(transparent)]
    Network(#[from] interlink_core::names::BadNetworkName),
    /// The retention does not fit in milliseconds.
    #[error("retention {0:?} is out of range")]
    Retention(Duration),
}

impl Args {
    /// The relay configuration these flags describe.
    pub fn into_config(self) -> Result<Config, ArgsError> {
        let network = Network::new(&self.network)?;
        let retention_ms = u64::try_from(self.retention.as_millis())
            .map_err(|_| ArgsError::Retention(self.retention))?;
        let caps = Caps::default()
            .with_retention_ms(retention_ms)
            .with_max_mailboxes(self.max_mailboxes)
            .with_max_total_bytes(self.max_store_bytes)
            .with_max_owner_bytes(self.max_identity_bytes)
            .serving(self.serve);
        let listen = if self.listen.is_empty() {
            default_listen()
        } else {
            self.listen
        };
        let mut config = Config::new(self.key, self.db)
            .with_listen(listen)
            .with_external(self.external)
            .with_network(network)
            .with_caps(caps)
            .with_sweep_interval(self.sweep_interval);
        if let Some(addr) = self.metrics {
            config = config.with_metrics(addr);
        }
        Ok(config)
    }
}

/// Parses `90s`, `10m`, `12h`, `7d` or `500ms` (a bare number is seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a number and a unit (ms, s, m, h, d)"))?;
    let unit_ms = match unit {
        "ms" => 1,
        "" | "s" => SECOND_MS,
        "m" => MINUTE_MS,
        "h" => HOUR_MS,
        "d" => DAY_MS,
        other => return Err(format!("{s:?}: unknown unit {other:?} (ms, s, m, h, d)")),
    };
    n.checked_mul(unit_ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{s:?} is too long"))
}

// Keeps the help text's default in step with the constant.
const _: () = assert!(DEFAULT_LISTEN.len() == 2);

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;
