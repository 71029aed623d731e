//! `interlink-p2p group create|list|add|remove|delete`: the operator's view and edits
//! of `groups.json`, the named groups of peers that `send_message(to: "group:<name>")`
//! reaches. The edits are [`interlink_store::groups`], the same ones the MCP tools make;
//! every session reads the file at each use.

use std::io::Write;

use interlink_store::{groups, paths::Home, policy};

/// What `group` does (also its command-line subcommands: the doc comments are the
/// `--help` text).
#[derive(Clone, Debug, clap::Subcommand)]
pub enum Action {
    /// List the groups and their members.
    #[command(
        after_help = "Examples:\n  interlink-p2p group list\n  interlink-p2p group list --json"
    )]
    List {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Create the group NAME of MEMBERs: peers as a petname, fingerprint or key prefix,
    /// or PEER/SESSION to narrow one to a session (repeat for several).
    #[command(
        after_help = "Examples:\n  interlink-p2p group create team bob carol\n  interlink-p2p group create reviewers bob/bob-2 carol"
    )]
    Create {
        /// Group name: 1-32 characters of A-Z a-z 0-9 . _ -
        name: String,
        /// PEER or PEER/SESSION.
        #[arg(required = true)]
        members: Vec<String>,
    },
    /// Add MEMBERs (PEER or PEER/SESSION) to the group NAME.
    #[command(
        after_help = "Examples:\n  interlink-p2p group add team dave\n  interlink-p2p group add team bob/bob-3"
    )]
    Add {
        /// Group name.
        name: String,
        /// PEER or PEER/SESSION.
        #[arg(required = true)]
        members: Vec<String>,
    },
    /// Take MEMBERs out of the group NAME: PEER, or PEER/SESSION for one session of a
    /// narrowed member (it goes with its last session).
    #[command(after_help = "Examples:\n  interlink-p2p group remove team dave")]
    Remove {
        /// Group name.
        name: String,
        /// PEER or PEER/SESSION.
        #[arg(required = true)]
        members: Vec<String>,
    },
    /// Delete the group NAME (its members stay peers).
    #[command(after_help = "Examples:\n  interlink-p2p group delete team")]
    Delete {
        /// Group name.
        name: String,
    },
}

/// Runs `group`: results to `out`, hints to `progress`.
pub fn run(
    home: &Home,
    action: Action,
    out: &mut impl Write,
    progress: &mut impl Write,
) -> anyhow::Result<()> {
    let line = |g: &groups::Group| -> anyhow::Result<String> {
        Ok(groups::group_line(&policy::load(home)?, g))
    };
    match action {
        Action::List { json } => list(home, json, out, progress),
        Action::Create { name, members } => {
            let g = groups::create(home, &name, &members)?;
            writeln!(out, "created {}", line(&g)?)?;
            Ok(())
        }
        Action::Add { name, members } => {
            let g = groups::update(home, &name, &members, &[])?;
            writeln!(out, "updated {}", line(&g)?)?;
            Ok(())
        }
        Action::Remove { name, members } => {
            let g = groups::update(home, &name, &[], &members)?;
            writeln!(out, "updated {}", line(&g)?)?;
            Ok(())
        }
        Action::Delete { name } => {
            let g = groups::delete(home, &name)?;
            writeln!(out, "deleted {}", g.name)?;
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
    let all = groups::load(home)?;
    let policy = policy::load(home)?;
    if json {
        let list: Vec<_> = all.iter().map(|g| groups::group_json(&policy, g)).collect();
        writeln!(
            out,
            "{}",
            serde_json::json!({ "version": 1, "groups": list })
        )?;
        return Ok(());
    }
    if all.is_empty() {
        writeln!(
            progress,
            "no groups yet: create one with `interlink-p2p group create NAME PEER...`"
        )?;
        return Ok(());
    }
    for g in all.iter() {
        writeln!(out, "{}", groups::group_line(&policy, g))?;
    }
    Ok(())
}

/// Show or change the named groups of peers (`send_message` to "group:<name>").
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  interlink-p2p group create team bob carol/carol-2\n  interlink-p2p group add team dave\n  interlink-p2p group list"
)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

/// `interlink-p2p group`.
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
#[path = "group_tests.rs"]
mod tests;
