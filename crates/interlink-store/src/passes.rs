//! The mailbox passes peers issued this user, so its mail to their sleeping sessions
//! is kept by holders among their admitted mail (PROTOCOL §4.7, §7.2).
//!
//! A peer hands its pass out on every receipt and envelope it sends this user
//! ([`interlink_core::wire::MailboxPass`]). A pass is per identity, not per session,
//! and never changes, so one learned by any session of this user serves every later
//! one: they are kept in a small file in the home (`mailbox_passes.json`, beside the
//! pinned sealing keys), merged on write. Every entry is verified again when loaded,
//! so the file grants nothing by itself; and a pass is no secret — holders see it on
//! every envelope that carries it — so the file needs no more care than the pins.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use interlink_core::{IdentityKey, wire::MailboxPass};
use serde::{Deserialize, Serialize};
use tracing::warn;

/// File name of the passes in the home directory.
pub const PASSES_FILE: &str = "mailbox_passes.json";
/// Most passes kept (the peers policy's own cap bounds who issues them).
pub const MAX_PASSES: usize = interlink_core::limits::MAX_PEERS;
/// Largest passes file read.
const MAX_PASSES_FILE_BYTES: u64 = 1024 * 1024;

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    passes: Vec<Entry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    /// The owner that issued the pass, 64 hex digits.
    owner: String,
    /// The pass, 128 hex digits.
    pass: String,
}

/// The passes other identities issued to `holder` (this user's identity).
#[derive(Debug)]
pub struct MailboxPasses {
    path: Option<PathBuf>,
    holder: IdentityKey,
    passes: HashMap<IdentityKey, MailboxPass>,
}

impl MailboxPasses {
    /// The passes for `holder` kept in `path` (none if `None`, or the file is missing
    /// or unreadable; entries that do not verify for `holder` are skipped).
    pub fn load(path: Option<PathBuf>, holder: IdentityKey) -> Self {
        let passes = path
            .as_deref()
            .map(|p| read(p, &holder))
            .unwrap_or_default();
        Self {
            path,
            holder,
            passes,
        }
    }

    /// The pass `owner` issued to the holder.
    pub fn get(&self, owner: &IdentityKey) -> Option<MailboxPass> {
        self.passes.get(owner).copied()
    }

    /// Number of passes kept.
    pub fn len(&self) -> usize {
        self.passes.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.passes.is_empty()
    }

    /// Keeps `pass` from `owner` if it verifies for the holder and is new; saves the
    /// file then (merged with what other sessions saved meanwhile). Returns whether it
    /// was new. The caller decides whose passes are worth a slot (peers only).
    pub fn learn(&mut self, owner: IdentityKey, pass: MailboxPass) -> bool {
        if self.passes.get(&owner) == Some(&pass)
            || (self.passes.len() >= MAX_PASSES && !self.passes.contains_key(&owner))
            || pass.verify(&owner, &self.holder).is_err()
        {
            return false;
        }
        self.passes.insert(owner, pass);
        if let Some(path) = &self.path {
            // Union with the file: another session of this user may have learned others.
            for (k, p) in read(path, &self.holder) {
                if self.passes.len() >= MAX_PASSES {
                    break;
                }
                self.passes.entry(k).or_insert(p);
            }
            if let Err(e) = write(path, &self.passes) {
                warn!("saving mailbox passes to {}: {e}", path.display());
            }
        }
        true
    }
}

fn read(path: &Path, holder: &IdentityKey) -> HashMap<IdentityKey, MailboxPass> {
    let Some(parsed) = crate::small_file::read::<File>(path, MAX_PASSES_FILE_BYTES) else {
        return HashMap::new();
    };
    parsed
        .passes
        .into_iter()
        .filter_map(|e| {
            let owner: IdentityKey = e.owner.parse().ok()?;
            let mut sig = [0u8; 64];
            interlink_core::identity::hex_decode_into(&e.pass, &mut sig)?;
            let pass = MailboxPass::from_bytes(sig);
            pass.verify(&owner, holder).ok()?;
            Some((owner, pass))
        })
        .take(MAX_PASSES)
        .collect()
}

fn write(path: &Path, passes: &HashMap<IdentityKey, MailboxPass>) -> std::io::Result<()> {
    let mut entries: Vec<Entry> = passes
        .iter()
        .map(|(k, p)| Entry {
            owner: k.to_hex(),
            pass: interlink_core::identity::hex_encode(p.as_bytes()),
        })
        .collect();
    entries.sort_by(|a, b| a.owner.cmp(&b.owner));
    crate::small_file::write(
        path,
        &File {
            version: 1,
            passes: entries,
        },
    )
}

#[cfg(test)]
#[path = "passes_tests.rs"]
mod tests;
