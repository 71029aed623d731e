//! The MCP server of an interlink-p2p session, and the local state files the agent
//! side reads.
//!
//! An agent host (Claude Code, Codex) starts `interlink-p2p mcp` once per agent
//! session; that command calls [`serve::serve_stdio`]: an rmcp server on stdio whose
//! tools ([`tools`]) drive the session's libp2p node (`interlink-net`) through its
//! handle. The node starts in the background so `initialize` is answered at once.
//!
//! Local state, under the home directory ([`paths`]):
//! - `peers.json` — who may message this user ([`policy`], edited through [`peers`]);
//!   shared by every session of the user and the operator's `peer` command;
//! - `sessions/<id>/inbox.jsonl` — delivered messages, written by the node;
//! - `sessions/<id>/read.json` — what the agent has consumed ([`read_state`]);
//! - `pairing.json` — pair requests waiting for the operator and the ones sent
//!   ([`pairing`]);
//! - `sessions/<id>/wait.lock` — held by the Stop hook's waiter ([`wait`]);
//! - `sessions/<id>/sent.json` — what this session sent and where it stands
//!   ([`sent`]);
//! - `sessions/<id>/follow.json` — how far [`follow`] handled the inbox's knocks,
//!   acceptances and read receipts.
//!
//! - `sessions/<id>/codex.json`, `codex_failed.json` — Codex delivery ([`codex`]).
//!
//! Delivery into the agent: the inbox plus the footer on every tool result and the
//! Stop hook (`interlink-p2p wait`, [`wait`]); or, in channel mode ([`channel`]), a
//! `notifications/claude/channel` notification per message; or, for Codex, a notice
//! queued into the bound thread ([`codex`]). When the session starts (at once, at
//! `initialize`, or when a Codex thread is bound) is decided by [`start`].
//!
//! [`session`] starts a session node (shared with `interlink-p2p run` and `send`);
//! [`route`] applies the routing rules to the roster.
#![deny(missing_docs)]

pub mod channel;
pub mod codex;
mod files;
pub mod follow;
pub mod pairing;
pub mod paths;
pub mod peers;
pub mod policy;
pub mod read_state;
pub mod receipts;
pub mod render;
pub mod route;
pub mod routes;
mod send;
pub mod sent;
pub mod serve;
pub mod server;
pub mod session;
pub mod start;
pub mod stdio;
pub mod tools;
pub mod tools_codex;
pub mod tools_pair;
pub mod tools_tasks;
pub mod wait;

pub use route::route;
pub use serve::{Options, ServeError, serve_stdio};
pub use server::{Context, INSTRUCTIONS, Server};
