//! The mailbox record: a session's store-and-forward queue in the DHT, kept as a
//! state-based CRDT.
//!
//! A mailbox belongs to one session (`owner key + session id`) and lives in the DHT
//! under [`record_key`]. Its value holds signed envelopes addressed to that session and
//! the owner's signed acks. The DHT has no delete and any holder may re-publish an old
//! copy at any time, so copies are merged, never overwritten: a merge takes the union of
//! both copies and normalises it.
//!
//! Normalising, in order:
//! 1. envelopes and acks outside their time window go (an ack lives the retention plus
//!    the clock-skew tolerance, so it outlives every envelope it names);
//! 2. only the newest [`Config::max_acks`] acks stay;
//! 3. envelopes whose (sender, id) a remaining ack lists go: acks are the tombstones;
//! 4. one pass over the remaining envelopes, oldest first, keeps an envelope when no
//!    version of it is kept yet and it fits its class:
//!    - **admitted** (from the owner identity itself, or carrying the owner's pass for
//!      its sender, [`wire::MailboxPass`]): its sender has fewer than
//!      [`Config::sender_quota`] envelopes and [`Config::sender_max_bytes`] bytes kept,
//!      fewer than [`Config::max_envelopes`] admitted are kept in all, and it fits in
//!      what is left of [`Config::max_bytes`];
//!    - **stranger** (no valid pass: knocks, a new peer's first words): it is at most
//!      [`Config::stranger_envelope_max_bytes`], its sender has fewer than
//!      [`Config::stranger_sender_quota`] kept, and the strangers' own
//!      [`Config::stranger_slots`] and [`Config::stranger_max_bytes`] have room.
//!
//! The classes never compete: no number of strangers, however they date their mail,
//! takes room from the owner's admitted senders. Whether an envelope is admitted is a
//! function of its own bytes (the pass it carries), so every holder classes it alike
//! and the algebra below holds per class.
//!
//! "Oldest" is the order on `(ts, msg_id, sender, digest of the wire bytes)`. An entry is
//! one `(msg_id, sender)`: ids are visible to every holder, so keying by id alone would
//! let anyone displace a pending message by copying its id. Of several versions of one
//! entry (re-signed by its sender, or carrying another unsigned reply-to hint) only the
//! oldest is kept.
//!
//! Keeping the oldest makes a full mailbox refuse new mail rather than evict mail it
//! already took: a message once stored stays until it is acked or expires, so a sender
//! told "queued" is never overtaken by its own later messages or by anyone else's, and
//! a sender whose mail does not fit learns it at once ([`Inserted::Dropped`]) and can
//! say so. Within the admitted class, per-sender quotas in envelopes and bytes keep one
//! sender from filling the mailbox; backdating only reorders a sender's own share.
//!
//! # Algebra, and where it stops
//!
//! Step 4 judges each envelope only by the envelopes kept before it. Hence merging is
//! commutative, idempotent and absorbing — `a ⊔ (a ⊔ b) = a ⊔ b`, so re-publishing an
//! old copy never changes a merged one — and every result respects every bound.
//! Merging is associative while no bound discards anything (it is then the union minus
//! expired and acked entries), and also when only quotas and the count cap discard and
//! no ack is involved: "keep the oldest k" filters compose. Otherwise the grouping of
//! merges can matter, because an entry a bound discarded is not reconsidered when room
//! appears later:
//!
//! - **Late ack.** A copy over a quota or the count cap drops its newest envelope; an
//!   ack merged afterwards removes an older one. Merged in another order, the new
//!   envelope would have had room.
//! - **Ack cap.** Past `max_acks` the oldest ack goes, and with it the tombstone of
//!   every envelope it listed; a copy still holding such an envelope brings it back.
//!   The owner already has it: the inbox dedupes it by id and the next ack buries it.
//! - **Byte cap.** Which newer envelopes still fit depends on which larger, older ones
//!   were there to compete.
//!
//! Each boundary is pinned by a unit test; the property tests check everything else.
//! A copy only ever lacks envelopes that a bound ruled out in some merge, and the owner
//! takes the union of every holder's copy.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    fmt,
};

use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;
use sha2::{Digest, Sha256};

use crate::{
    identity::{Fingerprint, IdentityKey},
    limits::{
        MAILBOX_MAX_ACKS, MAILBOX_MAX_BYTES, MAILBOX_MAX_ENVELOPES, MAILBOX_RETENTION_MS,
        MAILBOX_SENDER_MAX_BYTES, MAILBOX_SENDER_QUOTA, MAILBOX_STRANGER_ENVELOPE_MAX_BYTES,
        MAILBOX_STRANGER_MAX_BYTES, MAILBOX_STRANGER_SENDER_QUOTA, MAILBOX_STRANGER_SLOTS,
        MAX_FUTURE_SKEW_MS, MAX_MAILBOX_RECORD_BYTES,
    },
    replay::{TimeError, check_time},
    session::SessionId,
    wire::{self, Ack, AckEntry, Envelope, MsgId, SessionAddr, Signed, WireError},
};

/// Domain prefix of a mailbox's DHT record key.
pub const RECORD_KEY_DOMAIN: &[u8] = b"interlink-p2p/v1/mailbox";
/// Version of the encoded mailbox record.
///
/// Version 2 (protocol version 2): its acks list (sender, message id) pairs. Version 3
/// (protocol version 4): admitted and stranger envelopes are bounded apart, so copies
/// normalise differently from version 2's.
pub const RECORD_VERSION: u8 = 3;

/// The DHT record key of the mailbox of `owner`'s session `session`:
/// SHA-256([`RECORD_KEY_DOMAIN`] || owner key || session id as UTF-8).
pub fn record_key(owner: &IdentityKey, session: &SessionId) -> [u8; 32] {
    Sha256::new()
        .chain_update(RECORD_KEY_DOMAIN)
        .chain_update(owner.as_bytes())
        .chain_update(session.as_str().as_bytes())
        .finalize()
        .into()
}

/// Mailbox bounds. Every holder of a mailbox must use the same values, or copies
/// normalise differently and a holder refuses a peer's larger copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Most admitted envelopes kept.
    pub max_envelopes: usize,
    /// Most admitted envelopes kept from one sender identity.
    pub sender_quota: usize,
    /// Most bytes of admitted envelopes (signed wire form) kept.
    pub max_bytes: usize,
    /// Most bytes of admitted envelopes kept from one sender identity.
    pub sender_max_bytes: usize,
    /// Most stranger envelopes (no valid pass) kept.
    pub stranger_slots: usize,
    /// Most stranger envelopes kept from one sender identity.
    pub stranger_sender_quota: usize,
    /// Most bytes of stranger envelopes kept.
    pub stranger_max_bytes: usize,
    /// Largest stranger envelope kept.
    pub stranger_envelope_max_bytes: usize,
    /// Most acks kept.
    pub max_acks: usize,
    /// How long an envelope stays deliverable, in ms.
    pub retention_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            max_envelopes: MAILBOX_MAX_ENVELOPES,
            sender_quota: MAILBOX_SENDER_QUOTA,
            max_bytes: MAILBOX_MAX_BYTES,
            sender_max_bytes: MAILBOX_SENDER_MAX_BYTES,
            stranger_slots: MAILBOX_STRANGER_SLOTS,
            stranger_sender_quota: MAILBOX_STRANGER_SENDER_QUOTA,
            stranger_max_bytes: MAILBOX_STRANGER_MAX_BYTES,
            stranger_envelope_max_bytes: MAILBOX_STRANGER_ENVELOPE_MAX_BYTES,
            max_acks: MAILBOX_MAX_ACKS,
            retention_ms: MAILBOX_RETENTION_MS,
        }
    }
}

impl Config {
    // An ack must outlive every envelope it names. The owner accepted that envelope
    // with a timestamp at most the skew tolerance ahead of the ack's.
    fn ack_window(&self) -> u64 {
        self.retention_ms.saturating_add(MAX_FUTURE_SKEW_MS)
    }

    /// Most envelopes of both classes a normalised copy holds.
    pub fn max_held_envelopes(&self) -> usize {
        self.max_envelopes.saturating_add(self.stranger_slots)
    }
}

/// Why a mailbox refused an entry, a merge or a record.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum MailboxError {
    /// The entry or copy belongs to another session's mailbox.
    #[error("belongs to the mailbox of {found}, not of {expected}")]
    WrongMailbox {
        /// This mailbox.
        expected: SessionAddr,
        /// Where the entry belongs.
        found: SessionAddr,
    },
    /// An ack signed by someone other than the mailbox owner.
    #[error("ack signed by {signer}, not by the mailbox owner {owner}")]
    NotOwner {
        /// The owner's fingerprint.
        owner: Fingerprint,
        /// The signer's fingerprint.
        signer: Fingerprint,
    },
    /// Outside the retention window.
    #[error(transparent)]
    Time(#[from] TimeError),
    /// The owner already acked this message id.
    #[error("message {0} was already acknowledged by the mailbox owner")]
    AlreadyAcked(MsgId),
    /// The encoded record is too large to decode.
    #[error("mailbox record is {len} bytes; the limit is {MAX_MAILBOX_RECORD_BYTES}")]
    Oversized {
        /// Its size.
        len: usize,
    },
    /// The encoded record is not a mailbox record.
    #[error("malformed mailbox record: {0}")]
    Malformed(#[source] WireError),
    /// A record version this node does not read.
    #[error("mailbox record version {got}; this node reads {RECORD_VERSION}")]
    UnsupportedVersion {
        /// The version found.
        got: u8,
    },
    /// More entries than any copy normalised under this node's [`Config`] can hold.
    #[error("mailbox record lists {envelopes} envelopes and {acks} acks; over the caps")]
    TooManyEntries {
        /// Envelopes listed.
        envelopes: usize,
        /// Acks listed.
        acks: usize,
    },
    /// An entry that does not decode or verify.
    #[error(transparent)]
    InvalidEntry(WireError),
}

impl MailboxError {
    /// This error as a wire refusal: its code, and its text as the detail.
    pub fn refusal(&self) -> wire::Refusal {
        use wire::RefusalCode as C;
        let code = match self {
            Self::WrongMailbox { .. } => C::WrongMailbox,
            Self::NotOwner { .. } => C::BadSignature,
            Self::Time(TimeError::Stale { .. }) => C::Stale,
            Self::Time(TimeError::FutureDated { .. }) => C::FutureDated,
            Self::AlreadyAcked(_) => C::Replayed,
            Self::Oversized { .. } | Self::TooManyEntries { .. } => C::TooLarge,
            Self::UnsupportedVersion { .. } => C::UnsupportedVersion,
            Self::InvalidEntry(e) | Self::Malformed(e) => wire::Refusal::from(e).code,
            // `TimeError` and this enum are non-exhaustive.
            #[allow(unreachable_patterns)]
            _ => C::Malformed,
        };
        wire::Refusal::new(code, self.to_string())
    }
}

/// What [`Mailbox::insert`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Inserted {
    /// Stored (possibly replacing a newer version of the same entry).
    Stored,
    /// Already held, or an older version of it is held; nothing changed.
    Duplicate,
    /// Valid, but the mailbox is full for it (its sender's quota, the count or the byte
    /// cap of its class, all taken by older envelopes; or, without a pass, too large
    /// for a stranger's), so not kept.
    Dropped,
}

/// Which list of a record a rejected entry came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// `envelopes`.
    Envelope,
    /// `acks`.
    Ack,
}

/// Why a holder refuses a mailbox copy handed to it (PROTOCOL §7.2): the holder and the
/// relay's store both check a copy this way ([`Mailbox::decode_handed`]).
#[derive(Debug, PartialEq, Eq)]
pub enum HandedCopyError {
    /// The record itself is refused: malformed, oversized, another version, too many
    /// entries.
    Record(MailboxError),
    /// Entries that do not decode, verify or belong here. A holder refuses the whole
    /// copy: keeping the valid rest would make it a laundering point for forged copies.
    InvalidEntries {
        /// How many entries are invalid.
        count: usize,
        /// The first of them.
        first: Box<Rejected>,
    },
    /// The copy is of another mailbox than the key it was handed under.
    WrongKey {
        /// The mailbox the copy is of.
        mailbox: SessionAddr,
    },
}

/// An entry of a decoded record that was skipped.
#[derive(Debug, PartialEq, Eq)]
pub struct Rejected {
    /// Its list.
    pub kind: EntryKind,
    /// Its position in that list.
    pub index: usize,
    /// What is wrong with it.
    pub reason: MailboxError,
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            EntryKind::Envelope => "envelope",
            EntryKind::Ack => "ack",
        };
        write!(f, "{kind} #{}: {}", self.index, self.reason)
    }
}

/// `(ts, msg_id, sender, wire digest)`: the order "oldest" refers to, and the map key.
/// The digest tells apart versions of one entry that share a timestamp.
type EnvKey = (u64, MsgId, IdentityKey, [u8; 32]);
/// `(ts, signature)`: a deterministic order on acks, and their map key.
type AckKey = (u64, [u8; 64]);

/// An envelope with the size of its signed wire form, which the byte cap counts and
/// `encode` emits, and its class (checked once, when it came in).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Held {
    env: Signed<Envelope>,
    /// Bytes of the envelope's wire form. The form itself is made again when a record
    /// is encoded rather than kept: a held envelope is already in memory twice (its
    /// signed body bytes and the decoded body), and a third copy made every held
    /// mailbox a third larger (issue 13, item 2: the largest item on a flooded
    /// holder's heap).
    wire_len: usize,
    digest: [u8; 32],
    admitted: bool,
}

impl Held {
    fn new(env: Signed<Envelope>) -> Self {
        let admitted = env.body().is_admitted();
        let wire = env.to_bytes();
        let digest = Sha256::digest(&wire).into();
        Self {
            env,
            wire_len: wire.len(),
            digest,
            admitted,
        }
    }

    fn key(&self) -> EnvKey {
        let b = self.env.body();
        (b.ts, b.msg_id, b.sender, self.digest)
    }
}

/// One session's mailbox: envelopes waiting for it and the owner's acks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mailbox {
    owner: IdentityKey,
    session: SessionId,
    envelopes: BTreeMap<EnvKey, Held>,
    acks: BTreeMap<AckKey, Signed<Ack>>,
}

#[derive(Serialize)]
struct RecordOut<'a> {
    v: u8,
    owner: &'a IdentityKey,
    session: &'a SessionId,
    envelopes: Vec<ByteBuf>,
    acks: Vec<ByteBuf>,
}

// Entries borrowed from the record's bytes: decoding a copy does not copy each entry
// before it is verified (a flooded holder decodes many large copies).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordIn<'a> {
    // Already checked through `VersionProbe`; named here so the field is not unknown.
    #[serde(deserialize_with = "crate::wire::decode_version")]
    #[serde(rename = "v")]
    _v: u8,
    owner: IdentityKey,
    session: SessionId,
    #[serde(borrow)]
    envelopes: Vec<&'a serde_bytes::Bytes>,
    #[serde(borrow)]
    acks: Vec<&'a serde_bytes::Bytes>,
}

// The owner session, ignoring other fields.
#[derive(Deserialize)]
struct AddressProbe {
    owner: IdentityKey,
    session: SessionId,
}

/// The owner session an encoded mailbox record names, without verifying anything (for
/// a record this node verified when it was put: a relay pushing a copy it just
/// committed to its connected owner).
pub fn record_address(bytes: &[u8]) -> Option<SessionAddr> {
    if bytes.len() > MAX_MAILBOX_RECORD_BYTES {
        return None;
    }
    wire::decode_cbor::<AddressProbe>(RECORD_KIND, bytes)
        .ok()
        .map(|p| SessionAddr {
            key: p.owner,
            session: p.session,
        })
}

/// The owner identity an encoded mailbox record names, without verifying anything
/// (a relay counts its records per owner at open; every record in its store was
/// verified when it was put).
pub fn record_owner(bytes: &[u8]) -> Option<IdentityKey> {
    record_address(bytes).map(|a| a.key)
}

// Read first, ignoring other fields, so a newer record reports its version rather
// than a confusing shape error.
#[derive(Deserialize)]
struct VersionProbe {
    #[serde(deserialize_with = "crate::wire::decode_version")]
    v: u8,
}

const RECORD_KIND: &str = "mailbox record";

impl Mailbox {
    /// An empty mailbox of `owner`'s session `session`.
    pub fn new(owner: IdentityKey, session: SessionId) -> Self {
        Self {
            owner,
            session,
            envelopes: BTreeMap::new(),
            acks: BTreeMap::new(),
        }
    }

    /// The owner identity.
    pub fn owner(&self) -> &IdentityKey {
        &self.owner
    }

    /// The owner's session.
    pub fn session(&self) -> &SessionId {
        &self.session
    }

    /// The owner session's address.
    pub fn address(&self) -> SessionAddr {
        SessionAddr {
            key: self.owner,
            session: self.session.clone(),
        }
    }

    /// The DHT record key of this mailbox.
    pub fn record_key(&self) -> [u8; 32] {
        record_key(&self.owner, &self.session)
    }

    /// Adds a verified envelope. It must be addressed to this mailbox's session, be
    /// inside the retention window and not already acked.
    pub fn insert(
        &mut self,
        env: Signed<Envelope>,
        now: u64,
        cfg: &Config,
    ) -> Result<Inserted, MailboxError> {
        self.check_envelope(env.body())?;
        let b = env.body();
        check_time(b.ts, now, cfg.retention_ms)?;
        if self
            .acks
            .values()
            .any(|a| a.body().covers(&b.sender, &b.msg_id))
        {
            return Err(MailboxError::AlreadyAcked(b.msg_id));
        }
        let held = Held::new(env);
        let key = held.key();
        if self.envelopes.contains_key(&key) {
            return Ok(Inserted::Duplicate);
        }
        self.envelopes.insert(key, held);
        self.normalise(now, cfg);
        if self.envelopes.contains_key(&key) {
            Ok(Inserted::Stored)
        } else if self.envelopes.keys().any(|k| (k.1, k.2) == (key.1, key.2)) {
            // An older version of the same entry is kept.
            Ok(Inserted::Duplicate)
        } else {
            Ok(Inserted::Dropped)
        }
    }

    /// Adds the owner's ack and drops the envelopes it names; returns how many
    /// envelopes left (acked, or expired meanwhile). The signature was verified when the
    /// [`Signed`] ack was made, under the key in `ack.owner`; requiring that key to be
    /// this mailbox's owner is what makes a forged ack fail.
    pub fn apply_ack(
        &mut self,
        ack: Signed<Ack>,
        now: u64,
        cfg: &Config,
    ) -> Result<usize, MailboxError> {
        self.check_ack(ack.body())?;
        check_time(ack.body().ts, now, cfg.ack_window())?;
        let before = self.envelopes.len();
        self.acks.insert((ack.body().ts, *ack.signature()), ack);
        self.normalise(now, cfg);
        Ok(before.saturating_sub(self.envelopes.len()))
    }

    /// Merges another copy of this mailbox into this one: the union of both, then
    /// normalised (see the module docs for the algebra).
    pub fn merge(&mut self, other: &Mailbox, now: u64, cfg: &Config) -> Result<(), MailboxError> {
        if other.owner != self.owner || other.session != self.session {
            return Err(MailboxError::WrongMailbox {
                expected: self.address(),
                found: other.address(),
            });
        }
        for (k, held) in &other.envelopes {
            self.envelopes.entry(*k).or_insert_with(|| held.clone());
        }
        for (k, a) in &other.acks {
            self.acks.entry(*k).or_insert_with(|| a.clone());
        }
        self.normalise(now, cfg);
        Ok(())
    }

    /// The envelopes of `handed` (another copy of this mailbox) that this copy keeps
    /// or whose owner acked them, as `(sender, id)`: what a holder that merged
    /// `handed` into this copy answers its sender (`MailboxOutcome::Held`). Only
    /// `handed`'s own entries are named.
    pub fn kept_of(&self, handed: &Mailbox) -> Vec<AckEntry> {
        self.kept(handed.entries())
    }

    /// The `(sender, id)` of every waiting envelope, sorted, each once.
    pub fn entries(&self) -> Vec<AckEntry> {
        let mut entries: Vec<AckEntry> = self
            .envelopes
            .keys()
            .map(|(_, id, sender, _)| AckEntry(*sender, *id))
            .collect();
        entries.sort_unstable();
        entries.dedup();
        entries
    }

    /// Those of `entries` that this copy holds or whose owner acked them (what
    /// [`Mailbox::kept_of`] answers, for a copy whose entries were taken before it was
    /// merged into this one).
    pub fn kept(&self, mut entries: Vec<AckEntry>) -> Vec<AckEntry> {
        let held: HashSet<AckEntry> = self.entries().into_iter().collect();
        let acked = self.acked();
        entries.retain(|e| held.contains(e) || acked.contains(e));
        entries
    }

    /// Drops what expired by `now` and re-applies the bounds; returns how many
    /// envelopes left.
    pub fn sweep(&mut self, now: u64, cfg: &Config) -> usize {
        let before = self.envelopes.len();
        self.normalise(now, cfg);
        before.saturating_sub(self.envelopes.len())
    }

    /// The waiting envelopes, oldest first.
    pub fn pending(
        &self,
    ) -> impl DoubleEndedIterator<Item = &Signed<Envelope>> + ExactSizeIterator {
        self.envelopes.values().map(|h| &h.env)
    }

    /// The held acks, oldest first.
    pub fn acks(&self) -> impl DoubleEndedIterator<Item = &Signed<Ack>> + ExactSizeIterator {
        self.acks.values()
    }

    /// Every (sender, message id) a held ack lists.
    pub fn acked(&self) -> BTreeSet<AckEntry> {
        self.acks
            .values()
            .flat_map(|a| a.body().entries.iter().copied())
            .collect()
    }

    /// Number of waiting envelopes.
    pub fn len(&self) -> usize {
        self.envelopes.len()
    }

    /// Whether no envelope is waiting.
    pub fn is_empty(&self) -> bool {
        self.envelopes.is_empty()
    }

    /// Bytes of [`Mailbox::encode`].
    pub fn encoded_len(&self) -> usize {
        self.encode().len()
    }

    /// The record value: CBOR `{ v, owner, session, envelopes: [bytes], acks: [bytes] }`,
    /// each entry in its signed wire form, envelopes oldest first and acks by
    /// `(ts, signature)`, so equal mailboxes encode to equal bytes.
    pub fn encode(&self) -> Vec<u8> {
        wire::encode(&RecordOut {
            v: RECORD_VERSION,
            owner: &self.owner,
            session: &self.session,
            envelopes: self
                .envelopes
                .values()
                .map(|h| ByteBuf::from(h.env.to_bytes()))
                .collect(),
            acks: self
                .acks
                .values()
                .map(|a| ByteBuf::from(a.to_bytes()))
                .collect(),
        })
    }

    /// Decodes a copy handed to a holder under `key` and checks it as a holder must
    /// (PROTOCOL §7.2): [`Mailbox::decode`], refused if any entry is invalid or the copy
    /// is of another mailbox.
    pub fn decode_handed(
        bytes: &[u8],
        key: &[u8],
        now_ms: u64,
        cfg: &Config,
    ) -> Result<Self, HandedCopyError> {
        let (mb, rejected) = Self::decode(bytes, now_ms, cfg).map_err(HandedCopyError::Record)?;
        let count = rejected.len();
        if let Some(first) = rejected.into_iter().next() {
            return Err(HandedCopyError::InvalidEntries {
                count,
                first: Box::new(first),
            });
        }
        if mb.record_key().as_slice() != key {
            return Err(HandedCopyError::WrongKey {
                mailbox: mb.address(),
            });
        }
        Ok(mb)
    }

    /// Decodes a record value. A record that is oversized, malformed, of another version
    /// or lists more entries than the caps allow is an error. Each entry is then
    /// verified on its own: entries that fail to decode, verify or belong here are
    /// skipped and listed in the returned [`Rejected`] (a holder should refuse such a
    /// put; a recipient can still use the rest). Expired and already-acked envelopes are
    /// not rejections — they are normalised away like in any merge. The caller checks
    /// that [`Mailbox::record_key`] is the key the record was stored under.
    pub fn decode(
        bytes: &[u8],
        now: u64,
        cfg: &Config,
    ) -> Result<(Mailbox, Vec<Rejected>), MailboxError> {
        if bytes.len() > MAX_MAILBOX_RECORD_BYTES {
            return Err(MailboxError::Oversized { len: bytes.len() });
        }
        let probe: VersionProbe =
            wire::decode_cbor(RECORD_KIND, bytes).map_err(MailboxError::Malformed)?;
        if probe.v != RECORD_VERSION {
            return Err(MailboxError::UnsupportedVersion { got: probe.v });
        }
        let rec: RecordIn<'_> =
            wire::decode_cbor_borrowed(RECORD_KIND, bytes).map_err(MailboxError::Malformed)?;
        // Checked before any signature is verified: a copy normalised under the same
        // config never exceeds these, and verifying costs CPU a hostile put could waste.
        if rec.envelopes.len() > cfg.max_held_envelopes() || rec.acks.len() > cfg.max_acks {
            return Err(MailboxError::TooManyEntries {
                envelopes: rec.envelopes.len(),
                acks: rec.acks.len(),
            });
        }
        let mut mailbox = Mailbox::new(rec.owner, rec.session);
        let mut rejected = Vec::new();
        for (index, raw) in rec.acks.iter().enumerate() {
            let checked = Signed::<Ack>::decode(raw)
                .map_err(MailboxError::InvalidEntry)
                .and_then(|a| mailbox.check_ack(a.body()).map(|()| a));
            match checked {
                Ok(a) => {
                    mailbox.acks.insert((a.body().ts, *a.signature()), a);
                }
                Err(reason) => rejected.push(Rejected {
                    kind: EntryKind::Ack,
                    index,
                    reason,
                }),
            }
        }
        let mut envelopes = Vec::with_capacity(rec.envelopes.len());
        for (index, raw) in rec.envelopes.iter().enumerate() {
            let checked = Signed::<Envelope>::decode(raw)
                .map_err(MailboxError::InvalidEntry)
                .and_then(|e| mailbox.check_envelope(e.body()).map(|()| e));
            match checked {
                // A sender's pass is the same bytes on each of its envelopes (passes are
                // deterministic signatures), checked once ([`wire::MailboxPass::admits`]).
                Ok(e) => envelopes.push(Held::new(e)),
                Err(reason) => rejected.push(Rejected {
                    kind: EntryKind::Envelope,
                    index,
                    reason,
                }),
            }
        }
        mailbox
            .envelopes
            .extend(envelopes.into_iter().map(|h| (h.key(), h)));
        mailbox.normalise(now, cfg);
        Ok((mailbox, rejected))
    }

    fn check_envelope(&self, b: &Envelope) -> Result<(), MailboxError> {
        if b.recipient != self.owner || b.recipient_session != self.session {
            return Err(MailboxError::WrongMailbox {
                expected: self.address(),
                found: b.recipient_addr(),
            });
        }
        Ok(())
    }

    fn check_ack(&self, a: &Ack) -> Result<(), MailboxError> {
        if a.owner != self.owner {
            return Err(MailboxError::NotOwner {
                owner: self.owner.fingerprint(),
                signer: a.owner.fingerprint(),
            });
        }
        if a.owner_session != self.session {
            return Err(MailboxError::WrongMailbox {
                expected: self.address(),
                found: SessionAddr {
                    key: a.owner,
                    session: a.owner_session.clone(),
                },
            });
        }
        Ok(())
    }

    /// Restores the invariants listed in the module docs, in that order.
    fn normalise(&mut self, now: u64, cfg: &Config) {
        let ack_window = cfg.ack_window();
        self.acks
            .retain(|k, _| check_time(k.0, now, ack_window).is_ok());
        while self.acks.len() > cfg.max_acks {
            self.acks.pop_first();
        }
        let acked: HashSet<AckEntry> = self
            .acks
            .values()
            .flat_map(|a| a.body().entries.iter().copied())
            .collect();
        self.envelopes.retain(|k, _| {
            check_time(k.0, now, cfg.retention_ms).is_ok() && !acked.contains(&AckEntry(k.2, k.1))
        });

        // Oldest first, each envelope judged only by those kept before it: that is what
        // makes re-merging an input a no-op (see the module docs). The two classes are
        // counted apart, so neither can take the other's room.
        let mut admitted = Room::new(cfg.max_envelopes, cfg.max_bytes);
        let mut strangers = Room::new(cfg.stranger_slots, cfg.stranger_max_bytes);
        let mut kept_entries: HashSet<(MsgId, IdentityKey)> = HashSet::new();
        let mut doomed = Vec::new();
        for (key, held) in &self.envelopes {
            let size = held.wire_len;
            let keep = !kept_entries.contains(&(key.1, key.2))
                && if held.admitted {
                    admitted.take(key.2, size, cfg.sender_quota, cfg.sender_max_bytes)
                } else {
                    size <= cfg.stranger_envelope_max_bytes
                        && strangers.take(key.2, size, cfg.stranger_sender_quota, usize::MAX)
                };
            if keep {
                kept_entries.insert((key.1, key.2));
            } else {
                doomed.push(*key);
            }
        }
        for key in doomed {
            self.envelopes.remove(&key);
        }
    }
}

/// What one class of envelopes still has room for during a normalising pass.
struct Room {
    slots: usize,
    bytes: usize,
    /// Per sender: (envelopes, bytes) kept.
    per_sender: HashMap<IdentityKey, (usize, usize)>,
}

impl Room {
    fn new(slots: usize, bytes: usize) -> Self {
        Self {
            slots,
            bytes,
            per_sender: HashMap::new(),
        }
    }

    /// Takes room for an envelope of `size` bytes from `sender` if the class and the
    /// sender's quotas (`quota` envelopes, `quota_bytes` bytes) allow it.
    fn take(&mut self, sender: IdentityKey, size: usize, quota: usize, quota_bytes: usize) -> bool {
        let (n, b) = self.per_sender.get(&sender).copied().unwrap_or((0, 0));
        let fits = self.slots > 0
            && size <= self.bytes
            && n < quota
            && b.saturating_add(size) <= quota_bytes;
        if fits {
            self.slots -= 1;
            self.bytes -= size;
            self.per_sender.insert(sender, (n + 1, b + size));
        }
        fits
    }
}

#[cfg(test)]
#[path = "mailbox_tests.rs"]
mod tests;
