//! The pair requests a session sent, kept across a restart of its process.
//!
//! A session's trust gate lets a `pair_accept` in only from an identity it knocked
//! (an unsolicited acceptance is dropped). The acceptance may come long after the knock
//! — the other operator decides when they decide — and may be waiting in this
//! session's mailbox when the process restarts. So the identities knocked are written
//! to a small file in the session's inbox directory when a knock is sent, and noted in
//! the gate again when the node starts, before the first mailbox fetch.
//!
//! The list is bounded by the gate ([`MAX_PENDING_PAIR_REQUESTS`]); identities that
//! became peers are pruned by the gate and leave the file with the next knock.
//!
//! The other direction — knocks this session holds for its operator — is mirrored to
//! [`interlink_store::knocks`].

use std::path::{Path, PathBuf};

use interlink_core::{IdentityKey, limits::MAX_PENDING_PAIR_REQUESTS};
use serde::{Deserialize, Serialize};
use tracing::warn;

use super::Actor;

/// File name, in the session's inbox directory, of the identities this session knocked.
pub(super) const PAIR_REQUESTS_FILE: &str = "pair_requests_sent.json";

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
pub(super) fn load(dir: &Path) -> Vec<IdentityKey> {
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
fn save(dir: &Path, keys: &[IdentityKey]) -> std::io::Result<()> {
    let file = File {
        version: 1,
        keys: keys.iter().map(IdentityKey::to_hex).collect(),
    };
    let bytes = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
    interlink_store::atomic::write_file(&path(dir), &bytes)
}

impl Actor {
    /// Mirrors the gate's held knocks to [`interlink_store::knocks::KNOCKS_FILE`].
    pub(super) fn save_held_knocks(&self) {
        let (Some(d), Some(dir)) = (
            self.parts.delivery(),
            self.config.delivery.inbox_dir.as_deref(),
        ) else {
            return;
        };
        let sealing = match &self.role {
            crate::Role::Session(spec) => Some(spec.identity.sealing_secret()),
            _ => None,
        };
        let held: Vec<interlink_store::knocks::HeldKnock> = d
            .engine()
            .gate()
            .knocks()
            .list()
            .map(|k| interlink_store::knocks::HeldKnock {
                invite: sealing
                    .as_ref()
                    .and_then(|s| k.open_invite(s))
                    .map(|secret| interlink_core::identity::hex_encode(&secret)),
                ..k.into()
            })
            .collect();
        if let Err(e) = interlink_store::knocks::save(dir, &held) {
            warn!("saving the held knocks: {e}");
        }
    }

    /// Records that this session knocked `key`: its acceptance will be let in, also
    /// after a restart.
    pub(super) fn note_knock_sent(&mut self, key: IdentityKey) {
        let Some(gate) = self.parts.delivery_mut().map(|d| d.engine_mut().gate_mut()) else {
            return;
        };
        gate.note_pair_request(key);
        let keys: Vec<IdentityKey> = gate.pending_pair_requests().copied().collect();
        if let Some(dir) = self.config.delivery.inbox_dir.as_deref()
            && let Err(e) = save(dir, &keys)
        {
            warn!("saving the pair requests sent: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use interlink_core::Identity;

    use super::*;

    #[test]
    fn requests_survive_in_the_file_bounded() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path()).is_empty());
        let keys: Vec<IdentityKey> = (0..=MAX_PENDING_PAIR_REQUESTS)
            .map(|i| Identity::from_seed(&[u8::try_from(i % 250).unwrap() + 1; 32]).public())
            .collect();
        save(dir.path(), &keys).unwrap();
        let loaded = load(dir.path());
        assert_eq!(loaded.len(), MAX_PENDING_PAIR_REQUESTS);
        assert_eq!(loaded.last(), keys.last());
        let mut gate = interlink_core::trust::Gate::new(Default::default());
        for key in load(dir.path()) {
            gate.note_pair_request(key);
        }
        assert_eq!(
            gate.pending_pair_requests().len(),
            MAX_PENDING_PAIR_REQUESTS
        );
        std::fs::write(path(dir.path()), b"not json").unwrap();
        assert!(load(dir.path()).is_empty());
    }
}
