//! Acks: a mailbox owner's signed word that holders may drop these messages.

use serde::{Deserialize, Serialize};

use super::{MsgId, SignedBody, WireError, invalid};
use crate::{
    identity::IdentityKey,
    limits::{MAX_ACK_BYTES, MAX_ACK_IDS},
    session::SessionId,
    sign::Domain,
};

/// One acknowledged message: its sender and its id. Encoded as a two-element CBOR
/// array `[sender, msg_id]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AckEntry(pub IdentityKey, pub MsgId);

impl AckEntry {
    /// The sender of the acknowledged message.
    pub fn sender(&self) -> &IdentityKey {
        &self.0
    }
    /// The acknowledged message's id.
    pub fn msg_id(&self) -> &MsgId {
        &self.1
    }
}

impl Ack {
    /// Whether this ack names `sender`'s message `id`.
    pub fn covers(&self, sender: &IdentityKey, id: &MsgId) -> bool {
        self.entries.iter().any(|e| e.0 == *sender && e.1 == *id)
    }
}

/// A signed ack from the owner of the mailbox `owner#owner_session`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ack {
    /// Protocol version.
    #[serde(deserialize_with = "crate::wire::decode_version")]
    pub v: u8,
    /// The mailbox owner's identity (the signer).
    pub owner: IdentityKey,
    /// The mailbox's session.
    pub owner_session: SessionId,
    /// Messages the owner has safely in its inbox, each named by its sender and id:
    /// ids are visible to every holder, so an id alone would let anyone who copies one
    /// get another sender's message acked away.
    pub entries: Vec<AckEntry>,
    /// Milliseconds since the Unix epoch.
    pub ts: u64,
}

impl SignedBody for Ack {
    const KIND: &'static str = "ack";
    const DOMAIN: Domain = Domain::Ack;
    const MAX_BYTES: usize = MAX_ACK_BYTES;

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
        if self.entries.is_empty() || self.entries.len() > MAX_ACK_IDS {
            return Err(invalid::<Self>(
                "entries",
                format!(
                    "must list 1 to {MAX_ACK_IDS} messages, got {}",
                    self.entries.len()
                ),
            ));
        }
        Ok(())
    }
}
