//! `read.lazy`: where marks that need not survive a machine crash go.
//!
//! A channel push marks its message consumed on every message's path. Replacing
//! `read.json` for it (a temporary file renamed over the old one) cost the recipient
//! about 12 % of its CPU on ext4: the rename makes the kernel allocate and write out
//! the new file's blocks at once (`auto_da_alloc`), and dropping the old file frees its
//! blocks, each with a disk request. A lazy mark is written instead over one of two
//! fixed slots of this file, in place: the file keeps its blocks, nothing is
//! allocated, renamed or freed, and the page goes to disk later with the others.
//!
//! Slot `generation % 2` holds `magic (4) | generation (u64 LE) | length (u32 LE) |
//! digest (16) | state (JSON)`, the digest being the first 16 bytes of SHA-256 over
//! everything before it and the state. The reader takes the whole slot with the
//! higher generation; `read.json` carries a generation too, and whichever of the three
//! is newest is the state. A slot torn by a machine crash fails its digest and the
//! older state is used: the messages pushed since are pushed again (at least once),
//! as an unsynced `read.json` could be before. A state too large for a slot goes to
//! `read.json` as before.

use std::{
    io::{self, Seek as _, SeekFrom, Write as _},
    path::Path,
};

use sha2::{Digest as _, Sha256};

use crate::files::private_file;

/// File name of the lazy slots, next to `read.json`.
pub const LAZY_FILE: &str = "read.lazy";
/// Bytes of one slot (a page: one write that a process crash cannot tear).
pub(crate) const SLOT_BYTES: usize = 4096;
const MAGIC: &[u8; 4] = b"ILR1";
const DIGEST_BYTES: usize = 16;
const HEADER_BYTES: usize = MAGIC.len() + 8 + 4 + DIGEST_BYTES;

fn digest(generation: u64, state: &[u8]) -> [u8; DIGEST_BYTES] {
    let mut h = Sha256::new();
    h.update(MAGIC);
    h.update(generation.to_le_bytes());
    h.update(u32::try_from(state.len()).unwrap_or(u32::MAX).to_le_bytes());
    h.update(state);
    let mut out = [0; DIGEST_BYTES];
    out.copy_from_slice(&h.finalize()[..DIGEST_BYTES]);
    out
}

/// Writes `state` as generation `generation` over its slot of `path` (created 0600);
/// `false` if it does not fit in a slot (nothing written).
pub(crate) fn write(path: &Path, generation: u64, state: &[u8]) -> io::Result<bool> {
    if HEADER_BYTES + state.len() > SLOT_BYTES {
        return Ok(false);
    }
    let len = u32::try_from(state.len()).unwrap_or(u32::MAX);
    let mut slot = Vec::with_capacity(HEADER_BYTES + state.len());
    slot.extend_from_slice(MAGIC);
    slot.extend_from_slice(&generation.to_le_bytes());
    slot.extend_from_slice(&len.to_le_bytes());
    slot.extend_from_slice(&digest(generation, state));
    slot.extend_from_slice(state);
    let mut f = private_file(path, false)?;
    f.seek(SeekFrom::Start((generation % 2) * SLOT_BYTES as u64))?;
    f.write_all(&slot)?;
    Ok(true)
}

/// The whole slot of `path` with the highest generation: its generation and state.
/// A missing file, or slots that are not whole, give `None`.
pub(crate) fn newest(path: &Path) -> io::Result<Option<(u64, Vec<u8>)>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(bytes
        .chunks(SLOT_BYTES)
        .take(2)
        .filter_map(whole)
        .max_by_key(|(generation, _)| *generation)
        .map(|(generation, state)| (generation, state.to_vec())))
}

/// A slot's generation and state, if the slot is whole.
fn whole(slot: &[u8]) -> Option<(u64, &[u8])> {
    let (magic, rest) = slot.split_at_checked(MAGIC.len())?;
    if magic != MAGIC {
        return None;
    }
    let (generation, rest) = rest.split_first_chunk::<8>()?;
    let (len, rest) = rest.split_first_chunk::<4>()?;
    let (sum, rest) = rest.split_first_chunk::<DIGEST_BYTES>()?;
    let generation = u64::from_le_bytes(*generation);
    let state = rest.get(..usize::try_from(u32::from_le_bytes(*len)).ok()?)?;
    (digest(generation, state) == *sum).then_some((generation, state))
}

#[cfg(test)]
#[path = "lazy_tests.rs"]
mod tests;
