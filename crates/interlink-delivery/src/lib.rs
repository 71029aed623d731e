#![warn(missing_docs)]
//! The IO-free delivery engine of interlink-p2p, and a seeded simulator for it.
//!
//! One [`Engine`] per session node owns everything delivery decides: the outbox, live
//! attempts, mailbox copies, receipts, the inbox index, acks. It reads no clock, opens
//! no socket or file and draws no randomness: the shell calls
//! [`Engine::handle`]`(input, now)` with what happened and drains
//! [`Engine::poll_output`] for what to do — write this, send that, set a timer. Ed25519
//! is deterministic, so the engine signs receipts and acks itself with the session's
//! [`Identity`](interlink_core::Identity).
//!
//! # Promises
//!
//! - **Queued means durable.** A `send` is answered only after its outbox entry is
//!   durable ([`Input::OutboxStored`]); a failed write answers with an error and nothing
//!   is claimed or retried.
//! - **Delivered means in the inbox.** [`Outcome::Delivered`] / [`Event::Delivered`]
//!   only on a receipt signed by the recipient identity that names this message, this
//!   sender and the recipient session it was sent to (live, or collected-mail §8.6).
//! - **Kept until receipted or expired.** The outbox entry stays, is retried live
//!   whenever the recipient shows life and is re-published to its mailbox, until a
//!   receipt, a final refusal, or the retention ends ([`Event::Expired`]).
//! - **Exactly once, in order.** The recipient's durable index is keyed by
//!   `(sender, msg_id)`: a retry of something stored is receipted again; another
//!   sender reusing the id is another message. Live requests are FIFO per recipient
//!   with one in flight; mailbox copies carry every pending message of the sender, and
//!   the recipient stores a sender's mail only in timestamp order (one append in
//!   flight; a failed append fails everything queued behind it).
//! - **Without an outbox, queued means a holder said so.** A session configured
//!   [`Config::without_outbox`] (a shell command that exits) answers `queued`
//!   ([`HeldBy::Mailbox`]) only once another node answered that its mailbox copy keeps
//!   the message ([`Input::PutAnswered`]), and [`Outcome::NotKept`] otherwise.
//! - **Nothing acked or receipted before it is durable.** Receipts, acks, the gate's
//!   replay record and the index change only on [`Input::InboxStored`] `Ok`.
//!
//! # Inputs and outputs
//!
//! Sender side: [`Input::Send`] → [`Output::PersistOutbox`] → [`Input::OutboxStored`] →
//! [`Output::SendRequest`] (+ timer) → [`Input::DeliverResponse`] → [`Output::Reply`],
//! [`Output::RemoveOutbox`]; or [`Output::DhtPut`] and `Reply(Queued)` (without an
//! outbox: after [`Input::PutAnswered`]; [`Input::PutEnded`] ends the wait).
//! [`Input::PeerAlive`] / [`Input::Route`] retry the live path; [`Input::Connected`]
//! says which nodes the shell has a connection to (an attempt past its window is
//! waited for while connected, up to [`LIVE_PATIENCE_MS`]); [`Input::ReceiptCollected`]
//! settles held mail. Recipient side: [`Input::DeliverRequest`] and
//! [`Input::MailboxFetched`] → [`Output::AppendInbox`] → [`Input::InboxStored`] →
//! [`Output::Respond`], [`Output::DhtPut`] (own mailbox with the ack),
//! [`Output::SendReceipt`]. Drains: [`Output::DhtGet`] on start, [`Input::Wake`] and
//! the periodic timer. One timer: [`Output::SetTimer`] → [`Input::Timer`].
//!
//! # One outbox entry
//!
//! ```text
//!  Send ─▶ persisting ──OutboxStored(Err)──▶ (gone; caller: error)
//!              │ Ok
//!              ▼
//!           pending ──reachable──▶ live in flight ──receipt──▶ delivered
//!              │  ▲                   │ timeout/failure/retryable refusal
//!              │  └──PeerAlive────────┤
//!              ▼                      ▼
//!            held (mailbox copy published; caller: Queued)
//!              │ collected receipt ──▶ delivered
//!              │ final refusal     ──▶ refused
//!              └ retention ends    ──▶ expired
//! ```
//!
//! Every map and queue has a named capacity in [`config`].

mod ack;
pub mod config;
mod engine;
mod inbox;
mod outbox;
mod routes;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
mod types;

pub use ack::ack_entries;
pub use config::{Bugs, Config};
pub use engine::{Engine, Sizes};
pub use routes::LIVE_PATIENCE_MS;
pub use types::{
    CallId, EntryKey, Event, HeldBy, InboundId, Input, NotKept, OutboxEntry, Outcome, Output,
    PeerRef, PutToken, ReceiptId, Refusal, ReqId, Response, SendError, SendFailure, StoreError,
    StoreToken,
};
