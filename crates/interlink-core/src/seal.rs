//! End-to-end sealing of message bodies with HPKE (RFC 9180).
//!
//! Suite: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305, base mode,
//! single shot. `info` is [`SEAL_INFO`]; the caller passes associated data that binds
//! the ciphertext to its envelope (message id, sender, recipient), so a body cannot be
//! lifted into another envelope. DHT holders and relays only ever see ciphertext.

use hpke::{
    Deserializable, OpModeR, OpModeS, Serializable, aead::ChaCha20Poly1305, kdf::HkdfSha256,
    kem::X25519HkdfSha256,
};
use rand_core::CryptoRng;
use serde::{Deserialize, Serialize};
use serde_bytes::{ByteArray, ByteBuf};

use crate::identity::{SealingKey, SealingSecret};

/// HPKE `info` for every sealed body.
pub const SEAL_INFO: &[u8] = b"interlink-p2p/v1/seal";
/// Bytes the AEAD tag adds to the plaintext.
pub const TAG_BYTES: usize = 16;

type Kem = X25519HkdfSha256;
type Kdf = HkdfSha256;
type Aead = ChaCha20Poly1305;

/// A sealed body: the HPKE encapsulated key and the ciphertext (with tag).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sealed {
    /// HPKE `enc`: the sender's ephemeral X25519 public key.
    pub enc: ByteArray<32>,
    /// Ciphertext followed by the 16-byte tag.
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

/// Seals `plaintext` to `to`, binding `aad`. `rng` supplies the ephemeral key.
pub fn seal(
    plaintext: &[u8],
    to: &SealingKey,
    aad: &[u8],
    rng: &mut impl CryptoRng,
) -> Result<Sealed, SealError> {
    let pk = to.to_hpke().map_err(|_| SealError::BadKey)?;
    let (enc, ct) = hpke::single_shot_seal_with_rng::<Aead, Kdf, Kem>(
        &OpModeS::Base,
        &pk,
        SEAL_INFO,
        plaintext,
        aad,
        rng,
    )
    .map_err(|_| SealError::Seal)?;
    let mut enc_bytes = [0u8; 32];
    enc_bytes.copy_from_slice(&enc.to_bytes());
    Ok(Sealed {
        enc: ByteArray::new(enc_bytes),
        ct: ByteBuf::from(ct),
    })
}

/// Opens `sealed` with `secret`, checking `aad`.
pub fn open(sealed: &Sealed, secret: &SealingSecret, aad: &[u8]) -> Result<Vec<u8>, SealError> {
    let enc = <Kem as hpke::Kem>::EncappedKey::from_bytes(sealed.enc.as_slice())
        .map_err(|_| SealError::Open)?;
    hpke::single_shot_open::<Aead, Kdf, Kem>(
        &OpModeR::Base,
        &secret.secret,
        &enc,
        SEAL_INFO,
        &sealed.ct,
        aad,
    )
    .map_err(|_| SealError::Open)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Identity;
    use rand_chacha::{ChaCha20Rng, rand_core::SeedableRng};

    #[test]
    fn seal_open_round_trip_and_binding() {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let bob = Identity::from_seed(&[2; 32]).sealing_secret();
        let eve = Identity::from_seed(&[3; 32]).sealing_secret();
        let s = seal(b"hello bob", &bob.public(), b"aad", &mut rng).unwrap();
        assert_eq!(s.ct.len(), 9 + TAG_BYTES);
        assert_eq!(open(&s, &bob, b"aad").unwrap(), b"hello bob");
        assert_eq!(open(&s, &bob, b"other"), Err(SealError::Open));
        assert_eq!(open(&s, &eve, b"aad"), Err(SealError::Open));
        let mut altered = s.clone();
        altered.ct[0] ^= 1;
        assert_eq!(open(&altered, &bob, b"aad"), Err(SealError::Open));
    }
}
