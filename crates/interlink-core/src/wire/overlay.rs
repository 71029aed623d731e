//! Messages of the overlay itself: what rides the presence topic, and the roster fetch.

use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use serde_bytes::ByteArray;
use sha2::{Digest as _, Sha256};

use super::{
    Announcement, Beacon, Goodbye, Refusal, Signed, Unverified, VERSION, WireError, decode_cbor,
    encode,
};
use crate::limits::{MAX_ANNOUNCEMENT_BYTES, MAX_ROSTER_RESPONSE_BYTES};

/// A message on the presence topic: a CBOR map with exactly one key,
/// `announcement`, `beacon` or `goodbye`, whose value is the signed wrapper's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)] // short-lived values, decoded and consumed at once
pub enum PresenceMessage {
    /// A session is here, as described (new, or changed).
    Announcement(Signed<Announcement>),
    /// A session whose announcement is unchanged is still here.
    Beacon(Signed<Beacon>),
    /// A session closed.
    Goodbye(Signed<Goodbye>),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum PresenceWire {
    Announcement(ByteBuf),
    Beacon(ByteBuf),
    Goodbye(ByteBuf),
}

/// Bytes of a gossipsub message id on the presence topic.
pub const GOSSIP_ID_BYTES: usize = 16;

const GOSSIP_ID_DOMAIN: &[u8] = b"interlink-p2p/v8/gossip-id\0";

/// The gossipsub message id of a presence-topic message with payload `data`: the first
/// [`GOSSIP_ID_BYTES`] bytes of SHA-256 over a domain and the payload (protocol version
/// 8). Messages travel unsigned by gossipsub (every payload is signed by its session),
/// so the id names the content: a copy is recognised as a duplicate whoever forwards
/// it, and nobody can make another message take a genuine one's id. The default id
/// (the publisher's PeerId in base58 and a decimal sequence number) was 71 bytes, and
/// every IHAVE lists an id per recent message.
pub fn gossip_message_id(data: &[u8]) -> [u8; GOSSIP_ID_BYTES] {
    let digest = Sha256::new()
        .chain_update(GOSSIP_ID_DOMAIN)
        .chain_update(data)
        .finalize();
    let mut id = [0u8; GOSSIP_ID_BYTES];
    id.copy_from_slice(&digest[..GOSSIP_ID_BYTES]);
    id
}

/// Largest presence-topic message.
pub const MAX_PRESENCE_MESSAGE_BYTES: usize = MAX_ANNOUNCEMENT_BYTES + 64;

impl PresenceMessage {
    /// The bytes published on the topic.
    pub fn to_bytes(&self) -> Vec<u8> {
        encode(&match self {
            PresenceMessage::Announcement(a) => {
                PresenceWire::Announcement(ByteBuf::from(a.to_bytes()))
            }
            PresenceMessage::Beacon(b) => PresenceWire::Beacon(ByteBuf::from(b.to_bytes())),
            PresenceMessage::Goodbye(g) => PresenceWire::Goodbye(ByteBuf::from(g.to_bytes())),
        })
    }

    /// Decodes and verifies a topic message; a beacon's signer is the identity
    /// `beacon_signer` names for the announcement it keeps live (none: it is refused).
    pub fn decode(
        bytes: &[u8],
        beacon_signer: impl FnOnce(&Beacon) -> Option<crate::identity::IdentityKey>,
    ) -> Result<Self, WireError> {
        Ok(match UnverifiedPresence::decode(bytes)? {
            UnverifiedPresence::Announcement(a) => PresenceMessage::Announcement(a.verify()?),
            UnverifiedPresence::Beacon(b) => {
                let b = match beacon_signer(b.claimed()) {
                    Some(key) => b.signed_by(key),
                    None => b,
                };
                PresenceMessage::Beacon(b.verify()?)
            }
            UnverifiedPresence::Goodbye(g) => PresenceMessage::Goodbye(g.verify()?),
        })
    }
}

/// A presence-topic message decoded but not verified ([`Unverified`]): what a node
/// looks at to recognise a copy it already holds before paying for signature checks.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)] // short-lived values, decoded and consumed at once
pub enum UnverifiedPresence {
    /// A claimed announcement.
    Announcement(Unverified<Announcement>),
    /// A claimed beacon (its signer is named by the receiver, [`Unverified::signed_by`]).
    Beacon(Unverified<Beacon>),
    /// A claimed goodbye.
    Goodbye(Unverified<Goodbye>),
}

impl UnverifiedPresence {
    /// Decodes a topic message: size and shape, no signature checks.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        if bytes.len() > MAX_PRESENCE_MESSAGE_BYTES {
            return Err(WireError::Oversized {
                kind: "presence message",
                len: bytes.len(),
                max: MAX_PRESENCE_MESSAGE_BYTES,
            });
        }
        Ok(
            match decode_cbor::<PresenceWire>("presence message", bytes)? {
                PresenceWire::Announcement(b) => Self::Announcement(Unverified::decode(&b)?),
                PresenceWire::Beacon(b) => Self::Beacon(Unverified::decode(&b)?),
                PresenceWire::Goodbye(b) => Self::Goodbye(Unverified::decode(&b)?),
            },
        )
    }
}

/// Roster fetch request (protocol version 8): "send me what I lack".
///
/// Either a **full** request — `have`, the requester's summary
/// ([`crate::presence::sync::Summary`]: the packed 8-byte tags of the announcement
/// versions it holds, empty for "everything"), and `away`, a bitmap over `have`
/// marking the sessions the requester judges away — or a **digest** request: `have`
/// and `away` empty and `digest` the requester's roster digest
/// ([`crate::presence::Roster::digest`]), answered with nothing but whether the
/// responder's is the same (anti-entropy between nodes that agree then costs a few
/// dozen bytes instead of 8 bytes per session).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RosterRequest {
    /// Protocol version.
    #[serde(deserialize_with = "crate::wire::decode_version")]
    pub v: u8,
    /// The requester's summary, tags back to back.
    pub have: ByteBuf,
    /// One bit per tag of `have`, in its order (tag `i` is bit `i % 8` of byte
    /// `i / 8`, least significant first): set when the requester judges that session
    /// away or overdue ([`crate::presence::Config::overdue`]), so a responder that
    /// heard from it since sends its newest beacon. Empty, or exactly as many bytes as
    /// `have` needs bits.
    pub away: ByteBuf,
    /// A digest request: the requester's roster digest.
    pub digest: Option<ByteArray<16>>,
}

impl Default for RosterRequest {
    fn default() -> Self {
        Self {
            v: VERSION,
            have: ByteBuf::new(),
            away: ByteBuf::new(),
            digest: None,
        }
    }
}

impl RosterRequest {
    /// A full request carrying `summary`, with the `away` bitmap over its tags.
    pub fn with_summary(summary: &crate::presence::sync::Summary) -> Self {
        let (have, away) = summary.to_wire();
        Self {
            v: VERSION,
            have: ByteBuf::from(have),
            away: ByteBuf::from(away),
            digest: None,
        }
    }

    /// A digest request.
    pub fn with_digest(digest: [u8; 16]) -> Self {
        Self {
            digest: Some(ByteArray::new(digest)),
            ..Self::default()
        }
    }

    /// Largest encoded request read: the largest summary, its bitmap and the map
    /// around them (30 bytes), with room to spare for a summary a few tags over the
    /// limit: one of 16,385 tags and its bitmap encodes in 39 bytes more than the
    /// largest summary and bitmap, so it is read and answered empty (PROTOCOL §8.2)
    /// rather than dropped unanswered.
    pub const MAX_BYTES: usize =
        crate::presence::sync::MAX_SUMMARY_BYTES + crate::presence::sync::MAX_AWAY_BYTES + 96;
}

/// Roster fetch response: the signed announcements the requester's summary did not
/// name, newest first, and beacons (each is verified by the requester), at most
/// [`MAX_ROSTER_RESPONSE_BYTES`] in all; to a digest request, only `same`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RosterResponse {
    /// Protocol version.
    #[serde(deserialize_with = "crate::wire::decode_version")]
    pub v: u8,
    /// Signed announcement wrappers.
    pub announcements: Vec<ByteBuf>,
    /// Signed beacon wrappers: the newest beacon of each announcement sent that has
    /// one, and of each session the request marked away that the responder heard
    /// from since its announcement.
    pub beacons: Vec<ByteBuf>,
    /// To a digest request: whether the responder's digest is the same (nothing to
    /// fetch). False otherwise.
    pub same: bool,
}

impl RosterResponse {
    /// Builds a response from an answer ([`crate::presence::Roster::answer`]), stopping
    /// before the size limit: announcements first, newest first, each followed by room
    /// for its beacon.
    pub fn new(answer: &crate::presence::sync::Answer<'_>) -> Self {
        let mut total = 32;
        let mut announcements = Vec::new();
        let mut beacons = Vec::new();
        for (a, b) in &answer.entries {
            let ann = a.to_bytes();
            let beacon = b.map(Signed::to_bytes);
            total += ann.len() + 8 + beacon.as_ref().map_or(0, |b| b.len() + 8);
            if total > MAX_ROSTER_RESPONSE_BYTES {
                break;
            }
            announcements.push(ByteBuf::from(ann));
            beacons.extend(beacon.map(ByteBuf::from));
        }
        for b in &answer.beacons {
            let bytes = b.to_bytes();
            total += bytes.len() + 8;
            if total > MAX_ROSTER_RESPONSE_BYTES {
                break;
            }
            beacons.push(ByteBuf::from(bytes));
        }
        Self {
            v: VERSION,
            announcements,
            beacons,
            same: answer.same,
        }
    }

    /// An answer with nothing in it (a refused request).
    pub fn empty() -> Self {
        Self {
            v: VERSION,
            announcements: Vec::new(),
            beacons: Vec::new(),
            same: false,
        }
    }
}

/// Live delivery request: one or more signed envelope wrappers for one recipient
/// session, in send order (at most [`crate::limits::MAX_DELIVER_BATCH`] envelopes and
/// [`crate::limits::MAX_DELIVER_REQUEST_BYTES`] of them, unless a single envelope is
/// larger). Batching lets the recipient store a burst with one fsync.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliverRequest {
    /// Protocol version.
    #[serde(deserialize_with = "crate::wire::decode_version")]
    pub v: u8,
    /// The signed envelope wrappers, oldest first.
    pub envelopes: Vec<ByteBuf>,
}

/// Live delivery response: one signed receipt for every envelope of the request the
/// recipient stored (now or before), and one result per envelope, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliverResponse {
    /// Protocol version.
    #[serde(deserialize_with = "crate::wire::decode_version")]
    pub v: u8,
    /// The signed receipt wrapper (`delivered`) listing every stored message; absent
    /// when none was stored.
    pub receipt: Option<ByteBuf>,
    /// The results, one per envelope.
    pub results: Vec<DeliverResult>,
}

/// The outcome of one envelope of a delivery request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliverResult {
    /// Why the recipient refused the envelope; `None` when it stored it, and the
    /// response's receipt lists it.
    pub refused: Option<Refusal>,
}

#[cfg(test)]
#[path = "overlay_tests.rs"]
mod tests;

/// Mailbox protocol request: hand a holder a copy of a mailbox record, or (the owner
/// only) ask for the copy it holds. A holder answers a `hold` only after the merged
/// copy is stored (a relay: committed to disk). Mailboxes travel only over this
/// protocol; the DHT finds the holders (their closest peers), it stores no mailbox.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MailboxRequest {
    /// Protocol version.
    #[serde(deserialize_with = "crate::wire::decode_version")]
    pub v: u8,
    /// What is asked.
    pub op: MailboxOp,
}

/// What a [`MailboxRequest`] asks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum MailboxOp {
    /// Merge this encoded mailbox record (`crate::mailbox`) into the copy held.
    Hold {
        /// The record's DHT key (32 bytes).
        key: ByteBuf,
        /// The encoded record.
        record: ByteBuf,
    },
    /// Send the copy held of the mailbox a signed, fresh [`super::MailboxFetch`] of its
    /// owner names; only the owner may read a mailbox (PROTOCOL §8.5).
    Fetch {
        /// The signed fetch request (a [`super::Signed`] wrapper), addressed to the holder.
        request: ByteBuf,
    },
    /// Never on the wire (serde skips it: it is neither encoded nor decoded). What a
    /// node's own stream reader hands the node for a request it did not read because
    /// the connection opened more mailbox streams at once than it takes.
    #[serde(skip)]
    Unread,
}

/// Mailbox protocol response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MailboxResponse {
    /// Protocol version.
    #[serde(deserialize_with = "crate::wire::decode_version")]
    pub v: u8,
    #[allow(missing_docs)]
    pub outcome: MailboxOutcome,
}

/// The outcome of a [`MailboxRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum MailboxOutcome {
    /// `hold`: merged and stored (on a relay: committed to disk). `kept` lists the
    /// envelopes of the handed copy, as `[sender, msg_id]`, that the merged copy holds
    /// or the owner acked: a sender learns which of its messages this holder took (the
    /// merge keeps the oldest, so a full mailbox takes a copy without its newest mail).
    /// It names only entries of the handed copy, so it tells the requester nothing it
    /// did not send.
    Held {
        /// The handed copy's envelopes that this holder keeps (or that are acked).
        kept: Vec<super::AckEntry>,
    },
    /// `fetch`: the copy held, if any.
    Record {
        /// The encoded record.
        record: Option<ByteBuf>,
    },
    /// Refused, with the reason.
    Refused {
        /// The recipient's refusal: a typed code and a detail.
        reason: Refusal,
    },
}

/// Receipt protocol request: one signed `delivered` receipt wrapper (§4.4) the
/// requesting session made for messages of the responder's session that it collected
/// from its mailbox (see `crate::collected`). The responder verifies it like any
/// signed object; nothing else in the request is trusted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptRequest {
    /// Protocol version.
    #[serde(deserialize_with = "crate::wire::decode_version")]
    pub v: u8,
    /// The signed receipt wrapper.
    pub receipt: ByteBuf,
}

/// Receipt protocol response: taken, or refused with the reason. The requester only
/// logs it: the receipt is best effort either way.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptResponse {
    /// Protocol version.
    #[serde(deserialize_with = "crate::wire::decode_version")]
    pub v: u8,
    /// Why the receipt was refused; `None` when it was taken.
    pub refused: Option<Refusal>,
}

/// Largest receipt-protocol request: one receipt and the map around it.
pub const MAX_RECEIPT_REQUEST_BYTES: usize = crate::limits::MAX_RECEIPT_BYTES + 64;
/// Largest receipt-protocol response: a refusal reason is short.
pub const MAX_RECEIPT_RESPONSE_BYTES: usize = 1024 + super::MAX_REFUSAL_DETAIL_BYTES;
