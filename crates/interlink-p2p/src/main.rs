//! `interlink-p2p`: parses the arguments, installs logging on stderr, and runs the
//! command: each is one module of the library, with its arguments and its
//! `command(args, ctx)`.

use std::{io::IsTerminal as _, path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use interlink_p2p::{
    Ctx, claims, demo, group, guard, id, inbox, install, invite, join, mcp, pair, peer, peers,
    probe, run, search, send, ui, wait,
};

/// Coding-agent sessions that find each other and talk, peer to peer.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Home directory for the identity and state [default: $INTERLINK_HOME, else
    /// $XDG_CONFIG_HOME/interlink-p2p, else ~/.config/interlink-p2p]
    #[arg(long, global = true)]
    home: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Id(id::Args),
    Demo(demo::Args),
    Run(run::Args),
    Mcp(mcp::Args),
    Wait(wait::Args),
    Peers(peers::Args),
    Send(send::Args),
    Inbox(inbox::Args),
    Search(search::Args),
    Peer(peer::Args),
    Group(group::Args),
    Claims(claims::Args),
    Guard(guard::Args),
    Pair(pair::Args),
    Invite(invite::Args),
    Join(join::Args),
    Install(install::Args),
    Uninstall(install::UninstallArgs),
    Probe(probe::Args),
    Ui(ui::Args),
}

/// Exit code of a usage error (sysexits' EX_USAGE), distinct from probe's codes.
const EXIT_USAGE: u8 = 64;

/// The log filter when `RUST_LOG` is unset: warnings, except kad's "Failed to trigger
/// bootstrap: No known peers", which libp2p-kad 0.49 logs whenever a listen address
/// appears before any peer is in the routing table - on every normal start, since the
/// node joins the DHT only once presence settles (node::discovery). kad's only other
/// warning is about record replication, which this node does not use.
const DEFAULT_LOG_FILTER: &str = "warn,libp2p_kad::behaviour=error";

fn main() -> ExitCode {
    interlink_net::memory::return_large_buffers();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER)),
        )
        .init();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<interlink_p2p::UsageError>().is_some() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Runs the command.
fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    let ctx = &Ctx::new(cli.home)?;
    match cli.command {
        Command::Id(a) => id::command(a, ctx),
        Command::Demo(a) => demo::command(a, ctx),
        Command::Run(a) => run::command(a, ctx),
        Command::Mcp(a) => mcp::command(a, ctx),
        Command::Wait(a) => wait::command(a, ctx),
        Command::Peers(a) => peers::command(a, ctx),
        Command::Send(a) => send::command(a, ctx),
        Command::Inbox(a) => inbox::command(a, ctx),
        Command::Search(a) => search::command(a, ctx),
        Command::Peer(a) => peer::command(a, ctx),
        Command::Group(a) => group::command(a, ctx),
        Command::Claims(a) => claims::command(a, ctx),
        Command::Guard(a) => guard::command(a, ctx),
        Command::Pair(a) => pair::command(a, ctx),
        Command::Invite(a) => invite::command(a, ctx),
        Command::Join(a) => join::command(a, ctx),
        Command::Install(a) => install::command(a, ctx),
        Command::Uninstall(a) => install::uninstall(a, ctx),
        Command::Probe(a) => probe::command(a, ctx),
        Command::Ui(a) => ui::command(a, ctx),
    }
}

#[cfg(test)]
mod tests;
