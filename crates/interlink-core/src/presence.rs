//! Presence: the roster of sessions and how long each counts as present.
//!
//! A session proves it is running by re-announcing itself every
//! [`crate::limits::HEARTBEAT_MS`]. What a peer concludes depends only on the age of the
//! newest announcement it holds and on whether the session said goodbye:
//!
//! - [`Presence::Live`]: the newest announcement is younger than the live window.
//! - [`Presence::Away`]: it went quiet but is still inside the retention period. A
//!   suspended laptop sits here for days, and mail keeps being routed to it rather than
//!   to an awake sibling, because it will drain its queue when it wakes.
//! - [`Presence::Gone`]: it signed a [`Goodbye`], or nothing was heard from it for the
//!   whole retention period.
//!
//! Only a signed goodbye ends a session early; a missed heartbeat never does.
//!
//! The [`Roster`] holds verified announcements keyed by session address and grouped by
//! identity. Announcements arrive by gossip, roster fetches and direct exchange, in any
//! order and possibly more than once, so applying one is an idempotent upsert ordered by
//! `(ts, seq)`. A goodbye leaves a small tombstone so that an older announcement still
//! in flight cannot bring the closed session back. Every collection is bounded by the
//! [`Config`] caps, so a flood of announcements cannot grow memory without limit.

pub mod heartbeat;
pub mod node;
pub mod pacer;
#[cfg(feature = "sim")]
pub mod sim;
pub mod sync;

pub use heartbeat::heartbeat_interval_ms;

use std::{
    collections::{BTreeMap, btree_map::Entry},
    fmt,
};

use crate::{
    identity::IdentityKey,
    limits::{AWAY_RETENTION_MS, LIVE_WINDOW_MS, MAX_ROSTER_IDENTITIES, MAX_SESSIONS_PER_IDENTITY},
    replay::{TimeError, check_time},
    session::SessionId,
    wire::{Announcement, Beacon, Goodbye, SessionAddr, Signed},
};

/// How present a session is, judged at some `now`.
///
/// Ordered from most to least present, so sorting by it puts live sessions first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Presence {
    /// Announced within the live window.
    Live,
    /// Silent past the live window but still retained.
    Away,
    /// Said goodbye, expired, or never seen.
    Gone,
}

impl fmt::Display for Presence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Presence::Live => "live",
            Presence::Away => "away",
            Presence::Gone => "gone",
        })
    }
}

/// Time windows and caps of a [`Roster`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// An announcement younger than this makes its session live.
    pub live_window_ms: u64,
    /// An announcement at most this old keeps its session away; older ones are gone.
    /// It is also the oldest announcement or goodbye the roster accepts.
    pub away_retention_ms: u64,
    /// Most sessions held per identity (and most goodbye tombstones per identity).
    pub max_sessions_per_identity: usize,
    /// Most identities held that are not trusted (see [`Roster::set_trusted`]). Trusted
    /// identities — this user's own and its peers' — do not count against it, and an
    /// untrusted identity never evicts a trusted one: a flood of strangers' presence
    /// cannot push a sleeping friend off the roster. Trusted identities are bounded by
    /// the peers policy ([`crate::limits::MAX_PEERS`]) plus one.
    pub max_identities: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            live_window_ms: LIVE_WINDOW_MS,
            away_retention_ms: AWAY_RETENTION_MS,
            max_sessions_per_identity: MAX_SESSIONS_PER_IDENTITY,
            max_identities: MAX_ROSTER_IDENTITIES,
        }
    }
}

impl Config {
    /// The presence of a session whose newest announcement carries `ts`, at `now`.
    ///
    /// A timestamp slightly in the future (clock skew) counts as age zero.
    pub fn presence(&self, ts: u64, now: u64) -> Presence {
        self.presence_within(ts, now, self.live_window_ms)
    }

    /// The live window for a session that announced `ann`: the configured window,
    /// stretched in proportion when the session announces less often than every
    /// [`crate::limits::HEARTBEAT_MS`] (its `heartbeat_ms`, honoured up to
    /// [`crate::limits::MAX_HEARTBEAT_MS`]). With the standard heartbeat it is the
    /// configured window; at the longest, twenty times it.
    pub fn live_window_for(&self, ann: &Announcement) -> u64 {
        heartbeat::stretch_live_window(self.live_window_ms, ann.heartbeat_ms)
    }

    /// The presence of the session that announced `ann`, at `now`, if nothing was
    /// heard from it since.
    pub fn presence_of(&self, ann: &Announcement, now: u64) -> Presence {
        self.presence_within(ann.ts, now, self.live_window_for(ann))
    }

    /// Whether a session last heard from as `heard` is overdue at `now`: half its live
    /// window has passed, so its next sign should have come. A roster request marks it
    /// (with the sessions judged away), and a responder that heard from it since sends
    /// its newest beacon: a node back from a partition sees every session live again,
    /// also those that had not gone away yet but would before their next beacon.
    pub fn overdue(&self, heard: Heard, now: u64) -> bool {
        let window = heartbeat::stretch_live_window(self.live_window_ms, heard.heartbeat_ms);
        now.saturating_sub(heard.ts) >= window / 2
    }

    /// The presence of a session last heard from as `heard` says, at `now`.
    pub fn presence_heard(&self, heard: Heard, now: u64) -> Presence {
        self.presence_within(
            heard.ts,
            now,
            heartbeat::stretch_live_window(self.live_window_ms, heard.heartbeat_ms),
        )
    }

    fn presence_within(&self, ts: u64, now: u64, live_window_ms: u64) -> Presence {
        let age = now.saturating_sub(ts);
        if age < live_window_ms {
            Presence::Live
        } else if age <= self.away_retention_ms {
            Presence::Away
        } else {
            Presence::Gone
        }
    }
}

/// The newest sign of life held for a session: its announcement's or its newest
/// beacon's stamp, and the interval that sign promised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heard {
    /// When (ms since the Unix epoch, the session's clock).
    pub ts: u64,
    /// Its sequence number.
    pub seq: u64,
    /// The longest the session said it would wait before the next sign, ms.
    pub heartbeat_ms: u64,
}

/// What applying a beacon did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BeaconOutcome {
    /// It is the newest sign of life of a held session: kept, and worth forwarding.
    Applied,
    /// Nothing new: no newer than what was heard, or it names no announcement held
    /// (an older version, a session gone, or one never seen).
    Unchanged,
}

/// What applying an announcement did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upsert {
    /// A session not held before was added.
    Inserted,
    /// A newer announcement replaced the held one.
    Updated,
    /// Nothing changed: a duplicate, an announcement no newer than the held one, or one
    /// that predates the session's goodbye. Worth neither an error nor a re-gossip.
    Unchanged,
}

/// Why the roster refused an announcement or goodbye.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum RosterError {
    /// The timestamp is too far in the future or older than the retention period.
    #[error("presence timestamp refused: {0}")]
    Time(#[from] TimeError),
    /// The identity already holds its quota of sessions and none of them can make room:
    /// all are live, or all are fresher than the newcomer.
    #[error("identity {key:?} already has {cap} sessions on the roster and none can be evicted")]
    SessionCapReached {
        /// The identity.
        key: IdentityKey,
        /// The per-identity cap.
        cap: usize,
    },
    /// The roster holds its quota of identities and none of them can make room.
    #[error("the roster already holds {cap} identities and none can be evicted")]
    RosterFull {
        /// The identity cap.
        cap: usize,
    },
}

/// One retained session as seen at some `now`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionView {
    /// Identity key and session id.
    pub addr: SessionAddr,
    /// The newest announcement's body (addresses, sealed details, ...).
    pub announcement: Announcement,
    /// Its details (cwd, git label, summary, host, delivery), when the viewer may read
    /// them: filled by [`crate::wire::DetailsReader::fill`], `None` until then.
    pub details: Option<crate::wire::Details>,
    /// Live or away; gone sessions are never listed.
    pub presence: Presence,
    /// Milliseconds since the session was last heard from, by its announcement or a
    /// beacon (zero if that is dated ahead of `now`).
    pub age_ms: u64,
}

/// One identity and its retained sessions, as seen at some `now`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdentityView {
    /// The identity.
    pub key: IdentityKey,
    /// Its live and away sessions, in session-id order.
    pub sessions: Vec<SessionView>,
}

/// Forgets the tag of `ann` in a roster's tag index, unless the tag names another
/// session there (two sessions' tags can collide; the index keeps the first).
fn untag(tags: &mut std::collections::HashMap<sync::Tag, SessionAddr>, ann: &Announcement) {
    let tag = sync::Tag::of_announcement(ann);
    if tags
        .get(&tag)
        .is_some_and(|a| a.key == ann.identity && a.session == ann.session_id)
    {
        tags.remove(&tag);
    }
}

/// The `(ts, seq)` pair that orders announcements and goodbyes of one session.
type Stamp = (u64, u64);

fn stamp_of(ann: &Announcement) -> Stamp {
    (ann.ts, ann.seq)
}

/// One held session: its verified announcement and the newest beacon that keeps it
/// live (only a beacon naming this very announcement, and newer than it).
#[derive(Clone, Debug)]
pub(crate) struct Held {
    pub(crate) ann: Signed<Announcement>,
    pub(crate) beacon: Option<Signed<Beacon>>,
}

impl Held {
    /// The newest sign of life: the beacon if there is one, else the announcement.
    pub(crate) fn heard(&self) -> Heard {
        match &self.beacon {
            Some(b) => Heard {
                ts: b.body().ts,
                seq: b.body().seq,
                heartbeat_ms: b.body().heartbeat_ms,
            },
            None => {
                let a = self.ann.body();
                Heard {
                    ts: a.ts,
                    seq: a.seq,
                    heartbeat_ms: a.heartbeat_ms,
                }
            }
        }
    }

    fn body(&self) -> &Announcement {
        self.ann.body()
    }
}

/// Everything held for one identity.
#[derive(Debug, Default)]
struct Group {
    sessions: BTreeMap<SessionId, Held>,
    /// The newest goodbye stamp per session, kept after the session itself is removed so
    /// that a delayed older announcement is recognised as stale. Bounded by the
    /// per-identity cap and expired after the retention period: by then any announcement
    /// it could block is too old to be accepted anyway.
    tombstones: BTreeMap<SessionId, Stamp>,
}

impl Group {
    fn has_live(&self, config: &Config, now: u64) -> bool {
        self.sessions
            .values()
            .any(|h| config.presence_heard(h.heard(), now) == Presence::Live)
    }

    /// The newest timestamp held, announcement or goodbye.
    fn last_activity(&self) -> u64 {
        let sessions = self.sessions.values().map(|h| h.heard().ts);
        let tombstones = self.tombstones.values().map(|t| t.0);
        sessions.chain(tombstones).max().unwrap_or(0)
    }

    /// The session to evict to make room for a newcomer stamped `incoming`: the
    /// longest-silent session that is not live and is older than the newcomer (evicting
    /// fresher information for staler would make the roster worse).
    fn eviction_victim(&self, config: &Config, now: u64, incoming: Stamp) -> Option<SessionId> {
        self.sessions
            .iter()
            .filter(|(_, h)| config.presence_heard(h.heard(), now) != Presence::Live)
            .map(|(id, h)| {
                let heard = h.heard();
                ((heard.ts, heard.seq), id)
            })
            .filter(|(stamp, _)| *stamp < incoming)
            .min()
            .map(|(_, id)| id.clone())
    }

    /// Records a goodbye stamp, keeping the newest per session and at most `cap`
    /// tombstones (the oldest are forgotten first).
    fn record_tombstone(&mut self, session: SessionId, stamp: Stamp, cap: usize) {
        let slot = self.tombstones.entry(session).or_insert(stamp);
        *slot = (*slot).max(stamp);
        while self.tombstones.len() > cap {
            let oldest = self
                .tombstones
                .iter()
                .map(|(id, t)| (*t, id))
                .min()
                .map(|(_, id)| id.clone());
            match oldest {
                Some(id) => self.tombstones.remove(&id),
                None => break,
            };
        }
    }

    fn blocked_by_tombstone(&self, session: &SessionId, stamp: Stamp) -> bool {
        self.tombstones.get(session).is_some_and(|t| stamp <= *t)
    }

    fn is_empty(&self) -> bool {
        self.sessions.is_empty() && self.tombstones.is_empty()
    }
}

/// The set of known sessions, grouped by identity.
///
/// Entries are verified announcements (the caller decodes them with
/// [`Signed::decode`], which checks the signature); the roster adds the time rules,
/// ordering, goodbyes and caps. Iteration order is deterministic (by key, then session
/// id).
#[derive(Debug)]
pub struct Roster {
    config: Config,
    groups: BTreeMap<IdentityKey, Group>,
    /// Announcements held across all groups.
    len: usize,
    /// Identities this node trusts (its own, its peers'): never evicted by others.
    trusted: std::collections::BTreeSet<IdentityKey>,
    /// The [`sync::Tag`] of every held announcement, kept as they come and go: a
    /// summary or a roster-fetch answer is built from it without hashing the roster
    /// again (every connection asks for one, and at 100 sessions the hashing showed
    /// in profiles of the convergence bench).
    tags: std::collections::HashMap<sync::Tag, SessionAddr>,
}

impl Default for Roster {
    fn default() -> Self {
        Self::new(Config::default())
    }
}

impl Roster {
    /// An empty roster. Caps below one are raised to one.
    pub fn new(mut config: Config) -> Self {
        config.max_sessions_per_identity = config.max_sessions_per_identity.max(1);
        config.max_identities = config.max_identities.max(1);
        Self {
            config,
            groups: BTreeMap::new(),
            len: 0,
            trusted: std::collections::BTreeSet::new(),
            tags: std::collections::HashMap::new(),
        }
    }

    /// Sets the identities this node trusts (its own and its peers'; at most
    /// [`crate::limits::MAX_PEERS`] + 1 are kept). They are held apart from
    /// [`Config::max_identities`]: only another trusted identity can take a trusted
    /// one's room, and a stranger's announcement finds room among strangers only.
    pub fn set_trusted(&mut self, keys: impl IntoIterator<Item = IdentityKey>) {
        self.trusted = keys
            .into_iter()
            .take(crate::limits::MAX_PEERS + 1)
            .collect();
    }

    /// Whether `key` is among those [`Roster::set_trusted`] named (this user's and its
    /// peers' identities).
    pub fn is_trusted(&self, key: &IdentityKey) -> bool {
        self.trusted.contains(key)
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Applies a verified announcement received at `now`.
    ///
    /// Refused when its timestamp is outside the accepted window, or when a cap leaves
    /// no room. A new session of an identity at its cap evicts that identity's
    /// longest-silent non-live session; a new identity when the roster is full evicts
    /// the identity without live sessions that was heard from least recently.
    pub fn apply_announcement(
        &mut self,
        ann: Signed<Announcement>,
        now: u64,
    ) -> Result<Upsert, RosterError> {
        let body = ann.body();
        check_time(body.ts, now, self.config.away_retention_ms)?;
        let stamp = stamp_of(body);
        let key = body.identity;
        let session = body.session_id.clone();

        if !self.groups.contains_key(&key) {
            self.make_room_for_identity(&key, body.ts, now, true)
                .ok_or(RosterError::RosterFull {
                    cap: self.config.max_identities,
                })?;
        }
        let config = &self.config;
        let group = self.groups.entry(key).or_default();
        if group.blocked_by_tombstone(&session, stamp) {
            return Ok(Upsert::Unchanged);
        }
        if let Some(held) = group.sessions.get_mut(&session) {
            if stamp <= stamp_of(held.body()) {
                return Ok(Upsert::Unchanged);
            }
            untag(&mut self.tags, held.body());
            self.tags
                .entry(sync::Tag::of_announcement(ann.body()))
                .or_insert(SessionAddr { key, session });
            // A beacon names one announcement: it keeps a newer one live no more.
            *held = Held { ann, beacon: None };
            return Ok(Upsert::Updated);
        }
        if group.sessions.len() >= config.max_sessions_per_identity {
            // Not reached for a group created just above: the cap is at least one.
            let Some(victim) = group.eviction_victim(config, now, stamp) else {
                let cap = config.max_sessions_per_identity;
                return Err(RosterError::SessionCapReached { key, cap });
            };
            if let Some(old) = group.sessions.remove(&victim) {
                untag(&mut self.tags, old.body());
            }
            self.len -= 1;
        }
        self.tags
            .entry(sync::Tag::of_announcement(ann.body()))
            .or_insert(SessionAddr {
                key,
                session: session.clone(),
            });
        group.sessions.insert(session, Held { ann, beacon: None });
        self.len += 1;
        Ok(Upsert::Inserted)
    }

    /// Applies a verified goodbye received at `now`; returns whether a session was
    /// removed.
    ///
    /// The goodbye is remembered as a tombstone even when it removes nothing (it may
    /// have overtaken the announcement it ends, or the session may have restarted
    /// since), so the result does not depend on arrival order. A goodbye older than the
    /// held announcement leaves that announcement in place.
    pub fn apply_goodbye(&mut self, bye: Signed<Goodbye>, now: u64) -> Result<bool, RosterError> {
        let body = bye.body();
        check_time(body.ts, now, self.config.away_retention_ms)?;
        let stamp = (body.ts, body.seq);
        if !self.groups.contains_key(&body.identity)
            && self
                .make_room_for_identity(&body.identity, body.ts, now, false)
                .is_none()
        {
            // Nothing of this identity is held, so there is nothing to remove. A
            // tombstone for a stranger is worth less than anyone's retained session, so
            // it only displaces other tombstones; without room it is dropped, and an
            // older announcement arriving later meets the same full roster.
            return Ok(false);
        }
        let cap = self.config.max_sessions_per_identity;
        let group = self.groups.entry(body.identity).or_default();
        let removed = match group.sessions.get(&body.session_id) {
            Some(held) if stamp_of(held.body()) <= stamp => {
                untag(&mut self.tags, held.body());
                group.sessions.remove(&body.session_id);
                self.len -= 1;
                true
            }
            _ => false,
        };
        group.record_tombstone(body.session_id.clone(), stamp, cap);
        Ok(removed)
    }

    /// Drops sessions silent for longer than the retention period and tombstones that
    /// can no longer block anything; returns the addresses of the dropped sessions.
    pub fn sweep(&mut self, now: u64) -> Vec<SessionAddr> {
        let config = self.config;
        let mut dropped = Vec::new();
        let tags = &mut self.tags;
        self.groups.retain(|key, group| {
            group.sessions.retain(|session, held| {
                let keep = config.presence_heard(held.heard(), now) != Presence::Gone;
                if !keep {
                    untag(tags, held.body());
                    dropped.push(SessionAddr {
                        key: *key,
                        session: session.clone(),
                    });
                }
                keep
            });
            group
                .tombstones
                .retain(|_, t| now.saturating_sub(t.0) <= config.away_retention_ms);
            !group.is_empty()
        });
        self.len -= dropped.len();
        dropped
    }

    /// The presence of `addr` at `now`; [`Presence::Gone`] when it is not held.
    pub fn presence_of(&self, addr: &SessionAddr, now: u64) -> Presence {
        self.held(addr).map_or(Presence::Gone, |h| {
            self.config.presence_heard(h.heard(), now)
        })
    }

    /// The session whose held announcement has `tag`: the one a beacon naming that
    /// tag speaks for, signed by its identity.
    pub fn beacon_target(&self, tag: &sync::Tag) -> Option<&SessionAddr> {
        self.tags.get(tag)
    }

    /// Applies a verified beacon (its signer named with [`Roster::beacon_target`]),
    /// received at `now`: it becomes the session's newest sign of life if it names the
    /// held announcement, was signed by that announcement's identity and is newer than
    /// anything heard from the session.
    pub fn apply_beacon(
        &mut self,
        beacon: Signed<Beacon>,
        now: u64,
    ) -> Result<BeaconOutcome, RosterError> {
        use crate::wire::SignedBody as _;
        let body = beacon.body();
        check_time(body.ts, now, self.config.away_retention_ms)?;
        let tag = body.tag();
        let Some(addr) = self.tags.get(&tag).cloned() else {
            return Ok(BeaconOutcome::Unchanged);
        };
        if *body.signer() != addr.key {
            return Ok(BeaconOutcome::Unchanged);
        }
        let Some(held) = self
            .groups
            .get_mut(&addr.key)
            .and_then(|g| g.sessions.get_mut(&addr.session))
        else {
            return Ok(BeaconOutcome::Unchanged);
        };
        let heard = held.heard();
        // The index keeps the first of two colliding tags: make sure it is this one.
        if (body.ts, body.seq) <= (heard.ts, heard.seq)
            || sync::Tag::of_announcement(held.body()) != tag
        {
            return Ok(BeaconOutcome::Unchanged);
        }
        held.beacon = Some(beacon);
        Ok(BeaconOutcome::Applied)
    }

    /// The newest beacon held for `addr`'s current announcement.
    pub fn held_beacon(&self, addr: &SessionAddr) -> Option<&Signed<Beacon>> {
        self.held(addr)?.beacon.as_ref()
    }

    /// The newest sign of life held for `addr`.
    pub fn heard(&self, addr: &SessionAddr) -> Option<Heard> {
        self.held(addr).map(Held::heard)
    }

    pub(crate) fn held(&self, addr: &SessionAddr) -> Option<&Held> {
        self.groups.get(&addr.key)?.sessions.get(&addr.session)
    }

    /// The held announcement of `addr`, whatever its presence.
    pub fn get(&self, addr: &SessionAddr) -> Option<&Signed<Announcement>> {
        self.held(addr).map(|h| &h.ann)
    }

    /// The sealing key `key` announced most recently, from any of its sessions held
    /// (whatever their presence): the key is per identity, so a message to a session
    /// that is no longer on the roster can still be sealed and queued for it.
    pub fn sealing_key_of(&self, key: &IdentityKey) -> Option<crate::identity::SealingKey> {
        self.sealing_binding_of(key).map(|b| b.key)
    }

    /// The sealing binding (key and the identity's signature over it) from the newest
    /// announcement held of any session of `key`: what a node pins to seal to that
    /// identity once none of its sessions is on the roster.
    pub fn sealing_binding_of(&self, key: &IdentityKey) -> Option<crate::wire::SealingBinding> {
        self.groups
            .get(key)?
            .sessions
            .values()
            .max_by_key(|h| (h.body().ts, h.body().seq))
            .map(|h| h.body().sealing)
    }

    /// The sessions of `key` that said goodbye and are remembered (their tombstones,
    /// bounded by the per-identity cap), most recent goodbye first, with its time.
    pub fn departed(&self, key: &IdentityKey) -> Vec<(SessionId, u64)> {
        let mut out: Vec<(SessionId, u64)> = self
            .groups
            .get(key)
            .map(|g| g.tombstones.iter().map(|(s, t)| (s.clone(), t.0)).collect())
            .unwrap_or_default();
        out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out
    }

    /// The live and away sessions of `key` at `now`, in session-id order.
    pub fn sessions_of(&self, key: &IdentityKey, now: u64) -> Vec<SessionView> {
        self.groups
            .get(key)
            .map(|g| self.views(key, g, now))
            .unwrap_or_default()
    }

    /// Every identity with at least one live or away session at `now`, in key order.
    pub fn view(&self, now: u64) -> Vec<IdentityView> {
        self.groups
            .iter()
            .map(|(key, group)| IdentityView {
                key: *key,
                sessions: self.views(key, group, now),
            })
            .filter(|v| !v.sessions.is_empty())
            .collect()
    }

    /// Every held announcement, as received and signed, for answering a roster fetch.
    ///
    /// Call [`Roster::sweep`] first to leave out expired ones; a receiver refuses those
    /// anyway.
    pub fn announcements(&self) -> impl Iterator<Item = &Signed<Announcement>> + '_ {
        self.groups
            .values()
            .flat_map(|g| g.sessions.values().map(|h| &h.ann))
    }

    /// Number of held announcements (sessions), including expired ones not yet swept.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no announcement is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of identities with anything held (sessions or goodbye tombstones).
    pub fn identity_count(&self) -> usize {
        self.groups.len()
    }

    fn views(&self, key: &IdentityKey, group: &Group, now: u64) -> Vec<SessionView> {
        group
            .sessions
            .iter()
            .filter_map(|(session, held)| {
                let heard = held.heard();
                let presence = self.config.presence_heard(heard, now);
                (presence != Presence::Gone).then(|| SessionView {
                    addr: SessionAddr {
                        key: *key,
                        session: session.clone(),
                    },
                    announcement: held.body().clone(),
                    details: None,
                    presence,
                    age_ms: now.saturating_sub(heard.ts),
                })
            })
            .collect()
    }

    /// Ensures a new identity fits, evicting one if needed; `None` when it cannot.
    ///
    /// Identities holding only tombstones go first (they protect against stale
    /// resurrection but show nothing). Otherwise, when `evict_sessions` allows, the
    /// identity without live sessions heard from least recently goes, provided it is
    /// older than the newcomer's timestamp `ts`.
    /// Makes room for the new identity `key`. A trusted one always finds room (its
    /// kind is bounded by the peers policy); an untrusted one only among the untrusted,
    /// up to [`Config::max_identities`] of them.
    fn make_room_for_identity(
        &mut self,
        key: &IdentityKey,
        ts: u64,
        now: u64,
        evict_sessions: bool,
    ) -> Option<()> {
        if self.is_trusted(key) {
            return Some(());
        }
        let untrusted = self
            .groups
            .keys()
            .filter(|k| !self.trusted.contains(k))
            .count();
        if untrusted < self.config.max_identities {
            return Some(());
        }
        let config = &self.config;
        let trusted = &self.trusted;
        let victim = self
            .groups
            .iter()
            .filter(|(k, _)| !trusted.contains(k))
            .filter(|(_, g)| !g.has_live(config, now))
            .map(|(key, g)| ((!g.sessions.is_empty(), g.last_activity()), *key))
            .filter(|((has_sessions, last), _)| !has_sessions || (evict_sessions && *last < ts))
            .min()
            .map(|(_, key)| key)?;
        if let Entry::Occupied(e) = self.groups.entry(victim) {
            self.len -= e.get().sessions.len();
            for held in e.get().sessions.values() {
                untag(&mut self.tags, held.body());
            }
            e.remove();
        }
        Some(())
    }
}

#[cfg(test)]
#[path = "presence_tests.rs"]
pub(crate) mod tests;
