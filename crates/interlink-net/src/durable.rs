//! The interface between a relay node and its durable mailbox store.
//!
//! A relay's node verifies nothing twice: the store verifies, merges and commits a
//! mailbox record in one call, made on the relay's store thread (never on the task
//! that owns the Swarm), and the node only answers a `hold` after that call returned.
//! The store lives in the relay crate (redb); tests may use any implementation.

use std::fmt;

/// Why a store refused a record, as a short label (also a metrics label) and a
/// human-readable reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// A stable label: `malformed`, `invalid_entry`, `wrong_mailbox`, `oversized`,
    /// `store_full`, `io`, …
    pub label: &'static str,
    /// What was wrong.
    pub reason: String,
}

impl Refusal {
    /// This refusal as it goes on the wire: a typed code from its label, and its text.
    pub fn to_wire(&self) -> interlink_core::wire::Refusal {
        use interlink_core::wire::RefusalCode as C;
        let code = match self.label {
            "oversized" | "too_many_entries" => C::TooLarge,
            "unsupported_version" => C::UnsupportedVersion,
            "not_owner" => C::BadSignature,
            "wrong_mailbox" => C::WrongMailbox,
            // A full store may have room later; an I/O error may pass.
            "store_full_mailboxes" | "store_full_bytes" => C::OverBudget,
            "io" => C::StoreFailed,
            _ => C::Malformed,
        };
        interlink_core::wire::Refusal::new(code, self.to_string())
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.reason, self.label)
    }
}

/// What [`DurableMailboxes::hold`] committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldCopy {
    /// The merged record's encoding.
    pub record: Vec<u8>,
    /// The envelopes of the handed record that the merged one keeps or acks, as
    /// `(sender, msg_id)` (`interlink_core::mailbox::Mailbox::kept_of`): the `hold`
    /// answer.
    pub kept: Vec<interlink_core::wire::AckEntry>,
    /// Bytes the store grew by with this hold: what the relay charges the network the
    /// copy came from (`node::budgets`).
    pub grew_by: u64,
}

/// A durable holder of mailbox records, keyed by their DHT key.
///
/// Calls block (a commit waits for the disk); the relay node makes them from one
/// thread of their own, one at a time.
pub trait DurableMailboxes: Send + Sync + fmt::Debug + 'static {
    /// Verifies `record` (an encoded `interlink_core::mailbox::Mailbox` that must
    /// belong under `key`), merges it with the copy held, commits the result durably
    /// and returns the merged record's encoding with what of `record` it keeps.
    fn hold(&self, key: &[u8; 32], record: &[u8], now_ms: u64) -> Result<HeldCopy, Refusal>;
    /// The encoding of the copy held under `key`.
    fn get(&self, key: &[u8; 32]) -> Option<Vec<u8>>;
    /// Every key held, so a restarted relay serves what it kept.
    fn keys(&self) -> Vec<[u8; 32]>;
}
