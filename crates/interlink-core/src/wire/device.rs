//! The device-link code and the messages of the device-link exchange (PROTOCOL.md
//! §4.11, §8.8): how one person's second machine gets the identity of the first.
//!
//! The code is framed exactly like an invite code (§4.10: `interlink` and a format
//! digit, base32 of a signed wrapper and a 4-byte check) with its own format digit, 3,
//! and its own signing domain, `device-link`, so neither kind of code can be read as
//! the other. It is signed by the identity it hands over: the joiner checks the seed it
//! receives against that key, so no one who only handles the code can hand it an
//! identity of their own.
//!
//! The exchange's cryptography and state machines are in [`crate::device_link`]; this
//! module holds the encodings and their shape rules, checked before anything else.

use libp2p_identity::PeerId;
use multiaddr::{Multiaddr, Protocol};
use serde::{Deserialize, Serialize};
use serde_bytes::{ByteArray, ByteBuf};

use super::invite::{Wrapper, frame, parse, peer_of, unframe};
use crate::{
    identity::{Identity, IdentityKey},
    sign::{self, Domain},
    wire::{INVITE_SECRET_BYTES, InviteError, MAX_INVITE_ADDR_BYTES},
};

/// The format digit of a device-link code (its prefix's digit and its map's `v`).
pub const DEVICE_CODE_VERSION: u8 = 3;
/// What every device-link code starts with.
pub const DEVICE_CODE_PREFIX: &str = "interlink3";
/// Most addresses of the waiting node a code carries.
pub const MAX_DEVICE_ADDRS: usize = 6;
/// Most addresses either machine reports of itself in the exchange.
pub const MAX_LINK_ADDRS: usize = 8;
/// Longest address (multiaddr text) either machine reports of itself.
pub const MAX_LINK_ADDR_BYTES: usize = 256;
/// Bytes of every MAC of the exchange (HMAC-SHA256).
pub const DEVICE_LINK_MAC_BYTES: usize = 32;
/// Largest request of the exchange, encoded: a confirm with 8 addresses of 256 bytes
/// is 2,160 bytes.
pub const MAX_LINK_REQUEST_BYTES: usize = 4 * 1024;
/// Largest response of the exchange, encoded: the sealed offer and its framing.
pub const MAX_LINK_RESPONSE_BYTES: usize = 4 * 1024;
/// Largest sealed offer's plaintext: the seed and 8 addresses of 256 bytes fit in
/// 2,120 bytes.
pub const MAX_OFFER_BYTES: usize = 3 * 1024;

/// A device-link code, as it carries it (signed by `key`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceCode {
    /// The code's format ([`DEVICE_CODE_VERSION`]).
    pub v: u8,
    /// The identity the code hands over, which signs it.
    pub key: IdentityKey,
    /// The one-time secret: it authenticates both sides of the exchange.
    pub secret: ByteArray<INVITE_SECRET_BYTES>,
    /// When the code stops being accepted, ms since the Unix epoch.
    pub expires: u64,
    /// Binary multiaddrs of the waiting node, each ending in `/p2p/<its peer id>`, all
    /// with the same peer id.
    pub addrs: Vec<ByteBuf>,
}

impl std::fmt::Debug for DeviceCode {
    // The secret stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceCode")
            .field("key", &self.key)
            .field("expires", &self.expires)
            .field("addrs", &self.addrs.len())
            .finish_non_exhaustive()
    }
}

impl DeviceCode {
    /// The one-line code, signed by `identity` (which must be the code's `key`).
    pub fn encode(&self, identity: &Identity) -> Result<String, InviteError> {
        if identity.public() != self.key {
            return Err(InviteError::Invalid(
                "it must be signed by the identity it hands over".into(),
            ));
        }
        self.check()?;
        let body = super::encode(self);
        let sig = identity.sign(Domain::DeviceLink, &body);
        Ok(frame(
            DEVICE_CODE_VERSION,
            &super::encode(&Wrapper {
                body: ByteBuf::from(body),
                sig: ByteArray::new(sig),
            }),
        ))
    }

    /// Reads a code and verifies all of it but the expiry: the check, the shape, every
    /// address, and the signature under the key it names.
    pub fn decode(text: &str) -> Result<Self, InviteError> {
        let signed = unframe(text, DEVICE_CODE_VERSION)?;
        let wrapper: Wrapper = super::decode_cbor("device code", &signed)
            .map_err(|e| InviteError::Invalid(format!("its wrapper does not decode ({e})")))?;
        let code: DeviceCode = super::decode_cbor("device code", &wrapper.body)
            .map_err(|e| InviteError::Invalid(format!("its body does not decode ({e})")))?;
        code.check()?;
        sign::verify(
            &code.key,
            Domain::DeviceLink,
            &wrapper.body,
            wrapper.sig.as_ref(),
        )
        .map_err(|_| InviteError::Forged)?;
        Ok(code)
    }

    /// Whether `text` looks like a device-link code (its prefix), whatever else it is.
    pub fn is_device_code(text: &str) -> bool {
        super::invite::format_of(text) == Ok(DEVICE_CODE_VERSION)
    }

    /// The waiting node's addresses, each ending in `/p2p/<its peer id>`.
    pub fn direct_addrs(&self) -> Vec<Multiaddr> {
        self.addrs.iter().filter_map(|a| parse(a).ok()).collect()
    }

    /// The waiting node's peer id (the one every address ends in).
    pub fn peer(&self) -> Option<PeerId> {
        self.direct_addrs().first().and_then(peer_of)
    }

    fn check(&self) -> Result<(), InviteError> {
        let invalid = |what: String| Err(InviteError::Invalid(what));
        if self.v != DEVICE_CODE_VERSION {
            return Err(InviteError::Format(self.v));
        }
        if self.addrs.is_empty() || self.addrs.len() > MAX_DEVICE_ADDRS {
            return invalid(format!("it carries not 1-{MAX_DEVICE_ADDRS} addresses"));
        }
        let mut peer = None;
        for a in &self.addrs {
            if a.is_empty() || a.len() > MAX_INVITE_ADDR_BYTES {
                return invalid(format!("an address is not 1-{MAX_INVITE_ADDR_BYTES} bytes"));
            }
            let addr = parse(a).map_err(|e| {
                InviteError::Invalid(format!("an address is not a multiaddr ({e})"))
            })?;
            // The exchange is direct: the waiting node has no relay client.
            if addr.iter().any(|p| matches!(p, Protocol::P2pCircuit)) {
                return invalid(format!("address {addr} is relayed"));
            }
            let Some(this) = peer_of(&addr) else {
                return invalid(format!("address {addr} does not end in /p2p/<peer id>"));
            };
            if *peer.get_or_insert(this) != this {
                return invalid("its addresses name different nodes".into());
            }
        }
        Ok(())
    }
}

/// The step a request of the exchange takes.
pub mod step {
    /// The joiner's commitment to its ephemeral key, proving it holds the secret.
    pub const HELLO: u8 = 1;
    /// The joiner's ephemeral key, opening its commitment.
    pub const REVEAL: u8 = 2;
    /// The joiner's user confirmed the comparison string; its addresses.
    pub const CONFIRM: u8 = 3;
}

/// A request of the exchange (joiner → waiting node).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkRequest {
    /// The protocol version.
    pub v: u8,
    /// Which step ([`step`]).
    pub step: u8,
    /// `hello` only: the commitment to the joiner's ephemeral key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<ByteArray<32>>,
    /// `reveal` only: the joiner's ephemeral X25519 key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eph: Option<ByteArray<32>>,
    /// `confirm` only: where the joiner's machine can be reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addrs: Option<Vec<String>>,
    /// The step's MAC under the code's secret.
    pub mac: ByteArray<DEVICE_LINK_MAC_BYTES>,
}

impl LinkRequest {
    /// Decodes a request and checks its shape: the version, and exactly the fields its
    /// step has, within their bounds.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() > MAX_LINK_REQUEST_BYTES {
            return Err(format!("{} bytes is over the limit", bytes.len()));
        }
        let r: LinkRequest =
            super::decode_cbor("device-link request", bytes).map_err(|e| e.to_string())?;
        r.check()?;
        Ok(r)
    }

    /// The shape rules [`LinkRequest::decode`] applies.
    pub fn check(&self) -> Result<(), String> {
        if self.v != super::VERSION {
            return Err(format!("version {} is not {}", self.v, super::VERSION));
        }
        let shape = (
            self.commit.is_some(),
            self.eph.is_some(),
            self.addrs.is_some(),
        );
        match (self.step, shape) {
            (step::HELLO, (true, false, false)) | (step::REVEAL, (false, true, false)) => Ok(()),
            (step::CONFIRM, (false, false, true)) => check_addrs(self.addrs.as_deref()),
            (s, _) => Err(format!("step {s} with the wrong fields")),
        }
    }
}

/// How the waiting node answered a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkStatus {
    /// The step was taken; the response carries what it gives.
    Ok,
    /// The MAC did not verify, or the request does not fit the exchange: nothing else
    /// is said.
    Refused,
    /// The code was already used by another joiner.
    Used,
    /// The code expired.
    Expired,
    /// The user at the waiting node did not confirm the comparison string.
    Declined,
}

/// A response of the exchange (waiting node → joiner).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkResponse {
    /// The protocol version.
    pub v: u8,
    /// The step of the request it answers.
    pub step: u8,
    /// The answer.
    pub status: LinkStatus,
    /// `ok` to `hello`: the waiting node's ephemeral X25519 key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eph: Option<ByteArray<32>>,
    /// `ok` to `hello`: its MAC under the code's secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<ByteArray<DEVICE_LINK_MAC_BYTES>>,
    /// `ok` to `confirm`: the HPKE encapsulated key of the sealed offer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enc: Option<ByteArray<32>>,
    /// `ok` to `confirm`: the sealed [`DeviceOffer`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed: Option<ByteBuf>,
}

impl LinkResponse {
    /// A response with a status and nothing else (a refusal, or `ok` to `reveal`).
    pub fn status(step: u8, status: LinkStatus) -> Self {
        Self {
            v: super::VERSION,
            step,
            status,
            eph: None,
            mac: None,
            enc: None,
            sealed: None,
        }
    }

    /// Decodes a response and checks its shape against the request's step.
    pub fn decode(bytes: &[u8], asked: u8) -> Result<Self, String> {
        if bytes.len() > MAX_LINK_RESPONSE_BYTES {
            return Err(format!("{} bytes is over the limit", bytes.len()));
        }
        let r: LinkResponse =
            super::decode_cbor("device-link response", bytes).map_err(|e| e.to_string())?;
        r.check(asked)?;
        Ok(r)
    }

    /// The shape rules [`LinkResponse::decode`] applies, for a request of step `asked`.
    pub fn check(&self, asked: u8) -> Result<(), String> {
        if self.v != super::VERSION {
            return Err(format!("version {} is not {}", self.v, super::VERSION));
        }
        if self.step != asked {
            return Err(format!("answers step {}, not {asked}", self.step));
        }
        let shape = (
            self.eph.is_some(),
            self.mac.is_some(),
            self.enc.is_some(),
            self.sealed.is_some(),
        );
        let ok = match (self.status, self.step) {
            (LinkStatus::Ok, step::HELLO) => shape == (true, true, false, false),
            (LinkStatus::Ok, step::CONFIRM) => {
                shape == (false, false, true, true)
                    && self
                        .sealed
                        .as_ref()
                        .is_some_and(|s| s.len() <= MAX_OFFER_BYTES + 16)
            }
            _ => shape == (false, false, false, false),
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "a {:?} answer to step {} with the wrong fields",
                self.status, self.step
            ))
        }
    }
}

/// What the waiting node seals to the joiner: the identity's seed and where the
/// waiting machine can be reached.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceOffer {
    /// The identity's 32-byte secret seed (PROTOCOL.md §2.1).
    pub seed: ByteArray<32>,
    /// The waiting machine's addresses.
    pub addrs: Vec<String>,
}

impl std::fmt::Debug for DeviceOffer {
    // The seed stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceOffer")
            .field("addrs", &self.addrs)
            .finish_non_exhaustive()
    }
}

impl Drop for DeviceOffer {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut *self.seed);
    }
}

impl DeviceOffer {
    /// Decodes an opened offer and checks its addresses.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() > MAX_OFFER_BYTES {
            return Err(format!("{} bytes is over the limit", bytes.len()));
        }
        let o: DeviceOffer =
            super::decode_cbor("device offer", bytes).map_err(|e| e.to_string())?;
        check_addrs(Some(&o.addrs))?;
        Ok(o)
    }

    /// Its encoding.
    pub fn encode(&self) -> zeroize::Zeroizing<Vec<u8>> {
        zeroize::Zeroizing::new(super::encode(self))
    }
}

/// At most [`MAX_LINK_ADDRS`] multiaddr texts of at most [`MAX_LINK_ADDR_BYTES`]
/// bytes, each one that parses.
fn check_addrs(addrs: Option<&[String]>) -> Result<(), String> {
    let addrs = addrs.unwrap_or_default();
    if addrs.len() > MAX_LINK_ADDRS {
        return Err(format!(
            "{} addresses, at most {MAX_LINK_ADDRS}",
            addrs.len()
        ));
    }
    for a in addrs {
        if a.len() > MAX_LINK_ADDR_BYTES || a.parse::<Multiaddr>().is_err() {
            return Err("an address is not a multiaddr of at most 256 bytes".into());
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "device_tests.rs"]
mod tests;
