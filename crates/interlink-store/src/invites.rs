//! The invites this user issued and nobody has used yet, in `invites.json` in the home.
//!
//! `interlink-p2p invite` issues one ([`issue`]): a one-time secret with an expiry,
//! printed inside the code it hands the other person ([`interlink_core::wire::Invite`]).
//! The joiner's knock carries the secret sealed; whichever session of this home holds
//! that knock redeems it ([`redeem`]) — taking it out of the file, so a second knock
//! with the same secret is an ordinary knock for the operator — and pairs at once.
//!
//! The file holds at most [`MAX_INVITES`] unexpired invites (a new one drops the
//! oldest); expired ones leave it on every edit. It is 0600, like every state file.

use std::{io, path::PathBuf};

use interlink_core::{SessionId, identity::hex_encode, wire::INVITE_SECRET_BYTES};
use serde::{Deserialize, Serialize};

use crate::{
    files::{edit_json, from_json_file_error, load_json},
    paths::Home,
};

/// Most invites waiting at once.
pub const MAX_INVITES: usize = 16;
/// How long an invite admits by default.
pub const DEFAULT_TTL_MS: u64 = 60 * 60 * 1000;
/// The longest an invite may admit.
pub const MAX_TTL_MS: u64 = 7 * 24 * 60 * 60 * 1000;
const VERSION: u32 = 1;

/// One invite issued.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issued {
    /// Its secret, 32 hex digits.
    pub secret: String,
    /// The session that was waiting for the join when it was issued.
    pub session: String,
    /// When it was issued and when it expires (ms since the Unix epoch).
    pub created: u64,
    /// See `created`.
    pub expires: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    #[serde(default)]
    issued: Vec<Issued>,
}

/// Reading or changing the invites failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InviteStoreError {
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
    #[error("{} is not a valid invites file: {source}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where and how the JSON breaks.
        source: serde_json::Error,
    },
}

from_json_file_error!(InviteStoreError);

fn edit<T>(
    home: &Home,
    now: u64,
    change: impl FnOnce(&mut Vec<Issued>) -> T,
) -> Result<T, InviteStoreError> {
    let out = edit_json(
        home.path(),
        &home.invites_lock(),
        &home.invites(),
        |file: &mut File| {
            file.version = VERSION;
            file.issued.retain(|i| i.expires > now);
            Ok::<_, InviteStoreError>(change(&mut file.issued))
        },
    )??;
    Ok(out)
}

/// Issues an invite for `session`, valid for `ttl_ms`; returns its secret.
pub fn issue(
    home: &Home,
    session: &SessionId,
    ttl_ms: u64,
    now: u64,
    rng: &mut impl rand_core::CryptoRng,
) -> Result<([u8; INVITE_SECRET_BYTES], u64), InviteStoreError> {
    let mut secret = [0u8; INVITE_SECRET_BYTES];
    rng.fill_bytes(&mut secret);
    let expires = now.saturating_add(ttl_ms.min(MAX_TTL_MS));
    edit(home, now, |issued| {
        if issued.len() >= MAX_INVITES {
            issued.remove(0);
        }
        issued.push(Issued {
            secret: hex_encode(&secret),
            session: session.to_string(),
            created: now,
            expires,
        });
    })?;
    Ok((secret, expires))
}

/// Takes the unexpired invite whose secret is `secret` (hex) out of the file; `None`
/// when there is none (never issued here, used, or expired).
pub fn redeem(home: &Home, secret: &str, now: u64) -> Result<Option<Issued>, InviteStoreError> {
    let matches = |i: &Issued| constant_time_eq(i.secret.as_bytes(), secret.as_bytes());
    // Most knocks carry no invite of ours: no lock, no write.
    let file: File = load_json(&home.invites())?;
    if !file.issued.iter().any(|i| i.expires > now && matches(i)) {
        return Ok(None);
    }
    edit(home, now, |issued| {
        let at = issued.iter().position(matches)?;
        Some(issued.remove(at))
    })
}

/// The unexpired invites, oldest first.
pub fn list(home: &Home, now: u64) -> Result<Vec<Issued>, InviteStoreError> {
    let file: File = load_json(&home.invites())?;
    Ok(file
        .issued
        .into_iter()
        .filter(|i| i.expires > now)
        .collect())
}

/// Withdraws every invite issued for `session`; returns how many.
pub fn revoke(home: &Home, session: &SessionId, now: u64) -> Result<usize, InviteStoreError> {
    let session = session.to_string();
    edit(home, now, |issued| {
        let before = issued.len();
        issued.retain(|i| i.session != session);
        before - issued.len()
    })
}

/// Equality whose time does not depend on where two secrets of one length differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
#[path = "invites_tests.rs"]
mod tests;
