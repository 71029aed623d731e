//! What the agent has consumed of a session's inbox: `read.json` next to the inbox.
//!
//! The inbox (`inbox.jsonl`, written by the node) is append-only; this file records
//! how far the agent has read it. It holds a byte `offset` — every line before it is
//! consumed — and the ids of messages after the offset that were acknowledged out of
//! order. Acknowledging moves the offset past the longest consumed prefix, so the id
//! set stays small when messages are acknowledged roughly in order, and it is capped
//! ([`MAX_CONSUMED_IDS`]) when they are not.
//!
//! Only the MCP server writes the file (atomically: temporary file, fsync, rename —
//! without the fsyncs for messages pushed to the agent host, see [`Durability`]);
//! `interlink-p2p wait` reads it to know what is unread. A missing file means nothing
//! was consumed yet.
//!
//! Only `message` entries are shown to the agent; other kinds (pairing and goodbye
//! notices the node records) count as consumed when the offset moves past them.

use std::{
    collections::BTreeSet,
    io,
    path::{Path, PathBuf},
};

use interlink_core::{MsgId, wire::EnvelopeKind};
use interlink_net::inbox::{INBOX_FILE, InboxEntry, InboxError, read_positioned_from};
use serde::{Deserialize, Serialize};

use crate::files::{write_atomically, write_replacing};

/// File name of the read state inside a session's directory.
pub const READ_STATE_FILE: &str = "read.json";
/// Most message ids acknowledged ahead of an older unread message that the state
/// remembers; an acknowledgement beyond it is refused until older messages are
/// acknowledged.
pub const MAX_CONSUMED_IDS: usize = 4096;
/// Version of the file format.
const VERSION: u32 = 1;

/// How hard a change of the read state is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Synced before returning: the agent acknowledged these messages, and they must
    /// never be shown again, also after a crash.
    Synced,
    /// Replaced atomically but not synced: messages handed to the agent host (channel
    /// notifications). A crash of the machine may hand them over again (at least
    /// once), which is cheaper than two fsyncs per message on the hot path.
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
        /// The error.
        source: io::Error,
    },
    /// The read-state file is not valid.
    #[error("read state {} is not valid: {source}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
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

/// What [`ReadState::acknowledge`] did with the ids it was given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Acked {
    /// Unread messages now consumed.
    pub consumed: Vec<MsgId>,
    /// Ids already consumed before (acknowledging twice is harmless).
    pub already: Vec<MsgId>,
    /// Ids that name no message in the inbox.
    pub unknown: Vec<MsgId>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    offset: u64,
    consumed: BTreeSet<String>,
}

/// The read state of one session's inbox.
#[derive(Debug)]
pub struct ReadState {
    inbox: PathBuf,
    path: PathBuf,
    offset: u64,
    consumed: BTreeSet<MsgId>,
}

impl ReadState {
    /// Loads the state of the inbox in `session_dir` (a missing file: nothing read).
    pub fn load(session_dir: &Path) -> Result<Self, ReadStateError> {
        let path = session_dir.join(READ_STATE_FILE);
        let file = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<File>(&bytes).map_err(|source| {
                ReadStateError::Invalid {
                    path: path.clone(),
                    source,
                }
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => File::default(),
            Err(source) => return Err(ReadStateError::Io { path, source }),
        };
        let consumed = file
            .consumed
            .iter()
            .filter_map(|id| id.parse().ok())
            .collect();
        let mut state = Self {
            inbox: session_dir.join(INBOX_FILE),
            path,
            offset: file.offset,
            consumed,
        };
        // An inbox shorter than the offset was replaced: read it from the start (the
        // ids consumed still hide what was read).
        let len = std::fs::metadata(&state.inbox)
            .map(|m| m.len())
            .unwrap_or(0);
        if state.offset > len {
            state.offset = 0;
        }
        Ok(state)
    }

    /// The unread messages, oldest first, reading from `hint` when it lies past the
    /// recorded offset (the end of a prefix already known to hold nothing unread), and
    /// the end of the longest prefix now known to hold nothing unread — the next
    /// call's hint. Receipts and consumed messages never turn unread, so a session that
    /// never acknowledges does not re-read its whole inbox on every call.
    pub fn unread_from(&self, hint: u64) -> Result<(Vec<InboxEntry>, u64), ReadStateError> {
        let len = std::fs::metadata(&self.inbox).map(|m| m.len()).unwrap_or(0);
        let start = if hint > self.offset && hint <= len {
            hint
        } else {
            self.offset
        };
        let (entries, _) = read_positioned_from(&self.inbox, start)?;
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
        let (entries, _) = read_positioned_from(&self.inbox, self.offset)?;
        Ok(entries
            .into_iter()
            .map(|(e, _)| e)
            .filter(|e| self.is_unread(e))
            .collect())
    }

    fn is_unread(&self, e: &InboxEntry) -> bool {
        e.kind == EnvelopeKind::Message
            && e.msg_id
                .parse::<MsgId>()
                .is_ok_and(|id| !self.consumed.contains(&id))
    }

    /// Marks `ids` consumed, durably, and moves the offset past the longest consumed
    /// prefix of the inbox. Ids consumed before are reported, not refused.
    pub fn acknowledge(&mut self, ids: &[MsgId]) -> Result<Acked, AckError> {
        self.acknowledge_with(ids, Durability::Synced)
    }

    /// [`ReadState::acknowledge`], written as `durability` says.
    pub fn acknowledge_with(
        &mut self,
        ids: &[MsgId],
        durability: Durability,
    ) -> Result<Acked, AckError> {
        let (entries, _) =
            read_positioned_from(&self.inbox, self.offset).map_err(ReadStateError::from)?;
        let unread: BTreeSet<MsgId> = entries
            .iter()
            .filter(|(e, _)| self.is_unread(e))
            .filter_map(|(e, _)| e.msg_id.parse().ok())
            .collect();
        let mut acked = Acked::default();
        let mut consumed = self.consumed.clone();
        for id in ids {
            if unread.contains(id) {
                if consumed.insert(*id) {
                    acked.consumed.push(*id);
                }
            } else if acked.consumed.contains(id) || acked.already.contains(id) {
                // Listed twice in one call.
            } else if consumed.contains(id) || self.before_offset(id)? {
                acked.already.push(*id);
            } else {
                acked.unknown.push(*id);
            }
        }
        // Move the offset past every leading entry that is consumed or not a message.
        let mut offset = self.offset;
        for (e, end) in &entries {
            let id = e.msg_id.parse::<MsgId>().ok();
            let done =
                e.kind != EnvelopeKind::Message || id.is_none_or(|id| consumed.contains(&id));
            if !done {
                break;
            }
            if let Some(id) = id {
                consumed.remove(&id);
            }
            offset = *end;
        }
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

    /// Whether `id` is in the part of the inbox before the offset (consumed).
    fn before_offset(&self, id: &MsgId) -> Result<bool, ReadStateError> {
        if self.offset == 0 {
            return Ok(false);
        }
        let (entries, _) = read_positioned_from(&self.inbox, 0)?;
        let text = id.to_string();
        Ok(entries
            .iter()
            .take_while(|(_, end)| *end <= self.offset)
            .any(|(e, _)| e.msg_id == text))
    }

    fn save(
        &self,
        offset: u64,
        consumed: &BTreeSet<MsgId>,
        durability: Durability,
    ) -> Result<(), ReadStateError> {
        let file = File {
            version: VERSION,
            offset,
            consumed: consumed.iter().map(MsgId::to_string).collect(),
        };
        let bytes = serde_json::to_vec(&file).map_err(|source| ReadStateError::Invalid {
            path: self.path.clone(),
            source,
        })?;
        let write = match durability {
            Durability::Synced => write_atomically,
            Durability::Lazy => write_replacing,
        };
        write(&self.path, &bytes).map_err(|source| ReadStateError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use interlink_net::inbox::Inbox;

    use super::*;

    /// An inbox line from a fixed sender, with text `text <id>` (shared by the tests
    /// of the modules that read the inbox).
    pub(crate) fn entry(id: MsgId, kind: EnvelopeKind) -> InboxEntry {
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
            sent_at: 1,
            received_at: 2,
            text: Some(format!("text {id}")),
            name: None,
        }
    }

    fn id(n: u8) -> MsgId {
        MsgId::from_bytes([n; 16])
    }

    fn ids(entries: &[InboxEntry]) -> Vec<String> {
        entries.iter().map(|e| e.msg_id.clone()).collect()
    }

    #[test]
    fn unread_from_skips_a_prefix_with_nothing_unread() {
        let dir = tempfile::tempdir().unwrap();
        let mut inbox = Inbox::open(dir.path()).unwrap();
        inbox
            .append(id(1), &entry(id(1), EnvelopeKind::HostQueued))
            .unwrap();
        inbox
            .append(id(2), &entry(id(2), EnvelopeKind::Read))
            .unwrap();
        inbox
            .append(id(3), &entry(id(3), EnvelopeKind::Message))
            .unwrap();
        let state = ReadState::load(dir.path()).unwrap();
        let (unread, clean) = state.unread_from(0).unwrap();
        assert_eq!(ids(&unread), vec![id(3).to_string()]);
        assert!(clean > 0, "the two receipts are a clean prefix");
        // From the hint: the same answer without the prefix.
        let (again, clean_again) = state.unread_from(clean).unwrap();
        assert_eq!(ids(&again), vec![id(3).to_string()]);
        assert_eq!(clean_again, clean);
        // A hint past the end of the file (inbox replaced) is ignored.
        let (all, _) = state.unread_from(u64::MAX).unwrap();
        assert_eq!(ids(&all), vec![id(3).to_string()]);
    }

    #[test]
    fn acknowledged_messages_stay_consumed_across_reloads() {
        let dir = tempfile::tempdir().unwrap();
        let mut inbox = Inbox::open(dir.path()).unwrap();
        for n in 1..=3 {
            inbox
                .append(id(n), &entry(id(n), EnvelopeKind::Message))
                .unwrap();
        }
        inbox
            .append(id(9), &entry(id(9), EnvelopeKind::Goodbye))
            .unwrap();
        let mut state = ReadState::load(dir.path()).unwrap();
        assert_eq!(ids(&state.unread().unwrap()).len(), 3);

        // Out of order: the newest first; the offset cannot move yet.
        let acked = state.acknowledge(&[id(3), id(7)]).unwrap();
        assert_eq!((acked.consumed, acked.unknown), (vec![id(3)], vec![id(7)]));
        assert_eq!(state.offset, 0);
        let state2 = ReadState::load(dir.path()).unwrap();
        assert_eq!(
            ids(&state2.unread().unwrap()),
            [id(1).to_string(), id(2).to_string()]
        );

        // The oldest two: the offset moves past all four lines (the goodbye too), and
        // no ids need remembering.
        let acked = state.acknowledge(&[id(1), id(2), id(3)]).unwrap();
        assert_eq!(acked.consumed, vec![id(1), id(2)]);
        assert_eq!(acked.already, vec![id(3)]);
        let state = ReadState::load(dir.path()).unwrap();
        assert!(state.unread().unwrap().is_empty());
        assert!(state.consumed.is_empty());
        assert!(state.offset > 0);
        let mut state = state;
        let again = state.acknowledge(&[id(1)]).unwrap();
        assert_eq!(again.already, vec![id(1)]);

        // A new message after the offset is unread.
        inbox
            .append(id(4), &entry(id(4), EnvelopeKind::Message))
            .unwrap();
        assert_eq!(ids(&state.unread().unwrap()), [id(4).to_string()]);
    }

    #[test]
    fn a_missing_inbox_has_nothing_unread() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = ReadState::load(dir.path()).unwrap();
        assert!(state.unread().unwrap().is_empty());
        assert_eq!(state.acknowledge(&[id(1)]).unwrap().unknown, vec![id(1)]);
    }

    #[test]
    fn a_lazy_acknowledgement_is_as_visible_as_a_synced_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut inbox = Inbox::open(dir.path()).unwrap();
        for n in 1..=2 {
            inbox
                .append(id(n), &entry(id(n), EnvelopeKind::Message))
                .unwrap();
        }
        let mut state = ReadState::load(dir.path()).unwrap();
        let acked = state.acknowledge_with(&[id(1)], Durability::Lazy).unwrap();
        assert_eq!(acked.consumed, vec![id(1)]);
        // Another reader (the Stop hook, a restart) sees it at once.
        let again = ReadState::load(dir.path()).unwrap();
        assert_eq!(ids(&again.unread().unwrap()), [id(2).to_string()]);
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }
}
