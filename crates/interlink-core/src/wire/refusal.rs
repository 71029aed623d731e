//! Typed refusals: why a peer refused an envelope, a receipt or a mailbox copy.
//!
//! A refusal travels as a code from a closed list plus a free-text detail for people.
//! Code decides what the other side does next (retry, give up, tell the user); the
//! detail is only ever shown or logged, never compared.

use serde::{Deserialize, Serialize};

use super::WireError;

/// Longest refusal detail, in bytes; a longer one is cut (on a char boundary).
pub const MAX_REFUSAL_DETAIL_BYTES: usize = 512;

/// Why something was refused. The list is closed per protocol version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RefusalCode {
    /// Not valid CBOR of the expected shape, or a field breaks a rule.
    Malformed,
    /// Larger than the kind's limit, or more items than a request may carry.
    TooLarge,
    /// A signature did not verify.
    BadSignature,
    /// A protocol version the refusing node does not speak.
    UnsupportedVersion,
    /// Addressed to another identity or session.
    WrongRecipient,
    /// Older than the path's freshness window.
    Stale,
    /// Further in the future than the clock-skew tolerance.
    FutureDated,
    /// This (sender, message id) was already received.
    Replayed,
    /// The sender is not a peer of the recipient; strangers may only knock.
    NotPaired,
    /// A pairing acceptance nobody asked for.
    UnsolicitedAccept,
    /// The recipient could not store it (disk full, I/O error). Not final: send again
    /// later; nothing was recorded.
    StoreFailed,
    /// A delivery request carried more than one sender's envelopes.
    MixedSenders,
    /// The node is not a session that takes messages (an observer or a relay).
    NotASession,
    /// The item is for another mailbox, or a holder's copy broke the merge rules.
    WrongMailbox,
    /// The refusing node's budget for this peer is spent (too many requests or bytes).
    OverBudget,
    /// A sealed body did not open.
    Unopenable,
}

impl RefusalCode {
    /// Whether the same item may succeed if sent again later unchanged.
    pub fn is_retryable(self) -> bool {
        matches!(self, Self::StoreFailed | Self::OverBudget)
    }
}

/// A refusal on the wire: a code and a detail for people.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    /// What went wrong, for code.
    pub code: RefusalCode,
    /// What went wrong, for people (at most [`MAX_REFUSAL_DETAIL_BYTES`]).
    pub detail: String,
}

impl Refusal {
    /// A refusal with `code` and `detail` (cut to [`MAX_REFUSAL_DETAIL_BYTES`]).
    pub fn new(code: RefusalCode, detail: impl Into<String>) -> Self {
        let mut detail = detail.into();
        if detail.len() > MAX_REFUSAL_DETAIL_BYTES {
            let mut end = MAX_REFUSAL_DETAIL_BYTES;
            while !detail.is_char_boundary(end) {
                end -= 1;
            }
            detail.truncate(end);
        }
        Self { code, detail }
    }

    /// Whether sending the same item again later may succeed.
    pub fn is_retryable(&self) -> bool {
        self.code.is_retryable()
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

impl From<&WireError> for Refusal {
    fn from(e: &WireError) -> Self {
        let code = match e {
            WireError::Oversized { .. } => RefusalCode::TooLarge,
            WireError::UnsupportedVersion { .. } => RefusalCode::UnsupportedVersion,
            WireError::BadSignature { .. } => RefusalCode::BadSignature,
            WireError::Malformed { .. } | WireError::InvalidField { .. } => RefusalCode::Malformed,
        };
        Self::new(code, e.to_string())
    }
}

#[cfg(test)]
#[path = "refusal_tests.rs"]
mod tests;
