//! The operator's peer edits, shared by the `peer` command and the MCP tools
//! (`list_peers`, `add_peer`, `remove_peer`): one implementation over `peers.json`.
//!
//! Pairing pins a full identity key under a petname; only pinned keys (and the user's
//! own sessions) can put a message into a session's inbox. Edits go through
//! [`policy::edit`] (lock, re-read, atomic replace); running sessions pick them up
//! within a second.

use interlink_core::{IdentityKey, identity::KeyError, trust::TrustError};
use interlink_store::keyfile;

use crate::{paths::Home, policy, policy::PolicyError};

/// One peer as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Its petname.
    pub name: String,
    /// Its pinned identity key.
    pub key: IdentityKey,
}

/// What [`add`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Added {
    /// The peer is new.
    Added,
    /// The same name already pinned the same key; nothing changed.
    AlreadyPeer,
}

/// Adding a peer failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AddError {
    /// The key text is not a full identity key.
    #[error(
        "key {text:?} is not an identity key ({source}); the other side prints its key with `interlink-p2p id`"
    )]
    BadKey {
        /// The text given.
        text: String,
        /// What is wrong with the key's text.
        source: KeyError,
    },
    /// The key is this user's own identity.
    #[error("{0} is this user's own identity; its sessions reach each other without pairing")]
    OwnKey(interlink_core::Fingerprint),
    /// The policy refused the change (bad name, name taken, key already a peer, full).
    #[error(transparent)]
    Refused(#[from] TrustError),
    /// The peers file could not be read or written.
    #[error(transparent)]
    File(#[from] PolicyError),
}

/// Removing a peer failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoveError {
    /// No peer has that name.
    #[error("no peer is named {0:?} (list them with list_peers or `interlink-p2p peer list`)")]
    Unknown(String),
    /// The peers file could not be read or written.
    #[error(transparent)]
    File(#[from] PolicyError),
}

/// The peers of `home`, by name.
pub fn list(home: &Home) -> Result<Vec<Peer>, PolicyError> {
    Ok(policy::load(home)?
        .iter()
        .map(|(name, key)| Peer {
            name: name.to_owned(),
            key: *key,
        })
        .collect())
}

/// Pins `key_text` (64 hex digits, a valid Ed25519 point) under `name`.
pub fn add(home: &Home, name: &str, key_text: &str) -> Result<(IdentityKey, Added), AddError> {
    let key = parse_key(key_text)?;
    if own_key(home) == Some(key) {
        return Err(AddError::OwnKey(key.fingerprint()));
    }
    let added = policy::edit(home, |p| {
        let already = p.get(name) == Some(&key);
        p.add(name.to_owned(), key)?;
        Ok::<_, AddError>(if already {
            Added::AlreadyPeer
        } else {
            Added::Added
        })
    })?;
    Ok((key, added))
}

/// Removes the peer named `name`; returns the key it pinned.
pub fn remove(home: &Home, name: &str) -> Result<IdentityKey, RemoveError> {
    policy::edit(home, |p| {
        p.remove(name)
            .ok_or_else(|| RemoveError::Unknown(name.to_owned()))
    })
}

/// Renaming a peer failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RenameError {
    /// No peer has that name.
    #[error("no peer is named {0:?} (list them with `interlink-p2p peer list`)")]
    Unknown(String),
    /// The policy refused the new name (invalid, or another peer's).
    #[error(transparent)]
    Refused(#[from] TrustError),
    /// The peers file could not be read or written.
    #[error(transparent)]
    File(#[from] PolicyError),
}

/// Renames the peer `old` to `new` in `home`'s peers file; returns its key.
pub fn rename(home: &Home, old: &str, new: &str) -> Result<IdentityKey, RenameError> {
    policy::edit(home, |p| {
        p.rename(old, new)?
            .ok_or_else(|| RenameError::Unknown(old.to_owned()))
    })
}

/// A full identity key: 64 hex digits that are a valid Ed25519 point.
pub(crate) fn parse_key(text: &str) -> Result<IdentityKey, AddError> {
    let bad = |source| AddError::BadKey {
        text: text.to_owned(),
        source,
    };
    let key: IdentityKey = text.trim().parse().map_err(bad)?;
    key.verifying_key().map_err(bad)?;
    Ok(key)
}

/// The user's own key, if the key file exists and loads. Never creates one.
pub fn own_key(home: &Home) -> Option<IdentityKey> {
    keyfile::load(&home.identity()).ok().map(|i| i.public())
}
