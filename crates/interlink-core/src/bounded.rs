//! The one bounded map of the code base: at most a fixed number of entries, and when a
//! new key would pass it, the entry used least recently leaves — in O(1), whatever the
//! size, so a peer that makes a full map evict on every request costs no scan.
//!
//! Every map a remote peer can fill (per-peer budgets, blocked peers, routing hints,
//! sealing contexts) is one of these with a named capacity; "used" means looked up
//! with [`LruMap::touch`] or written with [`LruMap::entry`], never a plain read.

use std::hash::Hash;

use hashlink::{LinkedHashMap, linked_hash_map::Entry};

/// A map of at most `cap` entries, least recently used first.
#[derive(Clone, Debug)]
pub struct LruMap<K: Hash + Eq, V> {
    map: LinkedHashMap<K, V>,
    cap: usize,
}

impl<K: Hash + Eq, V> LruMap<K, V> {
    /// An empty map holding at most `cap` entries (at least one).
    pub fn new(cap: usize) -> Self {
        Self {
            map: LinkedHashMap::new(),
            cap: cap.max(1),
        }
    }

    /// The entry of `key`, made most recently used, inserted with `make` if missing —
    /// after the least recently used entry left, when the map was full; that entry is
    /// returned beside it.
    pub fn entry(&mut self, key: K, make: impl FnOnce() -> V) -> (&mut V, Option<(K, V)>) {
        let evicted = if !self.map.contains_key(&key) && self.map.len() >= self.cap {
            self.map.pop_front()
        } else {
            None
        };
        let value = match self.map.entry(key) {
            Entry::Occupied(mut found) => {
                found.to_back();
                found.into_mut()
            }
            Entry::Vacant(missing) => missing.insert(make()),
        };
        (value, evicted)
    }

    /// The entry of `key`, made most recently used.
    pub fn touch(&mut self, key: &K) -> Option<&mut V> {
        self.map.to_back(key)
    }

    /// The entry of `key`, leaving the order alone.
    pub fn get(&self, key: &K) -> Option<&V> {
        self.map.get(key)
    }

    /// The entry of `key` to change, leaving the order alone.
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.map.get_mut(key)
    }

    /// Removes `key`'s entry.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        self.map.remove(key)
    }

    /// The least recently used entry.
    pub fn oldest(&self) -> Option<(&K, &V)> {
        self.map.front()
    }

    /// Removes and returns the least recently used entry.
    pub fn pop_oldest(&mut self) -> Option<(K, V)> {
        self.map.pop_front()
    }

    /// Whether `key` has an entry.
    pub fn contains_key(&self, key: &K) -> bool {
        self.map.contains_key(key)
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The entries, least recently used first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + '_ {
        self.map.iter()
    }

    /// Keeps the entries `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        self.map.retain(|k, v| keep(k, v));
    }
}

#[cfg(test)]
#[path = "bounded_tests.rs"]
mod tests;

/// How fast a [`TokenBucket`] fills: at most `burst` tokens, `per` more every
/// `period_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    /// The most the bucket holds.
    pub burst: u64,
    /// Tokens added every `period_ms`.
    pub per: u64,
    /// See `per`.
    pub period_ms: u64,
}

/// The one rate limiter of the code base: a token bucket over milliseconds passed in
/// (so it runs the same under a simulator's clock). The level may go below zero when a
/// cost is only known afterwards ([`TokenBucket::charge`]); the debt is refilled first.
/// Time that has not yet made a whole token is kept, not lost at the next refill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenBucket {
    level: i64,
    at_ms: u64,
}

impl TokenBucket {
    /// A bucket holding `rate.burst` tokens at `now_ms`.
    pub fn full(rate: Rate, now_ms: u64) -> Self {
        Self {
            level: i64::try_from(rate.burst).unwrap_or(i64::MAX),
            at_ms: now_ms,
        }
    }

    /// An empty bucket at `now_ms`.
    pub fn empty(now_ms: u64) -> Self {
        Self {
            level: 0,
            at_ms: now_ms,
        }
    }

    /// Adds what `rate` gives for the time since the last refill, up to its burst.
    pub fn refill(&mut self, rate: Rate, now_ms: u64) {
        let burst = i64::try_from(rate.burst).unwrap_or(i64::MAX);
        let elapsed = now_ms.saturating_sub(self.at_ms);
        let added = elapsed.saturating_mul(rate.per) / rate.period_ms.max(1);
        let level = self
            .level
            .saturating_add(i64::try_from(added).unwrap_or(i64::MAX));
        if level >= burst {
            self.level = burst;
            self.at_ms = self.at_ms.max(now_ms);
        } else {
            self.level = level;
            // Only the time that made whole tokens is spent.
            self.at_ms += added.saturating_mul(rate.period_ms.max(1)) / rate.per.max(1);
        }
    }

    /// Takes `n` tokens if the bucket holds them.
    pub fn try_take(&mut self, n: u64) -> bool {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        if n > self.level {
            return false;
        }
        self.level -= n;
        true
    }

    /// Takes `n` tokens whatever the level (it may go into debt).
    pub fn charge(&mut self, n: u64) {
        self.level = self
            .level
            .saturating_sub(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// The tokens held (negative: a debt).
    pub fn level(&self) -> i64 {
        self.level
    }
}

#[cfg(test)]
#[path = "bounded_bucket_tests.rs"]
mod bucket_tests;
