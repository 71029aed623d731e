//! Routing: which session of an identity a message is addressed to.
//!
//! A message is signed to an identity but delivered to one of its sessions. The caller
//! names the target identity and, optionally, a session; [`route`] turns that into one
//! session id, using the roster and two hints the caller keeps per peer:
//!
//! - the *sticky* session: the session the peer last wrote from, so a reply lands in
//!   the conversation that asked;
//! - a *remembered* session: an address used before, tried only when the roster knows
//!   nothing of the peer (the queue keeps the message until that session returns).
//!
//! An explicit session is matched exactly, then as a unique prefix of a retained
//! session id; failing both it is taken literally, because a full id may name a
//! session that is offline right now. Without one, the order is: the sticky session if
//! still retained, the only live session, the only away session, the remembered
//! session. Whenever more than one session fits, the caller gets the list back and must
//! choose; a message is never sent to a guessed sibling.
//!
//! Messaging another session under one's own identity works the same way, except that
//! the sending session itself is never a candidate.

use std::fmt;

use crate::{
    identity::IdentityKey,
    presence::{IdentityView, Presence, Roster, SessionView},
    session::{SessionId, SessionIdError},
    wire::SessionAddr,
};

mod hints;

pub use hints::{Hints, MAX_ROUTE_HINTS, Routes};

/// What to route: the target and the hints the caller holds for it.
#[derive(Clone, Copy, Debug)]
pub struct RouteRequest<'a> {
    /// The identity the message is for.
    pub target: IdentityKey,
    /// The `session` argument as the user gave it: a full id or a prefix. Empty or
    /// blank text counts as not given.
    pub session: Option<&'a str>,
    /// This session's own address; excluded when `target` is our own identity.
    pub own: &'a SessionAddr,
    /// The session of `target` that last sent us a message, if any.
    pub sticky: Option<&'a SessionId>,
    /// A session of `target` used before, if any.
    pub remembered: Option<&'a SessionId>,
}

/// Why a session was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RouteReason {
    /// The explicit session matched a retained id exactly.
    Exact,
    /// The explicit session was a prefix of exactly one retained id.
    Prefix,
    /// The explicit session matched nothing retained and is used as given.
    Literal,
    /// The peer's last sending session, still retained.
    Sticky,
    /// The peer's only live session.
    SingleLive,
    /// The peer's only session, away.
    SingleAway,
    /// Nothing retained for the peer; an address used before, tried speculatively.
    Remembered,
    /// One of several sessions that fit equally well, each of which gets a copy (a
    /// group message: a direct message would have to name one).
    EachOfSeveral,
}

impl fmt::Display for RouteReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RouteReason::Exact => "exact session id",
            RouteReason::Prefix => "unique session-id prefix",
            RouteReason::Literal => "session id used as given (not on the roster)",
            RouteReason::Sticky => "the peer's last sending session",
            RouteReason::SingleLive => "the only live session",
            RouteReason::SingleAway => "the only session (away)",
            RouteReason::Remembered => "a previously used session (not on the roster)",
            RouteReason::EachOfSeveral => "one of the peer's sessions, each of which gets a copy",
        })
    }
}

/// The chosen session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The full session id.
    pub session: SessionId,
    /// Its presence when routed; [`Presence::Gone`] for literal and remembered routes,
    /// which the caller should report as "queued for an offline session".
    pub presence: Presence,
    /// Why it was chosen.
    pub reason: RouteReason,
    /// For a literal route ([`RouteReason::Literal`]): the peer's sessions on the
    /// roster, which the id given matched none of (so the caller can name them and
    /// the closest, [`Route::closest`]); empty otherwise.
    pub others: Vec<Candidate>,
}

impl Route {
    /// The retained session whose id is nearest to this literal route's id (at most a
    /// few edits away: a typo, not another session), if any.
    pub fn closest(&self) -> Option<&Candidate> {
        let id = self.session.as_str();
        let limit = (id.chars().count() / 3).max(2);
        self.others
            .iter()
            .map(|c| (edit_distance(id, c.session.as_str()), c))
            .filter(|(d, _)| *d <= limit)
            .min_by_key(|(d, _)| *d)
            .map(|(_, c)| c)
    }
}

impl Route {
    /// For a literal route with sessions on the roster: "its sessions now: a (live),
    /// b (away); did you mean a?" — `None` otherwise.
    pub fn others_note(&self) -> Option<String> {
        if self.reason != RouteReason::Literal || self.others.is_empty() {
            return None;
        }
        let list: Vec<String> = self
            .others
            .iter()
            .map(|c| format!("{} ({})", c.session, c.presence))
            .collect();
        let mut note = format!("its sessions now: {}", list.join(", "));
        if let Some(c) = self.closest() {
            note.push_str(&format!("; did you mean {}?", c.session));
        }
        Some(note)
    }
}

/// Levenshtein distance between `a` and `b`, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// A session offered for the caller to choose from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Full session id.
    pub session: SessionId,
    /// Its working directory.
    pub cwd: String,
    /// Its git-root label, if any.
    pub git_label: Option<String>,
    #[allow(missing_docs)]
    pub summary: String,
    /// Live or away.
    pub presence: Presence,
    /// Milliseconds since its last announcement.
    pub age_ms: u64,
}

impl Candidate {
    fn from_view(v: &SessionView) -> Self {
        Self {
            session: v.addr.session.clone(),
            cwd: v
                .details
                .as_ref()
                .map(|d| d.cwd.clone())
                .unwrap_or_default(),
            git_label: v.details.as_ref().and_then(|d| d.git_label.clone()),
            summary: v
                .details
                .as_ref()
                .map(|d| d.summary.clone())
                .unwrap_or_default(),
            presence: v.presence,
            age_ms: v.age_ms,
        }
    }
}

impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}) {}", self.session, self.presence, self.cwd)?;
        if let Some(g) = &self.git_label {
            write!(f, " git:{g}")?;
        }
        if !self.summary.is_empty() {
            write!(f, " {:?}", self.summary)?;
        }
        Ok(())
    }
}

/// Renders candidates for an error message, one per line.
fn list(candidates: &[Candidate]) -> String {
    candidates.iter().map(|c| format!("\n  {c}")).collect()
}

/// Why no session could be chosen.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RouteError {
    /// The explicit prefix fits several retained sessions.
    #[error("session prefix {prefix:?} matches several sessions; give more of the id:{}", list(.candidates))]
    AmbiguousPrefix {
        /// The prefix as given.
        prefix: String,
        /// The sessions it fits, live first.
        candidates: Vec<Candidate>,
    },
    /// No explicit session, and several sessions fit equally well.
    #[error("the peer has several sessions; pass `session` to pick one:{}", list(.candidates))]
    ChooseSession {
        /// Every retained session of the peer, live first, freshest first.
        candidates: Vec<Candidate>,
    },
    /// Nothing on the roster for the peer and no remembered session.
    #[error("the peer has no session on the roster and none was used before")]
    NoSession,
    /// The explicit session is this session itself.
    #[error("that is this session; a session cannot message itself")]
    OwnSession,
    /// The explicit session matched nothing and is not a valid session id.
    #[error("session {value:?} matches no session and is not a valid id: {source}")]
    InvalidSession {
        /// The text given.
        value: String,
        /// Why it is not an id.
        source: SessionIdError,
    },
}

/// Chooses the session of `req.target` to deliver to, judged at `now`.
pub fn route(roster: &Roster, req: &RouteRequest<'_>, now: u64) -> Result<Route, RouteError> {
    route_views(roster.sessions_of(&req.target, now), req)
}

/// The same rules as [`route`], over a roster snapshot as identities with their
/// sessions (what a process outside the node task gets from its handle).
pub fn route_identities(
    roster: &[IdentityView],
    req: &RouteRequest<'_>,
) -> Result<Route, RouteError> {
    let sessions = roster
        .iter()
        .filter(|i| i.key == req.target)
        .flat_map(|i| i.sessions.iter().cloned())
        .collect();
    route_views(sessions, req)
}

/// The same rules as [`route`], over a snapshot of the target's sessions (what a
/// process outside the node gets from its roster view). Sessions of other identities
/// and gone sessions in `sessions` are ignored.
pub fn route_views(
    sessions: Vec<SessionView>,
    req: &RouteRequest<'_>,
) -> Result<Route, RouteError> {
    // When writing to our own identity, this session is on the roster too, but sending
    // to ourselves is never what is meant.
    let own = (req.target == req.own.key).then_some(&req.own.session);
    let mut retained: Vec<SessionView> = sessions
        .into_iter()
        .filter(|v| {
            v.addr.key == req.target && v.presence != Presence::Gone && Some(&v.addr.session) != own
        })
        .collect();
    // Live first, then freshest: the order candidates are shown in.
    retained.sort_by(|a, b| {
        (a.presence, a.age_ms, &a.addr.session).cmp(&(b.presence, b.age_ms, &b.addr.session))
    });

    match req.session.map(str::trim).filter(|s| !s.is_empty()) {
        Some(text) => explicit(text, own, &retained),
        None => automatic(req, own, &retained),
    }
}

fn chosen(v: &SessionView, reason: RouteReason) -> Route {
    Route {
        session: v.addr.session.clone(),
        presence: v.presence,
        reason,
        others: Vec::new(),
    }
}

fn explicit(
    text: &str,
    own: Option<&SessionId>,
    retained: &[SessionView],
) -> Result<Route, RouteError> {
    if own.is_some_and(|o| o.as_str() == text) {
        return Err(RouteError::OwnSession);
    }
    // An exact id wins even when it is also a prefix of a longer one.
    if let Some(v) = retained.iter().find(|v| v.addr.session.as_str() == text) {
        return Ok(chosen(v, RouteReason::Exact));
    }
    let fits: Vec<&SessionView> = retained
        .iter()
        .filter(|v| v.addr.session.as_str().starts_with(text))
        .collect();
    match fits.as_slice() {
        [one] => Ok(chosen(one, RouteReason::Prefix)),
        [] => {
            // Possibly the full id of a session that is offline (asleep past
            // retention, or not yet seen by this node): the queue holds the message.
            // Not `.` or `..`, which no session can have.
            if text == "." || text == ".." {
                return Err(RouteError::InvalidSession {
                    value: text.to_owned(),
                    source: SessionIdError::Reserved(text.to_owned()),
                });
            }
            let session = SessionId::new(text).map_err(|source| RouteError::InvalidSession {
                value: text.to_owned(),
                source,
            })?;
            Ok(Route {
                session,
                presence: Presence::Gone,
                reason: RouteReason::Literal,
                others: retained.iter().map(Candidate::from_view).collect(),
            })
        }
        many => Err(RouteError::AmbiguousPrefix {
            prefix: text.to_owned(),
            candidates: many.iter().map(|v| Candidate::from_view(v)).collect(),
        }),
    }
}

fn automatic(
    req: &RouteRequest<'_>,
    own: Option<&SessionId>,
    retained: &[SessionView],
) -> Result<Route, RouteError> {
    // A reply goes back to the session that wrote, even if it has gone quiet: it is
    // the one holding the conversation, and it will drain its queue on waking.
    if let Some(sticky) = req.sticky.filter(|s| Some(*s) != own)
        && let Some(v) = retained.iter().find(|v| &v.addr.session == sticky)
    {
        return Ok(chosen(v, RouteReason::Sticky));
    }
    let choose = || RouteError::ChooseSession {
        candidates: retained.iter().map(Candidate::from_view).collect(),
    };
    for (presence, reason) in [
        (Presence::Live, RouteReason::SingleLive),
        (Presence::Away, RouteReason::SingleAway),
    ] {
        let mut matching = retained.iter().filter(|v| v.presence == presence);
        match (matching.next(), matching.next()) {
            (Some(v), None) => return Ok(chosen(v, reason)),
            (Some(_), Some(_)) => return Err(choose()),
            _ => {}
        }
    }
    // Only reached when nothing at all is retained for the peer.
    match req.remembered.filter(|s| Some(*s) != own) {
        Some(session) => Ok(Route {
            session: session.clone(),
            presence: Presence::Gone,
            reason: RouteReason::Remembered,
            others: Vec::new(),
        }),
        None => Err(RouteError::NoSession),
    }
}

#[cfg(test)]
mod tests;
