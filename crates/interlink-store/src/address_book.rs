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
mod tests {
    use interlink_core::Identity;

    use super::*;

    const DAY: u64 = 24 * 3600 * 1000;

    fn id(n: u8) -> IdentityKey {
        Identity::from_seed(&[n; 32]).public()
    }

    #[test]
    fn remembers_merges_across_sessions_and_ages_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(ADDRESS_BOOK_FILE);
        let mut one = AddressBook::load(Some(path.clone()));
        let mut two = AddressBook::load(Some(path.clone()));
        let t0 = 1_800_000_000_000;
        assert!(one.remember(id(1), "/ip4/10.0.0.2/tcp/7385", Source::Invite, t0));
        assert!(
            !one.remember(id(1), "/ip4/10.0.0.2/tcp/7385", Source::Invite, t0 + 5),
            "a refresh within a day changes nothing"
        );
        assert!(!one.remember(id(1), "/ip4/10.0.0.2/tcp/1/p2p/12D3Koo", Source::Invite, t0));
        assert!(!one.remember(id(1), "ip4/10.0.0.2", Source::Invite, t0));
        one.save(t0).unwrap();
        assert!(two.remember(
            id(2),
            "/ip4/10.0.0.3/udp/7385/quic-v1",
            Source::Announcement,
            t0
        ));
        two.answered("/ip4/10.0.0.3/udp/7385/quic-v1", t0 + 1);
        two.save(t0 + 1).unwrap();
        let back = AddressBook::load(Some(path.clone()));
        assert_eq!(back.len(), 2, "the second session's save kept the first's");
        assert_eq!(back.addresses(&id(2))[0].answered_ms, Some(t0 + 1));
        // Never answered: gone after a week; answered: kept for a month after.
        let mut later = AddressBook::load(Some(path.clone()));
        later.save(t0 + 8 * DAY).unwrap();
        assert!(later.addresses(&id(1)).is_empty());
        assert_eq!(later.addresses(&id(2)).len(), 1);
        later.save(t0 + 31 * DAY).unwrap();
        assert!(later.is_empty());
        // A damaged file reads as nothing.
        std::fs::write(&path, b"{not json").unwrap();
        assert!(AddressBook::load(Some(path)).is_empty());
    }

    #[test]
    fn bounded_per_identity_and_in_all_keeping_what_answered() {
        let mut book = AddressBook::load(None);
        let t0 = 1_800_000_000_000;
        book.remember(id(1), "/ip4/10.0.0.1/tcp/7385", Source::Invite, t0);
        book.answered("/ip4/10.0.0.1/tcp/7385", t0);
        for port in 0..100u64 {
            book.remember(
                id(1),
                &format!("/ip4/10.0.0.9/tcp/{}", 1000 + port),
                Source::Announcement,
                t0 + port,
            );
        }
        let kept = book.addresses(&id(1));
        assert_eq!(kept.len(), MAX_UNSTABLE_ADDRS_PER_IDENTITY);
        assert_eq!(
            kept[0].addr, "/ip4/10.0.0.1/tcp/7385",
            "the answered one first"
        );
        // Stable addresses (a host's well-known port) fill the rest; random ports
        // learned after them do not push them out.
        for host in 0..20u64 {
            book.remember_with(
                id(1),
                &format!("/ip4/10.0.1.{host}/tcp/7385"),
                Source::Invite,
                true,
                t0 + 200 + host,
            );
        }
        for port in 0..20u64 {
            book.remember(
                id(1),
                &format!("/ip4/10.0.0.9/tcp/{}", 3000 + port),
                Source::Announcement,
                t0 + 300 + port,
            );
        }
        let kept = book.addresses(&id(1));
        assert_eq!(kept.len(), MAX_ADDRS_PER_IDENTITY);
        let stable = kept.iter().filter(|e| e.stable).count();
        assert_eq!(stable, MAX_ADDRS_PER_IDENTITY - 1, "{kept:?}");
        assert_eq!(kept[0].addr, "/ip4/10.0.0.1/tcp/7385");
        for n in 0..=255u8 {
            book.remember(
                id(n),
                "/ip4/10.1.0.1/tcp/7385",
                Source::Knock,
                t0 + 1000 + u64::from(n),
            );
        }
        for n in 0..40u8 {
            let mut seed = [7u8; 32];
            seed[0] = n;
            let newcomer = Identity::from_seed(&seed).public();
            book.remember(newcomer, "/ip4/10.2.0.1/tcp/7385", Source::Knock, t0 + 5000);
        }
        assert_eq!(book.len(), MAX_IDENTITIES);
        book.failed("/ip4/10.0.0.1/tcp/7385");
        assert!(book.is_dirty());
        book.forget(&id(1));
        assert!(book.addresses(&id(1)).is_empty());
    }

    #[test]
    fn a_forgotten_identity_is_not_merged_back_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(ADDRESS_BOOK_FILE);
        let t0 = 1_800_000_000_000;
        let mut one = AddressBook::load(Some(path.clone()));
        one.remember(id(1), "/ip4/10.0.0.2/tcp/7385", Source::Invite, t0);
        one.remember(id(2), "/ip4/10.0.0.3/tcp/7385", Source::Invite, t0);
        one.save(t0).unwrap();
        let mut two = AddressBook::load(Some(path.clone()));
        two.forget(&id(1));
        assert!(two.remove(&id(2), "/ip4/10.0.0.3/tcp/7385"));
        assert!(!two.remove(&id(2), "/ip4/10.0.0.3/tcp/7385"));
        two.save(t0).unwrap();
        let back = AddressBook::load(Some(path.clone()));
        assert!(
            back.addresses(&id(1)).is_empty(),
            "forgotten stays forgotten"
        );
        // A single address removed comes back from the file (another session may still
        // know it answers); only a forgotten identity stays out.
        assert_eq!(back.addresses(&id(2)).len(), 1);
        // A peer again, its addresses written by another command: merged again.
        let mut three = AddressBook::load(Some(path.clone()));
        three.forget(&id(2));
        three.unforget(&id(2));
        three.save(t0).unwrap();
        assert_eq!(
            AddressBook::load(Some(path.clone()))
                .addresses(&id(2))
                .len(),
            1
        );
        // Learned again: kept again.
        two.remember(id(1), "/ip4/10.0.0.2/tcp/7385", Source::Knock, t0 + 1);
        two.save(t0 + 1).unwrap();
        assert_eq!(AddressBook::load(Some(path)).addresses(&id(1)).len(), 1);
    }
}
