//! Invites: a one-line code one user hands another out of band (chat, mail, a call)
//! so the two pair without copying keys, across a relay or a tailnet where mDNS
//! cannot help (PROTOCOL.md §4.10).
//!
//! The code names the inviter's identity, the name it suggests, the session waiting
//! for the join, how to reach it (relay and listen addresses), an expiry and a
//! one-time secret. The joiner knocks with the secret sealed to the inviter; the
//! inviter admits the first knock carrying an unexpired, unused secret it issued. So
//! a leaked code admits one key, once, before it expires — and nothing else.
//!
//! What the code carries is signed by the inviter's identity (the `invite` domain), so
//! nobody who handles it on the way can swap its addresses or relays for their own and
//! keep the inviter's key and fingerprint; and the code ends in a checksum, so a
//! mistyped or truncated copy is told apart from an altered one. Whoever replaces the
//! key too makes a code of their own: the fingerprint `join` prints is then theirs,
//! which is what the fingerprint check is for. [`Invite::decode`] verifies all of it
//! but the expiry (which needs a clock) before anything else may look at the code.
//!
//! The text is `interlink2` followed by the unpadded lowercase base32 of the signed
//! wrapper and its 4-byte check, so a double click selects it whole and case does not
//! matter.

use libp2p_identity::PeerId;
use multiaddr::{Multiaddr, Protocol};
use serde::{Deserialize, Serialize};
use serde_bytes::{ByteArray, ByteBuf};
use sha2::{Digest as _, Sha256};

use super::is_valid_name;
use crate::{
    identity::{Identity, IdentityKey},
    session::SessionId,
    sign::{self, Domain},
};

/// Bytes of an invite's one-time secret.
pub const INVITE_SECRET_BYTES: usize = 16;
/// Most addresses (relays and direct) an invite carries.
pub const MAX_INVITE_ADDRS: usize = 6;
/// Longest address (binary multiaddr) an invite carries.
pub const MAX_INVITE_ADDR_BYTES: usize = 160;
/// Longest code accepted, in characters (a longer one is not decoded).
pub const MAX_INVITE_CODE_CHARS: usize = 2048;
/// What every code of this format starts with: `interlink` and the format's version.
pub const INVITE_PREFIX: &str = "interlink2";
/// The version of the code's format (its prefix's digit and its map's `v`).
pub const INVITE_VERSION: u8 = 2;
/// Bytes of the check that ends a code.
pub const INVITE_CHECK_BYTES: usize = 4;
/// The domain of the check: SHA-256 over it and the signed wrapper.
const CHECK_DOMAIN: &[u8] = b"interlink-p2p/v1/invite-check\0";

/// An invite, as its code carries it (signed by `key`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Invite {
    /// Version of the code's format ([`INVITE_VERSION`]).
    pub v: u8,
    /// The inviter's identity, which signs the code.
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
    /// Binary multiaddrs of the waiting session (each ending in `/p2p/<its peer
    /// id>`), dialled to join.
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

/// The signed wrapper of a code: the encoded [`Invite`] and the inviter's signature
/// over `tag || body` in the `invite` domain (the shape of PROTOCOL.md §3.1).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Wrapper {
    pub(super) body: ByteBuf,
    pub(super) sig: ByteArray<64>,
}

/// Why a code was refused. Each message is a sentence a person can act on.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum InviteError {
    /// It does not start with `interlink`.
    #[error("this is not an interlink-p2p invite code (a code starts with {INVITE_PREFIX})")]
    Prefix,
    /// A code of another format version (`interlink1`, or a newer one).
    #[error(
        "this code is in invite format {0}, and this interlink-p2p reads format \
         {INVITE_VERSION}: both of you need a current interlink-p2p; then they run \
         `interlink-p2p invite` again"
    )]
    Format(u8),
    /// Longer than [`MAX_INVITE_CODE_CHARS`].
    #[error("the code is {0} characters; an invite code is at most {MAX_INVITE_CODE_CHARS}")]
    TooLong(usize),
    /// Not base32, cut short, or a character changed: the check does not match.
    #[error(
        "the code is damaged: a character is wrong, missing or extra (its check does not \
         match). Copy it again whole"
    )]
    Damaged,
    /// The check matches but the signature does not: altered after it was made.
    #[error(
        "the code was altered after the inviter made it (its signature does not verify \
         under the key it names). Do not use it: ask them for a new code over a channel \
         you trust"
    )]
    Forged,
    /// The check matches but what it carries breaks a rule: made by a faulty program.
    #[error("the code is not a valid invite: {0}")]
    Invalid(String),
}

impl Invite {
    /// The one-line code, signed by `identity` (which must be the invite's `key`).
    pub fn encode(&self, identity: &Identity) -> Result<String, InviteError> {
        if identity.public() != self.key {
            return Err(InviteError::Invalid(
                "it must be signed by the identity it names".into(),
            ));
        }
        self.check()?;
        let body = super::encode(self);
        let sig = identity.sign(Domain::Invite, &body);
        Ok(frame(
            INVITE_VERSION,
            &super::encode(&Wrapper {
                body: ByteBuf::from(body),
                sig: ByteArray::new(sig),
            }),
        ))
    }

    /// Reads a code (surrounding whitespace ignored, any case) and verifies all of it
    /// but the expiry: the check, the shape, every field and address, and the
    /// signature under the key it names.
    pub fn decode(text: &str) -> Result<Self, InviteError> {
        let signed = unframe(text, INVITE_VERSION)?;
        let wrapper: Wrapper = super::decode_cbor("invite", &signed)
            .map_err(|e| InviteError::Invalid(format!("its wrapper does not decode ({e})")))?;
        let invite: Invite = super::decode_cbor("invite", &wrapper.body)
            .map_err(|e| InviteError::Invalid(format!("its body does not decode ({e})")))?;
        if invite.v != INVITE_VERSION {
            return Err(InviteError::Format(invite.v));
        }
        invite.check()?;
        sign::verify(
            &invite.key,
            Domain::Invite,
            &wrapper.body,
            wrapper.sig.as_ref(),
        )
        .map_err(|_| InviteError::Forged)?;
        Ok(invite)
    }

    /// The relays the inviter signed, each ending in `/p2p/<relay id>`.
    pub fn relay_addrs(&self) -> Vec<Multiaddr> {
        self.relays.iter().filter_map(|a| parse(a).ok()).collect()
    }

    /// The waiting session's addresses, each ending in `/p2p/<its peer id>`.
    pub fn direct_addrs(&self) -> Vec<Multiaddr> {
        self.addrs.iter().filter_map(|a| parse(a).ok()).collect()
    }

    fn check(&self) -> Result<(), InviteError> {
        let invalid = |what: &str| Err(InviteError::Invalid(what.to_owned()));
        if self.v != INVITE_VERSION {
            return Err(InviteError::Format(self.v));
        }
        if !is_valid_name(&self.name) {
            return invalid("its name is not 1-32 characters of A-Z a-z 0-9 . _ -");
        }
        if self.relays.len() + self.addrs.len() > MAX_INVITE_ADDRS {
            return invalid("it carries more than 6 addresses");
        }
        if self.addrs.is_empty() && self.relays.is_empty() {
            return invalid("it carries no address to reach the inviter");
        }
        for (list, what) in [(&self.relays, "relay"), (&self.addrs, "address")] {
            for a in list {
                if a.is_empty() || a.len() > MAX_INVITE_ADDR_BYTES {
                    return invalid(&format!("a {what} is not 1-{MAX_INVITE_ADDR_BYTES} bytes"));
                }
                let addr = parse(a).map_err(|e| {
                    InviteError::Invalid(format!("a {what} is not a multiaddr ({e})"))
                })?;
                if peer_of(&addr).is_none() {
                    return invalid(&format!("{what} {addr} does not end in /p2p/<peer id>"));
                }
                if addr.iter().any(|p| matches!(p, Protocol::P2pCircuit)) && what == "relay" {
                    return invalid(&format!("relay {addr} is a relayed address itself"));
                }
            }
        }
        // The direct addresses name one session: one node.
        let mut peers = self
            .addrs
            .iter()
            .filter_map(|a| parse(a).ok().and_then(|a| peer_of(&a)));
        if let Some(first) = peers.next()
            && peers.any(|p| p != first)
        {
            return invalid("its addresses name different nodes");
        }
        Ok(())
    }
}

/// A code's text: `interlink` and the format's digit, then the unpadded lowercase
/// base32 of the encoded signed `wrapper` and its check (PROTOCOL.md §4.10; the
/// device-link code of §4.11 is framed the same way).
pub(super) fn frame(format: u8, wrapper: &[u8]) -> String {
    let mut bytes = wrapper.to_vec();
    bytes.extend_from_slice(&check_of(wrapper));
    let mut code = String::with_capacity(INVITE_PREFIX.len() + bytes.len() * 8 / 5 + 1);
    code.push_str("interlink");
    code.push(char::from(b'0' + format % 10));
    code.push_str(
        &data_encoding::BASE32_NOPAD
            .encode(&bytes)
            .to_ascii_lowercase(),
    );
    code
}

/// The format digit of a code's text (after `interlink`), if it has one.
pub(super) fn format_of(text: &str) -> Result<u8, InviteError> {
    let text = text.trim();
    let rest = text
        .get(.."interlink".len())
        .filter(|p| p.eq_ignore_ascii_case("interlink"))
        .map(|_| &text["interlink".len()..])
        .ok_or(InviteError::Prefix)?;
    rest.chars()
        .next()
        .and_then(|d| d.to_digit(10))
        .and_then(|d| u8::try_from(d).ok())
        .ok_or(InviteError::Prefix)
}

/// Reads a code of format `format` up to its signed wrapper: the length, the prefix,
/// the base32 and the check. The wrapper's contents are the caller's to verify.
pub(super) fn unframe(text: &str, format: u8) -> Result<Vec<u8>, InviteError> {
    let text = text.trim();
    if text.len() > MAX_INVITE_CODE_CHARS {
        return Err(InviteError::TooLong(text.len()));
    }
    let found = format_of(text)?;
    if found != format {
        return Err(InviteError::Format(found));
    }
    let mut bytes = data_encoding::BASE32_NOPAD
        .decode(
            text["interlink".len() + 1..]
                .to_ascii_uppercase()
                .as_bytes(),
        )
        .map_err(|_| InviteError::Damaged)?;
    let split = bytes
        .len()
        .checked_sub(INVITE_CHECK_BYTES)
        .ok_or(InviteError::Damaged)?;
    if bytes[split..] != check_of(&bytes[..split]) {
        return Err(InviteError::Damaged);
    }
    bytes.truncate(split);
    Ok(bytes)
}

pub(super) fn parse(bytes: &[u8]) -> Result<Multiaddr, multiaddr::Error> {
    Multiaddr::try_from(bytes.to_vec())
}

pub(super) fn peer_of(addr: &Multiaddr) -> Option<PeerId> {
    match addr.iter().last() {
        Some(Protocol::P2p(peer)) => Some(peer),
        _ => None,
    }
}

fn check_of(signed: &[u8]) -> [u8; INVITE_CHECK_BYTES] {
    let digest = Sha256::new()
        .chain_update(CHECK_DOMAIN)
        .chain_update(signed)
        .finalize();
    let mut check = [0; INVITE_CHECK_BYTES];
    check.copy_from_slice(&digest[..INVITE_CHECK_BYTES]);
    check
}

#[cfg(test)]
#[path = "invite_tests.rs"]
mod tests;
