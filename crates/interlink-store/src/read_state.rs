//! What the agent has consumed of a session's inbox: `read.json` next to the inbox.
//!
//! The inbox (`inbox.jsonl`, written by the node) is append-only for its readers; this
//! file records how far the agent has read it. It holds a logical `offset` (see
//! `crate::inbox`) — every line before it is consumed — and the ids of messages
//! after the offset that were acknowledged out of order. Acknowledging moves the offset
//! past the longest consumed prefix, so the id set stays small when messages are
//! acknowledged roughly in order, and it is capped ([`MAX_CONSUMED_IDS`]) when they are
//! not.
//!
//! The offset is also what lets the node compact: lines before it may move out of
//! the hot file into the archive. Lines that moved out unconsumed (older than the
//! mailbox retention) count as consumed: the offset is never below the hot file's base.
//!
//! A message is its (sender, id): the messages acknowledged out of order are kept as
//! `"<sender key>:<msg id>"`, so another sender's message reusing an id stays unread.
//! The agent acknowledges by id ([`AckId`]); when two senders' unread messages share
//! one, the bare id is ambiguous and consumes neither — the agent names the one it
//! handled as `"<sender key>:<msg id>"` (a paired peer copying a queued id must not get
//! the genuine message acknowledged unread). A bare `"<msg id>"` in the file (version 1)
//! stands for that id from any sender.
//!
//! Only the MCP server writes the file (atomically: temporary file, fsync, rename);
//! `interlink-p2p wait` reads it to know what is unread. A missing file means nothing
//! was consumed yet. Messages pushed to the agent host are marked in `read.lazy`
//! instead ([`Durability::Lazy`], `lazy`): every state written carries a generation,
//! and the newest whole one of the two files is the state.
//!
//! Only `message` entries are shown to the agent; other kinds (pairing and goodbye
//! notices the node records) count as consumed when the offset moves past them.

use std::{
    collections::BTreeSet,
    io,
    path::{Path, PathBuf},
};

use crate::inbox::{InboxEntry, InboxError, read_hot_from, saved_index_has};
use interlink_core::{IdentityKey, MsgId, wire::EnvelopeKind};
use serde::{Deserialize, Serialize};

use crate::{
    files::{JsonFileError, load_json, write_atomically, write_replacing},
    paths::SessionDir,
};

mod lazy;
pub use lazy::LAZY_FILE;
/// Most message ids acknowledged ahead of an older unread message that the state
/// remembers; an acknowledgement beyond it is refused until older messages are
/// acknowledged.
pub const MAX_CONSUMED_IDS: usize = 4096;
/// Version of the file format (2: consumed entries name their sender).
const VERSION: u32 = 2;

/// How hard a change of the read state is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Synced before returning: the agent acknowledged these messages, and they must
    /// never be shown again, also after a crash.
    Synced,
    /// Written in place into `read.lazy`, not synced: messages handed to the agent
    /// host (channel notifications). A crash of the machine may hand them over again
    /// (at least once), which is cheaper than fsyncs, or a rename, per message on the
    /// hot path.
    Lazy,
}

/// Reading or changing the read state failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadStateError {
    /// The read-state file could not be read or written.
    #[error("read state {}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system reported.
        source: io::Error,
    },
    /// The read-state file is not valid.
    #[error("read state {} is not valid: {source}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where and how the JSON breaks.
        source: serde_json::Error,
    },
    /// The inbox could not be read.
    #[error(transparent)]
    Inbox(#[from] InboxError),
}

/// Acknowledging messages failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AckError {
    /// Too many messages acknowledged ahead of an older unread one.
    #[error(
        "too many messages acknowledged out of order (at most {MAX_CONSUMED_IDS}); \
         acknowledge the oldest unread messages first"
    )]
    TooManyOutOfOrder,
    /// The state could not be read or written.
    #[error(transparent)]
    State(#[from] ReadStateError),
}

/// A message the agent names: its id, with its sender when the id alone is ambiguous
/// (text: `"<msg id>"` or `"<sender key, 64 hex>:<msg id>"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct AckId {
    /// The sender, if named.
    pub sender: Option<IdentityKey>,
    /// The message id.
    pub id: MsgId,
}

impl From<MsgId> for AckId {
    fn from(id: MsgId) -> Self {
        Self { sender: None, id }
    }
}

impl std::str::FromStr for AckId {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (sender, id) = parse_key(text)
            .ok_or_else(|| "not a msg_id (32 hex digits) or <sender key>:<msg_id>".to_string())?;
        Ok(Self { sender, id })
    }
}

impl std::fmt::Display for AckId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&key_text(&(self.sender, self.id)))
    }
}

/// What [`ReadState::acknowledge`] did with the ids it was given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Acked {
    /// Unread messages now consumed.
    pub consumed: Vec<MsgId>,
    /// The same, with their senders: who gets a read receipt.
    pub consumed_keys: Vec<(IdentityKey, MsgId)>,
    /// Bare ids that two or more senders' unread messages share: nothing consumed;
    /// name one as `<sender>:<id>`. Each with the senders.
    pub ambiguous: Vec<(MsgId, Vec<IdentityKey>)>,
    /// Ids already consumed before (acknowledging twice is harmless).
    pub already: Vec<MsgId>,
    /// Ids that name no message in the inbox.
    pub unknown: Vec<MsgId>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    /// Which write this is: of `read.json` and `read.lazy`'s slots, the highest is the
    /// state (0 in a file written before `read.lazy` existed).
    #[serde(default)]
    generation: u64,
    offset: u64,
    consumed: BTreeSet<String>,
}

/// The read state of one session's inbox.
#[derive(Debug)]
pub struct ReadState {
    inbox: PathBuf,
    path: PathBuf,
    lazy: PathBuf,
    generation: u64,
    offset: u64,
    consumed: BTreeSet<Key>,
}

/// The newest state of `read.json` (`path`) and the `read.lazy` beside it.
fn load_file(path: &Path, lazy: &Path) -> Result<File, ReadStateError> {
    let mut file = load_json::<File>(path).map_err(|e| match e {
        JsonFileError::Io { path, source, .. } => ReadStateError::Io { path, source },
        JsonFileError::Invalid { path, source } => ReadStateError::Invalid { path, source },
    })?;
    let newest = lazy::newest(lazy).map_err(|source| ReadStateError::Io {
        path: lazy.to_owned(),
        source,
    })?;
    if let Some((generation, bytes)) = newest
        && generation > file.generation
    {
        // Whole (its digest matched), so a state that does not parse is a bug or a
        // forgery of the owner's own file: said, like a damaged read.json.
        file =
            serde_json::from_slice::<File>(&bytes).map_err(|source| ReadStateError::Invalid {
                path: lazy.to_owned(),
                source,
            })?;
        file.generation = generation;
    }
    Ok(file)
}

/// The inbox's consumed offset in `dir` for the node's compaction (0 when the state
/// cannot be read: nothing moves).
pub(crate) fn consumed_offset(dir: &Path) -> u64 {
    load_file(
        &dir.join(crate::inbox::CONSUMED_CURSOR_FILE),
        &dir.join(lazy::LAZY_FILE),
    )
    .map_or(0, |f| f.offset)
}

/// A message of the inbox: its sender (`None`: any, a version 1 entry) and id.
type Key = (Option<IdentityKey>, MsgId);

fn key_of(e: &InboxEntry) -> Option<Key> {
    Some((e.sender.parse().ok(), e.msg_id.parse().ok()?))
}

fn parse_key(text: &str) -> Option<Key> {
    match text.split_once(':') {
        Some((sender, id)) => Some((Some(sender.parse().ok()?), id.parse().ok()?)),
        None => Some((None, text.parse().ok()?)),
    }
}

fn key_text((sender, id): &Key) -> String {
    match sender {
        Some(s) => format!("{}:{id}", s.to_hex()),
        None => id.to_string(),
    }
}

/// Whether `key` is consumed in `set` (by its sender's entry or an any-sender one).
fn is_consumed(set: &BTreeSet<Key>, key: &Key) -> bool {
    set.contains(key) || set.contains(&(None, key.1))
}

impl ReadState {
    /// Loads the state of the inbox in `session_dir` (a missing file: nothing read).
    pub fn load(session_dir: &SessionDir) -> Result<Self, ReadStateError> {
        let path = session_dir.read_state();
        let lazy = path.with_file_name(lazy::LAZY_FILE);
        let file = load_file(&path, &lazy)?;
        let consumed = file.consumed.iter().filter_map(|k| parse_key(k)).collect();
        // The offset is checked against the inbox when it is read (one open per call,
        // on the hot path of every tool's footer): an inbox ending before it was
        // replaced, and is read from its start (the ids consumed still hide what was
        // read); an offset before the hot file's base is one whose lines expired into
        // the archive unconsumed: they count as read.
        Ok(Self {
            inbox: session_dir.inbox(),
            path,
            lazy,
            generation: file.generation,
            offset: file.offset,
            consumed,
        })
    }

    /// The hot file's entries from `hint` when it lies past the offset and inside the
    /// file, else from the offset (moved into the file, see [`ReadState::load`]); and
    /// where the read started.
    fn read_after(&self, hint: u64) -> Result<(Vec<(InboxEntry, u64)>, u64), ReadStateError> {
        if hint > self.offset {
            let (entries, start, _) = read_hot_from(&self.inbox, hint)?;
            if start == hint {
                return Ok((entries, start));
            }
        }
        let (entries, start, _) = read_hot_from(&self.inbox, self.offset)?;
        Ok((entries, start))
    }

    /// The unread messages, oldest first, reading from `hint` when it lies past the
    /// recorded offset (the end of a prefix already known to hold nothing unread), and
    /// the end of the longest prefix now known to hold nothing unread — the next
    /// call's hint. Receipts and consumed messages never turn unread, so a session that
    /// never acknowledges does not re-read its whole inbox on every call.
    pub fn unread_from(&self, hint: u64) -> Result<(Vec<InboxEntry>, u64), ReadStateError> {
        let (entries, start) = self.read_after(hint)?;
        let mut clean = start;
        let mut unread = Vec::new();
        for (e, end) in entries {
            if self.is_unread(&e) {
                unread.push(e);
            } else if unread.is_empty() {
                clean = end;
            }
        }
        Ok((unread, clean))
    }

    /// The unread messages, oldest first.
    pub fn unread(&self) -> Result<Vec<InboxEntry>, ReadStateError> {
        let (entries, _) = self.read_after(self.offset)?;
        Ok(entries
            .into_iter()
            .map(|(e, _)| e)
            .filter(|e| self.is_unread(e))
            .collect())
    }

    fn is_unread(&self, e: &InboxEntry) -> bool {
        e.kind == EnvelopeKind::Message
            && key_of(e).is_some_and(|k| !is_consumed(&self.consumed, &k))
    }

    /// Marks `ids` consumed, durably, and moves the offset past the longest consumed
    /// prefix of the inbox. Ids consumed before are reported, not refused.
    pub fn acknowledge<I: Into<AckId> + Copy>(&mut self, ids: &[I]) -> Result<Acked, AckError> {
        self.acknowledge_with(ids, Durability::Synced)
    }

    /// [`ReadState::acknowledge`], written as `durability` says.
    pub fn acknowledge_with<I: Into<AckId> + Copy>(
        &mut self,
        ids: &[I],
        durability: Durability,
    ) -> Result<Acked, AckError> {
        let (entries, start) = self.read_after(self.offset)?;
        let unread: Vec<Key> = entries
            .iter()
            .filter(|(e, _)| self.is_unread(e))
            .filter_map(|(e, _)| key_of(e))
            .collect();
        let mut acked = Acked::default();
        let mut consumed = self.consumed.clone();
        for &ack in ids {
            let AckId { sender, id } = ack.into();
            let id = &id;
            let matching: Vec<Key> = unread
                .iter()
                .filter(|(s, i)| i == id && (sender.is_none() || *s == sender))
                .copied()
                .collect();
            let senders: BTreeSet<IdentityKey> = matching.iter().filter_map(|k| k.0).collect();
            if sender.is_none() && senders.len() > 1 {
                // Two senders' unread messages under one id: which one was handled is
                // the agent's to say.
                acked.ambiguous.push((*id, senders.into_iter().collect()));
                continue;
            }
            let mut newly = false;
            for key in &matching {
                if consumed.insert(*key) {
                    newly = true;
                    if let Some(s) = key.0 {
                        acked.consumed_keys.push((s, *id));
                    }
                }
            }
            if newly {
                acked.consumed.push(*id);
            } else if acked.consumed.contains(id) || acked.already.contains(id) {
                // Listed twice in one call.
            } else if consumed.iter().any(|(_, i)| i == id) || self.before_offset(id, start)? {
                acked.already.push(*id);
            } else {
                acked.unknown.push(*id);
            }
        }
        // Move the offset past every leading entry that is consumed or not a message.
        let mut offset = start;
        let mut passed = 0;
        for (e, end) in &entries {
            let done = e.kind != EnvelopeKind::Message
                || key_of(e).is_none_or(|k| is_consumed(&consumed, &k));
            if !done {
                break;
            }
            offset = *end;
            passed += 1;
        }
        // Only messages after the offset need naming: the rest (passed now, or expired
        // into the archive) can never turn unread. So the set stays small, and a
        // message arriving later under a consumed id is not mistaken for the old one.
        let after: BTreeSet<Key> = entries[passed..]
            .iter()
            .filter_map(|(e, _)| key_of(e))
            .collect();
        consumed.retain(|k| match k {
            (Some(_), _) => after.contains(k),
            (None, id) => after.iter().any(|(_, i)| i == id),
        });
        if consumed.len() > MAX_CONSUMED_IDS {
            return Err(AckError::TooManyOutOfOrder);
        }
        if offset != self.offset || consumed != self.consumed {
            self.save(offset, &consumed, durability)?;
            self.offset = offset;
            self.consumed = consumed;
        }
        Ok(acked)
    }

    /// Whether `id` is in the part of the inbox before the offset (consumed): in the
    /// hot file between its base and the offset, or in the node's saved index (every
    /// line moved to the archive within the index's time-to-live). Neither reads the
    /// history; an id older than that reads as unknown.
    fn before_offset(&self, id: &MsgId, offset: u64) -> Result<bool, ReadStateError> {
        let (entries, base, _) = read_hot_from(&self.inbox, 0)?;
        if offset > base {
            let text = id.to_string();
            if entries
                .iter()
                .take_while(|(_, end)| *end <= offset)
                .any(|(e, _)| e.msg_id == text)
            {
                return Ok(true);
            }
        }
        if base == 0 {
            return Ok(false);
        }
        let dir = self.inbox.parent().unwrap_or(Path::new("."));
        saved_index_has(dir, id).map_err(|source| ReadStateError::Io {
            path: dir.join(crate::inbox::INDEX_FILE),
            source,
        })
    }

    fn save(
        &mut self,
        offset: u64,
        consumed: &BTreeSet<Key>,
        durability: Durability,
    ) -> Result<(), ReadStateError> {
        let generation = self.generation + 1;
        let file = File {
            version: VERSION,
            generation,
            offset,
            consumed: consumed.iter().map(key_text).collect(),
        };
        let bytes = serde_json::to_vec(&file).map_err(|source| ReadStateError::Invalid {
            path: self.path.clone(),
            source,
        })?;
        let io_error = |path: &Path| {
            let path = path.to_owned();
            move |source| ReadStateError::Io { path, source }
        };
        let in_slot = durability == Durability::Lazy
            && lazy::write(&self.lazy, generation, &bytes).map_err(io_error(&self.lazy))?;
        if !in_slot {
            let write = match durability {
                Durability::Synced => write_atomically,
                Durability::Lazy => write_replacing,
            };
            write(&self.path, &bytes).map_err(io_error(&self.path))?;
        }
        self.generation = generation;
        Ok(())
    }
}

/// Inbox lines for the tests of the modules that read the inbox, here and above.
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    use interlink_core::{MsgId, wire::EnvelopeKind};

    use crate::inbox::InboxEntry;

    /// An inbox line from a fixed sender, with text `text <id>`.
    pub fn entry(id: MsgId, kind: EnvelopeKind) -> InboxEntry {
        InboxEntry {
            msg_id: id.to_string(),
            sender: "aa".repeat(32),
            sender_fingerprint: "0000-0000-0000".into(),
            sender_session: "s".into(),
            reply_to: format!("{}#s", "aa".repeat(32)),
            kind,
            task_id: None,
            status: None,
            in_reply_to: None,
            also_about: Vec::new(),
            sent_at: 1,
            received_at: 2,
            text: Some(format!("text {id}")),
            name: None,
            group: None,
        }
    }
}

#[cfg(test)]
#[path = "read_state_tests.rs"]
pub(crate) mod tests;
