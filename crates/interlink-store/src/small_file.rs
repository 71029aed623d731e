//! Small JSON files in the home that several sessions of one user share (pinned sealing
//! keys, mailbox passes): read within a size bound, replaced atomically.
//!
//! Each such file is a cache of self-authenticating entries, checked again by its
//! reader, so a missing, oversized or unreadable file reads as nothing rather than an
//! error: the worst case is something learned again.

use std::path::Path;

use serde::{Serialize, de::DeserializeOwned};

/// The file at `path` parsed as `T`, if it exists, is at most `max_bytes` long (a
/// longer one is cut there, and so fails to parse) and parses.
pub(crate) fn read<T: DeserializeOwned>(path: &Path, max_bytes: u64) -> Option<T> {
    let file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(file, max_bytes), &mut bytes).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Replaces the file at `path` with `value` as pretty JSON: a temporary file renamed
/// over it, so a reader never sees half.
pub(crate) fn write<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    crate::atomic::write_file(path, &bytes)
}
