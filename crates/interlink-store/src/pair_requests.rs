//! The identities a session knocked and has not seen accept yet, kept across a restart
//! of its process (`pair_requests_sent.json` in the session's inbox directory).
//!
//! A session's trust gate lets a `pair_accept` in only from an identity it knocked
//! (an unsolicited acceptance is dropped). The acceptance may come long after the knock
//! — the other operator decides when they decide — and may be waiting in this
//! session's mailbox when the process restarts. So the node writes the identities here
//! when a knock is sent, and notes them in the gate again when it starts, before the
//! first mailbox fetch. The list is bounded by the gate ([`MAX_PENDING_PAIR_REQUESTS`]).
//!
//! The other direction — knocks this session holds for its operator — is
//! [`crate::knocks`].

use std::path::{Path, PathBuf};

use interlink_core::{IdentityKey, limits::MAX_PENDING_PAIR_REQUESTS};
use serde::{Deserialize, Serialize};
use tracing::warn;

/// File name, in the session's inbox directory, of the identities this session knocked.
pub const PAIR_REQUESTS_FILE: &str = "pair_requests_sent.json";

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    keys: Vec<String>,
}

fn path(dir: &Path) -> PathBuf {
    dir.join(PAIR_REQUESTS_FILE)
}

/// The identities a session in `dir` knocked and has not seen accept yet, oldest first.
/// A missing or unreadable file is an empty list (the worst case is an acceptance
/// dropped as unsolicited, which the other side reports).
pub fn load(dir: &Path) -> Vec<IdentityKey> {
    let Ok(bytes) = std::fs::read(path(dir)) else {
        return Vec::new();
    };
    let file: File = match serde_json::from_slice(&bytes) {
        Ok(f) => f,
        Err(e) => {
            warn!("ignoring {}: {e}", path(dir).display());
            return Vec::new();
        }
    };
    let mut keys: Vec<IdentityKey> = file.keys.iter().filter_map(|k| k.parse().ok()).collect();
    let excess = keys.len().saturating_sub(MAX_PENDING_PAIR_REQUESTS);
    keys.drain(..excess);
    keys
}

/// Replaces the file: a temporary file renamed over it, so a reader never sees half.
pub fn save(dir: &Path, keys: &[IdentityKey]) -> std::io::Result<()> {
    let file = File {
        version: 1,
        keys: keys.iter().map(IdentityKey::to_hex).collect(),
    };
    let bytes = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
    crate::atomic::write_file(&path(dir), &bytes)
}

#[cfg(test)]
#[path = "pair_requests_tests.rs"]
mod tests;
