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
mod tests {
    use super::*;
    use crate::{Identity, wire::VERSION};

    fn fetch(owner: &Identity, holder: &[u8], ts: u64) -> Vec<u8> {
        let body = MailboxFetch {
            v: VERSION,
            owner: owner.public(),
            owner_session: SessionId::new("s").unwrap(),
            holder: ByteBuf::from(holder.to_vec()),
            ts,
        };
        Signed::sign(body, owner).unwrap().to_bytes()
    }

    #[test]
    fn a_fetch_opens_only_its_mailbox_at_its_holder_while_fresh() {
        let owner = Identity::from_seed(&[7; 32]);
        let now = 1_790_000_000_000;
        let key = mailbox::record_key(&owner.public(), &SessionId::new("s").unwrap());
        let good = fetch(&owner, b"holder-a", now);
        assert_eq!(Signed::check_fetch(&good, b"holder-a", now), Ok(key));
        let code = |r: Result<[u8; 32], Refusal>| r.unwrap_err().code;
        // Replayed to another holder, stale, future-dated.
        assert_eq!(
            code(Signed::check_fetch(&good, b"holder-b", now)),
            RefusalCode::WrongRecipient
        );
        assert_eq!(
            code(Signed::check_fetch(
                &good,
                b"holder-a",
                now + FETCH_FRESHNESS_MS + 1
            )),
            RefusalCode::Stale
        );
        let ahead = fetch(&owner, b"holder-a", now + MAX_FUTURE_SKEW_MS + 1);
        assert_eq!(
            code(Signed::check_fetch(&ahead, b"holder-a", now)),
            RefusalCode::FutureDated
        );
        // A body signed by someone else, or re-signed in another domain.
        let mut forged = good.clone();
        let last = forged.len() - 1;
        forged[last] ^= 1;
        assert_eq!(
            code(Signed::check_fetch(&forged, b"holder-a", now)),
            RefusalCode::BadSignature
        );
        assert_eq!(
            code(Signed::check_fetch(&[0xa0], b"holder-a", now)),
            RefusalCode::Malformed
        );
        let empty = MailboxFetch {
            v: VERSION,
            owner: owner.public(),
            owner_session: SessionId::new("s").unwrap(),
            holder: ByteBuf::new(),
            ts: now,
        };
        assert!(Signed::sign(empty, &owner).is_err());
    }
}
