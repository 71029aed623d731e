//! Messages of the overlay itself: what rides the presence topic, and the roster fetch.

use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use super::{
    Announcement, Goodbye, Refusal, Signed, Unverified, VERSION, WireError, decode_cbor, encode,
};
use crate::limits::{MAX_ANNOUNCEMENT_BYTES, MAX_ROSTER_RESPONSE_BYTES};

/// A message on the presence topic: a CBOR map with exactly one key,
/// `announcement` or `goodbye`, whose value is the signed wrapper's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)] // short-lived values, decoded and consumed at once
pub enum PresenceMessage {
    /// A session is here (or still here).
    Announcement(Signed<Announcement>),
    /// A session closed.
    Goodbye(Signed<Goodbye>),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum PresenceWire {
    Announcement(ByteBuf),
    Goodbye(ByteBuf),
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
            PresenceMessage::Goodbye(g) => PresenceWire::Goodbye(ByteBuf::from(g.to_bytes())),
        })
    }

    /// Decodes and verifies a topic message.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        Ok(match UnverifiedPresence::decode(bytes)? {
            UnverifiedPresence::Announcement(a) => PresenceMessage::Announcement(a.verify()?),
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
                PresenceWire::Goodbye(b) => Self::Goodbye(Unverified::decode(&b)?),
            },
        )
    }
}

/// Roster fetch request: "send me the announcements I lack" (protocol version 7).
///
/// `have` is the requester's summary ([`crate::presence::sync::Summary`]): the packed
/// 8-byte tags of the announcement versions it holds. Empty asks for everything.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RosterRequest {
    /// Protocol version.
    pub v: u8,
    /// The requester's summary, tags back to back.
    pub have: ByteBuf,
}

impl Default for RosterRequest {
    fn default() -> Self {
        Self {
            v: VERSION,
            have: ByteBuf::new(),
        }
    }
}

impl RosterRequest {
    /// A request carrying `summary`.
    pub fn with_summary(summary: &crate::presence::sync::Summary) -> Self {
        Self {
            v: VERSION,
            have: ByteBuf::from(summary.to_bytes()),
        }
    }

    /// Largest encoded request: the summary plus the map around it.
    pub const MAX_BYTES: usize = crate::presence::sync::MAX_SUMMARY_BYTES + 64;
}

/// Roster fetch response: the signed announcements the requester's summary did not
/// name (each is verified again by the requester), newest first, at most
/// [`MAX_ROSTER_RESPONSE_BYTES`] in all.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RosterResponse {
    /// Protocol version.
    pub v: u8,
    /// Signed announcement wrappers.
    pub announcements: Vec<ByteBuf>,
}

impl RosterResponse {
    /// Builds a response from announcements already in the order to send (newest
    /// first), stopping before the size limit.
    pub fn new<'a>(announcements: impl IntoIterator<Item = &'a Signed<Announcement>>) -> Self {
        let mut total = 16;
        let mut out = Vec::new();
        for a in announcements {
            let bytes = a.to_bytes();
            total += bytes.len() + 8;
            if total > MAX_ROSTER_RESPONSE_BYTES {
                break;
            }
            out.push(ByteBuf::from(bytes));
        }
        Self {
            v: VERSION,
            announcements: out,
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
mod tests {
    use super::*;
    use crate::Identity;

    #[test]
    fn presence_message_round_trip_and_refusals() {
        let a = Identity::from_seed(&[1; 32]);
        let ann = Signed::sign(super::super::tests::announcement(&a, "s1", "x"), &a).unwrap();
        let msg = PresenceMessage::Announcement(ann.clone());
        assert_eq!(PresenceMessage::decode(&msg.to_bytes()).unwrap(), msg);
        assert!(PresenceMessage::decode(&[0xa0]).is_err());
        assert!(PresenceMessage::decode(&vec![0; MAX_PRESENCE_MESSAGE_BYTES + 1]).is_err());
        // An announcement's bytes under the goodbye key do not verify as a goodbye.
        let wrong = encode(&PresenceWire::Goodbye(ByteBuf::from(ann.to_bytes())));
        assert!(PresenceMessage::decode(&wrong).is_err());
        let resp = RosterResponse::new([&ann]);
        assert_eq!(resp.announcements.len(), 1);
    }
}

/// Mailbox protocol request: hand a holder a copy of a mailbox record, or (the owner
/// only) ask for the copy it holds. A holder answers a `hold` only after the merged
/// copy is stored (a relay: committed to disk). Mailboxes travel only over this
/// protocol; the DHT finds the holders (their closest peers), it stores no mailbox.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MailboxRequest {
    /// Protocol version.
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
    pub v: u8,
    /// The outcome.
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
        /// Why.
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
    pub v: u8,
    /// Why the receipt was refused; `None` when it was taken.
    pub refused: Option<Refusal>,
}

/// Largest receipt-protocol request: one receipt and the map around it.
pub const MAX_RECEIPT_REQUEST_BYTES: usize = crate::limits::MAX_RECEIPT_BYTES + 64;
/// Largest receipt-protocol response: a refusal reason is short.
pub const MAX_RECEIPT_RESPONSE_BYTES: usize = 1024 + super::MAX_REFUSAL_DETAIL_BYTES;
