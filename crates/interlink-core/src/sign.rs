//! Domain-separated Ed25519 signatures.
//!
//! Every signed object is signed over `tag || payload`, where the tag names the kind
//! (`"interlink-p2p/v1/<kind>\0"`), so a signature made for one kind can never be
//! replayed as another. Verification is strict (`verify_strict`): small-order keys and
//! non-canonical signatures are rejected.

use std::cell::RefCell;

use ed25519_dalek::{Signature, VerifyingKey};

use crate::{bounded::LruMap, identity::IdentityKey};

/// Signers' keys kept decompressed, per thread. Decompressing a key is a field square
/// root (4.4 µs on the reference machine), paid on every signature otherwise, and a
/// session checks the same few peers' signatures over and over: the sender's on every
/// envelope, the recipient's on every receipt. Only keys that decompressed are kept.
const DECOMPRESSED_KEYS: usize = 64;

thread_local! {
    static KEYS: RefCell<LruMap<IdentityKey, VerifyingKey>> =
        RefCell::new(LruMap::new(DECOMPRESSED_KEYS));
}

fn verifying_key(key: &IdentityKey) -> Result<VerifyingKey, SignatureError> {
    KEYS.with(|keys| {
        let mut keys = keys.borrow_mut();
        if let Some(vk) = keys.touch(key) {
            return Ok(*vk);
        }
        let vk = key.verifying_key().map_err(|_| SignatureError::BadKey)?;
        keys.entry(*key, || vk);
        Ok(vk)
    })
}

/// The kinds of signed object. Each has its own tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Domain {
    /// A presence announcement.
    Announcement,
    /// A presence goodbye.
    Goodbye,
    /// A message envelope.
    Envelope,
    /// A receipt from a recipient.
    Receipt,
    /// A mailbox owner's ack.
    Ack,
    /// The binding of a sealing key to an identity.
    SealingKey,
    /// A mailbox owner's admission of a sender ([`crate::wire::MailboxPass`]).
    MailboxPass,
    /// A mailbox owner's request for a holder's copy ([`crate::wire::MailboxFetch`]).
    MailboxFetch,
    /// A session's sign of life between announcements ([`crate::wire::Beacon`]).
    Beacon,
    /// What an invite code carries, signed by the inviter ([`crate::wire::Invite`]).
    Invite,
    /// What a device-link code carries, signed by the identity it hands over
    /// ([`crate::wire::DeviceCode`]).
    DeviceLink,
}

impl Domain {
    /// All domains, for documentation and tests.
    pub const ALL: [Domain; 11] = [
        Domain::Announcement,
        Domain::Goodbye,
        Domain::Envelope,
        Domain::Receipt,
        Domain::Ack,
        Domain::SealingKey,
        Domain::MailboxPass,
        Domain::MailboxFetch,
        Domain::Beacon,
        Domain::Invite,
        Domain::DeviceLink,
    ];

    /// The tag prefixed to the payload before signing.
    pub const fn tag(self) -> &'static [u8] {
        match self {
            Domain::Announcement => b"interlink-p2p/v1/announcement\0",
            Domain::Goodbye => b"interlink-p2p/v1/goodbye\0",
            Domain::Envelope => b"interlink-p2p/v1/envelope\0",
            Domain::Receipt => b"interlink-p2p/v1/receipt\0",
            Domain::Ack => b"interlink-p2p/v1/ack\0",
            Domain::SealingKey => b"interlink-p2p/v1/sealing-key\0",
            Domain::MailboxPass => b"interlink-p2p/v1/mailbox-pass\0",
            Domain::MailboxFetch => b"interlink-p2p/v1/mailbox-fetch\0",
            Domain::Beacon => b"interlink-p2p/v1/beacon\0",
            Domain::Invite => b"interlink-p2p/v1/invite\0",
            Domain::DeviceLink => b"interlink-p2p/v1/device-link\0",
        }
    }
}

/// A signature did not verify.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignatureError {
    /// The signature is not 64 bytes.
    #[error("signature must be 64 bytes, got {0}")]
    BadLength(usize),
    /// The signer's key is not a valid Ed25519 point.
    #[error("signer key is not a valid Ed25519 public key")]
    BadKey,
    /// The signature does not match the key and payload.
    #[error("signature does not verify")]
    Invalid,
}

/// Verifies `sig` over `domain.tag() || payload` under `key`, strictly.
pub fn verify(
    key: &IdentityKey,
    domain: Domain,
    payload: &[u8],
    sig: &[u8],
) -> Result<(), SignatureError> {
    let sig: [u8; 64] = sig
        .try_into()
        .map_err(|_| SignatureError::BadLength(sig.len()))?;
    let vk = verifying_key(key)?;
    let mut msg = Vec::with_capacity(domain.tag().len() + payload.len());
    msg.extend_from_slice(domain.tag());
    msg.extend_from_slice(payload);
    vk.verify_strict(&msg, &Signature::from_bytes(&sig))
        .map_err(|_| SignatureError::Invalid)
}

#[cfg(test)]
#[path = "sign_tests.rs"]
mod tests;
