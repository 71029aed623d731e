//! The `interlink-p2p` command: operator and debugging commands around a session.
//!
//! `main.rs` only parses arguments and calls `<command>::command(args, ctx)` here
//! (one module per command, holding its clap arguments), so every command can be
//! driven from tests. Commands print their results on stdout and progress or logs
//! on stderr.
//!
//! - `id` ([`id`]), `demo` ([`demo`]): the identity; an in-memory walk-through.
//! - `run` ([`run`]): a headless session node that takes messages.
//! - `send` ([`send`]): messages from a shell, as a short-lived session; it resolves
//!   and routes through `interlink_mcp::cli::route`, as `send_message` does.
//! - `inbox` ([`inbox`]): a session's delivered messages.
//! - `peer` ([`peer`]): the peers policy, `peers.json` ([`policy`]); `pair`
//!   ([`pair`]): the operator's decisions on pair requests; `group` ([`group`]): the
//!   named groups of peers, `groups.json`; `invite` ([`invite`]) / `join` ([`join`]): pairing by
//!   a one-line code, over a short-lived session ([`pairing_session`]).
//! - `mcp` ([`mcp`]): the MCP server of an agent session; `wait` ([`wait`]): the
//!   Claude Code Stop hook.
//! - `claims` ([`claims`]): the claims on files of this repository, and Claude Code's
//!   edit hook; `guard` ([`guard`]): the git pre-commit hook that consults them.
//! - `peers` ([`peers`]): an observer's view of the overlay.
//! - `probe` ([`probe`]): a sessionless check of one address.
//! - `install` / `uninstall` ([`install`]): the agent hosts' configuration.
//! - [`config`] builds the node configuration from flags, the environment and the
//!   settings file ([`settings`], `config.toml` in the home).
//!
//! The local state files (`peers.json`, inboxes, the address book, …) are in
//! `interlink-store`, whose [`paths`] and [`policy`] are re-exported here; session
//! start-up and the sender are in `interlink-mcp`, shared with the MCP server.
#![warn(missing_docs)]

pub mod claims;
pub mod config;
pub mod ctx;
pub mod demo;
pub mod device;
pub mod group;
pub mod guard;
pub mod history;
pub mod id;
pub mod inbox;
pub mod install;
pub mod invite;
pub mod join;
pub mod mcp;
pub mod pair;
pub mod pairing_session;
pub mod peer;
pub mod peers;
pub mod probe;
pub mod run;
pub mod search;
pub mod send;
pub mod session_ids;
pub mod settings;
pub mod stop_signal;
pub mod ui;
pub mod wait;

pub use ctx::Ctx;
pub use interlink_mcp::cli::session::os_rng;
pub use interlink_store::paths;
pub use interlink_store::policy;

/// A bad argument found after parsing (a negative number of seconds, an invalid
/// name): the command exits with 64, like a parse error, rather than 1.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

use anyhow::Context as _;
use interlink_core::Identity;
use interlink_store::paths::Home;

/// Loads this user's identity from `home`, creating it on first use.
/// Returns whether it was created.
pub fn load_identity(home: &Home) -> anyhow::Result<(Identity, bool)> {
    let path = home.identity();
    interlink_mcp::cli::session::load_identity(home)
        .with_context(|| format!("loading the identity from {}", path.display()))
}
