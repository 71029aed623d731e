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
    spawn_relay(dir, None, "127.0.0.1", port, None, metrics, offset_ms)
}

/// Like [`start_relay`], listening on QUIC port `quic` as well, as a relay does by
/// default; the address returned is still the TCP one (RELAY.md's recipe).
pub fn start_relay_with_quic(
    dir: &Path,
    port: u16,
    quic: u16,
    metrics: u16,
) -> anyhow::Result<Relay> {
    spawn_relay(dir, None, "127.0.0.1", port, Some(quic), metrics, 0)
}

/// A relay on a lab's public host: in network namespace `netns`, on `ip` at TCP and
/// QUIC port `port` (RELAY.md's defaults), its metrics on the namespace's loopback.
pub fn start_relay_in_netns(
    netns: &str,
    dir: &Path,
    ip: &str,
    port: u16,
    metrics: u16,
) -> anyhow::Result<Relay> {
    spawn_relay(dir, Some(netns), ip, port, Some(port), metrics, 0)
}

fn spawn_relay(
    dir: &Path,
    netns: Option<&str>,
    ip: &str,
    port: u16,
    quic: Option<u16>,
    metrics: u16,
    offset_ms: i64,
) -> anyhow::Result<Relay> {
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns])
                .arg(binary("interlink-relay")?);
            c
        }
        None => Command::new(binary("interlink-relay")?),
    };
    cmd.env("INTERLINK_TEST_CLOCK_OFFSET_MS", offset_ms.to_string());
    cmd.arg("--key")
        .arg(dir.join("relay.key"))
        .arg("--db")
        .arg(dir.join("mailboxes.redb"))
        .args(["--listen", &format!("/ip4/{ip}/tcp/{port}")])
        .args(
            quic.map(|q| ["--listen".to_owned(), format!("/ip4/{ip}/udp/{q}/quic-v1")])
                .into_iter()
                .flatten(),
        )
        .args(["--metrics", &format!("127.0.0.1:{metrics}")])
        .env("RUST_LOG", "info");
    let log = dir.join(format!("relay.{}.log", std::process::id()));
    let process = Guard::spawn(cmd, log)?;
    // One line per listen address, in no fixed order: the TCP one is the relay's
    // address in RELAY.md's recipe.
    let deadline = Instant::now() + DEADLINE;
    let mut addr = String::new();
    for _ in 0..if quic.is_some() { 2 } else { 1 } {
        addr = process
            .next_line(deadline)?
            .with_context(|| format!("relay printed no address: {}", process.stderr()))?;
        if addr.contains("/tcp/") {
            break;
        }
    }
    anyhow::ensure!(
        addr.starts_with(&format!("/ip4/{ip}/tcp/")) && addr.contains("/p2p/12D3KooW"),
        "unexpected relay address {addr:?}"
    );
    Ok(Relay {
        process,
        addr,
        metrics,
    })
}
