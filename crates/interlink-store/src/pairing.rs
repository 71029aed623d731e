//! Pairing by knock: the requests waiting for the operator, and the ones this user
//! sent, in `pairing.json` in the home directory.
//!
//! A stranger can only knock (identity + suggested name, no text). Its knock reaches one
//! session, whose node holds it ([`crate::knocks`]); the agent side records it
//! here ([`record_knock`]) so it waits for
//! the operator across restarts and is visible to every session and to the
//! `interlink-p2p pair` command. Accepting ([`accept`]) pins the key in `peers.json`
//! under the suggested name (or one derived from it) and returns what is needed to
//! send the `pair_accept` back to the exact session that knocked. The requester's side
//! pins the acceptor when that `pair_accept` arrives, but only if this user asked
//! ([`take_outgoing`]), so acceptance is mutual and identity-level.
//!
//! The file is bounded ([`MAX_INCOMING`], [`MAX_OUTGOING`], [`MAX_DECIDED`]) and edited
//! like `peers.json`: under an exclusive `flock`, re-read, atomically replaced.

use std::{io, path::PathBuf};

use crate::knocks::HeldKnock;
use interlink_core::{
    IdentityKey, SessionId,
    limits::{KNOCK_QUEUE_CAPACITY, MAX_PENDING_PAIR_REQUESTS},
    trust::{KeyPattern, MIN_KEY_PREFIX, PeerPolicy, TrustError},
    wire::is_valid_name,
};
use serde::{Deserialize, Serialize};

use crate::{
    files::{edit_json, from_json_file_error, load_json},
    paths::Home,
    policy::{self, PolicyError},
};

/// Most knocks waiting for the operator; a new identity's knock drops the oldest.
pub const MAX_INCOMING: usize = KNOCK_QUEUE_CAPACITY;
/// Most pair requests this user has sent and not seen accepted.
pub const MAX_OUTGOING: usize = MAX_PENDING_PAIR_REQUESTS;
/// Most decided knock ids remembered, so a knock decided once is not offered again.
pub const MAX_DECIDED: usize = 256;
const VERSION: u32 = 1;

/// A knock waiting for the operator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Incoming {
    /// The stranger's identity key (64 hex digits).
    pub identity_key: String,
    pub fingerprint: String,
    /// The name it suggests for itself (unverified).
    pub name: Option<String>,
    /// The session that knocked: the acceptance goes back there.
    pub session: String,
    /// The knock's id.
    pub msg_id: String,
    /// When it was sent (ms since the Unix epoch, the sender's clock).
    pub knocked_at: u64,
    /// This user's session that received it.
    pub via_session: String,
}

impl Incoming {
    /// The request a held knock makes, received through the session `via`.
    fn of(knock: &HeldKnock, via: String) -> Self {
        Self {
            identity_key: knock.sender.clone(),
            fingerprint: knock.sender_fingerprint.clone(),
            name: knock.name.clone().filter(|n| is_valid_name(n)),
            session: knock.sender_session.clone(),
            msg_id: knock.msg_id.clone(),
            knocked_at: knock.ts,
            via_session: via,
        }
    }
}

/// A pair request this user sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outgoing {
    /// The identity asked (64 hex digits).
    pub identity_key: String,
    /// Its session that was knocked.
    pub session: String,
    /// The petname to pin it under when it accepts (else the name it suggests).
    pub petname: Option<String>,
    /// When the knock was sent (ms since the Unix epoch).
    pub sent_at: u64,
}

/// The whole file.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Pairing {
    version: u32,
    /// Knocks waiting for the operator, oldest first.
    #[serde(default)]
    pub incoming: Vec<Incoming>,
    /// Requests sent, oldest first.
    #[serde(default)]
    pub outgoing: Vec<Outgoing>,
    /// Ids of knocks accepted or rejected, oldest first.
    #[serde(default)]
    decided: Vec<String>,
}

/// Reading or changing the pairing state failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PairingError {
    /// A file-system error.
    #[error("{what} {}: {source}", .path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What the operating system reported.
        source: io::Error,
    },
    /// The file is not valid.
    #[error("{} is not a valid pairing file: {source}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where and how the JSON breaks.
        source: serde_json::Error,
    },
    /// No waiting request matches.
    #[error(
        "no pair request waiting matches {0:?}; give the fingerprint (or at least \
         {MIN_KEY_PREFIX} hex digits of it or of the key) from list_pair_requests"
    )]
    NoRequest(String),
    /// Several waiting requests match.
    #[error("{text:?} matches several pair requests: {}", .candidates.join(", "))]
    Ambiguous {
        /// What was given.
        text: String,
        /// The fingerprints matching.
        candidates: Vec<String>,
    },
    /// The peers file refused the key.
    #[error(transparent)]
    Trust(#[from] TrustError),
    /// The peers file could not be read or written.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The invites file could not be read or written.
    #[error("{0}")]
    Invites(String),
}

from_json_file_error!(PairingError);

/// Reads the pairing state of `home` (a missing file: nothing pending).
pub fn load(home: &Home) -> Result<Pairing, PairingError> {
    Ok(load_json(&home.pairing())?)
}

/// Changes the state under the editors' lock and writes it back atomically.
fn edit<T>(
    home: &Home,
    change: impl FnOnce(&mut Pairing) -> Result<T, PairingError>,
) -> Result<T, PairingError> {
    edit_json(
        home.path(),
        &home.pairing_lock(),
        &home.pairing(),
        |state| {
            let out = change(state)?;
            state.version = VERSION;
            Ok(out)
        },
    )?
}

/// Records a stranger's knock that `via` received. Returns false when it was already
/// recorded or decided. A newer knock from the same identity replaces the older one
/// (the acceptance goes to the session that knocked last).
pub fn record_knock(home: &Home, knock: &HeldKnock, via: &SessionId) -> Result<bool, PairingError> {
    let known = |state: &Pairing| {
        state.decided.contains(&knock.msg_id)
            || state.incoming.iter().any(|i| {
                i.msg_id == knock.msg_id
                    || (i.identity_key == knock.sender && i.knocked_at > knock.ts)
            })
    };
    // Most calls see a knock already recorded: no lock, no write.
    if known(&load(home)?) {
        return Ok(false);
    }
    edit(home, |state| {
        if known(state) {
            return Ok(false);
        }
        state.incoming.retain(|i| i.identity_key != knock.sender);
        if state.incoming.len() >= MAX_INCOMING {
            state.incoming.remove(0);
        }
        state.incoming.push(Incoming::of(knock, via.to_string()));
        Ok(true)
    })
}

/// Records that this user knocked `key`'s session `session`.
pub fn record_outgoing(
    home: &Home,
    key: &IdentityKey,
    session: &SessionId,
    petname: Option<String>,
    now: u64,
) -> Result<(), PairingError> {
    edit(home, |state| {
        let hex = key.to_hex();
        state.outgoing.retain(|o| o.identity_key != hex);
        if state.outgoing.len() >= MAX_OUTGOING {
            state.outgoing.remove(0);
        }
        state.outgoing.push(Outgoing {
            identity_key: hex,
            session: session.to_string(),
            petname,
            sent_at: now,
        });
        Ok(())
    })
}

/// Removes and returns this user's request to `key`, if one is pending (its
/// acceptance arrived).
pub fn take_outgoing(home: &Home, key: &IdentityKey) -> Result<Option<Outgoing>, PairingError> {
    edit(home, |state| {
        let hex = key.to_hex();
        let i = state.outgoing.iter().position(|o| o.identity_key == hex);
        Ok(i.map(|i| state.outgoing.remove(i)))
    })
}

/// What [`accept`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// The request accepted.
    pub request: Incoming,
    pub key: IdentityKey,
    /// The petname it is pinned under.
    pub petname: String,
}

/// The waiting request matching `fingerprint`, left in place (to ask about it).
pub fn request(home: &Home, fingerprint: &str) -> Result<Incoming, PairingError> {
    let state = load(home)?;
    let i = find(&state.incoming, fingerprint)?;
    Ok(state.incoming[i].clone())
}

/// Accepts the waiting request matching `fingerprint`: pins its key in `peers.json`
/// under its suggested name (or one derived from it) and forgets the request.
pub fn accept(home: &Home, fingerprint: &str) -> Result<Accepted, PairingError> {
    edit(home, |state| {
        let i = find(&state.incoming, fingerprint)?;
        let request = state.incoming[i].clone();
        let key: IdentityKey = request
            .identity_key
            .parse()
            .map_err(|_| PairingError::NoRequest(fingerprint.to_owned()))?;
        let petname = pin(home, &key, request.name.as_deref())?;
        state.incoming.remove(i);
        note_decided(state, &request.msg_id);
        Ok(Accepted {
            request,
            key,
            petname,
        })
    })
}

/// Rejects (discards) the waiting request matching `fingerprint`.
pub fn reject(home: &Home, fingerprint: &str) -> Result<Incoming, PairingError> {
    edit(home, |state| {
        let i = find(&state.incoming, fingerprint)?;
        let request = state.incoming.remove(i);
        note_decided(state, &request.msg_id);
        Ok(request)
    })
}

/// How long a pair request, either way, waits before it is dropped as stale: the
/// mailbox retention, after which the knock or its answer is gone from the overlay too.
pub const REQUEST_LIFETIME_MS: u64 = interlink_core::limits::MAILBOX_RETENTION_MS;

/// Forgets the requests that went stale: waiting ones from identities that are peers
/// now (paired some other way), and requests either way older than
/// [`REQUEST_LIFETIME_MS`]. Writes only when there is something to forget.
pub fn prune(home: &Home, policy: &PeerPolicy, now: u64) -> Result<(), PairingError> {
    let oldest = now.saturating_sub(REQUEST_LIFETIME_MS);
    let peer = |hex: &str| {
        hex.parse::<IdentityKey>()
            .is_ok_and(|k| policy.contains(&k))
    };
    let stale_in = |i: &Incoming| peer(&i.identity_key) || i.knocked_at < oldest;
    let stale_out = |o: &Outgoing| o.sent_at < oldest;
    let state = load(home)?;
    if !state.incoming.iter().any(stale_in) && !state.outgoing.iter().any(stale_out) {
        return Ok(());
    }
    edit(home, |state| {
        state.incoming.retain(|i| !stale_in(i));
        state.outgoing.retain(|o| !stale_out(o));
        Ok(())
    })
}

/// The pairing state after [`prune`]: what is really waiting.
pub fn current(home: &Home, now: u64) -> Result<Pairing, PairingError> {
    // Every tool result's footer asks; nothing waiting (the usual case) needs neither
    // the peers file nor a second read.
    let state = load(home)?;
    if state.incoming.is_empty() && state.outgoing.is_empty() {
        return Ok(state);
    }
    prune(home, &policy::load(home)?, now)?;
    load(home)
}

/// Why a stranger's knock was admitted without asking the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AutoAdmit {
    /// It carried the secret of an unused, unexpired invite this user issued.
    Invite(crate::invites::Issued),
    /// This user had asked to pair with that identity too (both humans asked).
    Mutual(Outgoing),
}

/// Decides a stranger's held knock that needs no operator: one carrying an invite
/// this user issued (redeemed here, so it admits once), or one from an identity this
/// user knocked as well. Pins the key and forgets the requests both ways; `None` when
/// the knock is for the operator.
pub fn auto_admit(
    home: &Home,
    knock: &HeldKnock,
    now: u64,
) -> Result<Option<(Accepted, AutoAdmit)>, PairingError> {
    let Ok(key) = knock.sender.parse::<IdentityKey>() else {
        return Ok(None);
    };
    if load(home)?.decided.contains(&knock.msg_id) {
        return Ok(None);
    }
    let why = match knock
        .invite
        .as_deref()
        .map(|secret| crate::invites::redeem(home, secret, now))
        .transpose()
        .map_err(|e| PairingError::Invites(e.to_string()))?
        .flatten()
    {
        Some(issued) => AutoAdmit::Invite(issued),
        None => match take_outgoing(home, &key)? {
            Some(out) => AutoAdmit::Mutual(out),
            None => return Ok(None),
        },
    };
    let petname = match &why {
        AutoAdmit::Mutual(out) => out.petname.clone(),
        AutoAdmit::Invite(_) => None,
    };
    let request = Incoming::of(knock, String::new());
    let accepted = edit(home, |state| {
        let petname = pin(home, &key, petname.as_deref().or(request.name.as_deref()))?;
        state
            .incoming
            .retain(|i| i.identity_key != request.identity_key);
        note_decided(state, &request.msg_id);
        Ok(Accepted {
            request: request.clone(),
            key,
            petname,
        })
    })?;
    Ok(Some((accepted, why)))
}

/// Pins `key` under `suggested` (or a name derived from it) unless it is a peer
/// already; returns its petname.
fn pin(home: &Home, key: &IdentityKey, suggested: Option<&str>) -> Result<String, PairingError> {
    policy::edit(home, |p| {
        if let Some(existing) = p.name_of(key) {
            return Ok::<_, PairingError>(existing.to_owned());
        }
        let name = free_name(p, suggested, key);
        p.add(name.clone(), *key)?;
        Ok(name)
    })
}

fn note_decided(state: &mut Pairing, msg_id: &str) {
    state.decided.push(msg_id.to_owned());
    let excess = state.decided.len().saturating_sub(MAX_DECIDED);
    state.decided.drain(..excess);
}

/// The one waiting request whose fingerprint (dashes optional) or key starts with
/// `text` (at least [`MIN_KEY_PREFIX`] hex digits).
fn find(incoming: &[Incoming], text: &str) -> Result<usize, PairingError> {
    let Some(pattern) = KeyPattern::parse(text) else {
        return Err(PairingError::NoRequest(text.to_owned()));
    };
    let hits: Vec<usize> = incoming
        .iter()
        .enumerate()
        .filter(|(_, i)| {
            i.identity_key
                .parse::<IdentityKey>()
                .is_ok_and(|k| pattern.matches(&k))
        })
        .map(|(n, _)| n)
        .collect();
    match hits.as_slice() {
        [] => Err(PairingError::NoRequest(text.to_owned())),
        [one] => Ok(*one),
        many => Err(PairingError::Ambiguous {
            text: text.to_owned(),
            candidates: many
                .iter()
                .map(|n| incoming[*n].fingerprint.clone())
                .collect(),
        }),
    }
}

/// A petname for `key` that `policy` does not use yet: the suggested name if it is a
/// valid one and free, else the suggested name (or `peer`) followed by fingerprint
/// digits.
pub fn free_name(policy: &PeerPolicy, suggested: Option<&str>, key: &IdentityKey) -> String {
    let fp = key.fingerprint().to_string().replace('-', "");
    let base = suggested.filter(|n| is_valid_name(n));
    let mut candidates: Vec<String> = base.iter().map(|b| (*b).to_owned()).collect();
    let stem_of = base.unwrap_or("peer");
    for digits in [4, 8, 12] {
        let stem: String = stem_of.chars().take(32 - digits - 1).collect();
        candidates.push(format!("{stem}-{}", &fp[..digits.min(fp.len())]));
    }
    candidates
        .into_iter()
        .find(|n| is_valid_name(n) && policy.get(n).is_none())
        .unwrap_or_else(|| format!("peer-{fp}"))
}

/// The name this user suggests for itself when it knocks, accepts or invites:
/// `INTERLINK_NAME` (or `name` in the settings file), else `<login>-<host>` — the login
/// name (`USER`) and the machine's short host name (`HOSTNAME`, else the system's), so
/// a person's laptop and desktop are told apart — made to fit the petname rule (the
/// rule has no `@`); else the login name alone (`LOGNAME`, Windows' `USERNAME` when
/// `USER` is unset); else the host name alone; else `peer`.
pub fn own_name(env: impl Fn(&str) -> Option<String>) -> String {
    let clean = |s: &str| -> Option<String> {
        let s: String = s
            .trim()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '-'
                }
            })
            .take(32)
            .collect();
        let s = s.trim_end_matches('-').to_owned();
        is_valid_name(&s).then_some(s)
    };
    if let Some(name) = env(crate::env::NAME).as_deref().and_then(clean) {
        return name;
    }
    let user = ["USER", "LOGNAME", "USERNAME"]
        .into_iter()
        .find_map(|var| env(var).as_deref().and_then(clean));
    let host = env("HOSTNAME")
        .or_else(os_hostname)
        .and_then(|h| h.split('.').next().map(str::to_owned))
        .and_then(|h| clean(&h));
    match (user, host) {
        (Some(user), Some(host)) if host != user => {
            clean(&format!("{user}-{host}")).unwrap_or(user)
        }
        (Some(user), _) => user,
        // No login name (a service, a container): the machine still tells who it is.
        (None, Some(host)) => host,
        (None, None) => "peer".to_owned(),
    }
}

/// The system's host name, where the platform says it without a call.
fn os_hostname() -> Option<String> {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
}

#[cfg(test)]
#[path = "pairing_tests.rs"]
mod tests;
