//! Sealing keys pinned per identity, so mail can be sealed to a session that is not on
//! the roster.
//!
//! A body is sealed to the recipient identity's sealing key (PROTOCOL §2.3), not to a
//! session, and an identity's sealing key never changes (it is derived from the
//! identity's seed). So once this node has seen one verified binding of an identity —
//! in any announcement of any of its sessions — it can seal to every session of that
//! identity: one that closed cleanly (its goodbye took it off the roster), one away
//! longer than the roster keeps it, or one this node never saw. Bindings are learned
//! for peers (and this user's own identity) and kept in a small file shared by the
//! user's sessions (`sealing_keys.json` in the home), merged on write: every entry
//! carries its own signature and is verified again when loaded, so the file grants
//! nothing by itself.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use interlink_core::{IdentityKey, SealingKey, wire::SealingBinding};
use serde::{Deserialize, Serialize};
use serde_bytes::ByteArray;
use tracing::warn;

/// File name of the pinned sealing keys in the home directory.
pub const PINS_FILE: &str = "sealing_keys.json";
/// Most identities pinned (the peers policy's own cap bounds who is pinned).
pub const MAX_PINS: usize = interlink_core::limits::MAX_PEERS + 1;
/// Largest pins file read.
const MAX_PINS_FILE_BYTES: u64 = 1024 * 1024;

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    pins: Vec<Entry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    /// The identity, 64 hex digits.
    identity: String,
    /// Its sealing key, 64 hex digits.
    sealing_key: String,
    /// The identity's signature over `identity || sealing key`, 128 hex digits.
    sig: String,
}

/// The sealing keys this node knows per identity, beyond the roster.
#[derive(Debug, Default)]
pub struct SealingPins {
    path: Option<PathBuf>,
    pins: HashMap<IdentityKey, SealingBinding>,
}

impl SealingPins {
    /// The pins kept in `path` (none if `None`, or the file is missing or unreadable;
    /// entries whose signature does not verify are skipped).
    pub fn load(path: Option<PathBuf>) -> Self {
        let pins = path.as_deref().map(read).unwrap_or_default();
        Self { path, pins }
    }

    /// The pinned sealing key of `identity`.
    pub fn get(&self, identity: &IdentityKey) -> Option<SealingKey> {
        self.pins.get(identity).map(|b| b.key)
    }

    /// Number of identities pinned.
    pub fn len(&self) -> usize {
        self.pins.len()
    }

    /// Whether nothing is pinned.
    pub fn is_empty(&self) -> bool {
        self.pins.is_empty()
    }

    /// Pins `binding` for `identity` if it verifies and is new; saves the file then
    /// (merged with what other sessions saved meanwhile). Returns whether it was new.
    pub fn learn(&mut self, identity: IdentityKey, binding: SealingBinding) -> bool {
        if self.pins.get(&identity) == Some(&binding)
            || binding.verify(&identity).is_err()
            || (self.pins.len() >= MAX_PINS && !self.pins.contains_key(&identity))
        {
            return false;
        }
        self.pins.insert(identity, binding);
        if let Some(path) = &self.path {
            // Union with the file: another session of this user may have pinned others.
            for (k, b) in read(path) {
                if self.pins.len() >= MAX_PINS {
                    break;
                }
                self.pins.entry(k).or_insert(b);
            }
            if let Err(e) = write(path, &self.pins) {
                warn!("saving pinned sealing keys to {}: {e}", path.display());
            }
        }
        true
    }
}

fn read(path: &Path) -> HashMap<IdentityKey, SealingBinding> {
    let Some(parsed) = crate::small_file::read::<File>(path, MAX_PINS_FILE_BYTES) else {
        return HashMap::new();
    };
    parsed
        .pins
        .into_iter()
        .filter_map(|e| {
            let identity: IdentityKey = e.identity.parse().ok()?;
            let mut key = [0u8; 32];
            interlink_core::identity::hex_decode_into(&e.sealing_key, &mut key)?;
            let key = SealingKey::from_bytes(key);
            let mut sig = [0u8; 64];
            interlink_core::identity::hex_decode_into(&e.sig, &mut sig)?;
            let binding = SealingBinding {
                key,
                sig: ByteArray::new(sig),
            };
            binding.verify(&identity).ok()?;
            Some((identity, binding))
        })
        .take(MAX_PINS)
        .collect()
}

fn write(path: &Path, pins: &HashMap<IdentityKey, SealingBinding>) -> std::io::Result<()> {
    let mut entries: Vec<Entry> = pins
        .iter()
        .map(|(k, b)| Entry {
            identity: k.to_hex(),
            sealing_key: interlink_core::identity::hex_encode(b.key.as_bytes()),
            sig: interlink_core::identity::hex_encode(b.sig.as_slice()),
        })
        .collect();
    entries.sort_by(|a, b| a.identity.cmp(&b.identity));
    crate::small_file::write(
        path,
        &File {
            version: 1,
            pins: entries,
        },
    )
}

#[cfg(test)]
#[path = "pins_tests.rs"]
mod tests;
