//! The MCP server of an interlink-p2p session, and the local state files the agent
//! side reads.
//!
//! Local state, under the home directory ([`paths`]):
//! - `peers.json` — who may message this user ([`policy`], edited through [`peers`]);
//!   shared by every session of the user and the operator's `peer` command.
//!
//! [`session`] starts a session node (shared with `interlink-p2p run` and `send`);
//! [`route`] applies the routing rules to the roster.
#![deny(missing_docs)]

mod files;
pub mod paths;
pub mod peers;
pub mod policy;
pub mod route;
pub mod session;

pub use route::route;
