//! Beacons: a session says it is still running (protocol version 8).
//!
//! A session's announcement rarely changes, yet until version 7 every heartbeat
//! re-published it whole: about 450 bytes of addresses, working directory, summary and
//! sealing binding, each copy forwarded by every mesh member of every node. A beacon
//! carries only what liveness needs: which announcement it keeps live (that
//! announcement's roster [`Tag`]), the interval until the next beacon, and a stamp —
//! about 150 bytes signed, a third of a re-announcement. The announcement is published
//! again only when it changes.
//!
//! The signer is not on the wire: it is the identity of the announcement the tag
//! names, which the receiver holds. A receiver that does not hold that announcement
//! cannot check the beacon and ignores it (it learns the announcement by roster sync,
//! and the next beacon then counts).

use serde::{Deserialize, Serialize};
use serde_bytes::ByteArray;

use super::{SignedBody, Unverified, WireError, invalid};
use crate::{identity::IdentityKey, presence::sync::Tag, sign::Domain};

/// Largest encoded beacon wrapper (a real one is about 140 bytes).
pub const MAX_BEACON_BYTES: usize = 256;

/// The key a decoded beacon claims before the receiver names its signer: no key at
/// all, so an unnamed beacon never verifies.
fn no_signer() -> IdentityKey {
    IdentityKey::from_bytes([0; 32])
}

/// A signed beacon: the session of the announcement `of` names is still running.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Beacon {
    /// Protocol version.
    #[serde(deserialize_with = "crate::wire::decode_version")]
    pub v: u8,
    /// The tag of the announcement it keeps live ([`Tag::of_announcement`]).
    pub of: ByteArray<8>,
    /// The longest the session waits before its next beacon or announcement, ms: the
    /// receiver judges it live for three of these ([`crate::presence::heartbeat`]).
    pub heartbeat_ms: u64,
    /// Milliseconds since the Unix epoch.
    pub ts: u64,
    /// From the session's announcement sequence: above the announcement it keeps live
    /// and every earlier beacon.
    pub seq: u64,
    /// The identity that signs it: the announcement's. Not on the wire.
    #[serde(skip, default = "no_signer")]
    signer: IdentityKey,
}

impl Beacon {
    /// A beacon of `signer`'s session whose current announcement has tag `of`.
    pub fn new(signer: IdentityKey, of: Tag, heartbeat_ms: u64, ts: u64, seq: u64) -> Self {
        Self {
            v: super::VERSION,
            of: ByteArray::new(of.0),
            heartbeat_ms,
            ts,
            seq,
            signer,
        }
    }

    /// The tag of the announcement it keeps live.
    pub fn tag(&self) -> Tag {
        Tag(self.of.into_array())
    }
}

impl SignedBody for Beacon {
    const KIND: &'static str = "beacon";
    const DOMAIN: Domain = Domain::Beacon;
    const MAX_BYTES: usize = MAX_BEACON_BYTES;

    fn signer(&self) -> &IdentityKey {
        &self.signer
    }
    fn version(&self) -> u8 {
        self.v
    }
    fn ts(&self) -> u64 {
        self.ts
    }
    fn check_fields(&self) -> Result<(), WireError> {
        if self.signer == no_signer() {
            return Err(invalid::<Self>(
                "of",
                "names no announcement the receiver holds",
            ));
        }
        Ok(())
    }
}

impl Unverified<Beacon> {
    /// Names the signer, the identity of the announcement its tag names, so that
    /// [`Unverified::verify`] checks the signature under it.
    pub fn signed_by(mut self, identity: IdentityKey) -> Self {
        self.body.signer = identity;
        self
    }
}

#[cfg(test)]
#[path = "beacon_tests.rs"]
mod tests;
