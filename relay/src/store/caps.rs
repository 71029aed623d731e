//! The bounds of a store.

use interlink_core::mailbox;

use super::OpenError;

/// Default most mailboxes the store holds.
pub const DEFAULT_MAX_MAILBOXES: usize = 100_000;
/// Default most bytes of encoded records the store holds (4 GiB).
pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 4 * 1024 * 1024 * 1024;
/// Default bound of the decoded-mailbox cache (estimated memory of the decoded copies:
/// about 27 MB of records).
pub const DEFAULT_DECODED_CACHE_BYTES: usize = 128 * 1024 * 1024;
/// Default most bytes of records held for one owner identity, over all its sessions'
/// mailboxes (64 MiB: 32 sessions' full mailboxes). One identity cannot fill the store.
pub const DEFAULT_MAX_OWNER_BYTES: u64 = 64 * 1024 * 1024;
/// Default page cache redb may use (its own default is 1 GiB, too much for a small box).
pub const DEFAULT_DB_CACHE_BYTES: usize = 64 * 1024 * 1024;

/// The bounds of a store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caps {
    /// Per-mailbox bounds (envelopes, per-sender quota, bytes, acks, retention). Every
    /// holder of a mailbox must use the same values; the default is the protocol's.
    pub mailbox: mailbox::Config,
    /// Most mailboxes held; a put creating one more is refused.
    pub max_mailboxes: usize,
    /// Most bytes of encoded records held; a put growing the total past it is refused.
    pub max_total_bytes: u64,
    /// Most bytes of encoded records held for one owner identity (all its sessions); a
    /// put growing that past it is refused.
    pub max_owner_bytes: u64,
    /// If set, the only owner identities whose mailboxes are held (the team this relay
    /// serves); a put for any other owner is refused. `None` holds anyone's.
    pub served: Option<std::collections::BTreeSet<interlink_core::IdentityKey>>,
    /// Bound of the decoded-mailbox cache, in estimated bytes of memory
    /// ([`DECODED_SIZE_FACTOR`](crate::store::DECODED_SIZE_FACTOR) times the records' size). A miss costs a decode that
    /// verifies every envelope of the mailbox again; 0 disables the cache.
    pub decoded_cache_bytes: usize,
    /// Page cache redb may use.
    pub db_cache_bytes: usize,
}

impl Default for Caps {
    fn default() -> Self {
        Self {
            mailbox: mailbox::Config::default(),
            max_mailboxes: DEFAULT_MAX_MAILBOXES,
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
            max_owner_bytes: DEFAULT_MAX_OWNER_BYTES,
            served: None,
            decoded_cache_bytes: DEFAULT_DECODED_CACHE_BYTES,
            db_cache_bytes: DEFAULT_DB_CACHE_BYTES,
        }
    }
}

impl Caps {
    /// With at most `n` mailboxes.
    pub fn with_max_mailboxes(mut self, n: usize) -> Self {
        self.max_mailboxes = n;
        self
    }

    /// With at most `bytes` of records.
    pub fn with_max_total_bytes(mut self, bytes: u64) -> Self {
        self.max_total_bytes = bytes;
        self
    }

    /// With at most `bytes` of records per owner identity.
    pub fn with_max_owner_bytes(mut self, bytes: u64) -> Self {
        self.max_owner_bytes = bytes;
        self
    }

    /// Holding only the mailboxes of `owners` (empty: anyone's).
    pub fn serving(
        mut self,
        owners: impl IntoIterator<Item = interlink_core::IdentityKey>,
    ) -> Self {
        let set: std::collections::BTreeSet<_> = owners.into_iter().collect();
        self.served = (!set.is_empty()).then_some(set);
        self
    }

    /// With envelope retention `ms` (acks live it plus the clock-skew tolerance).
    pub fn with_retention_ms(mut self, ms: u64) -> Self {
        self.mailbox.retention_ms = ms;
        self
    }

    /// With a decoded-mailbox cache of `bytes`.
    pub fn with_decoded_cache_bytes(mut self, bytes: usize) -> Self {
        self.decoded_cache_bytes = bytes;
        self
    }

    pub(super) fn validate(&self) -> Result<(), OpenError> {
        let m = &self.mailbox;
        if self.max_mailboxes == 0 || self.max_total_bytes == 0 || self.max_owner_bytes == 0 {
            return Err(OpenError::Caps("the store must hold something"));
        }
        if m.max_envelopes == 0 || m.sender_quota == 0 || m.max_bytes == 0 || m.max_acks == 0 {
            return Err(OpenError::Caps("a mailbox must hold something"));
        }
        if m.retention_ms == 0 {
            return Err(OpenError::Caps("retention must be positive"));
        }
        Ok(())
    }
}
