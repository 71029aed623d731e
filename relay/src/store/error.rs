//! What can go wrong in the store, one enum per operation, and the reasons a put is
//! refused (a closed set, so each can be a metrics label).

use std::{fmt, sync::Arc};

use interlink_core::mailbox::{MailboxError, Rejected};

/// Why a put was refused. Every variant is a fixed, low-cardinality metrics label
/// ([`RejectReason::label`]); the human-readable detail travels in [`Refusal`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// Not a mailbox record (CBOR shape, field types).
    Malformed,
    /// A record version this relay does not read.
    UnsupportedVersion,
    /// Larger than the largest record the protocol allows.
    Oversized,
    /// Lists more envelopes or acks than a copy normalised under the shared caps can.
    TooManyEntries,
    /// An entry that does not decode or whose signature does not verify (forged).
    InvalidEntry,
    /// An ack not signed by the mailbox owner (a forged tombstone).
    NotOwner,
    /// The record key is not the mailbox's key, or an entry belongs to another mailbox.
    WrongMailbox,
    /// The store holds as many mailboxes as it may.
    StoreFullMailboxes,
    /// The store holds as many bytes as it may.
    StoreFullBytes,
    /// The store holds as many bytes for this owner identity as it may.
    OwnerFull,
    /// This relay holds mailboxes only for the identities it serves.
    NotServed,
}

impl RejectReason {
    /// Every reason, in a fixed order (metrics export each, even at zero).
    pub const ALL: [RejectReason; 11] = [
        RejectReason::Malformed,
        RejectReason::UnsupportedVersion,
        RejectReason::Oversized,
        RejectReason::TooManyEntries,
        RejectReason::InvalidEntry,
        RejectReason::NotOwner,
        RejectReason::WrongMailbox,
        RejectReason::StoreFullMailboxes,
        RejectReason::StoreFullBytes,
        RejectReason::OwnerFull,
        RejectReason::NotServed,
    ];

    /// The metrics label: lower-case ASCII, stable across releases.
    pub const fn label(self) -> &'static str {
        match self {
            RejectReason::Malformed => "malformed",
            RejectReason::UnsupportedVersion => "unsupported_version",
            RejectReason::Oversized => "oversized",
            RejectReason::TooManyEntries => "too_many_entries",
            RejectReason::InvalidEntry => "invalid_entry",
            RejectReason::NotOwner => "not_owner",
            RejectReason::WrongMailbox => "wrong_mailbox",
            RejectReason::StoreFullMailboxes => "store_full_mailboxes",
            RejectReason::StoreFullBytes => "store_full_bytes",
            RejectReason::OwnerFull => "owner_full",
            RejectReason::NotServed => "not_served",
        }
    }

    /// Position in [`RejectReason::ALL`] (an index into per-reason counters).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The reason for a record or entry the core mailbox refused.
    pub fn of_mailbox_error(e: &MailboxError) -> Self {
        match e {
            MailboxError::Oversized { .. } => RejectReason::Oversized,
            MailboxError::Malformed(_) => RejectReason::Malformed,
            MailboxError::UnsupportedVersion { .. } => RejectReason::UnsupportedVersion,
            MailboxError::TooManyEntries { .. } => RejectReason::TooManyEntries,
            MailboxError::NotOwner { .. } => RejectReason::NotOwner,
            MailboxError::WrongMailbox { .. } => RejectReason::WrongMailbox,
            // Decode never reports these for a record; anything else about an entry
            // means it failed to decode or verify.
            _ => RejectReason::InvalidEntry,
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// A refused put: the reason (a metrics label) and what exactly was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {detail}")]
pub struct Refusal {
    /// The class of refusal.
    pub reason: RejectReason,
    /// A human-readable description, for logs.
    pub detail: String,
}

impl Refusal {
    pub(crate) fn new(reason: RejectReason, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
        }
    }

    pub(crate) fn from_mailbox(e: &MailboxError) -> Self {
        Self::new(RejectReason::of_mailbox_error(e), e.to_string())
    }

    pub(crate) fn from_invalid_entries(count: usize, first: &Rejected) -> Self {
        Self::new(
            RejectReason::of_mailbox_error(&first.reason),
            format!("{count} invalid entries, first: {first}"),
        )
    }
}

/// The database failed (I/O, corruption, a full disk). Shared (`Arc`): one failed
/// commit is reported to every put of its batch.
#[derive(Clone, Debug, thiserror::Error)]
#[error("mailbox database: {0}")]
pub struct DbError(#[source] Arc<redb::Error>);

// One impl per redb error type: a blanket `impl<E: Into<redb::Error>>` would collide
// with the reflexive `From<T> for T`.
macro_rules! db_error_from {
    ($($t:ty),*) => {$(
        impl From<$t> for DbError {
            fn from(e: $t) -> Self {
                DbError(Arc::new(e.into()))
            }
        }
    )*};
}
db_error_from!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

/// Opening the store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The database could not be opened or read (another process holds it, I/O, …).
    #[error(transparent)]
    Db(#[from] DbError),
    /// The file was written by an incompatible version of this store.
    #[error("mailbox database schema {found}; this relay reads {expected}")]
    Schema {
        /// The schema found.
        found: u64,
        /// The schema this build reads.
        expected: u64,
    },
    /// The capacities are inconsistent.
    #[error("invalid store caps: {0}")]
    Caps(&'static str),
    /// The file could not be created or made owner-only.
    #[error("mailbox database {}: {source}", path.display())]
    Io {
        /// The database file.
        path: std::path::PathBuf,
        /// What the operating system reported.
        source: std::io::Error,
    },
}

/// A put was not stored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PutError {
    /// The record was refused; nothing was written.
    #[error("mailbox put refused: {0}")]
    Refused(#[from] Refusal),
    /// The database failed; nothing was written (the transaction did not commit).
    #[error(transparent)]
    Db(#[from] DbError),
}

impl PutError {
    /// The refusal reason, if the put was refused rather than failed.
    pub fn reason(&self) -> Option<RejectReason> {
        match self {
            PutError::Refused(r) => Some(r.reason),
            PutError::Db(_) => None,
        }
    }
}

/// A read (get, stats) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
}

/// A sweep failed part-way; batches committed before the failure stay swept.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SweepError {
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
}
