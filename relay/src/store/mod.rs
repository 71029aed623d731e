//! The relay's durable mailbox store: one redb file.
//!
//! A mailbox record arrives as the bytes of a mailbox-protocol `hold`. [`MailboxStore::put`] decodes
//! and verifies it with the core CRDT ([`Mailbox::decode`]), checks it is stored under
//! its own key, merges it with the copy held, applies the store-wide caps, and writes
//! the merged record in one committed write transaction. The commit is the durability
//! point: once `put` returns `Ok`, the record survives kill -9 and power loss (redb's
//! default `Durability::Immediate` fsyncs on commit), so a network answer sent after it
//! is a promise the relay can keep.
//!
//! Every method blocks on disk I/O and signature checks. Async callers run them in
//! `tokio::task::spawn_blocking` (the store is `Send + Sync`; share it in an `Arc`).
//! Writers are serialised by one mutex: redb admits one write transaction at a time
//! anyway, and a put is a read-merge-write that must not interleave with another put
//! of the same mailbox.
//!
//! Tables:
//! - `mailbox_records`: record key → encoded merged record (what [`MailboxStore::get`]
//!   returns);
//! - `mailbox_summary`: record key → `(envelopes, record bytes, sweep due ms)`, so
//!   totals are known at open and a sweep decodes only mailboxes with something due;
//! - `mailbox_owner`: record key → owner identity key, so the bytes held per identity
//!   ([`Caps::max_owner_bytes`]) are known at open without reading a record (a file
//!   written before this table existed gets it filled once, from its records);
//! - `meta`: `schema` → [`SCHEMA_VERSION`].

mod cache;
mod caps;
mod error;
mod put;
mod sweep;

use std::{
    path::Path,
    sync::{Mutex, MutexGuard, PoisonError},
};

use interlink_core::{
    limits::MAX_FUTURE_SKEW_MS,
    mailbox::{self, Mailbox},
};
use redb::{
    Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, Table, TableDefinition,
};
use tracing::warn;

pub use self::cache::DECODED_SIZE_FACTOR;
pub use self::caps::{
    Caps, DEFAULT_DB_CACHE_BYTES, DEFAULT_DECODED_CACHE_BYTES, DEFAULT_MAX_MAILBOXES,
    DEFAULT_MAX_OWNER_BYTES, DEFAULT_MAX_TOTAL_BYTES,
};
pub use self::error::{DbError, OpenError, PutError, ReadError, Refusal, RejectReason, SweepError};
use self::{
    cache::{DecodedCache, Key},
    put::{Batch, Current, verify_put},
};

/// Schema of the database file; a file of another schema is refused at open.
pub const SCHEMA_VERSION: u64 = 1;
/// Mailboxes swept per write transaction, so a long sweep does not hold up puts.
pub const SWEEP_BATCH: usize = 64;

const RECORDS: TableDefinition<'_, Key, &[u8]> = TableDefinition::new("mailbox_records");
/// `(envelopes, record bytes, sweep due ms)`.
const SUMMARY: TableDefinition<'_, Key, (u64, u64, u64)> = TableDefinition::new("mailbox_summary");
/// The owner identity key of each record.
const OWNER: TableDefinition<'_, Key, [u8; 32]> = TableDefinition::new("mailbox_owner");
const META: TableDefinition<'_, &str, u64> = TableDefinition::new("meta");
const META_SCHEMA: &str = "schema";

/// What the store holds, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Mailboxes held (including ones holding only ack tombstones).
    pub mailboxes: u64,
    /// Envelopes held, over all mailboxes.
    pub envelopes: u64,
    /// Bytes of encoded records held.
    pub bytes: u64,
}

/// What an accepted put did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PutOutcome {
    /// Whether the held record changed (and was committed).
    pub changed: bool,
    /// Envelopes now held that were not before.
    pub new_envelopes: usize,
    /// Owner acks now held that were not before.
    pub new_acks: usize,
    /// Envelopes held before and gone now (acked, expired, or displaced by a cap).
    pub removed: usize,
    /// Envelopes the mailbox holds now.
    pub held: usize,
    /// The put's envelopes that the mailbox keeps (or whose owner acked them), as
    /// `(sender, msg_id)`: the `hold` answer.
    pub kept: Vec<interlink_core::wire::AckEntry>,
    /// Bytes the store holds now beyond what it held before the put (0 if it did not
    /// grow): what the relay charges the network the copy came from.
    pub grew_by: u64,
}

/// What a sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Mailboxes that had something due and were re-normalised.
    pub mailboxes_checked: usize,
    /// Envelopes dropped as expired.
    pub envelopes_dropped: usize,
    /// Mailboxes deleted (no envelope and no live ack left).
    pub mailboxes_deleted: usize,
}

/// One mailbox's row of `mailbox_summary`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Summary {
    envelopes: u64,
    bytes: u64,
    /// The first `now` at which an entry of the record is past its window.
    sweep_due: u64,
}

impl Summary {
    fn of(mb: &Mailbox, bytes: usize, cfg: &mailbox::Config) -> Self {
        // `check_time` refuses an entry once `now - ts > window`.
        let ack_window = cfg.retention_ms.saturating_add(MAX_FUTURE_SKEW_MS);
        let env_due = mb.pending().map(|e| due(e.body().ts, cfg.retention_ms));
        let ack_due = mb.acks().map(|a| due(a.body().ts, ack_window));
        Self {
            envelopes: mb.len() as u64,
            bytes: bytes as u64,
            sweep_due: env_due.chain(ack_due).min().unwrap_or(u64::MAX),
        }
    }

    fn row(self) -> (u64, u64, u64) {
        (self.envelopes, self.bytes, self.sweep_due)
    }

    fn from_row((envelopes, bytes, sweep_due): (u64, u64, u64)) -> Self {
        Self {
            envelopes,
            bytes,
            sweep_due,
        }
    }
}

fn due(ts: u64, window: u64) -> u64 {
    ts.saturating_add(window).saturating_add(1)
}

/// Whether a mailbox has nothing worth keeping: no envelope and no tombstone.
fn is_vacant(mb: &Mailbox) -> bool {
    mb.is_empty() && mb.acks().len() == 0
}

#[derive(Debug)]
struct State {
    cache: DecodedCache,
    totals: Stats,
    /// Bytes of records held per owner identity ([`Caps::max_owner_bytes`]): counted
    /// from the records at open, kept up to date by every commit. At most one entry
    /// per mailbox held, so bounded by [`Caps::max_mailboxes`].
    owners: std::collections::HashMap<interlink_core::IdentityKey, u64>,
}

impl State {
    fn owner_bytes(&self, owner: &interlink_core::IdentityKey) -> u64 {
        self.owners.get(owner).copied().unwrap_or(0)
    }

    /// Sets `owner`'s usage after a commit (an owner with nothing held leaves the map).
    fn set_owner_bytes(&mut self, owner: interlink_core::IdentityKey, bytes: u64) {
        if bytes == 0 {
            self.owners.remove(&owner);
        } else {
            self.owners.insert(owner, bytes);
        }
    }
}

/// The durable mailbox store. See the module docs; every method blocks.
#[derive(Debug)]
pub struct MailboxStore {
    db: Database,
    caps: Caps,
    state: Mutex<State>,
}

/// The write transaction's tables, opened once per batch.
struct Tables<'t> {
    records: Table<'t, Key, &'static [u8]>,
    summary: Table<'t, Key, (u64, u64, u64)>,
    owner: Table<'t, Key, [u8; 32]>,
}

impl MailboxStore {
    /// Opens the store at `path`, creating the file if there is none. Fails if another
    /// process (or another store in this one) has it open.
    pub fn open(path: &Path, caps: Caps) -> Result<Self, OpenError> {
        caps.validate()?;
        // Owner-only (redb would create it 0644): it holds every user's sealed mail.
        interlink_store::files::ensure_private_file(path).map_err(|source| OpenError::Io {
            path: path.to_owned(),
            source,
        })?;
        let db = Database::builder()
            .set_cache_size(caps.db_cache_bytes)
            .create(path)
            .map_err(DbError::from)?;
        let txn = db.begin_write().map_err(DbError::from)?;
        {
            let mut meta = txn.open_table(META).map_err(DbError::from)?;
            let found = meta
                .get(META_SCHEMA)
                .map_err(DbError::from)?
                .map(|g| g.value());
            match found {
                Some(v) if v != SCHEMA_VERSION => {
                    return Err(OpenError::Schema {
                        found: v,
                        expected: SCHEMA_VERSION,
                    });
                }
                Some(_) => {}
                None => {
                    meta.insert(META_SCHEMA, SCHEMA_VERSION)
                        .map_err(DbError::from)?;
                }
            }
            let mut t = open_tables(&txn)?;
            fill_owners(&mut t)?;
        }
        txn.commit().map_err(DbError::from)?;
        let totals = read_totals(&db)?;
        let owners = read_owners(&db)?;
        Ok(Self {
            db,
            state: Mutex::new(State {
                cache: DecodedCache::new(caps.decoded_cache_bytes),
                totals,
                owners,
            }),
            caps,
        })
    }

    /// The caps this store enforces.
    pub fn caps(&self) -> &Caps {
        &self.caps
    }

    /// Verifies, merges and durably stores one put of the record `record_key`. Returns
    /// after the commit. A refused put writes nothing. Blocking (see the module docs).
    pub fn put(
        &self,
        record_key: [u8; 32],
        encoded: &[u8],
        now_ms: u64,
    ) -> Result<PutOutcome, PutError> {
        self.put_many(&[(record_key, encoded)], now_ms)
            .pop()
            .unwrap_or_else(|| Err(Refusal::new(RejectReason::Malformed, "no put").into()))
    }

    /// Several puts in one write transaction: one commit (one fsync) for all of them,
    /// so a caller that queues puts arriving together pays the disk once. Results are in
    /// input order. If the commit fails, every put that would have changed the store
    /// reports the database error; refusals are reported as such either way.
    pub fn put_many(
        &self,
        puts: &[([u8; 32], &[u8])],
        now_ms: u64,
    ) -> Vec<Result<PutOutcome, PutError>> {
        let cfg = &self.caps.mailbox;
        // Decoding verifies every signature: done before taking the lock, so readers
        // of the stats are not held up by it.
        let decoded: Vec<Result<Mailbox, Refusal>> = puts
            .iter()
            .map(|(key, bytes)| verify_put(key, bytes, now_ms, cfg))
            .collect();
        let mut state = self.lock();
        let batch = match self.stage(&mut state, &decoded, now_ms) {
            Ok(batch) => batch,
            Err(e) => return puts.iter().map(|_| Err(PutError::Db(e.clone()))).collect(),
        };
        let Batch {
            txn,
            results,
            touched,
            totals,
            owners,
        } = batch;
        let dirty = results.iter().any(|r| matches!(r, Ok(o) if o.changed));
        let committed = if !dirty {
            txn.abort().map_err(DbError::from)
        } else {
            txn.commit().map_err(DbError::from)
        };
        match committed {
            Ok(()) => {
                state.totals = totals;
                for (owner, bytes) in owners {
                    state.set_owner_bytes(owner, bytes);
                }
                for (key, current) in touched {
                    match current {
                        Current::Held(mb, bytes) => state.cache.insert(key, mb, bytes),
                        Current::Absent | Current::Unknown => state.cache.remove(&key),
                    }
                }
                results
                    .into_iter()
                    .map(|r| r.map_err(PutError::from))
                    .collect()
            }
            Err(e) => {
                warn!("mailbox commit failed: {e}");
                // The touched mailboxes were taken out of the cache while staging, so
                // the cache holds no copy the database does not.
                results
                    .into_iter()
                    .map(|r| match r {
                        Ok(o) if o.changed => Err(PutError::Db(e.clone())),
                        Ok(o) => Ok(o),
                        Err(refusal) => Err(refusal.into()),
                    })
                    .collect()
            }
        }
    }

    /// The encoded merged record held under `record_key`. It may still list entries
    /// that expired since the last sweep; readers normalise on decode anyway.
    pub fn get(&self, record_key: &[u8; 32]) -> Result<Option<Vec<u8>>, ReadError> {
        let txn = self.db.begin_read().map_err(DbError::from)?;
        let records = txn.open_table(RECORDS).map_err(DbError::from)?;
        let value = records
            .get(record_key)
            .map_err(DbError::from)?
            .map(|g| g.value().to_vec());
        Ok(value)
    }

    /// Every record key held (at most [`Caps::max_mailboxes`] of them), so a restarted
    /// relay can tell its network layer what it serves.
    pub fn keys(&self) -> Result<Vec<[u8; 32]>, ReadError> {
        let txn = self.db.begin_read().map_err(DbError::from)?;
        let summary = txn.open_table(SUMMARY).map_err(DbError::from)?;
        let mut keys = Vec::new();
        for row in summary.iter().map_err(DbError::from)? {
            keys.push(row.map_err(DbError::from)?.0.value());
        }
        Ok(keys)
    }

    /// Counts of what is held.
    pub fn stats(&self) -> Stats {
        self.lock().totals
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the cache ahead of the database
        // (entries go back in only after a commit), so the state is still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The held copy of `key`, taken out of the cache or decoded from its record (as
    /// seen by the open write transaction). `None` if there is none, or it no longer
    /// decodes (then the caller's merge replaces it).
    fn held(
        &self,
        state: &mut State,
        t: &Tables<'_>,
        key: &Key,
        now_ms: u64,
    ) -> Result<Option<Mailbox>, DbError> {
        if let Some(mb) = state.cache.take(key) {
            return Ok(Some(mb));
        }
        let Some(guard) = t.records.get(key)? else {
            return Ok(None);
        };
        match Mailbox::decode(guard.value(), now_ms, &self.caps.mailbox) {
            Ok((mb, rejected)) => {
                if !rejected.is_empty() {
                    warn!(
                        rejected = rejected.len(),
                        "held mailbox has invalid entries"
                    );
                }
                Ok(Some(mb))
            }
            Err(e) => {
                warn!("held mailbox record no longer decodes, replacing it: {e}");
                Ok(None)
            }
        }
    }
}

fn open_tables(txn: &redb::WriteTransaction) -> Result<Tables<'_>, DbError> {
    Ok(Tables {
        records: txn.open_table(RECORDS)?,
        summary: txn.open_table(SUMMARY)?,
        owner: txn.open_table(OWNER)?,
    })
}

fn read_summary(t: &Tables<'_>, key: &Key) -> Result<Option<Summary>, DbError> {
    Ok(t.summary.get(key)?.map(|g| Summary::from_row(g.value())))
}

fn write_record(
    t: &mut Tables<'_>,
    key: &Key,
    owner: &interlink_core::IdentityKey,
    encoded: &[u8],
    s: Summary,
) -> Result<(), DbError> {
    t.records.insert(key, encoded)?;
    t.summary.insert(key, s.row())?;
    t.owner.insert(key, *owner.as_bytes())?;
    Ok(())
}

fn remove_record(t: &mut Tables<'_>, key: &Key) -> Result<(), DbError> {
    t.records.remove(key)?;
    t.summary.remove(key)?;
    t.owner.remove(key)?;
    Ok(())
}

fn add_summary(totals: &mut Stats, s: Summary) {
    totals.envelopes = totals.envelopes.saturating_add(s.envelopes);
    totals.bytes = totals.bytes.saturating_add(s.bytes);
}

fn sub_summary(totals: &mut Stats, s: Summary) {
    totals.envelopes = totals.envelopes.saturating_sub(s.envelopes);
    totals.bytes = totals.bytes.saturating_sub(s.bytes);
}

/// Gives every record without an owner row one, read from the record itself: once,
/// for a file written before the owner table existed (afterwards the tables agree).
fn fill_owners(t: &mut Tables<'_>) -> Result<(), DbError> {
    if t.owner.len()? == t.summary.len()? {
        return Ok(());
    }
    let Tables { records, owner, .. } = t;
    for row in records.iter()? {
        let (k, v) = row?;
        let key = k.value();
        let has_owner = owner.get(&key)?.is_some();
        if has_owner {
            continue;
        }
        match mailbox::record_owner(v.value()) {
            Some(o) => {
                owner.insert(&key, *o.as_bytes())?;
            }
            None => warn!("a held record names no owner; it is not counted per owner"),
        }
    }
    Ok(())
}

/// Bytes held per owner identity, from the summary and owner tables (no record is read).
fn read_owners(
    db: &Database,
) -> Result<std::collections::HashMap<interlink_core::IdentityKey, u64>, DbError> {
    let txn = db.begin_read()?;
    let summary = txn.open_table(SUMMARY)?;
    let owner = txn.open_table(OWNER)?;
    let mut owners = std::collections::HashMap::new();
    for row in owner.iter()? {
        let (k, o) = row?;
        let bytes = summary
            .get(k.value())?
            .map_or(0, |g| Summary::from_row(g.value()).bytes);
        *owners
            .entry(interlink_core::IdentityKey::from_bytes(o.value()))
            .or_insert(0u64) += bytes;
    }
    Ok(owners)
}

/// Totals from the summary table (a scan of three integers per mailbox).
fn read_totals(db: &Database) -> Result<Stats, DbError> {
    let txn = db.begin_read()?;
    let summary = txn.open_table(SUMMARY)?;
    let mut totals = Stats::default();
    for row in summary.iter()? {
        let (_, v) = row?;
        totals.mailboxes += 1;
        add_summary(&mut totals, Summary::from_row(v.value()));
    }
    Ok(totals)
}

#[cfg(test)]
mod kill_tests;
#[cfg(test)]
mod tests;
