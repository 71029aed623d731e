//! `interlink-p2p`: parses arguments, installs logging on stderr, calls the library.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

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
    /// Create this user's identity if missing; print its key and fingerprint.
    Id {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Walk through a signed, sealed exchange between two sessions, in memory.
    Demo,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    let home = || {
        interlink_p2p::paths::resolve_home(cli.home.clone(), |k| std::env::var(k).ok())
            .context("no home directory: set INTERLINK_HOME or HOME, or pass --home")
    };
    match cli.command {
        Command::Id { json } => println!("{}", interlink_p2p::cmd_id(&home()?, json)?),
        Command::Demo => interlink_p2p::demo::run(&mut std::io::stdout())?,
    }
    Ok(())
}
