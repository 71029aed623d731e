//! The libp2p node of an interlink-p2p session (and of observers and relays).
//!
//! One task owns the libp2p `Swarm` ([`node`]); everything else talks to it through a
//! cheap cloneable [`Handle`] over bounded channels, each request carrying a oneshot
//! for its reply. Delivery is decided by the IO-free engine of `interlink-delivery`;
//! the node is its shell (live requests, mailbox copies held by peers and relays and
//! handed only to their owner on a signed fetch, receipts), with the session's
//! [`interlink_store::inbox`] and [`interlink_store::outbox`] written on a store thread of their own. Kademlia only finds the peers
//! close to a mailbox's key; it stores no mailbox. The node:
//! - publishes the session's signed announcement on the overlay's gossipsub topic at
//!   start and on every change, a small signed beacon in between, and a goodbye on
//!   shutdown;
//! - validates every presence message with the core before gossipsub forwards it
//!   (rejections lower the sender's peer score);
//! - fetches a peer's roster as soon as it joins the presence topic, so a new session
//!   sees the overlay at once instead of after a heartbeat, and paces heartbeats,
//!   anti-entropy and joining the DHT by the core's IO-free presence pacer;
//! - discovers peers by mDNS, bootstrap addresses (redialled with backoff), Kademlia,
//!   and the online devices of a tailnet probed at the well-known port ([`tailnet`]).
#![warn(missing_docs)]

pub mod behaviour;
pub mod cbor;
mod clock;
pub mod config;
pub mod device_link;
mod diagnostics;
pub mod durable;
pub mod gated;
mod handle;
pub mod memory;
mod node;
mod ports;
pub mod probe;
mod swarm;
pub mod tailnet;

pub use clock::Clock;
pub use config::{
    Config, Delivery, RelaySpec, Role, SessionSpec, SwarmMetrics, Tailnet, Visibility,
};
pub use diagnostics::{ConnectedPeer, Diagnostics, PresenceCost};
pub use durable::{DurableMailboxes, HeldCopy, Refusal};
pub use handle::{Event, Handle, HeldMailbox, Outcome};
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
        /// The transport's error text.
        reason: String,
    },
    /// The node task has stopped.
    #[error("the node has shut down")]
    Stopped,
    /// A dial failed.
    #[error("dial failed: {0}")]
    Dial(String),
}

/// A message to send over the live path.
#[derive(Clone, Debug)]
pub struct OutgoingMessage {
    /// The recipient session (must be on the roster: its announcement gives the
    /// PeerId, addresses and sealing key).
    pub to: interlink_core::wire::SessionAddr,
    /// What it is.
    pub kind: interlink_core::wire::EnvelopeKind,
    /// The text (messages only; sealed to the recipient).
    pub text: Option<String>,
    /// Task it belongs to.
    pub task_id: Option<String>,
    /// Task status.
    pub status: Option<interlink_core::wire::TaskStatus>,
    /// The message it answers.
    pub in_reply_to: Option<interlink_core::MsgId>,
    /// Receipts only: the further messages the receipt is about (at most
    /// [`interlink_core::limits::MAX_RECEIPT_IDS`] with `in_reply_to`).
    pub also_about: Vec<interlink_core::MsgId>,
    /// Knocks and accepts: the name suggested for this identity.
    pub name: Option<String>,
    /// Messages only: the group it was sent to, sealed with the text (protocol
    /// version 7). One message per recipient session carries the same tag.
    pub group: Option<interlink_core::wire::GroupTag>,
    /// Knocks only: the secret of the invite the sender joins by, sealed to the
    /// recipient (protocol version 9).
    pub invite: Option<[u8; interlink_core::wire::INVITE_SECRET_BYTES]>,
}

impl OutgoingMessage {
    /// A plain text message to `to`.
    pub fn text(to: interlink_core::wire::SessionAddr, text: impl Into<String>) -> Self {
        Self {
            to,
            kind: interlink_core::wire::EnvelopeKind::Message,
            text: Some(text.into()),
            task_id: None,
            status: None,
            in_reply_to: None,
            also_about: Vec::new(),
            name: None,
            group: None,
            invite: None,
        }
    }
}

/// What became of a sent message.
#[derive(Clone, Debug)]
pub enum SendOutcome {
    /// The recipient's node stored it and receipted it.
    Delivered(Box<Sent>),
    /// The recipient did not answer; the message waits in this session's outbox and
    /// in the recipient's mailbox.
    Queued {
        #[allow(missing_docs)]
        msg_id: interlink_core::MsgId,
        /// Where it is held at the moment of the answer.
        held_by: HeldBy,
    },
}

/// Where a queued message is held when `queued` is answered. Only `outbox` is a fact
/// about storage: the copies sent to peers and relays are on their way, and
/// [`Handle::settle`] tells when one was taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeldBy {
    /// Committed to this session's durable outbox (kept until receipted or expired).
    pub outbox: bool,
    /// Relays the mailbox copy was handed to (each answers once it committed it).
    pub relays_asked: usize,
    /// Connected peers the mailbox copy was put to.
    pub peers_asked: usize,
    /// A peer or relay answered that its copy keeps this message (a session without
    /// an outbox says `queued` only then).
    pub confirmed: bool,
}

/// What the sent log keeps of it (`confirmed` is what `settle` reports later).
impl From<HeldBy> for interlink_store::sent_log::HeldBy {
    fn from(h: HeldBy) -> Self {
        Self {
            outbox: h.outbox,
            relays_asked: h.relays_asked,
            peers_asked: h.peers_asked,
        }
    }
}

/// Where the mailbox copies published so far stand ([`Handle::settle`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    /// Publications at least one peer took a copy of.
    pub stored_remotely: usize,
    /// Publications no peer took: held only by this node, lost if it exits.
    pub local_only: usize,
    /// Publications (or the fetches before them) still under way.
    pub pending: usize,
}

/// A message the recipient receipted: its signed receipt (verified by the engine)
/// names this message, this sender and the session below.
#[derive(Clone, Debug)]
pub struct Sent {
    #[allow(missing_docs)]
    pub msg_id: interlink_core::MsgId,
    /// The session that signed the receipt.
    pub to: interlink_core::wire::SessionAddr,
}

/// Sending over the live path failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// Observers don't send.
    #[error("this node is not a session")]
    NotASession,
    /// No session of the recipient identity was ever seen by this user's sessions, so
    /// there is no sealing key to seal to (it is pinned from any announcement of a peer).
    #[error(
        "no session of this identity has been seen here yet, so its sealing key is \
         unknown and {0} cannot be sealed to: wait until one of its sessions is on the \
         overlay"
    )]
    NotOnRoster(interlink_core::wire::SessionAddr),
    /// The message could not be built (a field breaks a wire rule).
    #[error("invalid message: {0}")]
    Invalid(String),
    /// No answer: not connected, timed out, or the connection failed.
    #[error("recipient unreachable: {0}")]
    Unreachable(String),
    /// The recipient refused it, with its typed reason.
    #[error("recipient refused the message: {0}")]
    Refused(interlink_core::wire::Refusal),
    /// The recipient answered with something that is not a valid receipt for it.
    #[error("invalid receipt: {0}")]
    BadReceipt(String),
    /// The outbox holds its most messages for this recipient, or in all: nothing was
    /// queued. Room comes back as the recipient collects its mail.
    #[error(
        "too many messages waiting in the outbox ({held} held, limit {limit}); nothing was \
         queued — send again once the recipient has collected its mail"
    )]
    OutboxFull {
        /// Messages held (for this recipient, or in all).
        held: usize,
        /// The limit that was hit.
        limit: usize,
    },
    /// The message was given up before the caller was answered (the retention ended).
    #[error("the message was not kept: {0}")]
    NotKept(String),
    /// The message could not be made durable in this session's outbox, so it was not
    /// queued (nothing was published).
    #[error("the message could not be kept in this session's outbox: {0}")]
    Outbox(String),
    /// The node has shut down.
    #[error("the node has shut down")]
    Stopped,
}

/// `addr` as others dial it: ending in `/p2p/<peer>` (a relay circuit address
/// reported by the swarm already ends so; others get it appended).
pub fn dialable(addr: &libp2p::Multiaddr, peer: libp2p::PeerId) -> libp2p::Multiaddr {
    match addr.iter().last() {
        Some(libp2p::multiaddr::Protocol::P2p(p)) if p == peer => addr.clone(),
        _ => addr.clone().with(libp2p::multiaddr::Protocol::P2p(peer)),
    }
}
