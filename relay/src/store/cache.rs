//! A bounded cache of decoded mailboxes.
//!
//! Merging a put needs the held copy decoded, and decoding verifies every envelope's
//! signature again: with a few hundred envelopes in a mailbox that is most of the cost
//! of a put. Each held envelope was verified when it was first stored, so the store
//! keeps the decoded copies of recently used mailboxes. It is only a cache: the
//! database is the truth, an entry is replaced only after the transaction that wrote
//! its record committed, and an evicted mailbox is decoded again from its record.
//!
//! Bounded by an estimate of the memory the decoded copies take —
//! [`DECODED_SIZE_FACTOR`] times the size of the records they mirror — evicting the
//! least recently used.

use std::collections::{BTreeMap, HashMap};

use interlink_core::mailbox::Mailbox;

/// Memory a decoded mailbox takes per byte of its record: each envelope is held as its
/// parsed body, its signed body bytes and its wire bytes, plus map overhead. Measured
/// at 4.9 for mailboxes of 100 sealed 256-byte messages (`RELAY_BENCH_DECODED_FACTOR=1
/// cargo bench -p interlink-relay --bench store`).
pub const DECODED_SIZE_FACTOR: usize = 5;

/// A mailbox's record key.
pub(crate) type Key = [u8; 32];

#[derive(Debug)]
struct Entry {
    mailbox: Mailbox,
    bytes: usize,
    last_use: u64,
}

/// Decoded mailboxes by record key, taking at most `max_bytes` (estimated).
#[derive(Debug)]
pub(crate) struct DecodedCache {
    entries: HashMap<Key, Entry>,
    /// `last_use` tick → key: the eviction order.
    by_use: BTreeMap<u64, Key>,
    bytes: usize,
    max_bytes: usize,
    tick: u64,
}

impl DecodedCache {
    pub(crate) fn new(max_bytes: usize) -> Self {
        Self {
            entries: HashMap::new(),
            by_use: BTreeMap::new(),
            bytes: 0,
            max_bytes,
            tick: 0,
        }
    }

    /// The cached copy, marked as just used.
    #[cfg(test)]
    pub(crate) fn get(&mut self, key: &Key) -> Option<&Mailbox> {
        self.tick += 1;
        let tick = self.tick;
        let entry = self.entries.get_mut(key)?;
        self.by_use.remove(&entry.last_use);
        entry.last_use = tick;
        self.by_use.insert(tick, *key);
        Some(&entry.mailbox)
    }

    /// Takes the cached copy out (it goes back in after the commit that updates it).
    pub(crate) fn take(&mut self, key: &Key) -> Option<Mailbox> {
        let e = self.entries.remove(key)?;
        self.by_use.remove(&e.last_use);
        self.bytes -= e.bytes;
        Some(e.mailbox)
    }

    /// Caches `mailbox`, whose encoded record is `record_bytes` long, evicting the least
    /// recently used until it fits. A mailbox larger than the whole cache is not kept.
    pub(crate) fn insert(&mut self, key: Key, mailbox: Mailbox, record_bytes: usize) {
        self.remove(&key);
        let bytes = record_bytes.saturating_mul(DECODED_SIZE_FACTOR);
        if bytes > self.max_bytes {
            return;
        }
        while self.bytes + bytes > self.max_bytes {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            if let Some(e) = self.entries.remove(&oldest) {
                self.bytes -= e.bytes;
            }
        }
        self.tick += 1;
        self.by_use.insert(self.tick, key);
        self.entries.insert(
            key,
            Entry {
                mailbox,
                bytes,
                last_use: self.tick,
            },
        );
        self.bytes += bytes;
    }

    /// Forgets `key` (its record was deleted, or a write of it failed).
    pub(crate) fn remove(&mut self, key: &Key) {
        self.take(key);
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
