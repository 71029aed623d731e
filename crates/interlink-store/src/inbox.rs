//! A session's local inbox: the durable hand-off point between the node and the agent.
//!
//! One JSON object per line (format in docs/DELIVERY.md), appended and fsynced before
//! the node receipts a message, so a receipt always means "on disk". Readers (the MCP
//! server, `interlink-p2p wait`, `interlink-p2p inbox`) keep their own cursor, a
//! *logical* offset that stays valid when the writer compacts (the `segment` module
//! has the file layout and the reader rule, docs/DELIVERY.md the whole design).
//!
//! Exactly once towards the agent: a (sender, message id) pair already stored is
//! refused as a duplicate, which makes delivery exactly-once even though the wire is
//! at-least-once. Two senders using one id are two messages, both stored: ids are
//! visible to others (the DHT), so keying by id alone would let a peer that copies
//! another sender's queued id suppress the genuine message. The index is bounded in
//! time ([`INDEX_TTL_MS`]) and size ([`MAX_INDEX_ENTRIES`]).
//!
//! Faults: an append that fails (a full disk, a short write, a failed sync) is cut
//! back to the last good line before the error is returned, so no fragment is left for
//! the next line to be glued to; [`InboxError::is_retryable`] says whether trying
//! again later can help. A crash can still leave a torn last line; opening the inbox
//! cuts it off (the message it held was never receipted, so its sender still has it
//! queued and will deliver it again).
//!
//! Padding: once messages arrive, the writer keeps spaces after the last line (topped
//! up by [`Inbox::pad`] when the node is idle, from [`MIN_PADDING`] to [`MAX_PADDING`]
//! as the inbox gets busy), so an append overwrites bytes the file has and its
//! `fdatasync` need not write a new file length and block map (`segment` has the rule
//! readers follow). A clean close cuts the padding off.
//!
//! Compaction: lines the agent has consumed (the offset in `read.json`), and lines
//! older than the mailbox retention, move from `inbox.jsonl` to the archive once they
//! amount to [`COMPACT_MIN_BYTES`]; the archive keeps the newest [`MAX_ARCHIVE_BYTES`]
//! as the conversation history.

mod compact;
mod index;
mod segment;

use std::{
    fs::{File, OpenOptions},
    io::{self, BufReader, Seek as _, SeekFrom, Write as _},
    path::{Path, PathBuf},
};

use compact::repair_archive;
#[cfg(test)]
use compact::trim_archive;
use index::Index;
pub use index::{INDEX_FILE, INDEX_TTL_MS, MAX_INDEX_ENTRIES, saved_index_has};
use interlink_core::{
    IdentityKey, MsgId,
    limits::MAILBOX_RETENTION_MS,
    wire::{EnvelopeKind, TaskStatus},
};
pub use segment::{
    ARCHIVE_FILE, bounds, read_from, read_hot_from, read_newest, read_newest_lines,
    read_positioned_from,
};
use segment::{PADDING, Segment, archive_path, next_line, read_at_most};
use serde::{Deserialize, Serialize};
use tracing::{debug, warn};

/// File name of the (hot) inbox inside a session's directory.
pub const INBOX_FILE: &str = "inbox.jsonl";
/// File the agent side keeps its consumed cursor in (`{"offset": N, …}`, written by
/// the MCP server): lines before that offset may move to the archive.
pub const CONSUMED_CURSOR_FILE: &str = "read.json";
/// Fewest bytes of movable lines worth a compaction. Each one rewrites the rest of the
/// hot file and the whole index (up to 7 MiB), so it should move much more than that
/// costs; the hot file scanned at open stays about this size while the agent
/// acknowledges.
pub const COMPACT_MIN_BYTES: u64 = 1024 * 1024;
/// Appends between two looks at the consumed cursor.
pub const COMPACT_CHECK_EVERY: u32 = 64;
/// Largest archive kept; past it the older half is dropped.
pub const MAX_ARCHIVE_BYTES: u64 = 64 * 1024 * 1024;
/// Padding an inbox that receives gets after its last line at first (about 45
/// messages of 1 KiB). [`Inbox::pad`] tops it up once less than half is left.
pub const MIN_PADDING: u64 = 64 * 1024;
/// Most padding: an inbox whose padding ran low twice within [`PADDING_GROWS_WITHIN_MS`]
/// gets twice as much, up to this. Each top-up is a write and sync of its own, which
/// a busy inbox should pay rarely (and a reader of the whole file reads past).
pub const MAX_PADDING: u64 = 1024 * 1024;
/// See [`MAX_PADDING`].
pub const PADDING_GROWS_WITHIN_MS: u64 = 10_000;
/// Largest tail past the last line that opening the inbox reads to tell padding from
/// a torn line; a longer tail is cut off.
const MAX_TAIL_CHECKED: u64 = 2 * MAX_PADDING;
/// Age after which a line leaves the hot file even if it was never consumed.
pub const HOT_RETENTION_MS: u64 = MAILBOX_RETENTION_MS;
/// One delivered message as the agent side reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxEntry {
    /// Message id, 32 hex digits.
    pub msg_id: String,
    /// The verified sender's identity key, 64 hex digits.
    pub sender: String,
    /// The sender's fingerprint.
    pub sender_fingerprint: String,
    /// The sending session.
    pub sender_session: String,
    /// Where replies go (`key#session`): the sender's hint if it named the sender's
    /// own key, else the sending session.
    pub reply_to: String,
    /// What it is.
    pub kind: EnvelopeKind,
    /// Task it belongs to.
    pub task_id: Option<String>,
    /// Task status reported by the sender.
    pub status: Option<TaskStatus>,
    /// The message it answers.
    pub in_reply_to: Option<String>,
    /// A receipt's further messages (version 10: one `read` or `host_queued` envelope
    /// may be about up to 64).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_about: Vec<String>,
    /// When the sender sent it (ms since the Unix epoch).
    pub sent_at: u64,
    /// When it was written here (ms since the Unix epoch).
    pub received_at: u64,
    /// The opened text (messages only).
    pub text: Option<String>,
    /// Knocks and pair acceptances: the name the sender suggests for itself
    /// (unverified; shown to the operator, never trusted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Messages sent to a group: the group, its thread and every session a copy went
    /// to, from the sealed body (protocol version 7). Absent for a direct message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<InboxGroup>,
}

/// The group a message came through, as its inbox line keeps it: the sealed
/// [`interlink_core::wire::GroupTag`] in text form.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxGroup {
    /// The sender's name for the group (1-32 characters of `A-Z a-z 0-9 . _ -`).
    pub name: String,
    /// The thread its copies and their replies share, 32 hex digits.
    pub thread: String,
    /// Every session a copy went to (this one among them), in the sender's order.
    pub members: Vec<InboxGroupMember>,
}

/// One recipient session of a group message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxGroupMember {
    /// Its identity key, 64 hex digits.
    pub identity_key: String,
    pub session_id: String,
}

impl From<&interlink_core::wire::GroupTag> for InboxGroup {
    fn from(tag: &interlink_core::wire::GroupTag) -> Self {
        Self {
            name: tag.name.clone(),
            thread: tag.thread.to_string(),
            members: tag
                .members
                .iter()
                .map(|m| InboxGroupMember {
                    identity_key: m.key.to_hex(),
                    session_id: m.session.to_string(),
                })
                .collect(),
        }
    }
}

/// What [`Inbox::append`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Appended {
    /// Written and synced.
    New,
    /// That sender's message with that id is already in the inbox; nothing written.
    Duplicate,
}

/// An inbox operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InboxError {
    /// File-system error.
    #[error("inbox {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the operating system reported.
        source: io::Error,
    },
    /// An entry could not be encoded.
    #[error("inbox entry could not be encoded: {0}")]
    Encode(#[from] serde_json::Error),
    /// An append failed and was rolled back: the file is as it was before it.
    #[error("appending to inbox {path} failed (rolled back): {source}")]
    Write {
        /// The inbox file.
        path: PathBuf,
        /// Why the write or its sync failed.
        source: io::Error,
    },
    /// An append failed and the bytes it left could not be cut off; the next append
    /// tries again before writing anything.
    #[error(
        "appending to inbox {path} failed ({source}); cutting off its fragment failed too: {rollback}"
    )]
    Damaged {
        /// The inbox file.
        path: PathBuf,
        /// Why the write failed.
        source: io::Error,
        /// Why the rollback failed.
        rollback: io::Error,
    },
}

impl InboxError {
    /// Whether the same operation may succeed later without anyone repairing
    /// anything: a full disk or quota, an interrupted or short write. A sender told
    /// "not stored" keeps the message queued and retries.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Io { source, .. } | Self::Write { source, .. } => retryable(source.kind()),
            Self::Encode(_) | Self::Damaged { .. } => false,
        }
    }
}

fn retryable(kind: io::ErrorKind) -> bool {
    use io::ErrorKind as K;
    matches!(
        kind,
        K::StorageFull
            | K::QuotaExceeded
            | K::WriteZero
            | K::Interrupted
            | K::WouldBlock
            | K::TimedOut
            | K::OutOfMemory
    )
}

/// A test's injected failure of the next append: `after` bytes reach the file, then
/// the write (or, when the whole batch fits, its sync) fails with `kind`.
#[cfg(test)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fault {
    pub(crate) after: usize,
    pub(crate) kind: io::ErrorKind,
}

/// The writer side of a session's inbox. One per session, owned by its node.
#[derive(Debug)]
pub struct Inbox {
    dir: PathBuf,
    path: PathBuf,
    /// The hot file, opened for reading and writing: lines are written at `len`.
    file: File,
    /// Logical offset of the hot file's first line.
    base: u64,
    /// Bytes of its header line.
    header_len: u64,
    /// File length up to the end of the last good line.
    len: u64,
    /// File length: `len` and the padding after it.
    allocated: u64,
    /// Padding the next top-up leaves after `len`; 0 until a message is appended.
    padding: u64,
    /// When the padding was last topped up (ms since the epoch).
    padded_at: u64,
    /// A failed append left bytes after `len` that could not be cut off yet.
    dirty: bool,
    index: Index,
    appends_since_check: u32,
    /// [`COMPACT_MIN_BYTES`] unless a test lowers it.
    compact_min_bytes: u64,
    #[cfg(test)]
    pub(crate) fault: Option<Fault>,
}

impl Inbox {
    /// Opens (creating) the inbox in `dir` (mode 0700; the files 0600), loads its
    /// index (expiring entries older than its window at `now`, ms since the epoch),
    /// cuts off a torn last line and compacts what is due.
    pub fn open(dir: &Path, now: u64) -> Result<Self, InboxError> {
        let path = dir.join(INBOX_FILE);
        let io_err = |source| InboxError::Io {
            path: path.clone(),
            source,
        };
        crate::keyfile::create_private_dir(dir).map_err(|source| InboxError::Io {
            path: dir.to_owned(),
            source,
        })?;
        let file = open_rw(&path).map_err(io_err)?;
        let seg = Segment::from_file(file.try_clone().map_err(io_err)?).map_err(io_err)?;
        let (hot, complete_len) = scan(&file, seg.header_len).map_err(io_err)?;
        let mut allocated = seg.len;
        if complete_len < seg.len && !padding_only(&file, complete_len, seg.len).map_err(io_err)? {
            // A torn line, or what a crash left past the padding.
            file.set_len(complete_len).map_err(io_err)?;
            file.sync_all().map_err(io_err)?;
            allocated = complete_len;
        }
        repair_archive(&path, seg.base).map_err(|source| InboxError::Io {
            path: archive_path(&path),
            source,
        })?;
        let index_path = dir.join(INDEX_FILE);
        let mut index = Index::load(&index_path).map_err(|source| InboxError::Io {
            path: index_path,
            source,
        })?;
        for (sender, id, at) in hot {
            index.insert(sender, id, at);
        }
        index.expire(now);
        let mut inbox = Self {
            dir: dir.to_owned(),
            path,
            file,
            base: seg.base,
            header_len: seg.header_len,
            len: complete_len,
            allocated,
            padding: 0,
            padded_at: 0,
            dirty: false,
            index,
            appends_since_check: 0,
            compact_min_bytes: COMPACT_MIN_BYTES,
            #[cfg(test)]
            fault: None,
        };
        if let Err(e) = inbox.compact(now) {
            // Compaction only saves space; the inbox works without it.
            warn!("inbox compaction: {e}");
        }
        Ok(inbox)
    }

    /// Appends `entry` unless that sender's message `id` is already present; returns
    /// once the line is on disk (`sync_data`).
    pub fn append(&mut self, id: MsgId, entry: &InboxEntry) -> Result<Appended, InboxError> {
        let mut out = self.append_many(std::iter::once((id, entry)))?;
        Ok(out.pop().unwrap_or(Appended::Duplicate))
    }

    /// Appends every entry whose (sender, id) is not present yet, in order, with one
    /// write and one `sync_data` for all of them; returns what happened to each. On an
    /// error nothing of the batch is in the file.
    ///
    /// A batch of nothing but receipts (`read`, `host_queued`) is written without the
    /// `sync_data`: a receipt only moves the sender's view of a message forward, losing
    /// one in a crash leaves that view one step behind, and every receipt would
    /// otherwise cost a journal commit on the sender's disk. The next synced append
    /// makes it durable with the rest of the file.
    pub fn append_many<'a>(
        &mut self,
        entries: impl IntoIterator<Item = (MsgId, &'a InboxEntry)>,
    ) -> Result<Vec<Appended>, InboxError> {
        if self.dirty {
            self.rollback().map_err(|source| InboxError::Io {
                path: self.path.clone(),
                source,
            })?;
        }
        let mut buf = Vec::new();
        let mut outcome = Vec::new();
        let mut new_keys: Vec<Arrival> = Vec::new();
        let mut durable = false;
        for (id, entry) in entries {
            // A line whose sender does not parse is nobody's to retry: not indexed.
            let sender = entry.sender.parse::<IdentityKey>().ok();
            if let Some(s) = sender
                && (self.index.contains(&s, &id)
                    || new_keys.iter().any(|(ns, ni, _)| *ns == s && *ni == id))
            {
                outcome.push(Appended::Duplicate);
                continue;
            }
            durable |= !entry.kind.is_receipt();
            serde_json::to_writer(&mut buf, entry)?;
            buf.push(b'\n');
            if let Some(s) = sender {
                new_keys.push((s, id, entry.received_at));
            }
            outcome.push(Appended::New);
        }
        if buf.is_empty() {
            return Ok(outcome);
        }
        if durable && self.padding == 0 {
            self.padding = MIN_PADDING;
        }
        if let Err(source) = self.write_batch(&buf, durable) {
            return Err(match self.rollback() {
                Ok(()) => InboxError::Write {
                    path: self.path.clone(),
                    source,
                },
                Err(rollback) => InboxError::Damaged {
                    path: self.path.clone(),
                    source,
                    rollback,
                },
            });
        }
        self.len += buf.len() as u64;
        self.allocated = self.allocated.max(self.len);
        for (s, id, at) in new_keys {
            self.index.insert(s, id, at);
        }
        self.appends_since_check = self.appends_since_check.saturating_add(1);
        Ok(outcome)
    }

    /// Compacts if [`COMPACT_CHECK_EVERY`] appends happened since the last look. The
    /// node calls it from its housekeeping tick, not from an append: a compaction takes
    /// tens of milliseconds, which must not sit between a delivery and its receipt.
    pub fn compact_if_due(&mut self, now: u64) {
        if self.appends_since_check < COMPACT_CHECK_EVERY {
            return;
        }
        self.appends_since_check = 0;
        if let Err(e) = self.compact(now) {
            warn!("inbox compaction: {e}");
        }
    }

    /// Once a message was appended, tops the padding after the last line up once less
    /// than half of it is left, and syncs it; `now` is ms since the epoch. The node's
    /// store thread calls it when it has nothing else to do, so the sync that writes
    /// the file's new length happens between deliveries rather than inside one. A
    /// failure (a full disk) is logged and leaves the file as it was: appends work
    /// without padding.
    pub fn pad(&mut self, now: u64) {
        if self.dirty || self.padding == 0 || self.allocated - self.len >= self.padding / 2 {
            return;
        }
        if self.padded_at != 0 && now.saturating_sub(self.padded_at) < PADDING_GROWS_WITHIN_MS {
            self.padding = (self.padding * 2).min(MAX_PADDING);
        }
        let from = self.allocated;
        let to = self.len + self.padding;
        let spaces = vec![PADDING; usize::try_from(to - from).unwrap_or(0)];
        let padded = write_at(&self.file, &spaces, from).and_then(|()| self.file.sync_data());
        match padded {
            Ok(()) => {
                self.allocated = to;
                self.padded_at = now;
            }
            Err(e) => {
                debug!("padding the inbox: {e}");
                // Spaces past the last line are padding whatever their length; cutting
                // them gives a full disk its space back.
                let _ = self.file.set_len(from);
            }
        }
    }

    fn write_batch(&mut self, buf: &[u8], durable: bool) -> io::Result<()> {
        #[cfg(test)]
        if let Some(f) = self.fault.take() {
            write_at(&self.file, &buf[..f.after.min(buf.len())], self.len)?;
            return Err(io::Error::from(f.kind));
        }
        write_at(&self.file, buf, self.len)?;
        if durable {
            self.file.sync_data()?;
        }
        Ok(())
    }

    /// Cuts the file back to its last good line, durably (the padding goes too).
    fn rollback(&mut self) -> io::Result<()> {
        self.dirty = true;
        self.file.set_len(self.len)?;
        self.file.sync_all()?;
        self.allocated = self.len;
        self.dirty = false;
        Ok(())
    }

    /// Every (sender, message id, received at) the inbox remembers receiving (the
    /// delivery engine's index is restored from it).
    pub fn received(&self) -> impl Iterator<Item = (IdentityKey, MsgId, u64)> + '_ {
        self.index.iter()
    }

    /// Whether the inbox holds message `id` from `sender` (a retry of a stored
    /// message). Another sender's message with the same id is a different message.
    pub fn holds(&self, sender: &IdentityKey, id: &MsgId) -> bool {
        self.index.contains(sender, id)
    }

    /// Number of (sender, id) pairs the index remembers.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the index is empty.
    pub fn is_empty(&self) -> bool {
        self.index.len() == 0
    }

    /// The inbox file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Compacts from `bytes` of movable lines on instead of [`COMPACT_MIN_BYTES`] (for
    /// tests and benchmarks that cannot afford megabytes).
    pub fn with_compact_min_bytes(mut self, bytes: u64) -> Self {
        self.compact_min_bytes = bytes;
        self
    }

    /// Logical offset of the hot file's first line: everything before it is in the
    /// archive.
    pub fn base(&self) -> u64 {
        self.base
    }
}

impl Drop for Inbox {
    /// A clean close gives the padding's space back (a crash leaves it, and the next
    /// open keeps it).
    fn drop(&mut self) {
        if !self.dirty && self.allocated > self.len {
            let _ = self.file.set_len(self.len);
        }
    }
}

/// Opens a file for reading and writing at any position (creating it, mode 0600).
fn open_rw(path: &Path) -> io::Result<File> {
    let mut opts = OpenOptions::new();
    opts.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path)
}

/// Writes all of `buf` at position `pos` of `file`.
fn write_at(file: &File, buf: &[u8], pos: u64) -> io::Result<()> {
    let mut f = file;
    f.seek(SeekFrom::Start(pos))?;
    f.write_all(buf)
}

/// Whether the bytes of `file` from `from` to `to` are all padding (reads at most
/// [`MAX_TAIL_CHECKED`]; a longer tail is not).
fn padding_only(file: &File, from: u64, to: u64) -> io::Result<bool> {
    if to - from > MAX_TAIL_CHECKED {
        return Ok(false);
    }
    let mut tail = vec![0; usize::try_from(to - from).unwrap_or(0)];
    let got = read_at_most(file, from, &mut tail)?;
    Ok(tail[..got].iter().all(|b| *b == PADDING))
}

/// A stored message's sender, id and arrival time (ms).
type Arrival = (IdentityKey, MsgId, u64);

/// The (sender, id, arrival) of the hot file's complete lines from `header_len` on,
/// and the file length up to the last complete line (before any padding).
fn scan(file: &File, header_len: u64) -> io::Result<(Vec<Arrival>, u64)> {
    let mut src = file;
    src.seek(SeekFrom::Start(header_len))?;
    let mut reader = BufReader::new(src);
    let mut keys = Vec::new();
    let mut complete = header_len;
    let mut line = Vec::new();
    while let Some(n) = next_line(&mut reader, &mut line)? {
        complete += n;
        #[derive(Deserialize)]
        struct Key {
            msg_id: String,
            #[serde(default)]
            sender: String,
            #[serde(default)]
            received_at: u64,
        }
        if let Ok(k) = serde_json::from_slice::<Key>(&line)
            && let (Ok(id), Ok(sender)) = (k.msg_id.parse(), k.sender.parse())
        {
            keys.push((sender, id, k.received_at));
        }
    }
    Ok((keys, complete))
}

#[cfg(test)]
mod tests;
