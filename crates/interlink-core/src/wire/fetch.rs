//! Mailbox fetches: an owner's signed, fresh request for the copy one holder keeps.
//!
//! A mailbox copy names its senders, their sessions, message ids, timestamps and kinds
//! in the clear (a holder needs them to merge and to keep quotas), so it is handed only
//! to its owner (PROTOCOL §8.5). The owner signs, in its own domain, which mailbox it
//! wants, **which holder** it asks (that holder's PeerId) and when: a holder that
//! received the request cannot replay it to another holder, and a request copied later
//! is stale. Holders serve mailboxes only through this request; Kademlia never answers
//! a get for one (it stores none).

use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use super::{Refusal, RefusalCode, Signed, SignedBody, WireError, invalid};
use crate::{
    identity::IdentityKey,
    limits::{FETCH_FRESHNESS_MS, MAX_FUTURE_SKEW_MS, MAX_SMALL_MESSAGE_BYTES},
    mailbox,
    session::SessionId,
    sign::Domain,
};

/// Longest PeerId, in bytes, a fetch may name (an Ed25519 PeerId is 38).
pub const MAX_PEER_ID_BYTES: usize = 64;

/// A mailbox owner's request for one holder's copy of `owner#owner_session`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MailboxFetch {
    /// Protocol version.
    #[serde(deserialize_with = "crate::wire::decode_version")]
    pub v: u8,
    /// The mailbox owner's identity (the signer).
    pub owner: IdentityKey,
    /// The mailbox's session.
    pub owner_session: SessionId,
    /// The holder asked: its PeerId, in its binary form.
    pub holder: ByteBuf,
    /// Milliseconds since the Unix epoch.
    pub ts: u64,
}

impl SignedBody for MailboxFetch {
    const KIND: &'static str = "mailbox fetch";
    const DOMAIN: Domain = Domain::MailboxFetch;
    const MAX_BYTES: usize = MAX_SMALL_MESSAGE_BYTES;

    fn signer(&self) -> &IdentityKey {
        &self.owner
    }
    fn version(&self) -> u8 {
        self.v
    }
    fn ts(&self) -> u64 {
        self.ts
    }
    fn check_fields(&self) -> Result<(), WireError> {
        if self.holder.is_empty() || self.holder.len() > MAX_PEER_ID_BYTES {
            return Err(invalid::<Self>(
                "holder",
                format!(
                    "must be a PeerId of 1 to {MAX_PEER_ID_BYTES} bytes, got {}",
                    self.holder.len()
                ),
            ));
        }
        Ok(())
    }
}

impl MailboxFetch {
    /// The DHT key of the mailbox asked for.
    pub fn record_key(&self) -> [u8; 32] {
        mailbox::record_key(&self.owner, &self.owner_session)
    }
}

impl Signed<MailboxFetch> {
    /// Decodes a fetch request and checks it as the holder `holder` (its PeerId bytes)
    /// at `now`: signature, addressed to this holder, fresh. Returns the key of the
    /// mailbox to hand over.
    pub fn check_fetch(bytes: &[u8], holder: &[u8], now: u64) -> Result<[u8; 32], Refusal> {
        let fetch = Self::decode(bytes).map_err(|e| Refusal::from(&e))?;
        let body = fetch.body();
        if body.holder.as_slice() != holder {
            return Err(Refusal::new(
                RefusalCode::WrongRecipient,
                "the fetch is addressed to another holder",
            ));
        }
        if body.ts > now.saturating_add(MAX_FUTURE_SKEW_MS) {
            return Err(Refusal::new(
                RefusalCode::FutureDated,
                "the fetch is dated further ahead than the clock skew allows",
            ));
        }
        if now.saturating_sub(body.ts) > FETCH_FRESHNESS_MS {
            return Err(Refusal::new(
                RefusalCode::Stale,
                format!(
                    "the fetch is older than {} s; sign a new one",
                    FETCH_FRESHNESS_MS / 1000
                ),
            ));
        }
        Ok(body.record_key())
    }
}

#[cfg(test)]
#[path = "fetch_tests.rs"]
mod tests;
