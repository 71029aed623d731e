//! Goodbye: a session says it closed (gone now, not just silent).

use serde::{Deserialize, Serialize};

use super::{SignedBody, WireError};
use crate::{
    identity::IdentityKey, limits::MAX_SMALL_MESSAGE_BYTES, session::SessionId, sign::Domain,
};

/// A signed goodbye: the session is gone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Goodbye {
    /// Protocol version.
    #[serde(deserialize_with = "crate::wire::decode_version")]
    pub v: u8,
    /// The identity (the signer).
    pub identity: IdentityKey,
    /// The session that closed.
    pub session_id: SessionId,
    /// Milliseconds since the Unix epoch.
    pub ts: u64,
    /// The session's announcement sequence at closing (greater than any announcement).
    pub seq: u64,
}

impl SignedBody for Goodbye {
    const KIND: &'static str = "goodbye";
    const DOMAIN: Domain = Domain::Goodbye;
    const MAX_BYTES: usize = MAX_SMALL_MESSAGE_BYTES;

    fn signer(&self) -> &IdentityKey {
        &self.identity
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
