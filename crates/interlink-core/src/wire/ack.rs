//! Acks: a mailbox owner's signed word that holders may drop these messages.

use serde::{Deserialize, Serialize};

use super::{MsgId, SignedBody, WireError, invalid};
use crate::{
    identity::IdentityKey,
    limits::{MAX_ACK_BYTES, MAX_ACK_IDS},
    session::SessionId,
    sign::Domain,
};

/// A signed ack from the owner of the mailbox `owner#owner_session`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ack {
    /// Protocol version.
    pub v: u8,
    /// The mailbox owner's identity (the signer).
    pub owner: IdentityKey,
    /// The mailbox's session.
    pub owner_session: SessionId,
    /// Messages the owner has safely in its inbox.
    pub msg_ids: Vec<MsgId>,
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
        if self.msg_ids.is_empty() || self.msg_ids.len() > MAX_ACK_IDS {
            return Err(invalid::<Self>(
                "msg_ids",
                format!(
                    "must list 1 to {MAX_ACK_IDS} ids, got {}",
                    self.msg_ids.len()
                ),
            ));
        }
        Ok(())
    }
}
