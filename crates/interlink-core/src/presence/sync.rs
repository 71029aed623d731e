//! Roster sync by summary (protocol versions 7 and 8): what a roster fetch sends back.
//!
//! Before version 7 a roster fetch returned every held announcement, and every new
//! connection brought one: on an overlay of N sessions where a node holds C
//! connections, learning the roster cost N × C announcements received, decoded and
//! hashed. Now the requester sends a *summary* — one 8-byte [`Tag`] per announcement it
//! holds — and the responder returns only the announcements whose tag is not in it:
//! the ones the requester lacks, or holds in an older version.
//!
//! Version 8 adds liveness and a cheap agreement check:
//!
//! - Announcements change rarely; between changes a session sends beacons
//!   ([`crate::wire::Beacon`]), which tags do not name. A response carries, with each
//!   announcement it sends, that announcement's newest beacon, and the summary marks
//!   the sessions the requester judges away (a bitmap over its tags): the responder
//!   sends the newest beacon of each of those it heard from since. A node back from a
//!   partition or a sleep sees its peers live again on its first fetch, not after
//!   their next beacon.
//! - A *digest* request carries only [`Roster::digest`], 16 bytes naming the whole
//!   set of held announcement versions; a responder holding the same set answers
//!   `same` and nothing else. Anti-entropy between nodes that agree (almost always,
//!   once beacons carry the heartbeats) costs a few dozen bytes instead of 8 bytes
//!   per session.
//!
//! A tag names one version of one session: it hashes the identity, the session id
//! and the `(ts, seq)` stamp, so a newer announcement of the same session has another
//! tag. Tags are truncated to 64 bits; a collision only makes the responder skip an
//! announcement the requester would then learn by gossip or the next heartbeat, and
//! finding a second preimage of someone else's tag costs 2^64 hashes.

use std::collections::HashSet;

use sha2::{Digest as _, Sha256};

use super::{Presence, Roster};
use crate::{
    identity::IdentityKey,
    session::SessionId,
    wire::{Announcement, Beacon, RosterRequest, Signed},
};

/// Bytes of one tag.
pub const TAG_BYTES: usize = 8;

/// Most tags a summary carries (and a responder reads): the roster's own bound
/// (identities × sessions each) is far above any team, and a summary is cut at this
/// many, newest first.
pub const MAX_SUMMARY_TAGS: usize = 16_384;

/// Largest encoded summary, in bytes.
pub const MAX_SUMMARY_BYTES: usize = MAX_SUMMARY_TAGS * TAG_BYTES;

/// Largest away bitmap a responder reads: one bit per tag of the largest summary.
pub const MAX_AWAY_BYTES: usize = MAX_SUMMARY_TAGS.div_ceil(8);

/// Bytes of a roster digest ([`Roster::digest`]).
pub const DIGEST_BYTES: usize = 16;

const TAG_DOMAIN: &[u8] = b"interlink-p2p/v7/roster-tag\0";
const DIGEST_DOMAIN: &[u8] = b"interlink-p2p/v8/roster-digest\0";

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

/// Why a roster request was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum SummaryError {
    /// Its length is not a multiple of [`TAG_BYTES`].
    #[error("roster summary of {0} bytes is not a whole number of {TAG_BYTES}-byte tags")]
    Ragged(usize),
    /// It is longer than [`MAX_SUMMARY_BYTES`].
    #[error("roster summary of {0} bytes; the limit is {MAX_SUMMARY_BYTES}")]
    Oversized(usize),
    /// The away bitmap is neither empty nor one bit per tag, rounded up to bytes.
    #[error("away bitmap of {got} bytes for {tags} tags (want 0 or {want})")]
    Bitmap {
        /// Its length.
        got: usize,
        /// Tags in the summary.
        tags: usize,
        /// The length one bit per tag takes.
        want: usize,
    },
    /// A digest request that also carries a summary.
    #[error("a digest request carries no summary")]
    DigestWithSummary,
}

/// Checks a summary's shape from its lengths alone (`have` and `away` bytes): a whole
/// number of tags, at most [`MAX_SUMMARY_TAGS`], and a bitmap empty or one bit per
/// tag. Returns the number of tags.
fn check_lengths(have: usize, away: usize) -> Result<usize, SummaryError> {
    if have > MAX_SUMMARY_BYTES {
        return Err(SummaryError::Oversized(have));
    }
    if !have.is_multiple_of(TAG_BYTES) {
        return Err(SummaryError::Ragged(have));
    }
    let tags = have / TAG_BYTES;
    let want = tags.div_ceil(8);
    if away != 0 && away != want {
        return Err(SummaryError::Bitmap {
            got: away,
            tags,
            want,
        });
    }
    Ok(tags)
}

/// Checks a roster request's shape (PROTOCOL §8.2) without reading a tag: a digest
/// request carries no summary, a full one a summary [`Summary::decode`] takes. A
/// request refused here is answered with an empty response.
pub fn check_request(request: &RosterRequest) -> Result<(), SummaryError> {
    if request.digest.is_some() {
        if !request.have.is_empty() || !request.away.is_empty() {
            return Err(SummaryError::DigestWithSummary);
        }
        return Ok(());
    }
    check_lengths(request.have.len(), request.away.len()).map(drop)
}

/// The bytes of `request`'s summary and bitmap a responder reads to answer it: all of
/// them for a request it processes, none for one refused by its shape
/// ([`check_request`]), which is answered empty before a tag is read. What a peer's
/// roster budget is charged besides the fixed cost of any request.
pub fn summary_bytes_read(request: &RosterRequest) -> usize {
    match check_request(request) {
        Ok(()) => request.have.len() + request.away.len(),
        Err(_) => 0,
    }
}

/// The set of announcement versions a requester holds, and which of them it judges
/// away or overdue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    tags: HashSet<Tag>,
    away: HashSet<Tag>,
}

impl Summary {
    /// The summary of what `roster` holds at `now`: newest first, at most
    /// [`MAX_SUMMARY_TAGS`], with the sessions judged away, or overdue
    /// ([`super::Config::overdue`]), marked.
    pub fn of(roster: &Roster, now: u64) -> Self {
        let config = roster.config;
        let mut all: Vec<(&Tag, &super::SessionAddr)> = roster.tags.iter().collect();
        if all.len() > MAX_SUMMARY_TAGS {
            all.sort_unstable_by_key(|(_, addr)| {
                std::cmp::Reverse(roster.get(addr).map(|a| (a.body().ts, a.body().seq)))
            });
            all.truncate(MAX_SUMMARY_TAGS);
        }
        let mut summary = Self::default();
        for (tag, addr) in all {
            summary.tags.insert(*tag);
            let away = roster.held(addr).is_some_and(|h| {
                let heard = h.heard();
                config.presence_heard(heard, now) != Presence::Live || config.overdue(heard, now)
            });
            if away {
                summary.away.insert(*tag);
            }
        }
        summary
    }

    /// Decodes the packed wire form: tags back to back, and the away bitmap over them
    /// (empty: none marked).
    pub fn decode(bytes: &[u8], away: &[u8]) -> Result<Self, SummaryError> {
        check_lengths(bytes.len(), away.len())?;
        let mut summary = Self::default();
        for (i, c) in bytes.chunks_exact(TAG_BYTES).enumerate() {
            let mut t = [0u8; TAG_BYTES];
            t.copy_from_slice(c);
            summary.tags.insert(Tag(t));
            if away.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0) {
                summary.away.insert(Tag(t));
            }
        }
        Ok(summary)
    }

    /// The packed wire form: the tags in ascending order (so equal sets encode
    /// equally) and the away bitmap over them (empty when none is away).
    pub fn to_wire(&self) -> (Vec<u8>, Vec<u8>) {
        let mut tags: Vec<&Tag> = self.tags.iter().collect();
        tags.sort_unstable();
        let mut away = vec![0u8; tags.len().div_ceil(8)];
        for (i, t) in tags.iter().enumerate() {
            if self.away.contains(t) {
                away[i / 8] |= 1 << (i % 8);
            }
        }
        if self.away.is_empty() {
            away.clear();
        }
        (tags.into_iter().flat_map(|t| t.0).collect(), away)
    }

    /// Whether the summary names this version.
    pub fn contains(&self, tag: &Tag) -> bool {
        self.tags.contains(tag)
    }

    /// Whether the requester judges the session of this version away.
    pub fn is_away(&self, tag: &Tag) -> bool {
        self.away.contains(tag)
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

/// What a roster fetch answers ([`Roster::answer`]), to be encoded as a
/// [`crate::wire::RosterResponse`].
#[derive(Debug, Default)]
pub struct Answer<'a> {
    /// Announcements the requester lacks, newest first, each with its newest beacon.
    pub entries: Vec<(&'a Signed<Announcement>, Option<&'a Signed<Beacon>>)>,
    /// Beacons of sessions the requester judges away that this roster heard from
    /// since (their announcements the requester holds).
    pub beacons: Vec<&'a Signed<Beacon>>,
    /// A digest request whose digest is this roster's.
    pub same: bool,
}

impl Roster {
    /// What a requester that sent `summary` is missing: every held announcement whose
    /// exact version the summary does not name, newest first.
    pub fn missing_from(&self, summary: &Summary) -> Vec<&Signed<Announcement>> {
        let mut out: Vec<&Signed<Announcement>> = self
            .tags
            .iter()
            .filter(|(tag, _)| !summary.contains(tag))
            .filter_map(|(_, addr)| self.get(addr))
            .collect();
        out.sort_unstable_by_key(|a| std::cmp::Reverse((a.body().ts, a.body().seq)));
        out
    }

    /// The answer to `request` at `now`: to a digest request, whether this roster's
    /// digest is the same; to a full one, what its summary lacks with their beacons,
    /// and the beacons of the sessions it marked away that are live here.
    pub fn answer(&self, request: &RosterRequest, now: u64) -> Result<Answer<'_>, SummaryError> {
        check_request(request)?;
        if let Some(digest) = &request.digest {
            return Ok(Answer {
                same: digest.into_array() == self.digest(),
                ..Answer::default()
            });
        }
        let summary = Summary::decode(&request.have, &request.away)?;
        let entries = self
            .missing_from(&summary)
            .into_iter()
            .map(|a| {
                let beacon = self
                    .held(&a.body().session_addr())
                    .and_then(|h| h.beacon.as_ref());
                (a, beacon)
            })
            .collect();
        let beacons = summary
            .away
            .iter()
            .filter_map(|tag| self.held(self.tags.get(tag)?))
            .filter(|h| self.config.presence_heard(h.heard(), now) == Presence::Live)
            .filter_map(|h| h.beacon.as_ref())
            .collect();
        Ok(Answer {
            entries,
            beacons,
            same: false,
        })
    }

    /// The digest of the announcement versions held: the first [`DIGEST_BYTES`] of
    /// SHA-256 over a domain and every tag, in ascending order. Two rosters holding
    /// the same versions have the same digest, whatever beacons each has heard.
    pub fn digest(&self) -> [u8; DIGEST_BYTES] {
        let mut tags: Vec<&Tag> = self.tags.keys().collect();
        tags.sort_unstable();
        let mut h = Sha256::new();
        h.update(DIGEST_DOMAIN);
        for t in tags {
            h.update(t.0);
        }
        let digest = h.finalize();
        let mut out = [0u8; DIGEST_BYTES];
        out.copy_from_slice(&digest[..DIGEST_BYTES]);
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

#[cfg(test)]
#[path = "sync_tests.rs"]
mod tests;
