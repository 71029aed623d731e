//! A session's descriptive presence — working directory, git label, summary, host,
//! delivery mode, its project and its claims on files — sealed inside its announcement
//! so that only the identities it is for read it (PROTOCOL §4.1, "Details"; since
//! version 13, project and claims since 14).
//!
//! The plaintext is sealed once, under a fresh content key, with XChaCha20-Poly1305;
//! the content key is wrapped for each reader under a key only the announcer and that
//! reader can compute: HKDF over the X25519 agreement of their sealing keys (§2.3),
//! with both identities in the info, so the wrap from A to B differs from B's to A and
//! two announcements do not show that their announcers are paired. A 4-byte hint,
//! derived beside the wrap key, lets a reader find its wrap without trying the others.
//! The announcer's own identity is a reader too (its other sessions and machines).
//! Taking a reader out of the list is all removal takes: the next announcement is
//! closed to it, with no key to rotate or hand out.

use chacha20poly1305::{
    KeyInit, XChaCha20Poly1305,
    aead::{Aead as _, Payload},
};
use hkdf::Hkdf;
use rand_core::CryptoRng;
use serde::{Deserialize, Serialize};
use serde_bytes::{ByteArray, ByteBuf};
use sha2::Sha256;
use zeroize::Zeroizing;

use super::{DeliveryMode, HostKind, WireError, check_text};
use crate::{
    claims::{Claim, MAX_CLAIMS_PER_SESSION, ProjectId},
    identity::{IdentityKey, SealingKey, SealingSecret},
    limits::{MAX_CWD_BYTES, MAX_GIT_LABEL_BYTES, MAX_SUMMARY_BYTES},
    session::SessionId,
};

/// Most readers an announcement's details are wrapped for (the announcer's own
/// identity among them).
pub const MAX_PRESENCE_READERS: usize = 64;
/// Bytes of one reader entry: the 4-byte hint, the wrapped 32-byte content key and its
/// 16-byte tag.
pub const READER_ENTRY_BYTES: usize = HINT_BYTES + 32 + 16;
/// Largest sealed details: the plaintext's largest encoding (about 1,850 bytes, and
/// about 2,400 for eight claims) and the tag.
pub const MAX_DETAILS_CT_BYTES: usize = 4608;
/// HKDF salt of a reader's wrap key and hint.
pub const READER_SALT: &[u8] = b"interlink-p2p/v1/presence-reader";
const HINT_BYTES: usize = 4;
const NONCE_BYTES: usize = 24;

/// What a session says about its work: readable by its readers only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Details {
    /// Working directory.
    pub cwd: String,
    /// Label of the git root (usually its directory name), if in a repository.
    pub git_label: Option<String>,
    /// Free-text description of the session's work.
    pub summary: String,
    /// Agent host.
    pub host: HostKind,
    /// Delivery mode.
    pub delivery: DeliveryMode,
    /// The project the working directory is in ([`ProjectId`]), if it is in one.
    pub project: Option<ByteArray<16>>,
    /// The session's claims on files of that project ([`crate::claims`]); none
    /// without a project.
    pub claims: Vec<Claim>,
}

/// [`Details`] sealed for a list of readers, as an announcement carries them.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SealedDetails {
    /// The random 24-byte nonce of the details and of every wrap.
    pub nonce: ByteArray<NONCE_BYTES>,
    /// The details' CBOR, sealed under the content key, with its tag.
    pub ct: ByteBuf,
    /// One entry per reader: hint (4) || the content key wrapped for it (48).
    pub readers: Vec<ByteArray<READER_ENTRY_BYTES>>,
}

impl std::fmt::Debug for SealedDetails {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SealedDetails({} bytes, {} readers)",
            self.ct.len(),
            self.readers.len()
        )
    }
}

/// Why details could not be sealed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DetailsError {
    /// A field breaks its rule (length, control characters).
    #[error("{0}")]
    Invalid(String),
    /// More readers than [`MAX_PRESENCE_READERS`].
    #[error("{0} readers; the limit is {MAX_PRESENCE_READERS}")]
    TooManyReaders(usize),
    /// A reader's sealing key gives no shared secret (a low-order point).
    #[error("a reader's sealing key is not usable")]
    BadReaderKey,
}

impl Details {
    /// The field rules of an announcement's text fields: lengths and no control
    /// characters (the same checks as every signed body's, [`super::check_text`]).
    pub fn check(&self) -> Result<(), String> {
        let text = |field, s: &str, max| {
            check_text::<super::Announcement>(field, s, max, false).map_err(|e| e.to_string())
        };
        text("cwd", &self.cwd, MAX_CWD_BYTES)?;
        if let Some(g) = &self.git_label {
            text("git_label", g, MAX_GIT_LABEL_BYTES)?;
        }
        text("summary", &self.summary, MAX_SUMMARY_BYTES)?;
        if self.claims.len() > MAX_CLAIMS_PER_SESSION {
            return Err(format!(
                "{} claims; the limit is {MAX_CLAIMS_PER_SESSION}",
                self.claims.len()
            ));
        }
        if !self.claims.is_empty() && self.project.is_none() {
            return Err("claims without a project".into());
        }
        // Times are checked where they are used, against the reader's clock.
        for claim in &self.claims {
            claim.check(claim.since).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The project, as an id.
    pub fn project_id(&self) -> Option<ProjectId> {
        self.project.as_ref().map(|p| ProjectId(p.into_array()))
    }

    /// Seals these details of `announcer`'s `session` for its own identity (its other
    /// sessions and machines) and for `others` (identity and verified sealing key each;
    /// the announcer's own is skipped there).
    pub fn seal(
        &self,
        announcer: &crate::Identity,
        session: &SessionId,
        others: &[(IdentityKey, SealingKey)],
        rng: &mut impl CryptoRng,
    ) -> Result<SealedDetails, DetailsError> {
        self.check().map_err(DetailsError::Invalid)?;
        let secret = announcer.sealing_secret();
        let me = announcer.public();
        let mut readers = vec![(me, secret.public())];
        readers.extend(others.iter().filter(|(k, _)| *k != me).copied());
        if readers.len() > MAX_PRESENCE_READERS {
            return Err(DetailsError::TooManyReaders(readers.len()));
        }
        let mut nonce = [0u8; NONCE_BYTES];
        rng.fill_bytes(&mut nonce);
        let mut content_key = Zeroizing::new([0u8; 32]);
        rng.fill_bytes(content_key.as_mut());
        let aad = aad(&me, session);
        let ct = xchacha(&content_key)
            .encrypt(
                (&nonce).into(),
                Payload {
                    msg: &super::encode(self),
                    aad: &aad,
                },
            )
            .map_err(|_| DetailsError::Invalid("the details could not be sealed".into()))?;
        let mut entries = Vec::with_capacity(readers.len());
        for (reader, key) in &readers {
            let wrap =
                ReaderKey::agree(&secret, key, &me, reader).ok_or(DetailsError::BadReaderKey)?;
            let sealed = xchacha(&wrap.key)
                .encrypt(
                    (&nonce).into(),
                    Payload {
                        msg: content_key.as_slice(),
                        aad: &aad,
                    },
                )
                .map_err(|_| DetailsError::BadReaderKey)?;
            let mut entry = [0u8; READER_ENTRY_BYTES];
            entry[..HINT_BYTES].copy_from_slice(&wrap.hint);
            entry[HINT_BYTES..].copy_from_slice(&sealed);
            entries.push(ByteArray::new(entry));
        }
        // In hint order, so the list's order says nothing of who was added when.
        entries.sort_unstable_by(|a, b| a.as_slice().cmp(b.as_slice()));
        Ok(SealedDetails {
            nonce: ByteArray::new(nonce),
            ct: ByteBuf::from(ct),
            readers: entries,
        })
    }
}

impl SealedDetails {
    /// The shape rules: the number of readers and the size of the ciphertext.
    pub(crate) fn check_shape(&self) -> Result<(), String> {
        if self.readers.len() > MAX_PRESENCE_READERS {
            return Err(format!(
                "has {} readers; the limit is {MAX_PRESENCE_READERS}",
                self.readers.len()
            ));
        }
        if self.ct.len() < 16 || self.ct.len() > MAX_DETAILS_CT_BYTES {
            return Err(format!(
                "ciphertext is {} bytes; it must be 16 to {MAX_DETAILS_CT_BYTES}",
                self.ct.len()
            ));
        }
        Ok(())
    }

    /// Opens the details with `wrap`, the key the reader shares with the announcer
    /// ([`ReaderKey::agree`]); `None` when no entry is for this reader or one fails.
    pub fn open(
        &self,
        announcer: &IdentityKey,
        session: &SessionId,
        wrap: &ReaderKey,
    ) -> Option<Details> {
        let aad = aad(announcer, session);
        let content_key = self
            .readers
            .iter()
            .filter(|e| e[..HINT_BYTES] == wrap.hint)
            .find_map(|e| {
                xchacha(&wrap.key)
                    .decrypt(
                        (&*self.nonce).into(),
                        Payload {
                            msg: &e[HINT_BYTES..],
                            aad: &aad,
                        },
                    )
                    .ok()
            })
            .map(Zeroizing::new)?;
        let key: &[u8; 32] = content_key.as_slice().try_into().ok()?;
        let plain = xchacha(key)
            .decrypt(
                (&*self.nonce).into(),
                Payload {
                    msg: &self.ct,
                    aad: &aad,
                },
            )
            .ok()?;
        let details: Details = super::decode_cbor("details", &plain).ok()?;
        details.check().ok()?;
        Some(details)
    }
}

/// The key and hint one announcer's wraps for one reader use.
#[derive(Clone)]
pub struct ReaderKey {
    key: Zeroizing<[u8; 32]>,
    hint: [u8; HINT_BYTES],
}

impl std::fmt::Debug for ReaderKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReaderKey(..)")
    }
}

impl ReaderKey {
    /// From `secret` (one side's sealing secret) and `other` (the other side's sealing
    /// key), for the wraps `announcer` makes for `reader`: both sides compute the same.
    /// `None` if the agreement is all zeros (`other` is a low-order point).
    pub fn agree(
        secret: &SealingSecret,
        other: &SealingKey,
        announcer: &IdentityKey,
        reader: &IdentityKey,
    ) -> Option<Self> {
        let shared = Zeroizing::new(secret.agree(other));
        if shared.iter().all(|b| *b == 0) {
            return None;
        }
        let mut info = [0u8; 64];
        info[..32].copy_from_slice(announcer.as_bytes());
        info[32..].copy_from_slice(reader.as_bytes());
        let mut okm = Zeroizing::new([0u8; 32 + HINT_BYTES]);
        Hkdf::<Sha256>::new(Some(READER_SALT), shared.as_slice())
            .expand(&info, okm.as_mut_slice())
            .ok()?;
        let mut key = Zeroizing::new([0u8; 32]);
        key.copy_from_slice(&okm[..32]);
        let mut hint = [0u8; HINT_BYTES];
        hint.copy_from_slice(&okm[32..]);
        Some(Self { key, hint })
    }
}

/// `announcer identity (32) || session id (UTF-8)`: what the details and the wraps are
/// bound to, so they cannot be moved into another session's announcement.
fn aad(announcer: &IdentityKey, session: &SessionId) -> Vec<u8> {
    let mut aad = Vec::with_capacity(32 + session.as_str().len());
    aad.extend_from_slice(announcer.as_bytes());
    aad.extend_from_slice(session.as_str().as_bytes());
    aad
}

fn xchacha(key: &[u8; 32]) -> XChaCha20Poly1305 {
    XChaCha20Poly1305::new(key.into())
}

impl From<DetailsError> for WireError {
    fn from(e: DetailsError) -> Self {
        WireError::InvalidField {
            kind: "announcement",
            field: "details",
            reason: e.to_string(),
        }
    }
}

/// Most announcers whose wrap keys a [`DetailsReader`] keeps.
pub const MAX_READER_KEYS: usize = 1024;

/// Opens the details of the announcements a node holds, as one reader: keeps the wrap
/// key it agreed with each announcer (one X25519 agreement per announcer, not per
/// announcement), the least recently used dropped past [`MAX_READER_KEYS`].
pub struct DetailsReader {
    me: IdentityKey,
    secret: SealingSecret,
    keys: hashlink::LruCache<(IdentityKey, SealingKey), Option<ReaderKey>>,
}

impl std::fmt::Debug for DetailsReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DetailsReader({} keys)", self.keys.len())
    }
}

impl DetailsReader {
    /// The reader `identity`.
    pub fn new(identity: &crate::Identity) -> Self {
        Self {
            me: identity.public(),
            secret: identity.sealing_secret(),
            keys: hashlink::LruCache::new(MAX_READER_KEYS),
        }
    }

    /// The details of `ann`, if they were sealed for this reader.
    pub fn open(&mut self, ann: &super::Announcement) -> Option<Details> {
        let at = (ann.identity, ann.sealing.key);
        if self.keys.get(&at).is_none() {
            let key = ReaderKey::agree(&self.secret, &ann.sealing.key, &ann.identity, &self.me);
            self.keys.insert(at, key);
        }
        let wrap = self.keys.get(&at)?.as_ref()?;
        ann.open_details(wrap)
    }

    /// Fills in the details of every session in `views` this reader may read.
    pub fn fill(&mut self, views: &mut [crate::presence::IdentityView]) {
        for session in views.iter_mut().flat_map(|v| v.sessions.iter_mut()) {
            session.details = self.open(&session.announcement);
        }
    }
}
