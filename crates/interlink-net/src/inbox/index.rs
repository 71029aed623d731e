//! The inbox's (sender, message id) index: what makes delivery exactly-once towards the
//! agent, bounded in time and size.
//!
//! An entry only has to outlive the sender's retries. The trust gate refuses an
//! envelope older than the mailbox window ([`MAILBOX_RETENTION_MS`]), and an envelope's
//! timestamp lies at most [`MAX_FUTURE_SKEW_MS`] after its arrival here, so an entry
//! received longer than both ago can never match an admitted envelope again and is
//! forgotten. Past [`MAX_INDEX_ENTRIES`] the oldest are forgotten first.
//!
//! The writer keeps the index in memory and, at each compaction, saves it to
//! `inbox.index` (atomically); opening the inbox loads that file and adds the lines of
//! the hot file, which is all that can be newer. Records are fixed-size and in arrival
//! order, so a reader in another process can look an id up without the writer.

use std::{
    collections::{HashMap, VecDeque},
    fs::{self, File},
    io::{self, BufReader, BufWriter, Read as _, Write as _},
    path::Path,
};

use interlink_core::{
    IdentityKey, MsgId,
    limits::{MAILBOX_RETENTION_MS, MAX_FUTURE_SKEW_MS},
};

/// File name of the saved index inside a session's directory.
pub const INDEX_FILE: &str = "inbox.index";
/// Most (sender, id) pairs the index remembers: twice the trust gate's replay set,
/// about 10 MiB of memory when full.
pub const MAX_INDEX_ENTRIES: usize = 131_072;
/// How long after its arrival an entry is kept.
pub const INDEX_TTL_MS: u64 = MAILBOX_RETENTION_MS + MAX_FUTURE_SKEW_MS;
/// First bytes of the index file (format version 1).
const MAGIC: &[u8; 8] = b"ILINDEX1";
/// One record: message id, sender key, arrival time (little endian).
const RECORD_LEN: usize = 16 + 32 + 8;

/// Who sent which id, and when it arrived.
#[derive(Debug, Default)]
pub(super) struct Index {
    by_key: HashMap<(IdentityKey, MsgId), u64>,
    /// Arrival order, for forgetting the oldest first. An entry re-inserted later
    /// keeps its first place; the map holds the time that counts.
    order: VecDeque<(u64, IdentityKey, MsgId)>,
}

impl Index {
    pub(super) fn contains(&self, sender: &IdentityKey, id: &MsgId) -> bool {
        self.by_key.contains_key(&(*sender, *id))
    }

    pub(super) fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Records `(sender, id)` as received at `at`.
    pub(super) fn insert(&mut self, sender: IdentityKey, id: MsgId, at: u64) {
        if self.by_key.insert((sender, id), at).is_none() {
            self.order.push_back((at, sender, id));
        }
        while self.by_key.len() > MAX_INDEX_ENTRIES {
            self.pop_oldest();
        }
    }

    /// Forgets the entries that arrived longer than [`INDEX_TTL_MS`] before `now`.
    pub(super) fn expire(&mut self, now: u64) {
        let cutoff = now.saturating_sub(INDEX_TTL_MS);
        while self.order.front().is_some_and(|(at, _, _)| *at < cutoff) {
            self.pop_oldest();
        }
    }

    fn pop_oldest(&mut self) {
        if let Some((_, sender, id)) = self.order.pop_front() {
            self.by_key.remove(&(sender, id));
        }
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
        let n = (records.len() / RECORD_LEN).min(MAX_INDEX_ENTRIES);
        let mut index = Self {
            by_key: HashMap::with_capacity(n),
            order: VecDeque::with_capacity(n),
        };
        // The newest records win when the file holds more than the capacity.
        let skip = records.len() / RECORD_LEN - n;
        for rec in records.chunks_exact(RECORD_LEN).skip(skip) {
            let (id, sender, at) = decode(rec);
            index.insert(sender, id, at);
        }
        Ok(index)
    }

    /// Writes the index to `file` (the caller makes it durable and renames it).
    pub(super) fn write_to(&self, file: &mut File) -> io::Result<()> {
        let mut out = BufWriter::new(file);
        out.write_all(MAGIC)?;
        for (_, sender, id) in &self.order {
            // The map has the entry's time (an entry is in `order` exactly once).
            if let Some(at) = self.by_key.get(&(*sender, *id)) {
                out.write_all(id.as_bytes())?;
                out.write_all(sender.as_bytes())?;
                out.write_all(&at.to_le_bytes())?;
            }
        }
        out.flush()
    }
}

fn decode(rec: &[u8]) -> (MsgId, IdentityKey, u64) {
    let mut id = [0; 16];
    let mut key = [0; 32];
    let mut at = [0; 8];
    id.copy_from_slice(&rec[..16]);
    key.copy_from_slice(&rec[16..48]);
    at.copy_from_slice(&rec[48..]);
    (
        MsgId::from_bytes(id),
        IdentityKey::from_bytes(key),
        u64::from_le_bytes(at),
    )
}

/// Whether the saved index in `dir` lists message `id` from any sender: for readers in
/// other processes (the writer's own index may be newer; the saved one covers at least
/// every line compacted out of the hot file that is younger than [`INDEX_TTL_MS`]).
pub fn saved_index_has(dir: &Path, id: &MsgId) -> io::Result<bool> {
    let file = match File::open(dir.join(INDEX_FILE)) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let mut reader = BufReader::new(file);
    let mut magic = [0; MAGIC.len()];
    if reader.read_exact(&mut magic).is_err() || &magic != MAGIC {
        return Ok(false);
    }
    let mut rec = [0; RECORD_LEN];
    while reader.read_exact(&mut rec).is_ok() {
        if rec[..16] == id.as_bytes()[..] {
            return Ok(true);
        }
    }
    Ok(false)
}
