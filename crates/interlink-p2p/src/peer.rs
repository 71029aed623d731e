//! `interlink-p2p peer list|add|remove`: the operator's view and edits of `peers.json`.
//!
//! Pairing pins a full identity key under a petname; only pinned keys (and the user's
//! own sessions) can put a message into a session's inbox. The edits are
//! [`interlink_mcp::peers`], the same ones the MCP tools make; running sessions pick
//! them up within a second.

use std::io::Write;

use interlink_mcp::cli::peers;
use interlink_store::paths::Home;

/// What `peer` does (also its command-line subcommands: the doc comments are the
/// `--help` text).
#[derive(Clone, Debug, clap::Subcommand)]
pub enum Action {
    /// List the peers.
    #[command(
        after_help = "Examples:\n  interlink-p2p peer list\n  interlink-p2p peer list --json"
    )]
    List {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Allow the identity KEY (64 hex digits, from `interlink-p2p id` on its machine)
    /// under the petname NAME.
    #[command(
        after_help = "Examples:\n  interlink-p2p peer add bob 9f2d3fc9741d5ed384012e0673863b1b8e77f4e7b3ae53d22b965646f031640c\n\nEasier: pair by invite (interlink-p2p invite / join) or by knock (interlink-p2p pair request)."
    )]
    Add {
        /// Petname: 1-32 characters of A-Z a-z 0-9 . _ -
        name: String,
        /// Identity key, 64 hex digits.
        key: String,
    },
    /// Remove the peer named NAME.
    #[command(after_help = "Examples:\n  interlink-p2p peer remove bob")]
    Remove {
        /// Petname.
        name: String,
    },
    /// Give the peer named OLD the petname NEW (its key, and its groups, stay).
    #[command(after_help = "Example:\n  interlink-p2p peer rename peer-1a2b bob")]
    Rename {
        /// Its petname now.
        old: String,
        /// Its new petname: 1-32 characters of A-Z a-z 0-9 . _ -
        new: String,
    },
}

/// Runs `peer`: results to `out`, hints to `progress`.
pub fn run(
    home: &Home,
    action: Action,
    out: &mut impl Write,
    progress: &mut impl Write,
) -> anyhow::Result<()> {
    match action {
        Action::List { json } => list(home, json, out, progress),
        Action::Add { name, key } => {
            let (key, added) = peers::add(home, &name, &key)?;
            let verb = match added {
                peers::Added::Added => "added",
                peers::Added::AlreadyPeer => "already a peer:",
            };
            writeln!(out, "{verb} {name} {}", key.fingerprint())?;
            Ok(())
        }
        Action::Rename { old, new } => {
            let key = peers::rename(home, &old, &new)?;
            writeln!(out, "renamed {old} to {new} {}", key.fingerprint())?;
            Ok(())
        }
        Action::Remove { name } => {
            let removed = peers::remove(home, &name)?;
            writeln!(out, "removed {name} {}", removed.fingerprint())?;
            Ok(())
        }
    }
}

fn list(
    home: &Home,
    json: bool,
    out: &mut impl Write,
    progress: &mut impl Write,
) -> anyhow::Result<()> {
    let peers = peers::list(home)?;
    if json {
        let list: Vec<_> = peers
            .iter()
            .map(|p| {
                serde_json::json!({
                    "name": p.name,
                    "identity_key": p.key.to_hex(),
                    "fingerprint": p.key.fingerprint().to_string(),
                })
            })
            .collect();
        writeln!(
            out,
            "{}",
            serde_json::json!({ "version": 1, "peers": list })
        )?;
        return Ok(());
    }
    if peers.is_empty() {
        writeln!(
            progress,
            "no peers yet: pair with someone by `interlink-p2p invite` (they run \
             `interlink-p2p join CODE` with the code it prints), or add one with \
             `interlink-p2p peer add NAME KEY` (the other side prints its KEY with \
             `interlink-p2p id`)"
        )?;
        return Ok(());
    }
    let width = peers.iter().map(|p| p.name.len()).max().unwrap_or(4).max(4);
    writeln!(out, "{:<width$}  {:<14}  KEY", "NAME", "FINGERPRINT")?;
    for p in &peers {
        writeln!(
            out,
            "{:<width$}  {}  {}",
            p.name,
            p.key.fingerprint(),
            p.key.to_hex()
        )?;
    }
    Ok(())
}

/// Show or change the peers (petname → identity key) allowed to message you.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  interlink-p2p peer list\n  interlink-p2p peer add bob 9f2d3fc9741d…  (his `interlink-p2p id`)\n  interlink-p2p peer rename peer-1a2b bob\n  interlink-p2p peer remove bob"
)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

/// `interlink-p2p peer`.
pub fn command(args: Args, ctx: &crate::Ctx) -> anyhow::Result<std::process::ExitCode> {
    run(
        &ctx.home()?,
        args.action,
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    )?;
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
#[path = "peer_tests.rs"]
mod tests;
