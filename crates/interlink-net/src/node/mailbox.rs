//! Store-and-forward: session mailboxes in the Kademlia DHT.
//!
//! A message whose live attempt fails goes into the recipient session's mailbox record
//! (key and merge rules from `interlink_core::mailbox`). Kademlia runs with record
//! filtering, so every inbound put reaches this module, which verifies it, merges it
//! with the copy held and stores the result — holders merge, never overwrite. The owner
//! fetches its mailbox from every holder on start, on wake and every few seconds,
//! delivers what is new to its inbox, and publishes a signed ack so holders drop it;
//! the senders of what it stored get a signed receipt (`node::receipting`).

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use interlink_core::{
    limits::{MAILBOX_RETENTION_MS, MAX_ACK_IDS},
    mailbox::{self, Mailbox},
    wire::{Ack, AckEntry, Envelope, Refusal, RefusalCode, SessionAddr, Signed, VERSION},
};
use libp2p::{
    PeerId,
    kad::{self, Record, RecordKey, store::RecordStore as _},
};
use tracing::{debug, warn};

use super::{Actor, queueing::PutId};
use crate::{Event, Role};

/// How often a session fetches its own mailbox while awake.
pub(crate) const MAILBOX_POLL: Duration = Duration::from_secs(10);
/// A housekeeping tick this late means the process was stopped or the machine slept.
pub(crate) const WAKE_GAP: Duration = Duration::from_secs(3);
/// Most peers remembered as unreachable at once.
const MAX_UNREACHABLE: usize = 1024;

/// Mailbox state of a node.
#[derive(Debug, Default)]
pub(crate) struct Mailboxes {
    /// The fetch of our own mailbox in flight: what it has gathered so far, and the
    /// (sender, id)s handled (delivered, or refused for good), acked as they are handled.
    fetch: Option<Fetch>,
    last_fetch: Option<Instant>,
    /// A fetch is owed (start, wake, first connection) as soon as one can run.
    fetch_due: bool,
    /// Peers that failed a live attempt and have not shown life since.
    unreachable: HashSet<PeerId>,
    /// Puts refused, for diagnostics.
    pub(crate) refused_puts: u64,
    /// Decoded copies of the records in the Kademlia store, so a merge does not verify
    /// every held envelope's signature again (each was verified when it was stored).
    /// Holds only keys the store holds, so it is bounded by the store's record limit.
    held: HashMap<RecordKey, Mailbox>,
}

impl Mailboxes {
    pub(crate) fn is_unreachable(&self, peer: &PeerId) -> bool {
        self.unreachable.contains(peer)
    }

    pub(crate) fn mark_unreachable(&mut self, peer: PeerId) {
        if self.unreachable.len() < MAX_UNREACHABLE {
            self.unreachable.insert(peer);
        }
    }

    /// The peer showed life (connected, announced): try it live again.
    pub(crate) fn alive(&mut self, peer: &PeerId) {
        self.unreachable.remove(peer);
    }

    pub(crate) fn request_fetch(&mut self) {
        self.fetch_due = true;
    }
}

#[derive(Debug)]
struct Fetch {
    /// The DHT query; `None` for a copy a relay sent outside any query.
    query: Option<kad::QueryId>,
    gathered: Mailbox,
    handled: Vec<AckEntry>,
    /// How many of `handled` are acked already.
    acked: usize,
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
        if !self.mailboxes.held.contains_key(key) {
            let record = self.swarm.behaviour_mut().kad.store_mut().get(key)?;
            let (mb, _) =
                Mailbox::decode(&record.value, crate::now_ms(), &mailbox::Config::default())
                    .ok()?;
            self.mailboxes.held.insert(key.clone(), mb);
        }
        self.mailboxes.held.get(key)
    }

    /// Counts of what this node holds of `addr`'s mailbox.
    pub(super) fn held_mailbox_info(&mut self, addr: &SessionAddr) -> Option<crate::HeldMailbox> {
        let mb = self.held_mailbox(&key_of(addr))?;
        Some(crate::HeldMailbox {
            pending: mb.len(),
            acked: mb.acked().len(),
        })
    }

    /// Merges `mailbox` into the held copy and publishes the result to the DHT; returns
    /// to how many connected peers and relays the copy was sent (not yet confirmed).
    pub(super) fn publish_mailbox(&mut self, mut merged: Mailbox) -> crate::HeldBy {
        let key = RecordKey::new(&merged.record_key());
        let cfg = mailbox::Config::default();
        let now = crate::now_ms();
        if let Some(held) = self.held_mailbox(&key) {
            let _ = merged.merge(held, now, &cfg);
        }
        let record = Record::new(key.clone(), merged.encode());
        // Straight to every connected peer that answers, too: the iterative put waits
        // for the closest peers, and a stopped one (often the recipient) stalls it
        // until the query times out, so nothing would be stored anywhere.
        let direct: Vec<PeerId> = self
            .peers
            .keys()
            .filter(|p| !self.mailboxes.is_unreachable(p) && !self.relays.is_relay(p))
            .copied()
            .collect();
        let mut queries = self.hold_at_relays(&record);
        let mut held_by = crate::HeldBy {
            outbox: false,
            relays_asked: queries.len(),
            peers_asked: direct.len(),
        };
        if !direct.is_empty() {
            queries.push(PutId::Kad(self.swarm.behaviour_mut().kad.put_record_to(
                record.clone(),
                direct.into_iter(),
                kad::Quorum::One,
            )));
        }
        // `put_record` stores the record locally first.
        match self
            .swarm
            .behaviour_mut()
            .kad
            .put_record(record, kad::Quorum::One)
        {
            Ok(query) => {
                queries.push(PutId::Kad(query));
                self.mailboxes.held.insert(key, merged);
            }
            Err(e) => {
                warn!("mailbox record not stored: {e}");
                held_by.peers_asked = 0;
            }
        }
        self.track_publication(queries);
        held_by
    }

    /// An inbound put (record filtering is on, so nothing is stored unless we do it).
    pub(super) fn on_inbound_put(&mut self, source: PeerId, record: Record) {
        if let Err(reason) = self.hold_record(&record.key, &record.value) {
            self.refused_put(source, &reason);
        }
    }

    /// Counts and reports a mailbox copy this node refused to hold.
    pub(super) fn refused_put(&mut self, source: PeerId, reason: &Refusal) {
        self.mailboxes.refused_puts += 1;
        debug!(%source, code = ?reason.code, %reason, "mailbox put refused");
        let _ = self.events.send(Event::Rejected {
            from: source,
            reason: reason.detail.clone(),
        });
    }

    /// Verifies a mailbox copy someone handed us, merges it with the copy held and
    /// stores the result — on a relay, durably before this returns.
    pub(super) fn hold_record(&mut self, key: &RecordKey, value: &[u8]) -> Result<(), Refusal> {
        let now = crate::now_ms();
        if let Role::Relay(spec) = &self.role {
            let raw: [u8; 32] = key
                .as_ref()
                .try_into()
                .map_err(|_| Refusal::new(RefusalCode::Malformed, "record key is not 32 bytes"))?;
            let merged = spec.store.hold(&raw, value, now).map_err(|r| r.to_wire())?;
            // The store verified it; the decoded cache is filled again only if asked.
            self.mailboxes.held.remove(key);
            return self.store_record(key, merged);
        }
        let cfg = mailbox::Config::default();
        let mut mb = match Mailbox::decode(value, now, &cfg) {
            Err(e) => return Err(e.refusal()),
            Ok((_, rejected)) if !rejected.is_empty() => {
                return Err(Refusal::new(
                    rejected[0].reason.refusal().code,
                    format!("{} invalid entries, first: {}", rejected.len(), rejected[0]),
                ));
            }
            Ok((mb, _)) => mb,
        };
        if RecordKey::new(&mb.record_key()) != *key {
            return Err(Refusal::new(
                RefusalCode::WrongMailbox,
                "record key does not match the mailbox",
            ));
        }
        if let Some(held) = self.held_mailbox(key) {
            let _ = mb.merge(held, now, &cfg);
        }
        let encoded = mb.encode();
        self.store_record(key, encoded.clone())?;
        let owner = mb.address();
        debug!(%owner, pending = mb.len(), acked = mb.acked().len(), "holding a mailbox copy");
        let own = Some(&owner) == self.own_addr().as_ref();
        let pending = !mb.is_empty();
        // Held first: delivering our own mail acks it, and that publication merges with
        // the held copy.
        let verified = own.then(|| mb.clone());
        self.mailboxes.held.insert(key.clone(), mb);
        if let Some(copy) = verified {
            // Our own mailbox, handed to us (a holder's push): deliver it now, from the
            // copy verified above rather than decoding it again.
            self.merge_own(&copy);
        } else if pending {
            self.push_to_owner(&owner, key, encoded);
        }
        Ok(())
    }

    fn store_record(&mut self, key: &RecordKey, value: Vec<u8>) -> Result<(), Refusal> {
        let record = Record {
            key: key.clone(),
            value,
            publisher: None,
            expires: None,
        };
        self.swarm
            .behaviour_mut()
            .kad
            .store_mut()
            .put(record)
            .map_err(|e| Refusal::new(RefusalCode::OverBudget, format!("store full: {e}")))
    }

    /// Starts fetching our own mailbox from every holder, if due and none is running.
    /// What this node holds itself is delivered at once.
    pub(super) fn maybe_fetch_mailbox(&mut self, now: Instant) {
        if self.inbox.is_none() || self.mailboxes.fetch.is_some() {
            return;
        }
        let periodic = self
            .mailboxes
            .last_fetch
            .is_none_or(|t| now.duration_since(t) >= MAILBOX_POLL);
        if !(self.mailboxes.fetch_due || periodic) || self.peers.is_empty() {
            return;
        }
        // Until identify has fed Kademlia a peer, a query finds nothing and the next
        // attempt would be a whole poll interval away.
        if self
            .swarm
            .behaviour_mut()
            .kad
            .kbuckets()
            .all(|b| b.num_entries() == 0)
        {
            return;
        }
        let Some(me) = self.own_addr() else { return };
        let key = key_of(&me);
        let gathered = self
            .held_mailbox(&key)
            .cloned()
            .unwrap_or_else(|| Mailbox::new(me.key, me.session.clone()));
        let query = self.swarm.behaviour_mut().kad.get_record(key.clone());
        let mut fetch = Fetch {
            query: Some(query),
            gathered,
            handled: Vec::new(),
            acked: 0,
        };
        self.deliver_gathered(&mut fetch);
        self.mailboxes.fetch = Some(fetch);
        self.mailboxes.fetch_due = false;
        self.mailboxes.last_fetch = Some(now);
        self.fetch_from_relays(&key);
    }

    /// Progress of a get-record query: each holder's copy is merged and what is new in
    /// it delivered at once (a slow or absent holder must not delay the others); the
    /// ack goes out when the query ends.
    pub(super) fn on_get_record(
        &mut self,
        id: kad::QueryId,
        result: Result<kad::GetRecordOk, kad::GetRecordError>,
        last: bool,
    ) {
        if self
            .mailboxes
            .fetch
            .as_ref()
            .is_none_or(|f| f.query != Some(id))
        {
            self.on_prefetch_record(id, result, last);
            return;
        }
        if let Ok(kad::GetRecordOk::FoundRecord(found)) = result {
            self.on_own_copy(&found.record.value);
        }
        if last {
            self.mailboxes.fetch = None;
        }
    }

    /// A holder's copy of our own mailbox (from the DHT query, or sent by a relay):
    /// merged into the fetch running, or into a one-off one, and what is new in it
    /// delivered and acked at once. A copy may carry invalid entries; the valid ones are
    /// still ours.
    pub(super) fn on_own_copy(&mut self, value: &[u8]) {
        let cfg = mailbox::Config::default();
        if let Ok((copy, _)) = Mailbox::decode(value, crate::now_ms(), &cfg) {
            self.merge_own(&copy);
        }
    }

    /// Merges an already verified copy of our own mailbox (see [`Self::on_own_copy`]).
    fn merge_own(&mut self, copy: &Mailbox) {
        let cfg = mailbox::Config::default();
        let now = crate::now_ms();
        let Some(me) = self.own_addr() else { return };
        if copy.address() != me {
            return;
        }
        let mut fetch = match self.mailboxes.fetch.take() {
            Some(f) => f,
            None => Fetch {
                query: None,
                gathered: self
                    .held_mailbox(&key_of(&me))
                    .cloned()
                    .unwrap_or_else(|| Mailbox::new(me.key, me.session.clone())),
                handled: Vec::new(),
                acked: 0,
            },
        };
        let _ = fetch.gathered.merge(copy, now, &cfg);
        self.deliver_gathered(&mut fetch);
        if fetch.query.is_some() {
            self.mailboxes.fetch = Some(fetch);
        }
    }

    /// Delivers every envelope of the gathered mailbox not handled yet.
    fn deliver_gathered(&mut self, fetch: &mut Fetch) {
        let pending: Vec<Signed<Envelope>> = fetch
            .gathered
            .pending()
            .filter(|e| {
                !fetch
                    .handled
                    .contains(&AckEntry(e.body().sender, e.body().msg_id))
            })
            .cloned()
            .collect();
        let refs: Vec<&Signed<Envelope>> = pending.iter().collect();
        let results = self.store_envelopes(&refs, MAILBOX_RETENTION_MS);
        let mut stored = Vec::new();
        for (env, result) in pending.iter().zip(results) {
            match result {
                Ok(()) => stored.push(env),
                // Our own storage failed: not acked, so it is fetched again next time.
                Err(refusal) if refusal.is_retryable() => continue,
                // Not for us to keep (not a peer, stale…): it is acked too, so holders
                // stop carrying what will never be delivered.
                Err(reason) => {
                    debug!(msg_id = %env.body().msg_id, %reason, "queued message refused");
                }
            }
            fetch
                .handled
                .push(AckEntry(env.body().sender, env.body().msg_id));
        }
        self.ack_handled(fetch);
        // Nobody waits on the line for collected mail: tell its senders.
        self.receipt_collected(&stored);
    }

    /// Signs an ack for what was handled since the last one and publishes the mailbox
    /// with it at once, so holders drop those envelopes and keep tombstones. Not at the
    /// end of the fetch: a holder that never answers holds the query open until its
    /// timeout, and meanwhile senders would count delivered mail against the mailbox's
    /// room.
    fn ack_handled(&mut self, fetch: &mut Fetch) {
        if fetch.handled.len() <= fetch.acked {
            return;
        }
        let Role::Session(spec) = &self.role else {
            return;
        };
        let identity = spec.identity.clone();
        let session = spec.session.clone();
        let cfg = mailbox::Config::default();
        let now = crate::now_ms();
        for entries in fetch.handled[fetch.acked..].chunks(MAX_ACK_IDS) {
            let ack = Ack {
                v: VERSION,
                owner: identity.public(),
                owner_session: session.clone(),
                entries: entries.to_vec(),
                ts: now,
            };
            match Signed::sign(ack, &identity) {
                Ok(ack) => {
                    if let Err(e) = fetch.gathered.apply_ack(ack, now, &cfg) {
                        warn!("own ack not applied: {e}");
                    }
                }
                Err(e) => warn!("cannot sign ack: {e}"),
            }
        }
        debug!(
            acked = fetch.handled.len() - fetch.acked,
            pending = fetch.gathered.len(),
            "acking delivered mail"
        );
        fetch.acked = fetch.handled.len();
        let _ = self.publish_mailbox(fetch.gathered.clone());
    }
}
