//! The sweep: dropping what passed its window.

use interlink_core::mailbox::Mailbox;
use redb::{ReadableDatabase, ReadableTable};

use super::{
    DbError, Key, MailboxStore, SUMMARY, SWEEP_BATCH, Summary, SweepError, SweepReport,
    add_summary, is_vacant, open_tables, read_summary, remove_record, sub_summary, write_record,
};

impl MailboxStore {
    /// Drops every envelope and ack past its window at `now_ms`, re-normalising each
    /// mailbox with something due through the CRDT, and deletes mailboxes left with
    /// no envelope and no live ack. Commits every [`SWEEP_BATCH`] mailboxes.
    pub fn sweep(&self, now_ms: u64) -> Result<SweepReport, SweepError> {
        let due: Vec<Key> = {
            let txn = self.db.begin_read().map_err(DbError::from)?;
            let summary = txn.open_table(SUMMARY).map_err(DbError::from)?;
            let mut due = Vec::new();
            for row in summary.iter().map_err(DbError::from)? {
                let (k, v) = row.map_err(DbError::from)?;
                if Summary::from_row(v.value()).sweep_due <= now_ms {
                    due.push(k.value());
                }
            }
            due
        };
        let mut report = SweepReport::default();
        for chunk in due.chunks(SWEEP_BATCH) {
            self.sweep_batch(chunk, now_ms, &mut report)?;
        }
        Ok(report)
    }

    fn sweep_batch(
        &self,
        keys: &[Key],
        now_ms: u64,
        report: &mut SweepReport,
    ) -> Result<(), SweepError> {
        let cfg = &self.caps.mailbox;
        let mut state = self.lock();
        let mut totals = state.totals;
        let mut touched: Vec<(Key, Option<(Mailbox, usize)>)> = Vec::new();
        // (owner, bytes before, bytes after) per swept record.
        let mut owner_changes: Vec<(interlink_core::IdentityKey, u64, u64)> = Vec::new();
        let txn = self.db.begin_write().map_err(DbError::from)?;
        {
            let mut t = open_tables(&txn)?;
            for key in keys {
                let Some(old) = read_summary(&t, key)? else {
                    continue; // deleted since the scan
                };
                let Some(mut mb) = self.held(&mut state, &t, key, now_ms)? else {
                    continue;
                };
                report.mailboxes_checked += 1;
                mb.sweep(now_ms, cfg);
                // Counted against the committed summary: decoding already drops what
                // expired, so `sweep`'s own count would miss it.
                let dropped = old.envelopes.saturating_sub(mb.len() as u64);
                report.envelopes_dropped += usize::try_from(dropped).unwrap_or(usize::MAX);
                sub_summary(&mut totals, old);
                let owner = *mb.owner();
                if is_vacant(&mb) {
                    owner_changes.push((owner, old.bytes, 0));
                    remove_record(&mut t, key)?;
                    totals.mailboxes = totals.mailboxes.saturating_sub(1);
                    report.mailboxes_deleted += 1;
                    touched.push((*key, None));
                } else {
                    let encoded = mb.encode();
                    let new = Summary::of(&mb, encoded.len(), cfg);
                    write_record(&mut t, key, &owner, &encoded, new)?;
                    add_summary(&mut totals, new);
                    owner_changes.push((owner, old.bytes, new.bytes));
                    touched.push((*key, Some((mb, encoded.len()))));
                }
            }
        }
        txn.commit().map_err(DbError::from)?;
        state.totals = totals;
        for (owner, before, after) in owner_changes {
            let used = state.owner_bytes(&owner);
            state.set_owner_bytes(owner, used.saturating_sub(before).saturating_add(after));
        }
        for (key, entry) in touched {
            match entry {
                Some((mb, bytes)) => state.cache.insert(key, mb, bytes),
                None => state.cache.remove(&key),
            }
        }
        Ok(())
    }
}
