//! The on-disk state of an interlink-p2p home and its sessions, in one place: where
//! each file lives ([`paths`]), how a file is replaced without ever being half written
//! ([`atomic`], [`files`]); the identity key file, owner-only on every platform
//! ([`keyfile`]); the user's admitted peers ([`policy`]), named groups
//! ([`groups`]), pair requests ([`pairing`]) and invites ([`invites`]); a session's
//! durable inbox and outbox ([`inbox`], [`outbox`]), what its agent has read
//! ([`read_state`]) and what it sent ([`sent_log`]); the sealing keys and mailbox passes
//! kept per peer ([`pins`], [`passes`]); the knocks a session holds for its operator
//! ([`knocks`]) and the ones it sent ([`pair_requests`]); where paired peers' and the
//! user's own sessions were reached ([`address_book`]); the lock that gives a session
//! id to one process ([`session_lock`]); the environment variables more than one crate
//! reads ([`env`]).
//!
//! The node (`interlink-net`), the MCP server (`interlink-mcp`) and the command line
//! read and write these files through this crate only. Nothing here runs a network or
//! reads the clock: times are passed in.

pub mod address_book;
pub mod atomic;
pub mod claims;
pub mod env;
pub mod files;
pub mod groups;
pub mod inbox;
pub mod invites;
pub mod keyfile;
pub mod knocks;
pub mod outbox;
mod owner_only;
pub mod pair_requests;
pub mod pairing;
pub mod passes;
pub mod paths;
pub mod pins;
pub mod policy;
pub mod read_state;
pub mod sent_log;
pub mod session_lock;
mod small_file;

pub use session_lock::{SessionLock, SessionLockError};
