//! Roster sync by summary: what a roster fetch sends back (protocol version 7).
//!
//! Before version 7 a roster fetch returned every held announcement, and every new
//! connection brought one: on an overlay of N sessions where a node holds C
//! connections, learning the roster cost N × C announcements received, decoded and
//! hashed. Now the requester sends a *summary* — one 8-byte [`Tag`] per announcement it
//! holds — and the responder returns only the announcements whose tag is not in it:
//! the ones the requester lacks, or holds in an older version. A connection between
//! two nodes that already agree costs `8 × N` bytes one way and an empty list back.
//!
//! A tag names one version of one session: it hashes the identity, the session id
//! and the `(ts, seq)` stamp, so a newer announcement of the same session has another
//! tag. Tags are truncated to 64 bits; a collision only makes the responder skip an
//! announcement the requester would then learn by gossip or the next heartbeat, and
//! finding a second preimage of someone else's tag costs 2^64 hashes.

use std::collections::HashSet;

use sha2::{Digest as _, Sha256};

use super::Roster;
use crate::{
    identity::IdentityKey,
    session::SessionId,
    wire::{Announcement, Signed},
};

/// Bytes of one tag.
pub const TAG_BYTES: usize = 8;

/// Most tags a summary carries (and a responder reads): the roster's own bound
/// (identities × sessions each) is far above any team, and a summary is cut at this
/// many, newest first.
pub const MAX_SUMMARY_TAGS: usize = 16_384;

/// Largest encoded summary, in bytes.
pub const MAX_SUMMARY_BYTES: usize = MAX_SUMMARY_TAGS * TAG_BYTES;

const TAG_DOMAIN: &[u8] = b"interlink-p2p/v7/roster-tag\0";

/// One version of one session's announcement, as named in a summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tag(pub [u8; TAG_BYTES]);

impl Tag {
    /// The tag of `identity`'s session `session` at stamp `(ts, seq)`:
    /// the first 8 bytes of SHA-256 over the domain, the 32 key bytes, the session
    /// id's length (one byte) and bytes, then `ts` and `seq` as big-endian u64.
    pub fn of(identity: &IdentityKey, session: &SessionId, ts: u64, seq: u64) -> Self {
        let mut h = Sha256::new();
        h.update(TAG_DOMAIN);
        h.update(identity.as_bytes());
        let id = session.as_str().as_bytes();
        // Session ids are at most MAX_SESSION_ID_BYTES (128) long: one byte suffices.
        h.update([u8::try_from(id.len()).unwrap_or(u8::MAX)]);
        h.update(id);
        h.update(ts.to_be_bytes());
        h.update(seq.to_be_bytes());
        let digest = h.finalize();
        let mut tag = [0u8; TAG_BYTES];
        tag.copy_from_slice(&digest[..TAG_BYTES]);
        Self(tag)
    }

    /// The tag of an announcement.
    pub fn of_announcement(ann: &Announcement) -> Self {
        Self::of(&ann.identity, &ann.session_id, ann.ts, ann.seq)
    }
}

/// Why a summary was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum SummaryError {
    /// Its length is not a multiple of [`TAG_BYTES`].
    #[error("roster summary of {0} bytes is not a whole number of {TAG_BYTES}-byte tags")]
    Ragged(usize),
    /// It is longer than [`MAX_SUMMARY_BYTES`].
    #[error("roster summary of {0} bytes; the limit is {MAX_SUMMARY_BYTES}")]
    Oversized(usize),
}

/// The set of announcement versions a requester holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    tags: HashSet<Tag>,
}

impl Summary {
    /// The summary of what `roster` holds: newest first, at most [`MAX_SUMMARY_TAGS`].
    pub fn of(roster: &Roster) -> Self {
        let mut all: Vec<&Signed<Announcement>> = roster.announcements().collect();
        if all.len() > MAX_SUMMARY_TAGS {
            all.sort_unstable_by_key(|a| std::cmp::Reverse((a.body().ts, a.body().seq)));
            all.truncate(MAX_SUMMARY_TAGS);
        }
        Self {
            tags: all
                .into_iter()
                .map(|a| Tag::of_announcement(a.body()))
                .collect(),
        }
    }

    /// Decodes the packed wire form: tags back to back.
    pub fn decode(bytes: &[u8]) -> Result<Self, SummaryError> {
        if bytes.len() > MAX_SUMMARY_BYTES {
            return Err(SummaryError::Oversized(bytes.len()));
        }
        if !bytes.len().is_multiple_of(TAG_BYTES) {
            return Err(SummaryError::Ragged(bytes.len()));
        }
        Ok(Self {
            tags: bytes
                .chunks_exact(TAG_BYTES)
                .map(|c| {
                    let mut t = [0u8; TAG_BYTES];
                    t.copy_from_slice(c);
                    Tag(t)
                })
                .collect(),
        })
    }

    /// The packed wire form, tags in ascending order (so equal sets encode equally).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut tags: Vec<&Tag> = self.tags.iter().collect();
        tags.sort_unstable();
        tags.into_iter().flat_map(|t| t.0).collect()
    }

    /// Whether the summary names this version.
    pub fn contains(&self, tag: &Tag) -> bool {
        self.tags.contains(tag)
    }

    /// Number of tags.
    pub fn len(&self) -> usize {
        self.tags.len()
    }

    /// Whether it names nothing (a requester with an empty roster, or one that sent
    /// no summary: it is answered with everything).
    pub fn is_empty(&self) -> bool {
        self.tags.is_empty()
    }
}

impl Roster {
    /// What a requester that sent `summary` is missing: every held announcement whose
    /// exact version the summary does not name, newest first.
    pub fn missing_from(&self, summary: &Summary) -> Vec<&Signed<Announcement>> {
        let mut out: Vec<&Signed<Announcement>> = self
            .announcements()
            .filter(|a| !summary.contains(&Tag::of_announcement(a.body())))
            .collect();
        out.sort_unstable_by_key(|a| std::cmp::Reverse((a.body().ts, a.body().seq)));
        out
    }

    /// Whether an announcement of this session at this stamp would tell the roster
    /// nothing: it holds this version or a newer one (or the session's goodbye is
    /// newer). Answered from the unverified stamp, so a node skips the signature checks
    /// of a copy it already has; anything that *would* change the roster must still be
    /// verified before it is applied.
    pub fn knows(&self, identity: &IdentityKey, session: &SessionId, ts: u64, seq: u64) -> bool {
        let Some(group) = self.groups.get(identity) else {
            return false;
        };
        group.blocked_by_tombstone(session, (ts, seq))
            || group
                .sessions
                .get(session)
                .is_some_and(|held| (ts, seq) <= (held.body().ts, held.body().seq))
    }
}
