//! Claims on files: a session says which paths of its project it is working on, so
//! that agents editing one repository stop writing over each other (docs/CLAIMS.md).
//!
//! A claim is part of a session's state, published in its sealed presence details
//! (PROTOCOL §4.1): it reaches the user's own sessions and paired peers' and nobody
//! else, lapses when the session says goodbye or is judged gone, and heals after a
//! partition with the roster. Every session that sees the same claims computes the same
//! holders, because the rule is a pure function of the claims alone:
//!
//! - two claims of different sessions *conflict* when their patterns overlap and at
//!   least one is exclusive;
//! - of two conflicting claims the one with the smaller precedence key — `since`, then
//!   the claimer's identity key, then its session id, then the pattern — comes first;
//! - a claim is *held* when no conflicting claim comes before it, and otherwise
//!   *waits* behind the first that does. A held claim stays held until it ends or a
//!   claim from before it appears (a partition healing): releasing a third claim never
//!   takes a hold away.
//!
//! [`Board`] keeps the claims of every session a node knows of, within bounds, and
//! answers what the hooks and tools ask: who holds a path, where a session's claims
//! stand, which conflicts exist.

pub mod pattern;
pub mod project;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    limits::{DAY_MS, HOUR_MS, MAX_FUTURE_SKEW_MS},
    wire::SessionAddr,
};
pub use pattern::Pattern;
pub use project::ProjectId;

/// Most claims one session publishes at once.
pub const MAX_CLAIMS_PER_SESSION: usize = 8;
/// Longest pattern, in bytes.
pub const MAX_PATTERN_BYTES: usize = 160;
/// Most segments in a pattern.
pub const MAX_PATTERN_SEGMENTS: usize = 32;
/// Longest reason, in bytes.
pub const MAX_REASON_BYTES: usize = 80;
/// Longest lifetime a claim may ask for; it is renewed by claiming again.
pub const MAX_CLAIM_LIFETIME_MS: u64 = DAY_MS;
/// The lifetime of a claim that asks for none.
pub const DEFAULT_CLAIM_LIFETIME_MS: u64 = 2 * HOUR_MS;
/// Most sessions whose claims a board keeps: 512 claims at the most in all. Ranking is
/// quadratic in the claims (a full board of patterns chosen so that no pair parts early
/// ranks in about 40 ms; BENCHMARKS.md), and one project with more sessions claiming at
/// once than this is not a team of people.
pub const MAX_BOARD_SESSIONS: usize = 64;

/// One claim, as a session publishes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// What it covers ([`Pattern`]), relative to the repository root.
    pub pattern: String,
    /// Exclusive (nobody else edits) or shared (others may claim shared too).
    pub exclusive: bool,
    /// Why, for the other side's agent and human.
    pub reason: String,
    /// When it was first made, ms since the Unix epoch; kept across renewals.
    pub since: u64,
    /// When it lapses unless renewed.
    pub until: u64,
}

/// Why a claim or a set of claims is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    /// The pattern breaks a rule.
    #[error("pattern {0}")]
    Pattern(String),
    /// The reason is too long or has control characters.
    #[error("reason: {0}")]
    Reason(String),
    /// `since`/`until` out of order, too long, or in the future.
    #[error("times: {0}")]
    Times(String),
    /// More than [`MAX_CLAIMS_PER_SESSION`].
    #[error("{0} claims; a session has at most {MAX_CLAIMS_PER_SESSION}")]
    TooMany(usize),
    /// The board holds [`MAX_BOARD_SESSIONS`] sessions already.
    #[error("the board is full ({MAX_BOARD_SESSIONS} sessions with claims)")]
    BoardFull,
}

impl Claim {
    /// Checks the fields as a receiver does, at `now` (the announcement's own time
    /// when checking what it carries): returns the parsed pattern.
    pub fn check(&self, now: u64) -> Result<Pattern, ClaimError> {
        let pattern = Pattern::parse(&self.pattern)?;
        if self.reason.len() > MAX_REASON_BYTES {
            return Err(ClaimError::Reason(format!(
                "is {} bytes; the limit is {MAX_REASON_BYTES}",
                self.reason.len()
            )));
        }
        if self.reason.chars().any(char::is_control) {
            return Err(ClaimError::Reason("contains control characters".into()));
        }
        if self.since > now.saturating_add(MAX_FUTURE_SKEW_MS) {
            return Err(ClaimError::Times("since is in the future".into()));
        }
        if self.until <= self.since || self.until - self.since > MAX_CLAIM_LIFETIME_MS {
            return Err(ClaimError::Times(format!(
                "until must be after since and at most {} h later",
                MAX_CLAIM_LIFETIME_MS / HOUR_MS
            )));
        }
        Ok(pattern)
    }
}

/// Checks a whole set as a session publishes it.
pub fn check_set(claims: &[Claim], now: u64) -> Result<Vec<Pattern>, ClaimError> {
    if claims.len() > MAX_CLAIMS_PER_SESSION {
        return Err(ClaimError::TooMany(claims.len()));
    }
    claims.iter().map(|c| c.check(now)).collect()
}

/// The claim sets of `project` a roster shows: of its live sessions (an away one's
/// lapse with its liveness) whose details the viewer can read and whose project is
/// `project`.
pub fn sets_in_views<'a>(
    views: &'a [crate::presence::IdentityView],
    project: &'a ProjectId,
) -> impl Iterator<Item = (SessionAddr, Vec<Claim>)> + 'a {
    views
        .iter()
        .flat_map(|i| &i.sessions)
        .filter(|s| s.presence == crate::presence::Presence::Live)
        .filter_map(move |s| {
            let details = s.details.as_ref()?;
            (details.project_id().as_ref() == Some(project) && !details.claims.is_empty())
                .then(|| (s.addr.clone(), details.claims.clone()))
        })
}

/// A claim on the board: who made it, and its place in the precedence order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The claimer.
    pub by: SessionAddr,
    /// The claim.
    pub claim: Claim,
    pattern: Pattern,
}

impl Placed {
    /// The parsed pattern.
    pub fn pattern(&self) -> &Pattern {
        &self.pattern
    }

    fn key(&self) -> (u64, &SessionAddr, &Pattern) {
        (self.claim.since, &self.by, &self.pattern)
    }

    /// Whether `self` and `other` cannot both stand.
    pub fn conflicts_with(&self, other: &Placed) -> bool {
        self.by != other.by
            && (self.claim.exclusive || other.claim.exclusive)
            && self.pattern.overlaps(&other.pattern)
    }
}

/// Where a claim stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Nothing before it conflicts.
    Held,
    /// It waits behind this claim (the first conflicting one before it).
    Waits(Box<Placed>),
}

/// Two claims that cannot both stand: `first` comes before `second`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The claim that comes first.
    pub first: Placed,
    /// The claim that comes after it.
    pub second: Placed,
}

/// The claims of every session a node knows of in one project, in precedence order.
#[derive(Clone, Debug, Default)]
pub struct Board {
    sets: BTreeMap<SessionAddr, Vec<Claim>>,
    /// Every claim, in precedence order, with whether it is held.
    order: Vec<(Placed, Option<usize>)>,
}

impl Board {
    /// An empty board.
    pub fn new() -> Self {
        Self::default()
    }

    /// The board of `project` as a roster shows it at `now`: the claims of its live
    /// sessions (an away one's lapse with its liveness) whose details the viewer can
    /// read and whose project is `project`. Sets that do not check, or that do not fit,
    /// are left out and counted in the second value.
    pub fn from_views(
        views: &[crate::presence::IdentityView],
        project: &ProjectId,
        now: u64,
    ) -> (Self, usize) {
        Self::from_sets(sets_in_views(views, project), now)
    }

    /// A board of these sets, ranked once. Sets that do not check, or that do not fit,
    /// are left out and counted in the second value.
    pub fn from_sets(
        sets: impl IntoIterator<Item = (SessionAddr, Vec<Claim>)>,
        now: u64,
    ) -> (Self, usize) {
        let mut board = Self::new();
        let mut refused = 0;
        for (by, claims) in sets {
            if board.insert(by, claims, now).is_err() {
                refused += 1;
            }
        }
        board.rank();
        (board, refused)
    }

    /// Sets what `by` claims now, replacing what it claimed before; an empty set takes
    /// it off the board. Claims that lapsed by `now` are left out. The set is checked
    /// whole: one bad claim refuses it all, and the board is unchanged.
    pub fn set(&mut self, by: SessionAddr, claims: Vec<Claim>, now: u64) -> Result<(), ClaimError> {
        if self.insert(by, claims, now)? {
            self.rank();
        }
        Ok(())
    }

    /// [`Board::set`] without ranking: whether the sets changed.
    fn insert(
        &mut self,
        by: SessionAddr,
        claims: Vec<Claim>,
        now: u64,
    ) -> Result<bool, ClaimError> {
        check_set(&claims, now)?;
        let live: Vec<Claim> = claims.into_iter().filter(|c| c.until > now).collect();
        if live.is_empty() {
            return Ok(self.sets.remove(&by).is_some());
        }
        if !self.sets.contains_key(&by) && self.sets.len() >= MAX_BOARD_SESSIONS {
            return Err(ClaimError::BoardFull);
        }
        if self.sets.get(&by) == Some(&live) {
            return Ok(false);
        }
        self.sets.insert(by, live);
        Ok(true)
    }

    /// The claim sets on the board, by session: equal sets give an equal board.
    pub fn sets(&self) -> &BTreeMap<SessionAddr, Vec<Claim>> {
        &self.sets
    }

    /// Takes `by`'s claims off the board (it ended, or was judged gone).
    pub fn remove(&mut self, by: &SessionAddr) {
        if self.sets.remove(by).is_some() {
            self.rank();
        }
    }

    /// Drops the claims that lapsed by `now`; true if any did.
    pub fn sweep(&mut self, now: u64) -> bool {
        let before = self.order.len();
        self.sets.retain(|_, set| {
            set.retain(|c| c.until > now);
            !set.is_empty()
        });
        let changed = self.sets.values().map(Vec::len).sum::<usize>() != before;
        if changed {
            self.rank();
        }
        changed
    }

    /// The sessions with claims on the board.
    pub fn sessions(&self) -> impl Iterator<Item = &SessionAddr> {
        self.sets.keys()
    }

    /// Every claim in precedence order, with where it stands.
    pub fn claims(&self) -> impl Iterator<Item = (&Placed, Standing)> {
        self.order
            .iter()
            .map(|(p, behind)| (p, self.standing_of(*behind)))
    }

    /// Where each of `by`'s claims stands.
    pub fn standings_of<'a>(
        &'a self,
        by: &'a SessionAddr,
    ) -> impl Iterator<Item = (&'a Placed, Standing)> + 'a {
        self.claims().filter(move |(p, _)| &p.by == by)
    }

    /// Every pair of conflicting claims, the first of each pair first.
    pub fn conflicts(&self) -> Vec<Conflict> {
        let mut out = Vec::new();
        for (i, (second, _)) in self.order.iter().enumerate() {
            for (first, _) in &self.order[..i] {
                if first.conflicts_with(second) {
                    out.push(Conflict {
                        first: first.clone(),
                        second: second.clone(),
                    });
                }
            }
        }
        out
    }

    /// The held exclusive claims of sessions other than `me` that cover `path`: what
    /// an edit of `path` by `me` would collide with. Empty when the path is free.
    pub fn held_against<'a>(
        &'a self,
        path: &'a str,
        me: Option<&'a SessionAddr>,
    ) -> impl Iterator<Item = &'a Placed> + 'a {
        self.order.iter().filter_map(move |(p, behind)| {
            (behind.is_none() && p.claim.exclusive && Some(&p.by) != me && p.pattern.covers(path))
                .then_some(p)
        })
    }

    /// The claims that would stand before `claim` by `by`, were it made: empty when it
    /// would be held. Does not change the board.
    pub fn would_wait_behind(&self, by: &SessionAddr, claim: &Claim) -> Vec<&Placed> {
        let Ok(pattern) = Pattern::parse(&claim.pattern) else {
            return Vec::new();
        };
        let new = Placed {
            by: by.clone(),
            claim: claim.clone(),
            pattern,
        };
        self.order
            .iter()
            .map(|(p, _)| p)
            .filter(|p| p.key() < new.key() && p.conflicts_with(&new))
            .collect()
    }

    fn standing_of(&self, behind: Option<usize>) -> Standing {
        match behind {
            None => Standing::Held,
            Some(i) => Standing::Waits(Box::new(self.order[i].0.clone())),
        }
    }

    /// Orders every claim and finds, for each, the first conflicting claim before it.
    /// Quadratic in the claims on the board (at most 512); most pairs part at their
    /// first literal segment.
    fn rank(&mut self) {
        let mut placed: Vec<Placed> = self
            .sets
            .iter()
            .flat_map(|(by, set)| {
                set.iter().filter_map(|c| {
                    Some(Placed {
                        by: by.clone(),
                        claim: c.clone(),
                        pattern: Pattern::parse(&c.pattern).ok()?,
                    })
                })
            })
            .collect();
        placed.sort_by(|a, b| a.key().cmp(&b.key()));
        self.order = (0..placed.len())
            .map(|i| {
                let behind = (0..i).find(|&j| placed[j].conflicts_with(&placed[i]));
                (placed[i].clone(), behind)
            })
            .collect();
    }
}

#[cfg(test)]
mod tests;
