//! Where the sessions of each known identity were reached: the address book.
//!
//! Two machines on a routed network without multicast (a tailnet, two sites) have no
//! mDNS to meet again by. So for every paired identity, and for the user's own, the
//! node remembers the addresses its sessions were reached at — from an invite code, a
//! knock, identify, a signed announcement, a linked device, a tailnet probe — and dials
//! them at start and after a network change. Addresses are kept without `/p2p/<peer>`:
//! a host's well-known port is held by whichever session of the home runs there now,
//! so the peer behind an address changes and is learned again by identify.
//!
//! The book is bounded per identity ([`MAX_ADDRS_PER_IDENTITY`]) and in all
//! ([`MAX_IDENTITIES`]), ages an address out when it has not answered for
//! [`FORGET_UNANSWERED_MS`] (or never answered within [`FORGET_NEVER_ANSWERED_MS`] of
//! being learned), and is one file in the home shared by the user's sessions
//! (`addresses.json`), merged on save. Whoever calls [`AddressBook::remember`] decides
//! whose addresses are worth dialling (paired identities and the user's own, never a
//! stranger's): this file holds no proof of anything, it only says where to try.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use interlink_core::IdentityKey;
use serde::{Deserialize, Serialize};

/// File name of the address book in the home directory.
pub const ADDRESS_BOOK_FILE: &str = "addresses.json";
/// Most addresses kept per identity (a person's few machines, each with its well-known
/// port on a LAN, a tailnet and a public address, plus a session's own ports).
pub const MAX_ADDRS_PER_IDENTITY: usize = 12;
/// Most identities with addresses (the peers policy's own cap bounds who is paired).
pub const MAX_IDENTITIES: usize = 256;
/// Longest address kept, in bytes (as PROTOCOL §4.1 bounds an announced one).
pub const MAX_ADDR_BYTES: usize = 256;
/// An address that answered once is forgotten after this long without answering again.
pub const FORGET_UNANSWERED_MS: u64 = 30 * 24 * 3600 * 1000;
/// An address that never answered is forgotten this long after it was last learned.
pub const FORGET_NEVER_ANSWERED_MS: u64 = 7 * 24 * 3600 * 1000;
/// Most addresses per identity that are not a host's stable address (a session's
/// random ports, which change with every start): the rest of
/// [`MAX_ADDRS_PER_IDENTITY`] is kept for stable ones, so a burst of a peer's
/// short-lived sessions never pushes its host's well-known-port address out.
pub const MAX_UNSTABLE_ADDRS_PER_IDENTITY: usize = 4;
/// Largest address book file read.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Where an address was learned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A signed invite code (`join`).
    Invite,
    /// An invite knock or pair request the user admitted (the inviter side).
    Knock,
    /// libp2p identify from a connected session of the identity.
    Identify,
    /// A signed announcement of one of the identity's sessions.
    Announcement,
    /// The other machine of a device link.
    Device,
    /// A tailnet peer that answered at the well-known port.
    Tailnet,
    /// A connection that was established to it.
    Connection,
}

/// One remembered address.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The multiaddr, without a trailing `/p2p/<peer id>`.
    pub addr: String,
    /// Where it was learned last.
    pub source: Source,
    /// When it was learned last (ms since the Unix epoch).
    pub learned_ms: u64,
    /// When a dial to it last succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_ms: Option<u64>,
    /// Dials that failed since it last answered.
    #[serde(default)]
    pub failures: u32,
    /// A host's stable address (its well-known port), as the one who remembered it
    /// judged; only [`MAX_UNSTABLE_ADDRS_PER_IDENTITY`] others are kept.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stable: bool,
}

impl Entry {
    /// The last time anything vouched for it.
    fn freshness(&self) -> u64 {
        self.answered_ms.unwrap_or(0).max(self.learned_ms)
    }

    fn expired(&self, now_ms: u64) -> bool {
        match self.answered_ms {
            Some(at) => now_ms.saturating_sub(at.max(self.learned_ms)) > FORGET_UNANSWERED_MS,
            None => now_ms.saturating_sub(self.learned_ms) > FORGET_NEVER_ANSWERED_MS,
        }
    }

    /// Merges what another copy of the same address knows.
    fn merge(&mut self, other: &Entry) {
        self.stable |= other.stable;
        if other.learned_ms > self.learned_ms {
            self.learned_ms = other.learned_ms;
            self.source = other.source;
        }
        if other.answered_ms > self.answered_ms {
            self.answered_ms = other.answered_ms;
            self.failures = other.failures;
        } else if other.answered_ms == self.answered_ms {
            self.failures = self.failures.max(other.failures);
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    /// Identity (64 hex digits) → its addresses, best first.
    identities: BTreeMap<String, Vec<Entry>>,
}

/// Whether `addr` may be kept: a multiaddr's text form within the bound, no control
/// characters, no `/p2p/` peer suffix (strip it first) and no relay circuit (relays
/// are settings, not remembered addresses).
pub fn acceptable(addr: &str) -> bool {
    addr.starts_with('/')
        && addr.len() <= MAX_ADDR_BYTES
        && !addr.chars().any(char::is_control)
        && !addr.contains("/p2p/")
        && !addr.contains("/p2p-circuit")
}

/// The addresses kept per identity, in memory and (when a path is given) in the home.
#[derive(Debug, Default)]
pub struct AddressBook {
    path: Option<PathBuf>,
    book: BTreeMap<IdentityKey, Vec<Entry>>,
    /// Identities forgotten since the book was loaded (peers removed): a save does not
    /// merge them back from the file another session wrote before it forgot them too.
    /// Bounded like the book; learning an identity again takes it out.
    forgotten: std::collections::BTreeSet<IdentityKey>,
    /// Something changed since the last [`AddressBook::save`].
    dirty: bool,
}

impl AddressBook {
    /// The book kept in `path` (empty if `None`, or the file is missing or unreadable;
    /// entries that are not acceptable addresses are skipped). Entries past their age
    /// are kept until the next [`AddressBook::save`] ages them out.
    pub fn load(path: Option<PathBuf>) -> Self {
        let book = path.as_deref().map(read).unwrap_or_default();
        Self {
            path,
            book,
            forgotten: Default::default(),
            dirty: false,
        }
    }

    /// The addresses of `identity`, best first: answered most recently, then learned
    /// most recently.
    pub fn addresses(&self, identity: &IdentityKey) -> &[Entry] {
        self.book.get(identity).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Every identity with its addresses.
    pub fn iter(&self) -> impl Iterator<Item = (&IdentityKey, &[Entry])> {
        self.book.iter().map(|(k, v)| (k, v.as_slice()))
    }

    /// Number of identities with addresses.
    pub fn len(&self) -> usize {
        self.book.len()
    }

    /// Whether no address is kept.
    pub fn is_empty(&self) -> bool {
        self.book.is_empty()
    }

    /// Whether something changed since the last save.
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Remembers that `identity`'s sessions can be reached at `addr` (learned from
    /// `source` at `now_ms`). Returns whether the book changed; an unacceptable address
    /// changes nothing. Past the bounds, the least fresh address of the identity, or the
    /// identity whose addresses are least fresh, makes room.
    pub fn remember(
        &mut self,
        identity: IdentityKey,
        addr: &str,
        source: Source,
        now_ms: u64,
    ) -> bool {
        self.remember_with(identity, addr, source, false, now_ms)
    }

    /// [`AddressBook::remember`], saying whether `addr` is a host's stable address
    /// (its well-known port): at most [`MAX_UNSTABLE_ADDRS_PER_IDENTITY`] addresses of
    /// an identity are not.
    pub fn remember_with(
        &mut self,
        identity: IdentityKey,
        addr: &str,
        source: Source,
        stable: bool,
        now_ms: u64,
    ) -> bool {
        if !acceptable(addr) {
            return false;
        }
        self.forgotten.remove(&identity);
        if !self.book.contains_key(&identity) && self.book.len() >= MAX_IDENTITIES {
            let stalest = self
                .book
                .iter()
                .min_by_key(|(_, v)| v.iter().map(Entry::freshness).max().unwrap_or(0))
                .map(|(k, _)| *k);
            if let Some(k) = stalest {
                self.book.remove(&k);
            }
        }
        let entries = self.book.entry(identity).or_default();
        if let Some(e) = entries.iter_mut().find(|e| e.addr == addr) {
            // Refreshing a known address often (every announcement) writes nothing new
            // unless a day passed, so the file is not rewritten on every heartbeat.
            if now_ms.saturating_sub(e.learned_ms) < 24 * 3600 * 1000
                && e.source == source
                && (e.stable || !stable)
            {
                return false;
            }
            e.learned_ms = e.learned_ms.max(now_ms);
            e.source = source;
            e.stable |= stable;
        } else {
            entries.push(Entry {
                addr: addr.to_owned(),
                source,
                learned_ms: now_ms,
                answered_ms: None,
                failures: 0,
                stable,
            });
        }
        order_and_bound(entries);
        self.dirty = true;
        true
    }

    /// Notes that a dial to `addr` succeeded at `now_ms` (for every identity listing it).
    pub fn answered(&mut self, addr: &str, now_ms: u64) {
        for e in self.book.values_mut().flatten().filter(|e| e.addr == addr) {
            // Once an hour is enough to keep an address from ageing out.
            if e.failures != 0 || e.answered_ms.is_none_or(|at| now_ms >= at + 3600 * 1000) {
                e.answered_ms = Some(now_ms);
                e.failures = 0;
                self.dirty = true;
            }
        }
        for entries in self.book.values_mut() {
            order_and_bound(entries);
        }
    }

    /// Notes that a dial to `addr` failed.
    pub fn failed(&mut self, addr: &str) {
        for e in self.book.values_mut().flatten().filter(|e| e.addr == addr) {
            e.failures = e.failures.saturating_add(1);
            self.dirty = true;
        }
    }

    /// Forgets every address of `identity` (a peer removed), also in the file at the
    /// next save.
    pub fn forget(&mut self, identity: &IdentityKey) {
        if self.book.remove(identity).is_some() {
            self.dirty = true;
        }
        if self.forgotten.len() < MAX_IDENTITIES {
            self.forgotten.insert(*identity);
        }
    }

    /// Lets a save merge `identity`'s addresses from the file again (it is a peer
    /// again: another command of the user, `join`, may have written them there).
    pub fn unforget(&mut self, identity: &IdentityKey) {
        self.forgotten.remove(identity);
    }

    /// Forgets one address of `identity` (to make room for a better one). Returns
    /// whether it was kept.
    pub fn remove(&mut self, identity: &IdentityKey, addr: &str) -> bool {
        let Some(entries) = self.book.get_mut(identity) else {
            return false;
        };
        let before = entries.len();
        entries.retain(|e| e.addr != addr);
        let removed = entries.len() != before;
        if entries.is_empty() {
            self.book.remove(identity);
        }
        self.dirty |= removed;
        removed
    }

    /// Ages out what expired at `now_ms`, then writes the book, merged with what other
    /// sessions of the user saved meanwhile. Without a path only the ageing happens.
    pub fn save(&mut self, now_ms: u64) -> std::io::Result<()> {
        if let Some(path) = &self.path {
            for (identity, theirs) in read(path) {
                if self.forgotten.contains(&identity) {
                    continue;
                }
                if !self.book.contains_key(&identity) && self.book.len() >= MAX_IDENTITIES {
                    continue;
                }
                let ours = self.book.entry(identity).or_default();
                for t in theirs {
                    match ours.iter_mut().find(|o| o.addr == t.addr) {
                        Some(o) => o.merge(&t),
                        None => ours.push(t),
                    }
                }
                order_and_bound(ours);
            }
        }
        for entries in self.book.values_mut() {
            entries.retain(|e| !e.expired(now_ms));
        }
        self.book.retain(|_, v| !v.is_empty());
        self.dirty = false;
        let Some(path) = &self.path else {
            return Ok(());
        };
        let file = File {
            version: 1,
            identities: self
                .book
                .iter()
                .map(|(k, v)| (k.to_hex(), v.clone()))
                .collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
        // Losing the last save to a crash of the machine only means learning again.
        crate::atomic::write_file_unsynced(path, &bytes)
    }
}

fn order_and_bound(entries: &mut Vec<Entry>) {
    entries.sort_by(|a, b| {
        b.answered_ms
            .cmp(&a.answered_ms)
            .then(a.failures.cmp(&b.failures))
            .then(b.stable.cmp(&a.stable))
            .then(b.learned_ms.cmp(&a.learned_ms))
    });
    let mut unstable = 0;
    entries.retain(|e| {
        unstable += usize::from(!e.stable);
        e.stable || unstable <= MAX_UNSTABLE_ADDRS_PER_IDENTITY
    });
    entries.truncate(MAX_ADDRS_PER_IDENTITY);
}

fn read(path: &Path) -> BTreeMap<IdentityKey, Vec<Entry>> {
    let Some(parsed) = crate::small_file::read::<File>(path, MAX_FILE_BYTES) else {
        return BTreeMap::new();
    };
    parsed
        .identities
        .into_iter()
        .filter_map(|(k, mut v)| {
            let identity: IdentityKey = k.parse().ok()?;
            v.retain(|e| acceptable(&e.addr));
            order_and_bound(&mut v);
            (!v.is_empty()).then_some((identity, v))
        })
        .take(MAX_IDENTITIES)
        .collect()
}

#[cfg(test)]
#[path = "address_book_tests.rs"]
mod tests;
