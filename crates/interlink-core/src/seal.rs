//! End-to-end sealing of message bodies with HPKE (RFC 9180) and its exporter.
//!
//! Suite: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305, base mode, `info`
//! [`SEAL_INFO`]. A sender sets up one HPKE context per recipient key ([`SealContext`])
//! and exports a 32-byte body key from it (RFC 9180 §5.3, exporter context
//! [`EXPORT_CONTEXT`]); each body is then sealed with ChaCha20-Poly1305 under that key
//! with a fresh random 96-bit nonce. The recipient sets up the matching context once per
//! `enc` ([`OpenContext`]). So the Diffie-Hellman that dominates a single-shot HPKE seal
//! (and open) is paid once per context, not once per message; a sender replaces its
//! context after a bounded time and number of messages, which bounds what one
//! compromised context key exposes.
//!
//! The caller passes associated data that binds the ciphertext to its envelope
//! (message id, sender, recipient), so a body cannot be lifted into another envelope.
//! DHT holders and relays only ever see ciphertext.

use chacha20poly1305::{
    KeyInit,
    aead::{Aead as _, Payload},
};
use hpke::{
    Deserializable, OpModeR, OpModeS, Serializable, kdf::HkdfSha256, kem::X25519HkdfSha256,
};
use rand_core::CryptoRng;
use serde::{Deserialize, Serialize};
use serde_bytes::{ByteArray, ByteBuf};
use zeroize::Zeroizing;

use crate::identity::{SealingKey, SealingSecret};

/// HPKE `info` for every sealing context.
pub const SEAL_INFO: &[u8] = b"interlink-p2p/v2/seal";
/// HPKE exporter context of the body key.
pub const EXPORT_CONTEXT: &[u8] = b"interlink-p2p/v2/body-key";
/// Bytes the AEAD tag adds to the plaintext.
pub const TAG_BYTES: usize = 16;
/// Bytes of the random nonce in front of each ciphertext.
pub const NONCE_BYTES: usize = 12;

type Kem = X25519HkdfSha256;
type Kdf = HkdfSha256;
/// HPKE's AEAD id in the key schedule; bodies use the exported key with the same
/// algorithm ([`ChaCha20Poly1305`]).
type Aead = hpke::aead::ChaCha20Poly1305;
use chacha20poly1305::ChaCha20Poly1305;

/// A sealed body: the HPKE encapsulated key of its context, and the nonce, ciphertext
/// and tag.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sealed {
    /// HPKE `enc` of the sender's context: its ephemeral X25519 public key.
    pub enc: ByteArray<32>,
    /// The 12-byte nonce, then the ciphertext, then the 16-byte tag.
    pub ct: ByteBuf,
}

impl std::fmt::Debug for Sealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sealed({} bytes)", self.ct.len())
    }
}

/// Sealing or opening failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SealError {
    /// The recipient's sealing key is not a valid X25519 key.
    #[error("the recipient's sealing key is invalid")]
    BadKey,
    /// The ciphertext did not authenticate (wrong key, wrong envelope, or altered).
    #[error("the sealed body does not open: wrong recipient or altered ciphertext")]
    Open,
    /// HPKE failed while sealing.
    #[error("sealing failed")]
    Seal,
}

/// A sender's sealing context for one recipient key: one HPKE encapsulation whose
/// exported key seals any number of bodies.
pub struct SealContext {
    enc: [u8; 32],
    cipher: ChaCha20Poly1305,
}

impl std::fmt::Debug for SealContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealContext").finish_non_exhaustive()
    }
}

impl SealContext {
    /// Sets up a context to `to`; `rng` supplies the ephemeral key.
    pub fn new(to: &SealingKey, rng: &mut impl CryptoRng) -> Result<Self, SealError> {
        let pk = to.to_hpke().map_err(|_| SealError::BadKey)?;
        let (enc, ctx) =
            hpke::setup_sender_with_rng::<Aead, Kdf, Kem>(&OpModeS::Base, &pk, SEAL_INFO, rng)
                .map_err(|_| SealError::Seal)?;
        let mut key = Zeroizing::new([0u8; 32]);
        ctx.export(EXPORT_CONTEXT, key.as_mut_slice())
            .map_err(|_| SealError::Seal)?;
        let mut enc_bytes = [0u8; 32];
        enc_bytes.copy_from_slice(&enc.to_bytes());
        Ok(Self {
            enc: enc_bytes,
            cipher: ChaCha20Poly1305::new(&(*key).into()),
        })
    }

    /// Seals `plaintext`, binding `aad`, under a fresh random nonce from `rng`.
    pub fn seal(
        &self,
        plaintext: &[u8],
        aad: &[u8],
        rng: &mut impl CryptoRng,
    ) -> Result<Sealed, SealError> {
        let mut nonce = [0u8; NONCE_BYTES];
        rng.fill_bytes(&mut nonce);
        let body = self
            .cipher
            .encrypt(
                &nonce.into(),
                Payload {
                    msg: plaintext,
                    aad,
                },
            )
            .map_err(|_| SealError::Seal)?;
        let mut ct = Vec::with_capacity(NONCE_BYTES + body.len());
        ct.extend_from_slice(&nonce);
        ct.extend_from_slice(&body);
        Ok(Sealed {
            enc: ByteArray::new(self.enc),
            ct: ByteBuf::from(ct),
        })
    }
}

/// A recipient's opening context for one sender context (`enc`).
pub struct OpenContext {
    cipher: ChaCha20Poly1305,
}

impl std::fmt::Debug for OpenContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenContext").finish_non_exhaustive()
    }
}

impl OpenContext {
    /// Sets up the context of `enc` with `secret` (one X25519 operation).
    pub fn new(enc: &[u8; 32], secret: &SealingSecret) -> Result<Self, SealError> {
        let enc = <Kem as hpke::Kem>::EncappedKey::from_bytes(enc).map_err(|_| SealError::Open)?;
        let ctx =
            hpke::setup_receiver::<Aead, Kdf, Kem>(&OpModeR::Base, &secret.secret, &enc, SEAL_INFO)
                .map_err(|_| SealError::Open)?;
        let mut key = Zeroizing::new([0u8; 32]);
        ctx.export(EXPORT_CONTEXT, key.as_mut_slice())
            .map_err(|_| SealError::Open)?;
        Ok(Self {
            cipher: ChaCha20Poly1305::new(&(*key).into()),
        })
    }

    /// Opens `sealed` (which must belong to this context), checking `aad`.
    pub fn open(&self, sealed: &Sealed, aad: &[u8]) -> Result<Vec<u8>, SealError> {
        if sealed.ct.len() < NONCE_BYTES + TAG_BYTES {
            return Err(SealError::Open);
        }
        let (nonce, body) = sealed.ct.split_at(NONCE_BYTES);
        let nonce: [u8; NONCE_BYTES] = nonce.try_into().map_err(|_| SealError::Open)?;
        self.cipher
            .decrypt(&nonce.into(), Payload { msg: body, aad })
            .map_err(|_| SealError::Open)
    }
}

/// Seals `plaintext` to `to`, binding `aad`, in a context of its own. `rng` supplies
/// the ephemeral key and the nonce.
pub fn seal(
    plaintext: &[u8],
    to: &SealingKey,
    aad: &[u8],
    rng: &mut impl CryptoRng,
) -> Result<Sealed, SealError> {
    SealContext::new(to, rng)?.seal(plaintext, aad, rng)
}

/// Opens `sealed` with `secret`, checking `aad` (setting up its context once).
pub fn open(sealed: &Sealed, secret: &SealingSecret, aad: &[u8]) -> Result<Vec<u8>, SealError> {
    OpenContext::new(&sealed.enc, secret)?.open(sealed, aad)
}

#[cfg(test)]
#[path = "seal_tests.rs"]
mod tests;
