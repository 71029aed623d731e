//! A session's local inbox: the durable hand-off point between the node and the agent.
//!
//! One JSON object per line in `inbox.jsonl` (format in docs/DELIVERY.md), appended and
//! fsynced before the node receipts a message, so a receipt always means "on disk".
//! The file is append-only; readers (the MCP server, `interlink-p2p wait`) keep their
//! own cursor. Message ids already in the file are refused as duplicates, which makes
//! delivery exactly-once towards the agent even though the wire is at-least-once. The
//! inbox also remembers who sent each id, so the node can tell a sender's retry of a
//! stored message from another identity reusing its id ([`Inbox::holds`]).
//!
//! A crash can leave a torn last line; opening the inbox cuts it off (the message it
//! held was never receipted, so its sender still has it queued and will deliver it
//! again).

use std::{
    collections::HashMap,
    fs::{File, OpenOptions},
    io::{self, BufRead as _, BufReader, Seek as _, SeekFrom, Write as _},
    path::{Path, PathBuf},
};

use interlink_core::{
    IdentityKey, MsgId,
    wire::{EnvelopeKind, TaskStatus},
};
use serde::{Deserialize, Serialize};

/// File name of the inbox inside a session's directory.
pub const INBOX_FILE: &str = "inbox.jsonl";

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
}

/// What [`Inbox::append`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Appended {
    /// Written and synced.
    New,
    /// That message id is already in the inbox; nothing written.
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
        /// The error.
        source: io::Error,
    },
    /// An entry could not be encoded.
    #[error("inbox entry could not be encoded: {0}")]
    Encode(#[from] serde_json::Error),
}

/// The writer side of a session's inbox. One per session, owned by its node.
#[derive(Debug)]
pub struct Inbox {
    path: PathBuf,
    file: File,
    /// Every id in the file, with its verified sender (`None` for a line whose sender
    /// does not parse: it still takes its id, but is nobody's to retry).
    seen: HashMap<MsgId, Option<IdentityKey>>,
}

impl Inbox {
    /// Opens (creating) the inbox in `dir` (mode 0700; the file 0600), loads the ids it
    /// holds and cuts off a torn last line.
    pub fn open(dir: &Path) -> Result<Self, InboxError> {
        let path = dir.join(INBOX_FILE);
        let io_err = |source| InboxError::Io {
            path: path.clone(),
            source,
        };
        interlink_core::keyfile::create_private_dir(dir).map_err(|source| InboxError::Io {
            path: dir.to_owned(),
            source,
        })?;
        let mut opts = OpenOptions::new();
        opts.read(true).append(true).create(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let file = opts.open(&path).map_err(io_err)?;
        let (seen, complete_len) = scan(&file).map_err(io_err)?;
        let len = file.metadata().map_err(io_err)?.len();
        if complete_len < len {
            file.set_len(complete_len).map_err(io_err)?;
            file.sync_all().map_err(io_err)?;
        }
        Ok(Self { path, file, seen })
    }

    /// Appends `entry` unless its id is already present; returns once the line is on
    /// disk (`sync_data`).
    pub fn append(&mut self, id: MsgId, entry: &InboxEntry) -> Result<Appended, InboxError> {
        let mut out = self.append_many(std::iter::once((id, entry)))?;
        Ok(out.pop().unwrap_or(Appended::Duplicate))
    }

    /// Appends every entry whose id is not present yet, in order, with one write and
    /// one `sync_data` for all of them; returns what happened to each.
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
        let mut buf = Vec::new();
        let mut outcome = Vec::new();
        let mut new_ids: Vec<(MsgId, Option<IdentityKey>)> = Vec::new();
        let mut durable = false;
        for (id, entry) in entries {
            if self.seen.contains_key(&id) || new_ids.iter().any(|(n, _)| *n == id) {
                outcome.push(Appended::Duplicate);
                continue;
            }
            durable |= !entry.kind.is_receipt();
            serde_json::to_writer(&mut buf, entry)?;
            buf.push(b'\n');
            new_ids.push((id, entry.sender.parse().ok()));
            outcome.push(Appended::New);
        }
        if !buf.is_empty() {
            let io_err = |source| InboxError::Io {
                path: self.path.clone(),
                source,
            };
            self.file.write_all(&buf).map_err(io_err)?;
            if durable {
                self.file.sync_data().map_err(io_err)?;
            }
            self.seen.extend(new_ids);
        }
        Ok(outcome)
    }

    /// Whether a message id is already in the inbox (from any sender).
    pub fn contains(&self, id: &MsgId) -> bool {
        self.seen.contains_key(id)
    }

    /// Whether the inbox holds message `id` from `sender`: a retry of a stored message,
    /// as opposed to another identity reusing its id.
    pub fn holds(&self, id: &MsgId, sender: &IdentityKey) -> bool {
        self.seen
            .get(id)
            .is_some_and(|s| s.as_ref() == Some(sender))
    }

    /// Number of messages in the inbox.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether the inbox is empty.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// The inbox file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Reads the entries after byte `offset` of an inbox file; returns them and the offset
/// after the last complete line (a reader's cursor). A missing file reads as empty.
pub fn read_from(path: &Path, offset: u64) -> Result<(Vec<InboxEntry>, u64), InboxError> {
    let (entries, end) = read_positioned_from(path, offset)?;
    Ok((entries.into_iter().map(|(e, _)| e).collect(), end))
}

/// Like [`read_from`], with each entry the offset just after its line, so a reader
/// can move its cursor past a prefix of the entries (e.g. the ones it has consumed).
pub fn read_positioned_from(
    path: &Path,
    offset: u64,
) -> Result<(Vec<(InboxEntry, u64)>, u64), InboxError> {
    let io_err = |source| InboxError::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), offset)),
        Err(e) => return Err(io_err(e)),
    };
    file.seek(SeekFrom::Start(offset)).map_err(io_err)?;
    let mut reader = BufReader::new(file);
    let mut entries = Vec::new();
    let mut pos = offset;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(io_err)?;
        if n == 0 || line.last() != Some(&b'\n') {
            break; // end, or a line still being written
        }
        pos += n as u64;
        // A line that does not parse is skipped rather than blocking every later one.
        if let Ok(e) = serde_json::from_slice::<InboxEntry>(&line) {
            entries.push((e, pos));
        }
    }
    Ok((entries, pos))
}

/// The ids (with their senders) of complete lines and the length up to the last
/// complete line.
fn scan(file: &File) -> io::Result<(HashMap<MsgId, Option<IdentityKey>>, u64)> {
    let mut reader = BufReader::new(file);
    let mut seen = HashMap::new();
    let mut complete = 0u64;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 || line.last() != Some(&b'\n') {
            break;
        }
        complete += n as u64;
        #[derive(Deserialize)]
        struct IdOnly {
            msg_id: String,
            #[serde(default)]
            sender: String,
        }
        if let Ok(IdOnly { msg_id, sender }) = serde_json::from_slice(&line)
            && let Ok(id) = msg_id.parse()
        {
            seen.entry(id).or_insert_with(|| sender.parse().ok());
        }
    }
    Ok((seen, complete))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn entry(id: MsgId, text: &str) -> InboxEntry {
        InboxEntry {
            msg_id: id.to_string(),
            sender: "aa".repeat(32),
            sender_fingerprint: "0000-0000-0000".into(),
            sender_session: "s".into(),
            reply_to: format!("{}#s", "aa".repeat(32)),
            kind: EnvelopeKind::Message,
            task_id: None,
            status: None,
            in_reply_to: None,
            sent_at: 1,
            received_at: 2,
            text: Some(text.into()),
            name: None,
        }
    }

    #[test]
    fn appends_dedupes_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (MsgId::from_bytes([1; 16]), MsgId::from_bytes([2; 16]));
        let mut inbox = Inbox::open(dir.path()).unwrap();
        assert_eq!(inbox.append(a, &entry(a, "one")).unwrap(), Appended::New);
        assert_eq!(
            inbox.append(a, &entry(a, "one again")).unwrap(),
            Appended::Duplicate
        );
        drop(inbox);
        let mut inbox = Inbox::open(dir.path()).unwrap();
        assert!(inbox.contains(&a));
        assert_eq!(
            inbox.append(a, &entry(a, "replayed")).unwrap(),
            Appended::Duplicate
        );
        assert_eq!(inbox.append(b, &entry(b, "two")).unwrap(), Appended::New);
        let (all, end) = read_from(inbox.path(), 0).unwrap();
        assert_eq!(
            all.iter().map(|e| e.text.as_deref()).collect::<Vec<_>>(),
            [Some("one"), Some("two")]
        );
        let (none, same) = read_from(inbox.path(), end).unwrap();
        assert!(none.is_empty());
        assert_eq!(same, end);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(inbox.path()).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
    }

    #[test]
    fn a_batch_of_receipts_is_appended_and_deduplicated_like_messages() {
        let dir = tempfile::tempdir().unwrap();
        let mut inbox = Inbox::open(dir.path()).unwrap();
        let mut receipt = entry(MsgId::from_bytes([7; 16]), "");
        receipt.kind = EnvelopeKind::HostQueued;
        receipt.text = None;
        let id = MsgId::from_bytes([7; 16]);
        assert_eq!(inbox.append(id, &receipt).unwrap(), Appended::New);
        assert_eq!(inbox.append(id, &receipt).unwrap(), Appended::Duplicate);
        // Written without a sync, still there for readers and after reopening.
        let (entries, _) = read_from(inbox.path(), 0).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].kind, EnvelopeKind::HostQueued);
        drop(inbox);
        let inbox = Inbox::open(dir.path()).unwrap();
        assert!(inbox.contains(&id));
    }

    #[test]
    fn remembers_each_ids_sender_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let a = MsgId::from_bytes([1; 16]);
        let sender: IdentityKey = "aa".repeat(32).parse().unwrap();
        let other: IdentityKey = "bb".repeat(32).parse().unwrap();
        let mut inbox = Inbox::open(dir.path()).unwrap();
        inbox.append(a, &entry(a, "one")).unwrap();
        assert!(inbox.holds(&a, &sender));
        assert!(
            !inbox.holds(&a, &other),
            "another sender's reuse is no retry"
        );
        drop(inbox);
        let inbox = Inbox::open(dir.path()).unwrap();
        assert!(inbox.holds(&a, &sender));
        assert!(!inbox.holds(&a, &other));
        assert!(inbox.contains(&a));
        assert!(!inbox.holds(&MsgId::from_bytes([2; 16]), &sender));
    }

    #[test]
    fn a_torn_last_line_is_cut_off_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let a = MsgId::from_bytes([1; 16]);
        let mut inbox = Inbox::open(dir.path()).unwrap();
        inbox.append(a, &entry(a, "whole")).unwrap();
        let path = inbox.path().to_owned();
        drop(inbox);
        let whole_len = fs::metadata(&path).unwrap().len();
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"msg_id":"0202"#).unwrap();
        drop(f);
        // A reader stops before the torn line...
        let (entries, end) = read_from(&path, 0).unwrap();
        assert_eq!((entries.len(), end), (1, whole_len));
        // ...and the writer cuts it off.
        let inbox = Inbox::open(dir.path()).unwrap();
        assert_eq!(inbox.len(), 1);
        assert_eq!(fs::metadata(&path).unwrap().len(), whole_len);
    }
}
