//! The libp2p node of an interlink-p2p session.
//!
//! One task owns the libp2p `Swarm` ([`node`]); everything else talks to it through a
//! cheap cloneable [`Handle`] over bounded channels, each request carrying a oneshot
//! for its reply. The node:
//! - publishes the session's signed announcement on the overlay's gossipsub topic at
//!   start, on every change and every heartbeat, and a goodbye on shutdown;
//! - validates every presence message with the core before gossipsub forwards it
//!   (rejections lower the sender's peer score);
//! - fetches a peer's roster as soon as it connects, so a new session sees the overlay
//!   at once instead of after a heartbeat;
//! - discovers peers by mDNS, bootstrap addresses (redialled with backoff) and Kademlia.
#![warn(missing_docs)]

pub mod behaviour;
pub mod config;
mod diagnostics;
mod handle;
pub mod inbox;
mod node;
pub mod probe;
mod swarm;

pub use config::{Config, Role, SessionSpec};
pub use diagnostics::{ConnectedPeer, Diagnostics};
pub use handle::{Event, Handle};
pub use node::Node;
pub use swarm::build_swarm;

/// Capacity of the command channel from handles to the node task.
pub const COMMAND_CHANNEL_CAPACITY: usize = 64;
/// Capacity of the event broadcast; a subscriber that falls further behind sees
/// `Lagged` and should re-read the roster.
pub const EVENT_CHANNEL_CAPACITY: usize = 256;

/// Errors of the node.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// Building the swarm or a behaviour failed.
    #[error("node setup failed: {0}")]
    Setup(String),
    /// A listen address could not be used.
    #[error("cannot listen on {addr}: {reason}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// The node task has stopped.
    #[error("the node has shut down")]
    Stopped,
    /// A dial failed.
    #[error("dial failed: {0}")]
    Dial(String),
}

/// Milliseconds since the Unix epoch from the system clock (0 if it is before 1970).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
