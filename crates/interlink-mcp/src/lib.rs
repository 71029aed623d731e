//! The MCP server of an interlink-p2p session: server, tools and workers, and the
//! session node and sender the command line shares. The files are `interlink_store`'s.
//!
//! An agent host (Claude Code, Codex) starts `interlink-p2p mcp` once per agent
//! session; that command calls [`serve::serve_stdio`]: an rmcp server ([`server`]) on
//! stdio ([`stdio`]) whose tools ([`tools`], one file per tool family) drive the
//! session's libp2p node (`interlink-net`) through its handle. The node starts in the
//! background so `initialize` is answered at once; when the session starts (at once, at
//! `initialize`, or when a Codex thread is bound) is decided by [`startup`], which also
//! starts the background [`workers`].
//!
//! The command line uses this crate only through [`cli`]; every other module is
//! private.
//!
//! The layers, each importing only those below it:
//! - [`serve`] — the entry point: builds the context, runs the server, shuts down;
//! - [`server`] — the rmcp handler and the instructions; [`tools`] — the tools;
//! - [`startup`] — starting the node and the [`workers`];
//! - [`context`] — the state the tools share ([`context::Context`]) and the one lock over its
//!   mutable part ([`context::SharedState`]), which workers get a handle to;
//! - [`project`] — the project of the working directory, asked of `git` (what claims
//!   on files are about);
//! - the local state files and helpers below.
//!
//! Local state, under the home directory (`interlink_store::paths::Home`; a session's
//! directory is a `SessionDir`, and every file name is spelled in `interlink_store::paths`):
//! - `peers.json` — who may message this user (`interlink_store::policy`, edited through [`peers`]);
//!   shared by every session of the user and the operator's `peer` command;
//! - `sessions/<id>/inbox.jsonl` — delivered messages, written by the node;
//! - `sessions/<id>/read.json` — what the agent has consumed (`interlink_store::read_state`);
//! - `pairing.json` — pair requests waiting for the operator and the ones sent
//!   (`interlink_store::pairing`);
//! - `groups.json` — the user's named groups of peers, what `group:<name>` reaches
//!   (`interlink_store::groups`); shared like `peers.json`;
//! - `sessions/<id>/wait.lock` — held by the Stop hook's waiter ([`stop_hook`]);
//! - `sessions/<id>/sent.json` — what this session sent and where it stands
//!   (`interlink_store::sent_log`);
//! - `sessions/<id>/follow.json` — how far [`workers::follow`] handled the inbox's
//!   knocks, acceptances and read receipts;
//! - `sessions/<id>/codex.json`, `codex_failed.json` — Codex delivery ([`codex`],
//!   [`workers::codex`]);
//! - `sessions/<id>/host_inbox.json` — what went into Claude Code's own inbox socket
//!   ([`host_inbox`], [`workers::host_inbox`]), read by the Stop hook.
//!
//! Delivery into the agent: the inbox plus the footer on every tool result and the
//! Stop hook (`interlink-p2p wait`, [`stop_hook`] — not part of the MCP server: a
//! separate process the host runs when the agent stops); or, in channel mode
//! ([`workers::channel`]), a `notifications/claude/channel` notification per message;
//! or, under a Claude Code with an inbox socket, a frame written there per message
//! ([`host_inbox`], [`workers::host_inbox`]; the Stop hook then only catches what the
//! socket did not deliver); or, for Codex, a notice queued into the bound thread ([`workers::codex`]).
//!
//! [`session_node`] starts a session node (shared with `interlink-p2p run` and
//! `send`); [`sender`] resolves a message's target and routes it once the roster has
//! seen it (shared by `send_message` and `interlink-p2p send`). The routing rules and
//! the per-peer hints are the core's (`interlink_core::routing`).
#![deny(missing_docs)]

// The home's files, under their own names for the modules here.
use interlink_store::{files, groups, pairing, paths, policy, read_state, sent_log};

mod claims;
pub mod cli;
mod codex;
mod consent;
mod context;
mod dates;
mod group_route;
mod host_inbox;
mod jsonrpc_lines;
mod network_view;
mod peers;
mod project;
mod render;
mod retention;
mod sender;
mod serve;
mod server;
mod session_node;
mod startup;
#[cfg(unix)]
mod stdio;
#[cfg(not(unix))]
#[path = "stdio_other.rs"]
mod stdio;
mod stop_hook;
mod surface;
mod tools;
mod workers;
