//! Invites: a one-line code one user hands another out of band (chat, mail, a call)
//! so the two pair without copying keys, across a relay or a tailnet where mDNS
//! cannot help (PROTOCOL.md, "Invites").
//!
//! The code names the inviter's identity, the name it suggests, the session waiting
//! for the join, how to reach it (relay and listen addresses), an expiry and a
//! one-time secret. The joiner pins the inviter from the code (pasting it is the
//! joiner's human decision) and knocks with the secret sealed to the inviter; the
//! inviter admits the first knock carrying an unexpired, unused secret it issued. So
//! a leaked code admits one key, once, before it expires — and nothing else.
//!
//! The code is not signed: it is only as trustworthy as the channel it was passed
//! over, which is the threat model of every invite link. It is `interlink1` followed
//! by the unpadded lowercase base32 of a CBOR map, so a double click selects it whole
//! and case does not matter.

use serde::{Deserialize, Serialize};
use serde_bytes::{ByteArray, ByteBuf};

use super::is_valid_name;
use crate::{identity::IdentityKey, session::SessionId};

/// Bytes of an invite's one-time secret.
pub const INVITE_SECRET_BYTES: usize = 16;
/// Most addresses (relays and direct) an invite carries.
pub const MAX_INVITE_ADDRS: usize = 6;
/// Longest address (binary multiaddr) an invite carries.
pub const MAX_INVITE_ADDR_BYTES: usize = 160;
/// Longest code accepted, in characters (a longer one is not decoded).
pub const MAX_INVITE_CODE_CHARS: usize = 2048;
/// What every code starts with.
pub const INVITE_PREFIX: &str = "interlink1";
/// The version of the code's map (its `v`).
pub const INVITE_VERSION: u8 = 1;

/// An invite, as its code carries it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Invite {
    /// Version of this map ([`INVITE_VERSION`]).
    #[serde(deserialize_with = "crate::wire::decode_version")]
    pub v: u8,
    /// The inviter's identity.
    pub key: IdentityKey,
    /// The name the inviter suggests for itself.
    pub name: String,
    /// The inviter's session waiting for the join (the knock goes there, or to
    /// another live session of the inviter).
    pub session: SessionId,
    /// The one-time secret the joiner's knock carries, sealed.
    pub secret: ByteArray<INVITE_SECRET_BYTES>,
    /// When the invite stops admitting, ms since the Unix epoch (the inviter's clock
    /// decides).
    pub expires: u64,
    /// Binary multiaddrs of the relays the inviter uses (each ending in `/p2p/<id>`):
    /// the joiner keeps them in its settings, a lasting way onto the same overlay.
    pub relays: Vec<ByteBuf>,
    /// Binary multiaddrs of the waiting session (each ending in `/p2p/<id>`), dialled
    /// once to join; they change with every start, so they are not kept.
    pub addrs: Vec<ByteBuf>,
}

impl std::fmt::Debug for Invite {
    // The secret stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Invite")
            .field("key", &self.key)
            .field("name", &self.name)
            .field("session", &self.session)
            .field("expires", &self.expires)
            .field("relays", &self.relays.len())
            .field("addrs", &self.addrs.len())
            .finish_non_exhaustive()
    }
}

/// Why a code was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum InviteError {
    /// It does not start with [`INVITE_PREFIX`].
    #[error("not an interlink invite: a code starts with {INVITE_PREFIX}")]
    Prefix,
    /// Longer than [`MAX_INVITE_CODE_CHARS`].
    #[error("the code is {0} characters; the limit is {MAX_INVITE_CODE_CHARS}")]
    TooLong(usize),
    /// Not base32, or cut short (a copy that lost characters).
    #[error("the code is damaged (was it copied whole?)")]
    Damaged,
    /// A newer or unknown version.
    #[error("invite version {0} is not supported here (this build reads {INVITE_VERSION})")]
    Version(u8),
    /// A field is out of bounds.
    #[error("the code's {0} is invalid")]
    Invalid(&'static str),
}

impl Invite {
    /// The one-line code.
    pub fn encode(&self) -> String {
        let bytes = super::encode(self);
        let mut code = String::with_capacity(INVITE_PREFIX.len() + bytes.len() * 8 / 5 + 1);
        code.push_str(INVITE_PREFIX);
        code.push_str(
            &data_encoding::BASE32_NOPAD
                .encode(&bytes)
                .to_ascii_lowercase(),
        );
        code
    }

    /// Reads a code (surrounding whitespace ignored, any case), checking every bound.
    pub fn decode(text: &str) -> Result<Self, InviteError> {
        let text = text.trim();
        if text.len() > MAX_INVITE_CODE_CHARS {
            return Err(InviteError::TooLong(text.len()));
        }
        let body = text
            .get(..INVITE_PREFIX.len())
            .filter(|p| p.eq_ignore_ascii_case(INVITE_PREFIX))
            .map(|_| &text[INVITE_PREFIX.len()..])
            .ok_or(InviteError::Prefix)?;
        let bytes = data_encoding::BASE32_NOPAD
            .decode(body.to_ascii_uppercase().as_bytes())
            .map_err(|_| InviteError::Damaged)?;
        let invite: Invite =
            super::decode_cbor("invite", &bytes).map_err(|_| InviteError::Damaged)?;
        invite.check()?;
        Ok(invite)
    }

    fn check(&self) -> Result<(), InviteError> {
        if self.v != INVITE_VERSION {
            return Err(InviteError::Version(self.v));
        }
        if !is_valid_name(&self.name) {
            return Err(InviteError::Invalid("name"));
        }
        if self.relays.len() + self.addrs.len() > MAX_INVITE_ADDRS {
            return Err(InviteError::Invalid("address list"));
        }
        if self
            .relays
            .iter()
            .chain(&self.addrs)
            .any(|a| a.is_empty() || a.len() > MAX_INVITE_ADDR_BYTES)
        {
            return Err(InviteError::Invalid("address"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Identity;

    fn invite() -> Invite {
        Invite {
            v: INVITE_VERSION,
            key: Identity::from_seed(&[7; 32]).public(),
            name: "alice".into(),
            session: SessionId::new("inv-1a2b3c").unwrap(),
            secret: ByteArray::new([9; INVITE_SECRET_BYTES]),
            expires: 1_800_000_000_000,
            relays: Vec::new(),
            addrs: vec![ByteBuf::from(vec![4, 127, 0, 0, 1, 6, 0x10, 0x00])],
        }
    }

    #[test]
    fn a_code_round_trips_in_any_case_and_with_spaces() {
        let code = invite().encode();
        assert!(code.starts_with(INVITE_PREFIX));
        assert!(code.chars().all(|c| c.is_ascii_alphanumeric()), "{code}");
        assert!(code.len() < 260, "{} characters", code.len());
        assert_eq!(Invite::decode(&code).unwrap(), invite());
        assert_eq!(
            Invite::decode(&format!("  {}\n", code.to_ascii_uppercase())).unwrap(),
            invite()
        );
    }

    #[test]
    fn damaged_foreign_and_oversized_codes_are_refused_with_a_reason() {
        let code = invite().encode();
        assert_eq!(Invite::decode("hello"), Err(InviteError::Prefix));
        assert_eq!(
            Invite::decode(&code[..code.len() - 7]),
            Err(InviteError::Damaged)
        );
        assert_eq!(
            Invite::decode(&format!("{code}!")),
            Err(InviteError::Damaged)
        );
        let long = format!("{INVITE_PREFIX}{}", "a".repeat(MAX_INVITE_CODE_CHARS));
        assert!(matches!(
            Invite::decode(&long),
            Err(InviteError::TooLong(_))
        ));
        let mut bad = invite();
        bad.v = 2;
        assert_eq!(Invite::decode(&bad.encode()), Err(InviteError::Version(2)));
        let mut bad = invite();
        bad.name = "a b".into();
        assert_eq!(
            Invite::decode(&bad.encode()),
            Err(InviteError::Invalid("name"))
        );
        let mut bad = invite();
        bad.addrs = vec![ByteBuf::from(vec![1; 4]); MAX_INVITE_ADDRS + 1];
        assert_eq!(
            Invite::decode(&bad.encode()),
            Err(InviteError::Invalid("address list"))
        );
    }

    #[test]
    fn the_secret_stays_out_of_debug_output() {
        let shown = format!("{:?}", invite());
        assert!(!shown.contains("9, 9"), "{shown}");
    }
}
