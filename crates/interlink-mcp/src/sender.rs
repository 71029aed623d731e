//! The one way a message finds its session: whom `to` names, and which of its sessions
//! gets it once the roster has seen them.
//!
//! `send_message` (the MCP tool) and `interlink-p2p send` (a shell command, a session
//! of its own that lives for one command) differ in wording and in how long they may
//! wait, not in what they decide: both resolve the target among the peers with
//! [`resolve`] and route over the node's roster with [`route_when_seen`], which waits
//! for a node that has just joined to hear of the target's sessions. The routing rules
//! themselves are the core's (`interlink_core::routing`, docs/SESSIONS.md).

use std::time::Duration;

use interlink_core::{
    IdentityKey,
    presence::{IdentityView, Presence},
    routing::{Route, RouteError, RouteReason, RouteRequest},
    trust::{KeyPattern, PeerPolicy, ResolveError},
};
use interlink_net::{Handle, NetError};
use tokio::time::Instant;

/// How often the roster is read again while waiting.
const POLL: Duration = Duration::from_millis(50);

/// The identity a message goes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    #[allow(missing_docs)]
    pub key: IdentityKey,
    /// How to call it: its petname, `self`, or its fingerprint.
    pub name: String,
}

/// Why `to` names nobody a message can go to.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    /// `to` is empty.
    #[error("`to` is empty: give a petname, a fingerprint or `self`")]
    Empty,
    /// `to` names no peer (or several).
    #[error("{reason}")]
    NotAPeer {
        /// Why the peers policy did not resolve it.
        reason: ResolveError,
        /// The one identity on the roster, not paired, that `to` matches, if any:
        /// pairing with it is the operator's decision.
        stranger: Option<IdentityKey>,
    },
}

/// The identity `to` names: `self`, or a peer by petname, fingerprint or key prefix
/// (`PeerPolicy::resolve`). On failure the roster is consulted to tell a stranger
/// from a typo.
pub(crate) async fn resolve(
    to: &str,
    policy: &PeerPolicy,
    own: IdentityKey,
    handle: &Handle,
) -> Result<Target, TargetError> {
    match resolve_among_peers(to, policy, own) {
        Err(TargetError::NotAPeer { reason, .. }) => {
            let roster = handle.roster().await.unwrap_or_default();
            Err(TargetError::NotAPeer {
                reason,
                stranger: unpaired_match(&roster, to.trim(), policy),
            })
        }
        other => other,
    }
}

/// [`resolve`] without the roster (no node needed): a failure names no stranger.
pub fn resolve_among_peers(
    to: &str,
    policy: &PeerPolicy,
    own: IdentityKey,
) -> Result<Target, TargetError> {
    let to = to.trim();
    if to.is_empty() {
        return Err(TargetError::Empty);
    }
    let named = |key: IdentityKey, name: &str| Target {
        key,
        name: name.to_owned(),
    };
    if to == "self" {
        return Ok(named(own, "self"));
    }
    match policy.resolve(to) {
        Ok(key) if key == own => Ok(named(key, "self")),
        Ok(key) => Ok(named(key, policy.name_of(&key).unwrap_or(to))),
        Err(reason) => Err(TargetError::NotAPeer {
            reason,
            stranger: None,
        }),
    }
}

/// A roster identity that is not a peer and whose fingerprint or key starts with
/// `text` (dashes ignored), if exactly one.
fn unpaired_match(roster: &[IdentityView], text: &str, policy: &PeerPolicy) -> Option<IdentityKey> {
    let pattern = KeyPattern::parse(text)?;
    let mut hits = roster
        .iter()
        .map(|i| i.key)
        .filter(|k| !policy.contains(k) && pattern.matches(k));
    match (hits.next(), hits.next()) {
        (Some(k), None) => Some(k),
        _ => None,
    }
}

/// How long [`route_when_seen`] may wait for the roster.
#[derive(Clone, Copy, Debug)]
pub struct Wait {
    /// Give up waiting (and route over what the roster shows) at this moment.
    pub until: Instant,
    /// Once the target has a session, how long its sessions must stay unchanged before
    /// routing: roster fetches and gossip from other peers may still add some. Zero
    /// routes at the first session seen.
    pub settle: Duration,
}

/// Why [`route_when_seen`] found no session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RouteWaitError {
    /// The routing rules found no session.
    #[error(transparent)]
    Route(#[from] RouteError),
    /// The node is gone.
    #[error(transparent)]
    Net(#[from] NetError),
}

/// Routes `req` over the node's roster once it shows the target: at once for an exact
/// session id, else when the target's sessions stayed unchanged for `wait.settle`. A
/// target with no session (or only a session id the roster does not hold) is waited for
/// until `wait.until`, then routed as the rules say (a literal session id, or
/// [`RouteError::NoSession`]).
pub async fn route_when_seen(
    handle: &Handle,
    req: &RouteRequest<'_>,
    wait: Wait,
) -> Result<Route, RouteWaitError> {
    let mut seen: Option<(Vec<(String, Presence)>, Instant)> = None;
    loop {
        let roster = handle.roster().await?;
        let now = Instant::now();
        let timed_out = now >= wait.until;
        let routed = interlink_core::routing::route_identities(&roster, req);
        match &routed {
            Ok(r) if r.presence != Presence::Gone => {
                if r.reason == RouteReason::Exact || wait.settle.is_zero() || timed_out {
                    return Ok(routed?);
                }
                let sessions = sessions_of(&roster, req);
                match &seen {
                    Some((s, since)) if *s == sessions => {
                        if now.duration_since(*since) >= wait.settle {
                            return Ok(routed?);
                        }
                    }
                    _ => seen = Some((sessions, now)),
                }
            }
            Err(RouteError::NoSession) | Ok(_) if !timed_out => {}
            _ => return Ok(routed?),
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The target's sessions on `roster` other than our own, sorted.
fn sessions_of(roster: &[IdentityView], req: &RouteRequest<'_>) -> Vec<(String, Presence)> {
    let mut sessions: Vec<(String, Presence)> = roster
        .iter()
        .filter(|i| i.key == req.target)
        .flat_map(|i| &i.sessions)
        .filter(|s| s.addr != *req.own)
        .map(|s| (s.addr.session.to_string(), s.presence))
        .collect();
    sessions.sort();
    sessions
}

/// Waits until the session `to` is on the node's roster, or `deadline`.
pub async fn wait_on_roster(
    handle: &Handle,
    to: &interlink_core::wire::SessionAddr,
    deadline: tokio::time::Instant,
) -> Result<(), interlink_net::NetError> {
    while tokio::time::Instant::now() < deadline
        && !handle
            .roster()
            .await?
            .iter()
            .filter(|i| i.key == to.key)
            .flat_map(|i| &i.sessions)
            .any(|s| s.addr.session == to.session)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// How long a knock or acceptance waits for its recipient to show on the roster.
const PAIRING_ROSTER_WAIT: Duration = Duration::from_secs(3);

/// Sends a knock or pair acceptance (no text) to `to`, suggesting `name` for this user,
/// waiting briefly for `to` to show on the roster (a message is sealed and addressed to
/// an announced session).
pub(crate) async fn send_pairing(
    handle: &Handle,
    name: &str,
    to: interlink_core::wire::SessionAddr,
    kind: interlink_core::wire::EnvelopeKind,
) -> Result<interlink_net::SendOutcome, interlink_net::SendError> {
    send_pairing_with(handle, name, to, kind, None).await
}

/// [`send_pairing`] of a knock that carries an invite's secret (sealed by the node).
pub async fn send_pairing_with(
    handle: &Handle,
    name: &str,
    to: interlink_core::wire::SessionAddr,
    kind: interlink_core::wire::EnvelopeKind,
    invite: Option<[u8; interlink_core::wire::INVITE_SECRET_BYTES]>,
) -> Result<interlink_net::SendOutcome, interlink_net::SendError> {
    let deadline = tokio::time::Instant::now() + PAIRING_ROSTER_WAIT;
    // An acceptance can be queued for a session that is not on the roster (it needs no
    // key), but is delivered live when it is: wait for it a moment first.
    if kind == interlink_core::wire::EnvelopeKind::PairAccept {
        wait_on_roster(handle, &to, deadline)
            .await
            .map_err(|_| interlink_net::SendError::Stopped)?;
    }
    loop {
        let msg = interlink_net::OutgoingMessage {
            to: to.clone(),
            kind,
            text: None,
            task_id: None,
            status: None,
            in_reply_to: None,
            also_about: Vec::new(),
            name: Some(name.to_owned()),
            group: None,
            invite,
        };
        match handle.send(msg).await {
            Err(interlink_net::SendError::NotOnRoster(_))
                if tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
}

/// Most session ids a "no session to route to" error names.
pub(crate) const MAX_SEEN_NAMED: usize = 3;
/// Most session directories of the home whose sent logs are read for them (the most
/// recently changed): an error path must not walk a home of thousands of sessions.
pub(crate) const MAX_SENT_LOGS_READ: usize = 32;

/// The session ids of `key` known to this user, most recent first, at most
/// [`MAX_SEEN_NAMED`]: those the node saw say goodbye (`handle`, if any) and those
/// the home's sessions wrote to (their sent logs). What a "no session" error offers as
/// `--session` / `session`: a message queued for one of them waits in its mailbox
/// until that session comes back.
pub async fn seen_sessions(
    home: &crate::paths::Home,
    handle: Option<&Handle>,
    key: IdentityKey,
) -> Vec<interlink_core::SessionId> {
    seen_sessions_up_to(home, handle, key, MAX_SEEN_NAMED).await
}

/// Most session ids [`is_seen`] compares with.
pub(crate) const MAX_SEEN_CHECKED: usize = 64;

/// Whether `session` of `key` is among the ids known to this user ([`seen_sessions`],
/// up to [`MAX_SEEN_CHECKED`] of them): an id given by hand that is not may be a typo.
pub async fn is_seen(
    home: &crate::paths::Home,
    handle: Option<&Handle>,
    key: IdentityKey,
    session: &interlink_core::SessionId,
) -> bool {
    seen_sessions_up_to(home, handle, key, MAX_SEEN_CHECKED)
        .await
        .contains(session)
}

/// [`seen_sessions`], at most `limit`.
async fn seen_sessions_up_to(
    home: &crate::paths::Home,
    handle: Option<&Handle>,
    key: IdentityKey,
    limit: usize,
) -> Vec<interlink_core::SessionId> {
    let mut seen: Vec<(interlink_core::SessionId, u64)> = match handle {
        Some(h) => h.departed(key).await.unwrap_or_default(),
        None => Vec::new(),
    };
    let sessions = home.sessions();
    let written = tokio::task::spawn_blocking(move || written_to(&sessions, &key, limit))
        .await
        .unwrap_or_default();
    seen.extend(written);
    seen.sort_by_key(|s| std::cmp::Reverse(s.1));
    let mut out: Vec<interlink_core::SessionId> = Vec::with_capacity(limit);
    for (session, _) in seen {
        if !out.contains(&session) {
            out.push(session);
            if out.len() == limit {
                break;
            }
        }
    }
    out
}

/// The sessions of `key` the sent logs under `sessions` (a home's `sessions/`) name,
/// at most `limit` per log, each with when it was last written to. Unreadable files
/// count as empty.
fn written_to(
    sessions: &std::path::Path,
    key: &IdentityKey,
    limit: usize,
) -> Vec<(interlink_core::SessionId, u64)> {
    let Ok(dirs) = std::fs::read_dir(sessions) else {
        return Vec::new();
    };
    let mut logs: Vec<(std::time::SystemTime, std::path::PathBuf)> = dirs
        .flatten()
        .filter_map(|d| {
            let path = d.path();
            let changed = std::fs::metadata(path.join(interlink_store::paths::SENT_FILE))
                .and_then(|m| m.modified())
                .ok()?;
            Some((changed, path))
        })
        .collect();
    logs.sort_by_key(|l| std::cmp::Reverse(l.0));
    logs.truncate(MAX_SENT_LOGS_READ);
    let hex = key.to_hex();
    let mut out = Vec::new();
    for (_, dir) in logs {
        let log =
            interlink_store::sent_log::SentLog::load(&interlink_store::paths::SessionDir::at(dir));
        // Newest first, one per session: the log keeps at most MAX_SENT entries.
        let mut named: Vec<&str> = Vec::new();
        for e in log.iter().rev().filter(|e| e.to_key == hex) {
            if named.len() == limit {
                break;
            }
            if named.contains(&e.to_session.as_str()) {
                continue;
            }
            named.push(&e.to_session);
            if let Ok(s) = interlink_core::SessionId::new(e.to_session.as_str()) {
                out.push((s, e.sent_at));
            }
        }
    }
    out
}

/// The sentence a "no session" error ends with: the ids [`seen_sessions`] found, or
/// that none is known here.
pub fn seen_sentence(seen: &[interlink_core::SessionId]) -> String {
    if seen.is_empty() {
        "no session id of theirs is known here (ask them for one: `interlink-p2p peers` \
         or whoami on their side shows it)"
            .to_owned()
    } else {
        format!(
            "their session ids seen last: {}",
            seen.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}
