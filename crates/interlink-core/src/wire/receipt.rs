//! Receipts: the recipient's signed word that messages reached it — one signature for
//! every message of a delivery request it stored.

use serde::{Deserialize, Serialize};

use super::{MsgId, SignedBody, WireError};
use crate::{
    identity::IdentityKey,
    limits::{MAX_DELIVER_BATCH, MAX_RECEIPT_BYTES},
    session::SessionId,
    sign::Domain,
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
    #[serde(deserialize_with = "crate::wire::decode_version")]
    pub v: u8,
    /// The recipient identity (the signer).
    pub recipient: IdentityKey,
    #[allow(missing_docs)]
    pub recipient_session: SessionId,
    /// The original sender the receipt is for.
    pub sender: IdentityKey,
    /// The messages (1 to [`MAX_DELIVER_BATCH`], no repeats), all from `sender`.
    pub msg_ids: Vec<MsgId>,
    /// What happened to it.
    pub state: ReceiptState,
    /// Milliseconds since the Unix epoch.
    pub ts: u64,
    /// The signer's pass admitting `sender` into the signer's mailboxes
    /// ([`super::MailboxPass`]): a session that answers a sender hands it what it
    /// needs to write back while the signer sleeps.
    pub pass: Option<super::MailboxPass>,
}

impl SignedBody for Receipt {
    const KIND: &'static str = "receipt";
    const DOMAIN: Domain = Domain::Receipt;
    const MAX_BYTES: usize = MAX_RECEIPT_BYTES;

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
        let n = self.msg_ids.len();
        if n == 0 || n > MAX_DELIVER_BATCH {
            return Err(WireError::InvalidField {
                kind: Self::KIND,
                field: "msg_ids",
                reason: format!("lists {n} ids; 1 to {MAX_DELIVER_BATCH} are allowed"),
            });
        }
        let mut seen = std::collections::HashSet::with_capacity(n);
        if !self.msg_ids.iter().all(|id| seen.insert(*id)) {
            return Err(WireError::InvalidField {
                kind: Self::KIND,
                field: "msg_ids",
                reason: "lists a message twice".into(),
            });
        }
        Ok(())
    }
}
