//! The group tag of a message's sealed body (protocol version 7): which of the
//! sender's named groups a message was sent to, who else got a copy, and the thread
//! all copies share.
//!
//! It is sealed, never in the clear: a holder of a mailbox sees one envelope from the
//! sender to one session, exactly as for a direct message, and learns nothing of the
//! group or its members.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{Envelope, MsgId, SessionAddr, WireError, invalid, is_valid_name};
use crate::limits::MAX_GROUP_RECIPIENTS;

/// The group a message came through: CBOR map `{name, thread, members}` in that order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupTag {
    /// The sender's name for the group: 1–32 characters of `A-Z a-z 0-9 . _ -`, like a
    /// petname. The sender's word, not the recipient's: shown quoted.
    pub name: String,
    /// The thread every copy of the message shares, kept by the replies to it: a
    /// random id for a new group message, the replied message's thread for a reply.
    pub thread: MsgId,
    /// Every session a copy was addressed to (the recipient among them), 1 to
    /// [`MAX_GROUP_RECIPIENTS`], none twice. The sender is not listed: it is the
    /// envelope's signed sender.
    pub members: Vec<SessionAddr>,
}

impl GroupTag {
    /// Checks the fields a sender chose: a valid name, 1 to [`MAX_GROUP_RECIPIENTS`]
    /// members, none twice.
    pub fn check(&self) -> Result<(), WireError> {
        if !is_valid_name(&self.name) {
            return Err(invalid::<Envelope>(
                "body.group.name",
                "must be 1-32 characters from A-Z a-z 0-9 . _ -",
            ));
        }
        if self.members.is_empty() {
            return Err(invalid::<Envelope>("body.group.members", "is empty"));
        }
        if self.members.len() > MAX_GROUP_RECIPIENTS {
            return Err(invalid::<Envelope>(
                "body.group.members",
                format!(
                    "lists {} sessions; the limit is {MAX_GROUP_RECIPIENTS}",
                    self.members.len()
                ),
            ));
        }
        let distinct: BTreeSet<&SessionAddr> = self.members.iter().collect();
        if distinct.len() != self.members.len() {
            return Err(invalid::<Envelope>(
                "body.group.members",
                "lists a session twice",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "group_tests.rs"]
mod tests;
