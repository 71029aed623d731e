//! Identity keys, fingerprints and the keys derived from them.
//!
//! A node's identity is one Ed25519 key. From its 32-byte secret seed two further keys
//! are derived deterministically with HKDF-SHA256 (docs/PROTOCOL.md, "Key derivations"):
//! - the **transport key** of a session (its libp2p PeerId), from the seed and the
//!   session id, so a session restarted under the same id keeps its PeerId and peers'
//!   cached addresses stay valid;
//! - the **sealing key**, an X25519 key used only to open HPKE-sealed bodies. It is
//!   bound to the identity by a signature ([`SealingKey`] + [`crate::wire::SealingBinding`]),
//!   never by reusing the Ed25519 key for Diffie-Hellman.

use std::{fmt, str::FromStr};

use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use hkdf::Hkdf;
use hpke::{Deserializable, Kem as _, Serializable, kem::X25519HkdfSha256};
use rand_core::CryptoRng;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use crate::{session::SessionId, sign::Domain};

/// HKDF salt for the per-session transport key.
pub const TRANSPORT_KEY_SALT: &[u8] = b"interlink-p2p/v1/transport-key";
/// HKDF salt for the sealing key.
pub const SEALING_KEY_SALT: &[u8] = b"interlink-p2p/v1/sealing-key";
/// Prefix hashed with a public key to make its fingerprint.
pub const FINGERPRINT_DOMAIN: &[u8] = b"interlink-p2p/v1/fingerprint";

/// A public identity key (Ed25519, 32 bytes). Text form: 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdentityKey([u8; 32]);

/// Why a key in text or bytes could not be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// Not 64 hex digits.
    #[error("an identity key is 64 hex digits, got {0} characters")]
    BadLength(usize),
    /// A character that is not a hex digit.
    #[error("an identity key is hex; found a non-hex character")]
    NotHex,
    /// The bytes are not a valid Ed25519 point.
    #[error("not a valid Ed25519 public key")]
    InvalidPoint,
}

impl IdentityKey {
    /// Wraps 32 bytes. Validity as a curve point is checked when a signature is verified.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The raw 32 bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The key as an Ed25519 verifying key; fails for bytes that are not a curve point.
    pub fn verifying_key(&self) -> Result<VerifyingKey, KeyError> {
        VerifyingKey::from_bytes(&self.0).map_err(|_| KeyError::InvalidPoint)
    }

    /// 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        hex_encode(&self.0)
    }

    /// The short human fingerprint: see [`Fingerprint`].
    pub fn fingerprint(&self) -> Fingerprint {
        let digest = Sha256::new()
            .chain_update(FINGERPRINT_DOMAIN)
            .chain_update(self.0)
            .finalize();
        let mut bytes = [0u8; Fingerprint::LEN];
        bytes.copy_from_slice(&digest[..Fingerprint::LEN]);
        Fingerprint(bytes)
    }
}

impl FromStr for IdentityKey {
    type Err = KeyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.len() != 64 {
            return Err(KeyError::BadLength(s.chars().count()));
        }
        let mut out = [0u8; 32];
        hex_decode_into(s, &mut out).ok_or(KeyError::NotHex)?;
        Ok(Self(out))
    }
}

impl fmt::Display for IdentityKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for IdentityKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdentityKey({})", self.fingerprint())
    }
}

/// A short fingerprint people compare: the first 6 bytes of
/// SHA-256(`"interlink-p2p/v1/fingerprint"` || key), shown as three groups of four hex
/// digits, `a1b2-c3d4-e5f6`. It is for recognising a key at a glance; pairing always
/// pins the full key.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint([u8; Fingerprint::LEN]);

impl Fingerprint {
    /// Bytes of digest in a fingerprint.
    pub const LEN: usize = 6;

    /// The fingerprint bytes.
    pub const fn as_bytes(&self) -> &[u8; Fingerprint::LEN] {
        &self.0
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = hex_encode(&self.0);
        write!(f, "{}-{}-{}", &h[0..4], &h[4..8], &h[8..12])
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

/// A node's secret identity. Signs everything the node sends.
pub struct Identity {
    signing: SigningKey,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the secret.
        f.debug_struct("Identity")
            .field("public", &self.public())
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// A new random identity.
    pub fn generate(rng: &mut impl CryptoRng) -> Self {
        let mut seed = Zeroizing::new([0u8; 32]);
        rng.fill_bytes(seed.as_mut());
        Self::from_seed(&seed)
    }

    /// The identity with this 32-byte Ed25519 secret seed.
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        Self {
            signing: SigningKey::from_bytes(seed),
        }
    }

    /// The 32-byte secret seed (for the key file only).
    pub fn seed(&self) -> Zeroizing<[u8; 32]> {
        Zeroizing::new(self.signing.to_bytes())
    }

    /// The public identity key.
    pub fn public(&self) -> IdentityKey {
        IdentityKey(self.signing.verifying_key().to_bytes())
    }

    /// Signs `payload` in `domain`: the signed message is the domain tag followed by
    /// the payload (see [`crate::sign`]).
    pub fn sign(&self, domain: Domain, payload: &[u8]) -> [u8; 64] {
        let mut msg = Vec::with_capacity(domain.tag().len() + payload.len());
        msg.extend_from_slice(domain.tag());
        msg.extend_from_slice(payload);
        self.signing.sign(&msg).to_bytes()
    }

    /// The libp2p transport keypair of `session`: an Ed25519 key whose seed is
    /// HKDF-SHA256(salt = [`TRANSPORT_KEY_SALT`], ikm = identity seed, info = session id).
    ///
    /// Any 32 bytes form a valid Ed25519 seed, so the error is unreachable in practice;
    /// it is surfaced rather than unwrapped.
    pub fn transport_keypair(
        &self,
        session: &SessionId,
    ) -> Result<libp2p_identity::Keypair, KeyError> {
        let mut okm = self.derive(TRANSPORT_KEY_SALT, session.as_str().as_bytes());
        libp2p_identity::Keypair::ed25519_from_bytes(okm.as_mut_slice())
            .map_err(|_| KeyError::InvalidPoint)
    }

    /// The sealing key pair: X25519 via HPKE's DeriveKeyPair (RFC 9180 §7.1.3) from
    /// HKDF-SHA256(salt = [`SEALING_KEY_SALT`], ikm = identity seed, info = "").
    pub fn sealing_secret(&self) -> SealingSecret {
        let okm = self.derive(SEALING_KEY_SALT, b"");
        let (secret, public) = X25519HkdfSha256::derive_keypair(okm.as_slice());
        SealingSecret {
            secret,
            public: SealingKey(public.to_bytes().into()),
        }
    }

    fn derive(&self, salt: &[u8], info: &[u8]) -> Zeroizing<[u8; 32]> {
        let seed = self.seed();
        let hk = Hkdf::<Sha256>::new(Some(salt), seed.as_slice());
        let mut okm = Zeroizing::new([0u8; 32]);
        // 32 bytes is far below HKDF-SHA256's 8160-byte output limit.
        if hk.expand(info, okm.as_mut_slice()).is_err() {
            okm.fill(0);
        }
        okm
    }
}

/// A public X25519 sealing key (32 bytes): bodies sent to its owner are sealed to it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SealingKey([u8; 32]);

impl SealingKey {
    /// Wraps 32 bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    pub(crate) fn to_hpke(self) -> Result<<X25519HkdfSha256 as hpke::Kem>::PublicKey, KeyError> {
        <X25519HkdfSha256 as hpke::Kem>::PublicKey::from_bytes(&self.0)
            .map_err(|_| KeyError::InvalidPoint)
    }
}

impl fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealingKey({})", &hex_encode(&self.0)[..12])
    }
}

/// The secret half of the sealing key; opens sealed bodies.
pub struct SealingSecret {
    pub(crate) secret: <X25519HkdfSha256 as hpke::Kem>::PrivateKey,
    public: SealingKey,
}

impl SealingSecret {
    /// The public sealing key.
    pub fn public(&self) -> SealingKey {
        self.public
    }

    /// The X25519 agreement with `other` (all zeros if `other` is a low-order point;
    /// the caller refuses that).
    pub fn agree(&self, other: &SealingKey) -> [u8; 32] {
        let mut bytes = Zeroizing::new([0u8; 32]);
        let mut mine = self.secret.to_bytes();
        bytes.copy_from_slice(&mine);
        zeroize::Zeroize::zeroize(mine.as_mut_slice());
        let secret = x25519_dalek::StaticSecret::from(*bytes);
        secret
            .diffie_hellman(&x25519_dalek::PublicKey::from(*other.as_bytes()))
            .to_bytes()
    }
}

impl fmt::Debug for SealingSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealingSecret")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

/// Lowercase hex of `bytes`.
pub fn hex_encode(bytes: &[u8]) -> String {
    data_encoding::HEXLOWER.encode(bytes)
}

/// Decodes hex (either case) into `out`; `None` unless `s` is exactly `2 * out.len()`
/// hex digits.
pub fn hex_decode_into(s: &str, out: &mut [u8]) -> Option<()> {
    // Checked first: `decode_mut` panics on an output of the wrong length.
    if s.len() != out.len() * 2 {
        return None;
    }
    data_encoding::HEXLOWER_PERMISSIVE
        .decode_mut(s.as_bytes(), out)
        .ok()
        .map(drop)
}

#[cfg(test)]
#[path = "identity_tests.rs"]
mod tests;
