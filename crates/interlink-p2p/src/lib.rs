//! The `interlink-p2p` command: operator and debugging commands around a session.
//!
//! `main.rs` only parses arguments and calls into this library, so every command can
//! be driven from tests. Commands print their results on stdout and progress or logs
//! on stderr.
//!
//! - `id` (here), `demo` ([`demo`]): the identity; an in-memory walk-through.
//! - `run` ([`run`]): a headless session node that takes messages.
//! - `send` ([`send`]): messages from a shell, as a short-lived session; it resolves
//!   and routes through `interlink_mcp::sender`, as `send_message` does.
//! - `inbox` ([`inbox`]): a session's delivered messages.
//! - `peer` ([`peer`]): the peers policy, `peers.json` ([`policy`]); `pair`
//!   ([`pair`]): the operator's decisions on pair requests; `group` ([`group`]): the
//!   named groups of peers, `groups.json`; `invite` / `join` ([`invite`]): pairing by
//!   a one-line code, over a short-lived session ([`pairing_session`]).
//! - `mcp` ([`mcp`]): the MCP server of an agent session; `wait` ([`wait`]): the
//!   Claude Code Stop hook.
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

pub mod config;
pub mod demo;
pub mod device;
pub mod group;
pub mod inbox;
pub mod install;
pub mod invite;
pub mod mcp;
pub mod pair;
pub mod pairing_session;
pub mod peer;
pub mod peers;
pub mod probe;
pub mod run;
pub mod send;
pub mod session_ids;
pub mod settings;
pub mod stop_signal;
pub mod wait;

pub use interlink_mcp::session_node::os_rng;
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
    interlink_mcp::session_node::load_identity(home)
        .with_context(|| format!("loading the identity from {}", path.display()))
}

/// `interlink-p2p id`: creates the identity if missing and describes it.
pub fn cmd_id(home: &Home, json: bool, set_name: Option<&str>) -> anyhow::Result<String> {
    let (identity, created) = load_identity(home)?;
    let key = identity.public();
    let path = home.identity();
    // The name peers are offered when this user knocks or accepts, kept in the
    // settings file so every session reads it.
    if let Some(name) = set_name {
        anyhow::ensure!(
            interlink_core::wire::is_valid_name(name),
            "invalid name {name:?}: use 1-32 characters from A-Z a-z 0-9 . _ -"
        );
        settings::write(
            home.path(),
            &[("name", Some(toml_edit::value(name)))],
            false,
        )?;
    }
    let env = settings::Settings::load(home.path())?;
    let name = interlink_store::pairing::own_name(env.layered(|k| std::env::var(k).ok()));
    Ok(if json {
        serde_json::json!({
            "identity_key": key.to_hex(),
            "fingerprint": key.fingerprint().to_string(),
            "key_file": path,
            "created": created,
            "name": name,
        })
        .to_string()
    } else {
        format!(
            "identity    {}\nfingerprint {}\nname        {name}\nkey file    {}{}",
            key.to_hex(),
            key.fingerprint(),
            path.display(),
            if created { " (created)" } else { "" }
        )
    })
}
