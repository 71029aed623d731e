//! Store-and-forward: session mailboxes, as a holder sees them.
//!
//! The delivery engine decides what goes into a mailbox copy and what a fetched copy
//! means (`node::delivery`); this module holds copies for everyone. Copies arrive only
//! as mailbox-protocol `hold` requests: each is verified, merged with the one held and
//! stored — holders merge, never overwrite. A publication (the engine's `DhtPut`) is
//! merged with the held copy too, then handed to every connected peer, every relay and
//! the mailbox key's closest peers in the DHT (`node::fetching`). The copies live here,
//! not in Kademlia's record store: Kademlia answers a get from its store to anyone, and
//! a copy names senders, ids and times that only its owner may read (PROTOCOL §8.5).

use std::{
    collections::{HashMap, HashSet, VecDeque},
    time::Duration,
};

use interlink_core::{
    limits::MAX_MAILBOX_RECORD_BYTES,
    mailbox::{self, Mailbox},
    wire::{AckEntry, Refusal, RefusalCode, SessionAddr},
};
use libp2p::{PeerId, kad::RecordKey};
use tracing::{debug, warn};

use super::{
    Actor,
    hold_check::{Check, Checked},
    relay_store::HoldFrom,
};
use crate::{Event, Role};

/// Most copies waiting for the checker thread (`node::hold_check`) besides its queue.
const MAX_CHECK_BACKLOG: usize = 64;
/// Most bytes of copies waiting for the checker thread: what a flood of large copies
/// can make a session buffer (past it they are refused `over_budget`).
const MAX_CHECK_BACKLOG_BYTES: usize = 8 << 20;
/// How often a session fetches its own mailbox while awake.
pub(crate) const MAILBOX_POLL: Duration = Duration::from_secs(10);
/// A housekeeping tick this late means the process was stopped or the machine slept.
pub(crate) const WAKE_GAP: Duration = Duration::from_secs(3);

/// The mailbox protocol's state on a node: the copies it holds for others, its own
/// requests (holds, fetches) and publications, and what each peer may cost it.
pub(super) struct Service {
    pub(super) copies: Mailboxes,
    pub(super) fetching: super::fetching::Fetching,
    /// Our mailbox requests, a few on the wire per peer.
    pub(super) calls: super::mailbox_calls::MailboxCalls,
    pub(super) publishing: super::publishing::Publishing,
    /// What each remote peer may make this node verify and hold.
    pub(super) budgets: super::budgets::Budgets,
    /// A relay: what each source network may still add to its store.
    pub(super) network_budgets: super::budgets::NetworkBudgets,
    /// Peers shut out for breaking the mailbox stream bound.
    pub(super) blocking: super::blocking::Blocking,
    /// Pushes, a relay's holds at its store, late refusals.
    pub(super) server: super::mailbox_server::MailboxServer,
}

/// Mailbox state of a node (as a holder).
#[derive(Debug)]
pub(crate) struct Mailboxes {
    /// Puts refused, for diagnostics.
    refused_puts: u64,
    /// The encoded copies held, by DHT key: at most `max_records`, each at most
    /// [`MAX_MAILBOX_RECORD_BYTES`].
    records: HashMap<RecordKey, Vec<u8>>,
    /// Bytes of every copy in `records`, kept with it: every inbound `hold` is checked
    /// against it before anything is decoded.
    records_bytes: usize,
    max_records: usize,
    /// Decoded copies of `records`, so a merge does not verify every held envelope's
    /// signature again (each was verified when it was stored). Holds only keys
    /// `records` holds, so it is bounded by the same limit.
    held: HashMap<RecordKey, Mailbox>,
    /// Holds at the checker thread or waiting for it → who waits (bounded by the
    /// thread's queues and the backlog).
    checking: HashMap<u64, HoldFrom>,
    next_check: u64,
    /// Copies waiting for room in the checker thread's queue: an honest sender's burst
    /// of publications (one per message) waits here instead of being refused.
    backlog: VecDeque<Check>,
    backlog_bytes: usize,
}

impl Mailboxes {
    /// An empty store of at most `max_records` copies.
    pub(crate) fn new(max_records: usize) -> Self {
        Self {
            refused_puts: 0,
            records: HashMap::new(),
            records_bytes: 0,
            max_records,
            held: HashMap::new(),
            checking: HashMap::new(),
            next_check: 0,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
        }
    }

    pub(super) fn count_refused(&mut self) {
        self.refused_puts += 1;
    }

    /// Puts refused so far.
    pub(crate) fn refused(&self) -> u64 {
        self.refused_puts
    }

    /// Drops the decoded copy of `key` (the encoded one changed elsewhere: a relay's
    /// store verified and merged it).
    pub(super) fn forget_decoded(&mut self, key: &RecordKey) {
        self.held.remove(key);
    }

    /// The encoded copy held under `key`.
    pub(super) fn record(&self, key: &RecordKey) -> Option<&[u8]> {
        self.records.get(key).map(Vec::as_slice)
    }

    /// How many copies are held.
    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }

    /// Bytes of every copy held but `key`'s (our own outgoing ones too).
    fn bytes_besides(&self, key: &RecordKey) -> usize {
        self.records_bytes - self.records.get(key).map_or(0, Vec::len)
    }

    /// Stores `value` under `key` (replacing the copy held), within the limits.
    pub(super) fn store(&mut self, key: &RecordKey, value: Vec<u8>) -> Result<(), Refusal> {
        if value.len() > MAX_MAILBOX_RECORD_BYTES {
            return Err(Refusal::new(
                RefusalCode::TooLarge,
                format!(
                    "a mailbox record of {} bytes (limit {MAX_MAILBOX_RECORD_BYTES})",
                    value.len()
                ),
            ));
        }
        if !self.records.contains_key(key) && self.records.len() >= self.max_records {
            return Err(Refusal::new(
                RefusalCode::OverBudget,
                format!(
                    "this node holds {} mailboxes, its limit; send it to a relay or again later",
                    self.max_records
                ),
            ));
        }
        self.records_bytes += value.len();
        if let Some(old) = self.records.insert(key.clone(), value) {
            self.records_bytes -= old.len();
        }
        Ok(())
    }
}

pub(super) fn key_of(addr: &SessionAddr) -> RecordKey {
    RecordKey::new(&mailbox::record_key(&addr.key, &addr.session))
}

impl Actor {
    pub(super) fn own_addr(&self) -> Option<SessionAddr> {
        match &self.role {
            Role::Session(spec) => Some(SessionAddr {
                key: spec.identity.public(),
                session: spec.session.clone(),
            }),
            Role::Observer | Role::Relay(_) => None,
        }
    }

    /// The copy of a mailbox this node holds, if any: from the decoded cache, or decoded
    /// (and verified) from the store once.
    pub(super) fn held_mailbox(&mut self, key: &RecordKey) -> Option<&Mailbox> {
        if !self.mailbox.copies.held.contains_key(key) {
            let record = self.mailbox.copies.record(key)?;
            let (mb, _) =
                Mailbox::decode(record, self.now_ms(), &mailbox::Config::default()).ok()?;
            self.mailbox.copies.held.insert(key.clone(), mb);
        }
        self.mailbox.copies.held.get(key)
    }

    /// Counts of what this node holds of `addr`'s mailbox.
    pub(super) fn held_mailbox_info(&mut self, addr: &SessionAddr) -> Option<crate::HeldMailbox> {
        let mb = self.held_mailbox(&key_of(addr))?;
        Some(crate::HeldMailbox {
            pending: mb.len(),
            acked: mb.acked().len(),
        })
    }

    /// Merges `mailbox` into the held copy and publishes the result (the engine's
    /// publication `engine`, if it made it): a `hold` to every connected peer and relay,
    /// whose answers say what each keeps (`node::publishing`), and to the key's closest
    /// peers once a DHT query found them. Returns to how many peers and relays the copy
    /// was sent (not yet confirmed).
    pub(super) fn publish_mailbox(
        &mut self,
        mut merged: Mailbox,
        engine: Option<interlink_delivery::PutToken>,
    ) -> crate::HeldBy {
        let key = RecordKey::new(&merged.record_key());
        let cfg = mailbox::Config::default();
        let now = self.now_ms();
        if let Some(held) = self.held_mailbox(&key) {
            let _ = merged.merge(held, now, &cfg);
        }
        let record = merged.encode();
        // Straight to every connected peer, as a `hold` that is answered after the merge
        // with what the peer keeps; the closest peers that are not connected get theirs
        // when the DHT query finds them (`node::fetching`).
        let direct: Vec<PeerId> = self
            .peers
            .keys()
            .filter(|p| !self.relays.is_relay(p))
            .copied()
            .collect();
        let mut queries = self.hold_at_relays(&key, &record);
        let held_by = crate::HeldBy {
            outbox: false,
            relays_asked: queries.len(),
            peers_asked: direct.len(),
            confirmed: false,
        };
        let mut asked: HashSet<PeerId> = direct.iter().copied().collect();
        asked.extend(self.relay_peers());
        queries.extend(self.hold_at(direct, &key, &record));
        match self.mailbox.copies.store(&key, record) {
            Ok(()) => {
                self.mailbox.copies.held.insert(key.clone(), merged);
                queries.extend(self.place_at_closest(key, asked));
            }
            Err(reason) => warn!("mailbox copy not held here: {reason}"),
        }
        self.track_publication(queries, engine);
        held_by
    }

    /// An inbound Kademlia put (record filtering is on, so nothing is stored unless we
    /// do it): refused. Mailbox copies come only as `hold` requests, which answer what
    /// was kept, and Kademlia's store must stay empty, since it serves gets to anyone.
    pub(super) fn on_inbound_put(&mut self, source: PeerId) {
        let reason = Refusal::new(
            RefusalCode::Malformed,
            "mailbox copies are handed over with the mailbox protocol's hold (PROTOCOL §8.5), \
             not a DHT put",
        );
        self.refused_put(source, &reason);
    }

    /// Counts and reports a mailbox copy this node refused to hold.
    pub(super) fn refused_put(&mut self, source: PeerId, reason: &Refusal) {
        self.mailbox.copies.count_refused();
        debug!(%source, code = ?reason.code, %reason, "mailbox put refused");
        let _ = self.events.send(Event::Rejected {
            from: source,
            reason: reason.detail.clone(),
        });
    }

    /// Whether `key` is this session's own mailbox.
    fn is_own(&self, key: &RecordKey) -> bool {
        self.own_addr().is_some_and(|a| key_of(&a) == *key)
    }

    /// Refuses a copy of `len` bytes before it is decoded if it would take what this
    /// session holds for others past its budget. Our own mailbox is ours to hold
    /// whatever it weighs; others' copies share a byte budget, checked before the copy
    /// is decoded and its signatures verified (a flood then costs no CPU), and again
    /// for the merged copy.
    fn precheck_hold(&self, key: &RecordKey, len: usize) -> Result<(), Refusal> {
        if self.is_own(key) {
            return Ok(());
        }
        self.within_held_bytes(self.mailbox.copies.bytes_besides(key), len)
    }

    /// A session's `hold` from `peer`: checked for size here, then decoded and verified
    /// on the checker thread (`node::hold_check`); answered from
    /// [`Actor::on_hold_checked`]. Without the thread (it could not start) the check
    /// runs here.
    pub(super) fn session_hold(&mut self, key: RecordKey, record: Vec<u8>, from: HoldFrom) {
        if let Err(reason) = self.precheck_hold(&key, record.len()) {
            return self.answer_hold(from, Err(reason));
        }
        let Some(checker) = self.parts.hold_checker() else {
            let result = super::hold_check::check(&key, &record, self.now_ms())
                .and_then(|mb| self.hold_checked(&key, mb));
            return self.answer_hold(from, result);
        };
        let token = self.mailbox.copies.next_check;
        let len = record.len();
        let m = &mut self.mailbox.copies;
        match checker.send(Check { token, key, record }) {
            Ok(()) => {}
            Err(c)
                if m.backlog.len() < MAX_CHECK_BACKLOG
                    && m.backlog_bytes + len <= MAX_CHECK_BACKLOG_BYTES =>
            {
                m.backlog_bytes += len;
                m.backlog.push_back(c);
            }
            Err(_) => {
                return self.answer_hold(
                    from,
                    Err(Refusal::new(
                        RefusalCode::OverBudget,
                        "this session is checking other mailbox copies; send it again later",
                    )),
                );
            }
        }
        m.next_check += 1;
        m.checking.insert(token, from);
    }

    /// Moves waiting copies to the checker thread while its queue has room.
    fn feed_checker(&mut self) {
        let Some(checker) = self.parts.hold_checker() else {
            return;
        };
        let m = &mut self.mailbox.copies;
        while let Some(c) = m.backlog.pop_front() {
            let len = c.record.len();
            match checker.send(c) {
                Ok(()) => m.backlog_bytes = m.backlog_bytes.saturating_sub(len),
                Err(c) => {
                    m.backlog.push_front(c);
                    break;
                }
            }
        }
    }

    /// The checker thread's verdict on a copy: merged, stored and answered.
    pub(super) fn on_hold_checked(&mut self, checked: Checked) {
        self.feed_checker();
        let Some(from) = self.mailbox.copies.checking.remove(&checked.token) else {
            return;
        };
        let result = checked
            .result
            .and_then(|mb| self.hold_checked(&checked.key, mb));
        self.answer_hold(from, result);
    }

    /// Merges a verified copy someone handed us (`handed`, the copy under `key`) with
    /// the copy held and stores the result (in memory). A relay holds through its store
    /// thread instead (`Actor::relay_hold`). Returns the envelopes of the handed copy the
    /// merged one keeps (the `hold` answer).
    fn hold_checked(&mut self, key: &RecordKey, mut mb: Mailbox) -> Result<Vec<AckEntry>, Refusal> {
        let own = self.is_own(key);
        let held_for_others = (!own).then(|| self.mailbox.copies.bytes_besides(key));
        let now = self.now_ms();
        let cfg = mailbox::Config::default();
        let handed = mb.entries();
        if let Some(held) = self.held_mailbox(key) {
            let _ = mb.merge(held, now, &cfg);
        }
        let kept = mb.kept(handed);
        let encoded = mb.encode();
        let owner = mb.address();
        if let Some(held) = held_for_others {
            self.within_held_bytes(held, encoded.len())?;
        }
        self.store_record(key, encoded.clone())?;
        debug!(%owner, pending = mb.len(), acked = mb.acked().len(), "holding a mailbox copy");
        let pending = !mb.is_empty();
        // Held first: delivering our own mail acks it, and that publication merges with
        // the held copy.
        let verified = own.then(|| mb.clone());
        self.mailbox.copies.held.insert(key.clone(), mb);
        if let Some(copy) = verified {
            // Our own mailbox, handed to us (a holder's push): to the engine now, from
            // the copy verified above rather than decoding it again.
            self.own_copy(copy);
        } else if pending {
            self.push_to_owner(&owner, key, encoded);
        }
        Ok(kept)
    }

    /// Whether a copy of `bytes` beside `held` bytes of others keeps what a session
    /// holds within [`crate::Config::max_held_bytes`]. A relay's durable store has caps
    /// of its own.
    fn within_held_bytes(&self, held: usize, bytes: usize) -> Result<(), Refusal> {
        let cap = self.config.max_held_bytes;
        if held.saturating_add(bytes) > cap {
            return Err(Refusal::new(
                RefusalCode::OverBudget,
                format!(
                    "this session holds {held} bytes of mailbox copies (limit {cap}); send it \
                     to a relay or again later"
                ),
            ));
        }
        Ok(())
    }

    pub(super) fn store_record(&mut self, key: &RecordKey, value: Vec<u8>) -> Result<(), Refusal> {
        self.mailbox.copies.store(key, value)
    }
}

/// The refusal for input beyond a peer's budget (`node::budgets`).
pub(super) fn over_budget() -> Refusal {
    Refusal::new(
        RefusalCode::OverBudget,
        "this peer sent more than its budget allows; send it again later",
    )
}

impl Actor {
    /// Spends `bytes` of `peer`'s budget for mailbox copies; `false` if it is spent.
    pub(super) fn within_hold_budget(&mut self, peer: PeerId, bytes: usize) -> bool {
        self.mailbox
            .budgets
            .spend(peer, super::budgets::Kind::Hold, bytes, self.now_ms())
    }
}
