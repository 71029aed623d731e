//! The wire protocol: versioned CBOR types and their verified decoders.
//!
//! Every signed object travels as a [`Signed`] wrapper: a CBOR map
//! `{ "body": bytes, "sig": bytes(64), "reply_to"?: {..} }`. `body` holds the exact
//! CBOR encoding of the inner struct; `sig` signs `domain tag || body` (see
//! [`crate::sign`]). Verifying the bytes as received — rather than a re-encoding —
//! means no canonical-encoding rules are needed and any change to a signed byte is
//! caught. `reply_to` is an unsigned routing hint, allowed only on envelopes and
//! honoured only when its key equals the signed sender.
//!
//! Decoding checks, in order: the size limit of the kind, CBOR shape (unknown fields
//! are refused), the version, field limits, then the signature. Freshness and replay
//! depend on where an object came from (gossip, live path, mailbox) and are checked by
//! the caller with [`crate::replay`].

mod ack;
mod announcement;
mod beacon;
mod details;
mod device;
mod envelope;
mod fetch;
mod goodbye;
mod group;
mod invite;
mod item;
mod overlay;
mod pass;
mod receipt;
mod refusal;

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_bytes::{ByteArray, ByteBuf};

pub use crate::seal::Sealed;
pub use ack::{Ack, AckEntry};
pub use announcement::{Announcement, DeliveryMode, HostKind, SealingBinding};
pub use beacon::{Beacon, MAX_BEACON_BYTES};
pub use details::{
    Details, DetailsError, DetailsReader, MAX_DETAILS_CT_BYTES, MAX_PRESENCE_READERS,
    MAX_READER_KEYS, READER_ENTRY_BYTES, READER_SALT, ReaderKey, SealedDetails,
};
pub use device::step as link_step;
pub use device::{
    DEVICE_CODE_PREFIX, DEVICE_CODE_VERSION, DEVICE_LINK_MAC_BYTES, DeviceCode, DeviceOffer,
    LinkRequest, LinkResponse, LinkStatus, MAX_DEVICE_ADDRS, MAX_LINK_ADDR_BYTES, MAX_LINK_ADDRS,
    MAX_LINK_REQUEST_BYTES, MAX_LINK_RESPONSE_BYTES, MAX_OFFER_BYTES,
};
pub(crate) use envelope::seal_aad;
pub use envelope::{Body, Envelope, EnvelopeKind, OpenError, TaskStatus};
pub use fetch::{MAX_PEER_ID_BYTES, MailboxFetch};
pub use goodbye::Goodbye;
pub use group::GroupTag;
pub use invite::{
    INVITE_CHECK_BYTES, INVITE_PREFIX, INVITE_SECRET_BYTES, INVITE_VERSION, Invite, InviteError,
    MAX_INVITE_ADDR_BYTES, MAX_INVITE_ADDRS, MAX_INVITE_CODE_CHARS,
};
pub use item::{ItemError, MAX_ITEM_DEPTH, item_len};
pub use overlay::{
    DeliverRequest, DeliverResponse, DeliverResult, GOSSIP_ID_BYTES, MAX_PRESENCE_MESSAGE_BYTES,
    MAX_RECEIPT_REQUEST_BYTES, MAX_RECEIPT_RESPONSE_BYTES, MailboxOp, MailboxOutcome,
    MailboxRequest, MailboxResponse, PresenceMessage, ReceiptRequest, ReceiptResponse,
    RosterRequest, RosterResponse, UnverifiedPresence, gossip_message_id,
};
pub use pass::{IssuedPasses, MAX_ISSUED_PASSES, MAX_VERIFIED_PASSES, MailboxPass};
pub use receipt::{Receipt, ReceiptState};
pub use refusal::{MAX_REFUSAL_DETAIL_BYTES, Refusal, RefusalCode};

use crate::{
    Identity,
    identity::{IdentityKey, SealingKey, hex_decode_into, hex_encode},
    session::SessionId,
    sign::{self, Domain, SignatureError},
};

/// The protocol version every body carries in its `v` field.
///
/// Version 2: acks list (sender, message id) pairs instead of ids alone, and refusals
/// are typed codes with a detail. Version 3: a `hold` answer lists which envelopes of
/// the handed copy the holder keeps. Version 4: envelopes and receipts carry mailbox
/// passes, and holders keep a mailbox's admitted mail apart from strangers'. Version 5:
/// mailboxes leave the Kademlia record store; a holder hands a copy only to its owner,
/// on a signed fetch. Version 6: the `host_inbox` delivery mode. Version 7: a roster
/// fetch carries the requester's summary and is answered with only what it lacks, and
/// a message's sealed body may name the group it was sent to ([`GroupTag`])
/// Version 8: between changes a session re-announces by a beacon. Version 9: a knock may
/// carry an invite's secret, sealed ([`Invite`]). Version 10: a `read` or `host_queued`
/// envelope may be about up to 64 messages ([`Envelope::also_about`]). Version 12: a
/// user's own machines share the identity by a device-link code and exchange
/// ([`DeviceCode`], [`crate::device_link`]). Version 13: an announcement's working
/// directory, summary and other details are sealed for the identities that may read
/// them ([`Details`]) (PROTOCOL.md, "Versions").
pub const VERSION: u8 = 14;

/// Why bytes from the wire were refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// Larger than the kind's limit; not decoded at all.
    #[error("{kind} is {len} bytes; the limit is {max}")]
    Oversized {
        /// The kind of object.
        kind: &'static str,
        /// Its size.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Not valid CBOR of the expected shape.
    #[error("malformed {kind}: {reason}")]
    Malformed {
        /// The kind of object.
        kind: &'static str,
        /// The decoder's complaint.
        reason: String,
    },
    /// A version this node does not speak.
    #[error("{kind} has protocol version {got}; this node speaks {VERSION}")]
    UnsupportedVersion {
        /// The kind of object.
        kind: &'static str,
        /// The version found.
        got: u8,
    },
    /// A field breaks a rule (length, charset, combination).
    #[error("invalid {kind}: {field} {reason}")]
    InvalidField {
        /// The kind of object.
        kind: &'static str,
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The signature did not verify.
    #[error("{kind} signature rejected: {source}")]
    BadSignature {
        /// The kind of object.
        kind: &'static str,
        /// What the verification found.
        source: SignatureError,
    },
}

/// A signed body type: an announcement, goodbye, envelope, receipt or ack.
pub trait SignedBody: Serialize + DeserializeOwned + Clone + fmt::Debug {
    /// Name used in errors.
    const KIND: &'static str;
    /// The signing domain.
    const DOMAIN: Domain;
    /// Size limit of the whole encoded [`Signed`] wrapper.
    const MAX_BYTES: usize;
    /// Whether the unsigned `reply_to` hint may be present.
    const ALLOWS_REPLY_TO: bool = false;

    /// The key that must have signed it.
    fn signer(&self) -> &IdentityKey;
    /// The body's `v` field.
    fn version(&self) -> u8;
    /// Its timestamp (ms since the Unix epoch).
    fn ts(&self) -> u64;
    /// Field rules beyond what the types enforce.
    fn check_fields(&self) -> Result<(), WireError>;
}

/// A signed object as on the wire, decoded and verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed<T> {
    body: T,
    body_bytes: Vec<u8>,
    sig: [u8; 64],
    reply_to: Option<SessionAddr>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Outer {
    body: ByteBuf,
    sig: ByteArray<64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reply_to: Option<SessionAddr>,
}

impl<T: SignedBody> Signed<T> {
    /// Encodes and signs `body` with `identity`, which must be the body's signer.
    pub fn sign(body: T, identity: &Identity) -> Result<Self, WireError> {
        if identity.public() != *body.signer() {
            return Err(invalid::<T>("signer", "is not the signing identity"));
        }
        body.check_fields()?;
        let body_bytes = encode(&body);
        let sig = identity.sign(T::DOMAIN, &body_bytes);
        Ok(Self {
            body,
            body_bytes,
            sig,
            reply_to: None,
        })
    }

    /// Decodes and verifies a wire object: size, shape, version, fields, signature.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        Unverified::<T>::decode(bytes)?.verify()
    }

    /// The encoded wire form (what [`Signed::decode`] accepts).
    pub fn to_bytes(&self) -> Vec<u8> {
        encode(&Outer {
            body: ByteBuf::from(self.body_bytes.clone()),
            sig: ByteArray::new(self.sig),
            reply_to: self.reply_to.clone(),
        })
    }

    /// The verified body.
    pub fn body(&self) -> &T {
        &self.body
    }

    /// The exact signed bytes of the body.
    pub fn body_bytes(&self) -> &[u8] {
        &self.body_bytes
    }

    #[allow(missing_docs)]
    pub fn signature(&self) -> &[u8; 64] {
        &self.sig
    }

    /// The unsigned reply-to hint as received, unchecked. Use
    /// [`Signed::<Envelope>::reply_address`] to route by it.
    pub fn raw_reply_to(&self) -> Option<&SessionAddr> {
        self.reply_to.as_ref()
    }
}

/// A wire object decoded but not yet verified: size, shape and version are checked,
/// the field rules and the signature are not.
///
/// Its body is a claim, not a fact. It exists so a node can recognise a copy of
/// something it already holds (same signed bytes, or an older stamp) without paying
/// for signature checks; anything acted on goes through [`Unverified::verify`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unverified<T> {
    body: T,
    body_bytes: Vec<u8>,
    sig: [u8; 64],
    reply_to: Option<SessionAddr>,
}

impl<T: SignedBody> Unverified<T> {
    /// Decodes a wire object without checking its field rules or signature.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        if bytes.len() > T::MAX_BYTES {
            return Err(WireError::Oversized {
                kind: T::KIND,
                len: bytes.len(),
                max: T::MAX_BYTES,
            });
        }
        let outer: Outer = decode_cbor(T::KIND, bytes)?;
        if outer.reply_to.is_some() && !T::ALLOWS_REPLY_TO {
            return Err(invalid::<T>("reply_to", "is only allowed on envelopes"));
        }
        let body: T = decode_cbor(T::KIND, &outer.body)?;
        if body.version() != VERSION {
            return Err(WireError::UnsupportedVersion {
                kind: T::KIND,
                got: body.version(),
            });
        }
        Ok(Self {
            body,
            body_bytes: outer.body.into_vec(),
            sig: outer.sig.into_array(),
            reply_to: outer.reply_to,
        })
    }

    /// The claimed body: not yet verified.
    pub fn claimed(&self) -> &T {
        &self.body
    }

    /// Whether this is byte for byte the signed object `held` (already verified).
    pub fn is_copy_of(&self, held: &Signed<T>) -> bool {
        self.sig == held.sig && self.body_bytes == held.body_bytes
    }

    /// Checks the field rules and the signature.
    pub fn verify(self) -> Result<Signed<T>, WireError> {
        self.verify_checking(T::check_fields)
    }

    /// Checks the fields with `check` (a kind's rules, when part of them is known to
    /// hold already), then the signature.
    pub(crate) fn verify_checking(
        self,
        check: impl FnOnce(&T) -> Result<(), WireError>,
    ) -> Result<Signed<T>, WireError> {
        check(&self.body)?;
        sign::verify(self.body.signer(), T::DOMAIN, &self.body_bytes, &self.sig).map_err(
            |source| WireError::BadSignature {
                kind: T::KIND,
                source,
            },
        )?;
        Ok(Signed {
            body: self.body,
            body_bytes: self.body_bytes,
            sig: self.sig,
            reply_to: self.reply_to,
        })
    }
}

/// An address of one session: identity key and session id.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionAddr {
    /// The identity.
    pub key: IdentityKey,
    /// The session under it.
    pub session: SessionId,
}

impl fmt::Display for SessionAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.key, self.session)
    }
}

/// A 16-byte message id, random per message. Text form: 32 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MsgId([u8; 16]);

impl MsgId {
    /// Wraps 16 bytes.
    pub const fn from_bytes(b: [u8; 16]) -> Self {
        Self(b)
    }

    /// A fresh random id.
    pub fn random(rng: &mut impl rand_core::CryptoRng) -> Self {
        let mut b = [0u8; 16];
        rng.fill_bytes(&mut b);
        Self(b)
    }

    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl fmt::Display for MsgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex_encode(&self.0))
    }
}

impl fmt::Debug for MsgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MsgId({self})")
    }
}

impl FromStr for MsgId {
    type Err = &'static str;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut b = [0u8; 16];
        hex_decode_into(s.trim(), &mut b).ok_or("a message id is 32 hex digits")?;
        Ok(Self(b))
    }
}

macro_rules! bytes_serde {
    ($ty:ty, $n:expr, $from:expr) => {
        impl Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(self.as_bytes())
            }
        }
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let a = ByteArray::<$n>::deserialize(d)?;
                Ok($from(a.into_array()))
            }
        }
    };
}
bytes_serde!(IdentityKey, 32, IdentityKey::from_bytes);
bytes_serde!(SealingKey, 32, SealingKey::from_bytes);
bytes_serde!(MsgId, 16, MsgId::from_bytes);

impl Serialize for SessionId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SessionId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        SessionId::new(s).map_err(serde::de::Error::custom)
    }
}

/// Reads a `v` field from an integer in any form, as every other `uint` is read (§1):
/// decoded straight into a `u8`, `v` took only the one-byte forms, so `0x19 0x00 0x09`
/// was malformed where `0x19 0x00 0x05` as a `seq` was fine. A value past 255 is no
/// version any node speaks and is malformed.
pub(crate) fn decode_version<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
    let n = u64::deserialize(d)?;
    u8::try_from(n)
        .map_err(|_| serde::de::Error::custom(format_args!("protocol version {n} is past 255")))
}

/// CBOR-encodes `value`. Encoding into a `Vec` cannot fail for this crate's types;
/// should it ever, the result is empty and every decoder refuses it.
pub(crate) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    cbor4ii::serde::to_vec(Vec::new(), value).unwrap_or_default()
}

/// CBOR-decodes `bytes` as `T`, naming `kind` in the error.
pub(crate) fn decode_cbor<T: DeserializeOwned>(
    kind: &'static str,
    bytes: &[u8],
) -> Result<T, WireError> {
    cbor4ii::serde::from_slice(bytes).map_err(|e| WireError::Malformed {
        kind,
        reason: e.to_string(),
    })
}

/// [`decode_cbor`] for a type that borrows from `bytes` (byte strings as slices).
pub(crate) fn decode_cbor_borrowed<'a, T: Deserialize<'a>>(
    kind: &'static str,
    bytes: &'a [u8],
) -> Result<T, WireError> {
    cbor4ii::serde::from_slice(bytes).map_err(|e| WireError::Malformed {
        kind,
        reason: e.to_string(),
    })
}

pub(crate) fn invalid<T: SignedBody>(field: &'static str, reason: impl Into<String>) -> WireError {
    WireError::InvalidField {
        kind: T::KIND,
        field,
        reason: reason.into(),
    }
}

/// Checks a text field: at most `max` bytes and no control characters (newlines and
/// tabs allowed only where `multiline`).
pub(crate) fn check_text<T: SignedBody>(
    field: &'static str,
    s: &str,
    max: usize,
    multiline: bool,
) -> Result<(), WireError> {
    if s.len() > max {
        return Err(invalid::<T>(
            field,
            format!("is {} bytes; the limit is {max}", s.len()),
        ));
    }
    if s.chars()
        .any(|c| c.is_control() && !(multiline && (c == '\n' || c == '\t')))
    {
        return Err(invalid::<T>(field, "contains control characters"));
    }
    Ok(())
}

/// Checks a petname-like token: 1 to [`crate::limits::MAX_NAME_BYTES`] characters from
/// `A-Z a-z 0-9 . _ -`. Used for names a knock claims, so a knock carries no free text.
pub fn is_valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= crate::limits::MAX_NAME_BYTES
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[cfg(test)]
pub(crate) mod tests;
