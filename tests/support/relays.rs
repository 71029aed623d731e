//! An `interlink-relay` process on loopback for the end-to-end tests.

use std::{
    net::TcpListener,
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use crate::{binary, process::Guard};

/// How long a relay may take to print its address.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// A free loopback TCP port (bound and released: the relay must get the same port
/// again after a restart, because sessions are configured with its address).
#[allow(clippy::unwrap_used)] // binding port 0 on loopback fails only on a broken host
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

/// A running relay (killed when dropped).
#[derive(Debug)]
pub struct Relay {
    pub process: Guard,
    /// Its address, ending in `/p2p/<relay id>`.
    pub addr: String,
    /// Its metrics port.
    pub metrics: u16,
}

/// Starts `interlink-relay` on `port` with its key and database in `dir`; returns it
/// with the address it printed.
pub fn start_relay(dir: &Path, port: u16, metrics: u16) -> anyhow::Result<Relay> {
    start_relay_at(dir, port, metrics, 0)
}

/// Like [`start_relay`], with the relay's clock moved by `offset_ms`.
pub fn start_relay_at(
    dir: &Path,
    port: u16,
    metrics: u16,
    offset_ms: i64,
) -> anyhow::Result<Relay> {
    let mut cmd = Command::new(binary("interlink-relay")?);
    cmd.env("INTERLINK_TEST_CLOCK_OFFSET_MS", offset_ms.to_string());
    cmd.arg("--key")
        .arg(dir.join("relay.key"))
        .arg("--db")
        .arg(dir.join("mailboxes.redb"))
        .args(["--listen", &format!("/ip4/127.0.0.1/tcp/{port}")])
        .args(["--metrics", &format!("127.0.0.1:{metrics}")])
        .env("RUST_LOG", "info");
    let log = dir.join(format!("relay.{}.log", std::process::id()));
    let process = Guard::spawn(cmd, log)?;
    let addr = process
        .next_line(Instant::now() + DEADLINE)?
        .with_context(|| format!("relay printed no address: {}", process.stderr()))?;
    anyhow::ensure!(
        addr.starts_with("/ip4/127.0.0.1/tcp/") && addr.contains("/p2p/12D3KooW"),
        "unexpected relay address {addr:?}"
    );
    Ok(Relay {
        process,
        addr,
        metrics,
    })
}
