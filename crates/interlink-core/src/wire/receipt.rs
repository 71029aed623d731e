//! Receipts: the recipient's signed word that a message reached it.

use serde::{Deserialize, Serialize};

use super::{MsgId, SignedBody, WireError};
use crate::{
    identity::IdentityKey, limits::MAX_SMALL_MESSAGE_BYTES, session::SessionId, sign::Domain,
};

/// What a receipt attests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptState {
    /// Durably in the recipient session's inbox.
    Delivered,
    /// The agent acknowledged (read) it.
    Read,
}

/// A signed receipt, made by the recipient for the sender.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    /// Protocol version.
    pub v: u8,
    /// The recipient identity (the signer).
    pub recipient: IdentityKey,
    /// The recipient session.
    pub recipient_session: SessionId,
    /// The original sender the receipt is for.
    pub sender: IdentityKey,
    /// The message.
    pub msg_id: MsgId,
    /// What happened to it.
    pub state: ReceiptState,
    /// Milliseconds since the Unix epoch.
    pub ts: u64,
}

impl SignedBody for Receipt {
    const KIND: &'static str = "receipt";
    const DOMAIN: Domain = Domain::Receipt;
    const MAX_BYTES: usize = MAX_SMALL_MESSAGE_BYTES;

    fn signer(&self) -> &IdentityKey {
        &self.recipient
    }
    fn version(&self) -> u8 {
        self.v
    }
    fn ts(&self) -> u64 {
        self.ts
    }
    fn check_fields(&self) -> Result<(), WireError> {
        Ok(())
    }
}
