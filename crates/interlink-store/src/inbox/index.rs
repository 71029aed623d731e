//! The inbox's (sender, message id) index: what makes delivery exactly-once towards the
//! agent, bounded in time and size.
//!
//! An entry only has to outlive the sender's retries. The trust gate refuses an
//! envelope older than the mailbox window ([`MAILBOX_RETENTION_MS`]), and an envelope's
//! timestamp lies at most [`MAX_FUTURE_SKEW_MS`] after its arrival here, so an entry
//! received longer than both ago can never match an admitted envelope again and is
//! forgotten. Past [`MAX_INDEX_ENTRIES`] the oldest are forgotten first.
//!
//! Two parts, so opening a long history costs a file read and no hashing: `settled`, a
//! vector sorted by (id, sender) — what `inbox.index` holds, saved (atomically) at each
//! compaction — and `recent`, a map of what arrived since. Opening loads the file and
//! adds the hot file's lines, which is all that can be newer. Records are fixed-size
//! and sorted, so a reader in another process looks an id up with a binary search.

use std::{
    collections::HashMap,
    fs::{self, File},
    io::{self, BufWriter, Read as _, Seek as _, SeekFrom, Write as _},
    path::Path,
};

use interlink_core::{
    IdentityKey, MsgId,
    limits::{MAILBOX_RETENTION_MS, MAX_FUTURE_SKEW_MS},
};

/// File name of the saved index inside a session's directory.
pub const INDEX_FILE: &str = "inbox.index";
/// Most (sender, id) pairs the index remembers: twice the trust gate's replay set,
/// about 8 MiB of memory when full.
pub const MAX_INDEX_ENTRIES: usize = 131_072;
/// How long after its arrival an entry is kept.
pub const INDEX_TTL_MS: u64 = MAILBOX_RETENTION_MS + MAX_FUTURE_SKEW_MS;
/// First bytes of the index file (format version 1).
const MAGIC: &[u8; 8] = b"ILINDEX1";
/// One record: message id, sender key, arrival time (little endian).
const RECORD_LEN: usize = 16 + 32 + 8;

/// One remembered message; ordered by id, then sender (the file's order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Rec {
    id: MsgId,
    sender: IdentityKey,
    at: u64,
}

/// Who sent which id, and when it arrived.
#[derive(Debug, Default)]
pub(super) struct Index {
    /// Sorted by (id, sender), no duplicates.
    settled: Vec<Rec>,
    /// Arrived since `settled` was built; never holds a key `settled` has.
    recent: HashMap<(IdentityKey, MsgId), u64>,
}

impl Index {
    pub(super) fn contains(&self, sender: &IdentityKey, id: &MsgId) -> bool {
        self.recent.contains_key(&(*sender, *id)) || self.settled_has(sender, id)
    }

    fn settled_has(&self, sender: &IdentityKey, id: &MsgId) -> bool {
        self.settled
            .binary_search_by(|r| (&r.id, &r.sender).cmp(&(id, sender)))
            .is_ok()
    }

    pub(super) fn len(&self) -> usize {
        self.settled.len() + self.recent.len()
    }

    /// Records `(sender, id)` as received at `at`.
    pub(super) fn insert(&mut self, sender: IdentityKey, id: MsgId, at: u64) {
        if self.settled_has(&sender, &id) {
            return;
        }
        self.recent.insert((sender, id), at);
        if self.len() > MAX_INDEX_ENTRIES {
            // Forget the oldest eighth at once, so this sort runs once per that many
            // arrivals, not on each.
            self.settle(0, MAX_INDEX_ENTRIES - MAX_INDEX_ENTRIES / 8);
        }
    }

    /// Every (sender, id, arrived at) remembered, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (IdentityKey, MsgId, u64)> + '_ {
        self.settled
            .iter()
            .map(|r| (r.sender, r.id, r.at))
            .chain(self.recent.iter().map(|((s, id), at)| (*s, *id, *at)))
    }

    /// Forgets the entries that arrived longer than [`INDEX_TTL_MS`] before `now`.
    pub(super) fn expire(&mut self, now: u64) {
        let cutoff = now.saturating_sub(INDEX_TTL_MS);
        self.settled.retain(|r| r.at >= cutoff);
        self.recent.retain(|_, at| *at >= cutoff);
    }

    /// Folds `recent` into `settled` (sorting only the recent part, then merging).
    pub(super) fn fold(&mut self) {
        if self.recent.is_empty() {
            return;
        }
        let mut new: Vec<Rec> = self
            .recent
            .drain()
            .map(|((sender, id), at)| Rec { id, sender, at })
            .collect();
        new.sort_unstable();
        let old = std::mem::take(&mut self.settled);
        let mut merged = Vec::with_capacity(old.len() + new.len());
        let (mut a, mut b) = (old.into_iter().peekable(), new.into_iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x <= y => a.next(),
                (Some(_), Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, _) => b.next(),
            };
            match next {
                Some(r) => merged.push(r),
                None => break,
            }
        }
        self.settled = merged;
    }

    /// Rebuilds `settled` from both parts: entries that arrived at `cutoff` or later,
    /// the newest `keep` of them.
    fn settle(&mut self, cutoff: u64, keep: usize) {
        let mut all = std::mem::take(&mut self.settled);
        all.extend(
            self.recent
                .drain()
                .map(|((sender, id), at)| Rec { id, sender, at }),
        );
        all.retain(|r| r.at >= cutoff);
        if all.len() > keep {
            all.sort_unstable_by_key(|r| std::cmp::Reverse(r.at));
            all.truncate(keep);
        }
        all.sort_unstable();
        self.settled = all;
    }

    /// Loads the saved index from `path` (missing: empty).
    pub(super) fn load(path: &Path) -> io::Result<Self> {
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(e),
        };
        let Some(records) = bytes.strip_prefix(MAGIC) else {
            // Not ours (or empty): start over; the hot file still dedupes what it holds.
            return Ok(Self::default());
        };
        let mut settled: Vec<Rec> = records.chunks_exact(RECORD_LEN).map(decode).collect();
        if !settled.is_sorted() {
            // Not written by us: sorting keeps the binary search right.
            settled.sort_unstable();
        }
        let mut index = Self {
            settled,
            recent: HashMap::new(),
        };
        if index.settled.len() > MAX_INDEX_ENTRIES {
            index.settle(0, MAX_INDEX_ENTRIES);
        }
        Ok(index)
    }

    /// Writes the index to `file` (the caller makes it durable and renames it); call
    /// [`Index::fold`] first so everything is in the sorted part.
    pub(super) fn write_to(&self, file: &mut File) -> io::Result<()> {
        let mut out = BufWriter::new(file);
        out.write_all(MAGIC)?;
        for r in &self.settled {
            out.write_all(r.id.as_bytes())?;
            out.write_all(r.sender.as_bytes())?;
            out.write_all(&r.at.to_le_bytes())?;
        }
        out.flush()
    }
}

fn decode(rec: &[u8]) -> Rec {
    let mut id = [0; 16];
    let mut key = [0; 32];
    let mut at = [0; 8];
    id.copy_from_slice(&rec[..16]);
    key.copy_from_slice(&rec[16..48]);
    at.copy_from_slice(&rec[48..RECORD_LEN]);
    Rec {
        id: MsgId::from_bytes(id),
        sender: IdentityKey::from_bytes(key),
        at: u64::from_le_bytes(at),
    }
}

/// Whether the saved index in `dir` lists message `id` from any sender: for readers in
/// other processes (the writer's own index may be newer; the saved one covers at least
/// every line compacted out of the hot file that is younger than [`INDEX_TTL_MS`]).
/// A binary search: about 17 reads for 100,000 entries.
pub fn saved_index_has(dir: &Path, id: &MsgId) -> io::Result<bool> {
    let mut file = match File::open(dir.join(INDEX_FILE)) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let mut magic = [0; MAGIC.len()];
    if file.read_exact(&mut magic).is_err() || &magic != MAGIC {
        return Ok(false);
    }
    let count = (file.metadata()?.len() - MAGIC.len() as u64) / RECORD_LEN as u64;
    // The first record whose id is not below `id`.
    let (mut lo, mut hi) = (0u64, count);
    let mut rec = [0; 16];
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        file.seek(SeekFrom::Start(
            MAGIC.len() as u64 + mid * RECORD_LEN as u64,
        ))?;
        file.read_exact(&mut rec)?;
        if rec < *id.as_bytes() {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if lo == count {
        return Ok(false);
    }
    file.seek(SeekFrom::Start(MAGIC.len() as u64 + lo * RECORD_LEN as u64))?;
    file.read_exact(&mut rec)?;
    Ok(rec == *id.as_bytes())
}
