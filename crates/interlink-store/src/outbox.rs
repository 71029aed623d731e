//! The sender's durable outbox: every message answered `queued` stays on disk until
//! its recipient receipts it or the mailbox retention ends.
//!
//! Saying `queued` promises that the message will reach its recipient when it comes
//! back. A copy in the DHT alone cannot keep that promise: session nodes hold mailbox
//! copies in memory, and with no relay and no other peer the only copy is the
//! sender's own. So a queued message is first committed here (one redb file per
//! session, `outbox.redb` in the session's directory, one fsynced transaction per batch
//! admitted together), and only then answered. On start the node loads what is left,
//! publishes it to the recipients' mailboxes again and retries it live when a recipient
//! shows life, so mail survives the sender's process being closed or killed.
//!
//! An entry is the signed envelope as sent (its wire bytes), keyed by its message id;
//! its recipient, timestamp and order come from the envelope itself. One process owns
//! the file (redb refuses a second open); the session lock makes that the session's
//! process.

use std::path::{Path, PathBuf};

use interlink_core::{
    MsgId,
    limits::{MAILBOX_RETENTION_MS, MAX_FUTURE_SKEW_MS},
    wire::{Envelope, Signed},
};
use redb::{
    Database, ReadableDatabase as _, ReadableTable as _, ReadableTableMetadata as _,
    TableDefinition,
};

/// File name of the outbox inside a session's directory.
pub const OUTBOX_FILE: &str = "outbox.redb";
/// Most messages waiting in one outbox. A mailbox takes 64 messages per sender, so
/// this is 64 recipients' worth of full mailboxes.
pub const MAX_OUTBOX_ENTRIES: usize = 4096;

const ENTRIES: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("outbox_entries");

/// An outbox operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutboxError {
    /// The database could not be opened, read or written.
    #[error("outbox {path}: {reason}")]
    Db {
        /// The outbox file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// The outbox holds [`MAX_OUTBOX_ENTRIES`] messages.
    #[error("the outbox holds {MAX_OUTBOX_ENTRIES} messages waiting for their recipients")]
    Full,
}

/// A session's durable outbox.
#[derive(Debug)]
pub struct Outbox {
    db: Database,
    path: PathBuf,
    len: usize,
}

impl Outbox {
    /// Opens (creating) the outbox in `dir`.
    pub fn open(dir: &Path) -> Result<Self, OutboxError> {
        let path = dir.join(OUTBOX_FILE);
        // Owner-only, like every file of the home (redb would create it 0644).
        crate::files::ensure_private_file(&path).map_err(|e| OutboxError::Db {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let db = Database::create(&path).map_err(|e| db_error(&path, e))?;
        let txn = db.begin_write().map_err(|e| db_error(&path, e))?;
        let len = {
            let table = txn.open_table(ENTRIES).map_err(|e| db_error(&path, e))?;
            usize::try_from(table.len().map_err(|e| db_error(&path, e))?).unwrap_or(usize::MAX)
        };
        txn.commit().map_err(|e| db_error(&path, e))?;
        Ok(Self { db, path, len })
    }

    /// Every message waiting, oldest first; entries past the retention (or that no
    /// longer decode) are removed.
    pub fn load(&mut self, now_ms: u64) -> Result<Vec<Signed<Envelope>>, OutboxError> {
        let p = self.path.clone();
        let mut keep = Vec::new();
        let mut drop_keys = Vec::new();
        {
            let txn = self.db.begin_read().map_err(|e| db_error(&p, e))?;
            let table = txn.open_table(ENTRIES).map_err(|e| db_error(&p, e))?;
            for row in table.iter().map_err(|e| db_error(&p, e))? {
                let (k, v) = row.map_err(|e| db_error(&p, e))?;
                match Signed::<Envelope>::decode(v.value()) {
                    Ok(env) if !expired(&env, now_ms) => keep.push(env),
                    _ => drop_keys.push(k.value().to_vec()),
                }
            }
        }
        if !drop_keys.is_empty() {
            let txn = self.db.begin_write().map_err(|e| db_error(&p, e))?;
            {
                let mut table = txn.open_table(ENTRIES).map_err(|e| db_error(&p, e))?;
                for k in &drop_keys {
                    table.remove(k.as_slice()).map_err(|e| db_error(&p, e))?;
                }
            }
            txn.commit().map_err(|e| db_error(&p, e))?;
            self.len = self.len.saturating_sub(drop_keys.len());
        }
        keep.sort_by_key(|e| (e.body().ts, e.body().msg_id));
        Ok(keep)
    }

    /// Commits `envelopes` (one fsynced transaction for all): when this returns `Ok`,
    /// they survive a crash. Nothing is written if they do not all fit.
    pub fn put(&mut self, envelopes: &[&Signed<Envelope>]) -> Result<(), OutboxError> {
        self.apply(envelopes, &[]).map(|_| ())
    }

    /// Removes the messages `ids` (receipted, refused for good, or expired); ids not
    /// held are ignored.
    pub fn remove(&mut self, ids: &[MsgId]) -> Result<usize, OutboxError> {
        self.apply(&[], ids)
    }

    /// Adds `puts` and removes `removes` in one fsynced transaction (all or nothing);
    /// returns how many entries were removed. Refused whole, before writing, if the
    /// outbox would hold more than [`MAX_OUTBOX_ENTRIES`].
    pub fn apply(
        &mut self,
        puts: &[&Signed<Envelope>],
        removes: &[MsgId],
    ) -> Result<usize, OutboxError> {
        if puts.is_empty() && removes.is_empty() {
            return Ok(0);
        }
        if self.len + puts.len() > MAX_OUTBOX_ENTRIES + removes.len() {
            return Err(OutboxError::Full);
        }
        let p = self.path.clone();
        let txn = self.db.begin_write().map_err(|e| db_error(&p, e))?;
        let (mut added, mut removed) = (0, 0);
        {
            let mut table = txn.open_table(ENTRIES).map_err(|e| db_error(&p, e))?;
            for id in removes {
                if table
                    .remove(id.as_bytes().as_slice())
                    .map_err(|e| db_error(&p, e))?
                    .is_some()
                {
                    removed += 1;
                }
            }
            if self.len + puts.len() > MAX_OUTBOX_ENTRIES + removed {
                return Err(OutboxError::Full);
            }
            for env in puts {
                let key = env.body().msg_id;
                if table
                    .insert(key.as_bytes().as_slice(), env.to_bytes().as_slice())
                    .map_err(|e| db_error(&p, e))?
                    .is_none()
                {
                    added += 1;
                }
            }
        }
        txn.commit().map_err(|e| db_error(&p, e))?;
        self.len = (self.len + added).saturating_sub(removed);
        Ok(removed)
    }

    /// Number of messages waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Past the mailbox retention (with the skew tolerance): no holder keeps it and no
/// recipient would take it.
pub fn expired(env: &Signed<Envelope>, now_ms: u64) -> bool {
    now_ms.saturating_sub(env.body().ts) > MAILBOX_RETENTION_MS + MAX_FUTURE_SKEW_MS
}

fn db_error<E: Into<redb::Error>>(path: &Path, e: E) -> OutboxError {
    OutboxError::Db {
        path: path.to_owned(),
        reason: e.into().to_string(),
    }
}

#[cfg(test)]
#[path = "outbox_tests.rs"]
mod tests;
