//! `interlink-p2p probe MULTIADDR`: is there an interlink session at this address?
//!
//! A sessionless check (see `interlink_net::probe`): nothing joins a roster. The
//! answer is one line on stdout and an exit code a script can test.

use std::time::Duration;

use interlink_core::names::Network;
use interlink_net::probe::{self, Error};
use libp2p::Multiaddr;

/// Found an interlink session.
pub const EXIT_OK: i32 = 0;
/// Nothing answered, the connection failed, or no answer came in time.
pub const EXIT_UNREACHABLE: i32 = 2;
/// Something answered that is not an interlink node.
pub const EXIT_NOT_INTERLINK: i32 = 3;
/// An interlink node of another network (overlay).
pub const EXIT_OTHER_NETWORK: i32 = 4;
/// An interlink node without a session of its own (an observer or a relay).
pub const EXIT_NO_SESSION: i32 = 5;
/// The probe itself could not run.
pub const EXIT_FAILED: i32 = 1;

/// The exit codes, for `--help`.
pub const HELP: &str = "\
Examples:
  interlink-p2p probe /ip4/192.168.1.5/tcp/4001
  interlink-p2p probe /ip4/100.101.102.103/udp/4001/quic-v1/p2p/12D3KooW… --timeout 3

Exit codes:
  0   an interlink-p2p session answered
  1   the probe could not run (setup error)
  2   unreachable: nothing answered, the connection failed, or the timeout passed
  3   something answered that is not an interlink-p2p node
  4   an interlink-p2p node of another network
  5   an interlink-p2p node without a session (an observer or a relay)
  64  usage error (bad arguments)";

/// Probes `addr`; returns the line to print and the exit code.
pub async fn run(addr: Multiaddr, network: &Network, timeout: Duration) -> (String, i32) {
    match probe::probe(addr, network, timeout).await {
        Ok(found) => (
            format!(
                "interlink-p2p node {} session {} version {}",
                found.fingerprint,
                found.session,
                short_version(&found.version)
            ),
            EXIT_OK,
        ),
        Err(e) => describe(&e),
    }
}

/// The line and exit code for a probe that found no session.
pub fn describe(error: &Error) -> (String, i32) {
    match error {
        Error::Unreachable(why) => (format!("unreachable: {why}"), EXIT_UNREACHABLE),
        Error::Timeout(t) => (
            format!("unreachable: no answer within {:.1} s", t.as_secs_f64()),
            EXIT_UNREACHABLE,
        ),
        Error::NotInterlink(what) => (
            format!("not an interlink-p2p node: {what}"),
            EXIT_NOT_INTERLINK,
        ),
        Error::OtherNetwork { theirs, ours } => (
            format!("interlink-p2p node of another network: it speaks {theirs}, this probe {ours}"),
            EXIT_OTHER_NETWORK,
        ),
        Error::NoSession { peer_id, agent } => (
            format!(
                "interlink-p2p node {peer_id} version {} without a session (an observer or a relay)",
                short_version(agent)
            ),
            EXIT_NO_SESSION,
        ),
        other => (format!("probe failed: {other}"), EXIT_FAILED),
    }
}

/// `interlink-p2p/0.1.0` → `0.1.0`; any other agent string as it is.
fn short_version(agent: &str) -> &str {
    agent.strip_prefix("interlink-p2p/").unwrap_or(agent)
}

/// Check whether an interlink-p2p session answers at an address (joins no roster).
#[derive(Debug, clap::Args)]
#[command(after_help = HELP)]
pub struct Args {
    /// The address, e.g. /ip4/192.168.1.5/tcp/4001/p2p/12D3KooW… (the /p2p/ part is
    /// optional).
    multiaddr: Multiaddr,
    /// Give up after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    timeout: f64,
    /// Overlay name [default: default]
    #[arg(long, value_name = "NAME", env = crate::config::ENV_NETWORK,
          value_parser = crate::config::Sourced::text())]
    network: Option<crate::config::Typed<String>>,
}

/// `interlink-p2p probe`.
pub fn command(args: Args, ctx: &crate::Ctx) -> anyhow::Result<std::process::ExitCode> {
    let flags = crate::config::Flags {
        network: args.network.and_then(|n| n.typed()),
        ..Default::default()
    };
    let network = crate::config::network(&flags, ctx.env())?;
    let timeout = crate::ctx::seconds("--timeout", args.timeout)?;
    let (line, code) = crate::ctx::runtime()?.block_on(run(args.multiaddr, &network, timeout));
    println!("{line}");
    Ok(std::process::ExitCode::from(
        u8::try_from(code).unwrap_or(1),
    ))
}

#[cfg(test)]
#[path = "probe_tests.rs"]
mod tests;
