//! The MCP tools, one file per tool family. Each file holds its tools' arguments (a
//! `Parameters` struct whose doc comments become the schema's descriptions) and one
//! `#[tool_router]` block on [`crate::server::Server`]; [`crate::server::Server::router`]
//! adds the blocks up.
//!
//! - [`messaging`]: `send_message`, `receive_messages`, `acknowledge_messages`,
//!   `message_status`, `list_pending` (sending itself: `send`, and to a group or every
//!   recipient of one: `group_send`);
//! - [`groups`]: `group` (list, create, edit, delete);
//! - [`sessions`]: `whoami`, `discover`, `set_summary`;
//! - [`pairing`]: `list_peers`, `add_peer`, `remove_peer`, `request_pair`,
//!   `list_pair_requests`, `accept_pair`, `reject_pair`;
//! - [`tasks`]: `conversation_history`, `cancel_task`;
//! - [`codex`]: `bind_codex_session`, `failed_deliveries`;
//! - [`conversation`]: `bind_session` (Claude Code's SessionStart hook);
//! - [`claims`]: `claim` (claim, release, check files of the repository).

pub(crate) mod claims;
pub(crate) mod codex;
pub(crate) mod conversation;
mod group_send;
pub(crate) mod groups;
pub(crate) mod messaging;
pub(crate) mod pairing;
mod send;
pub(crate) mod sessions;
pub(crate) mod tasks;
