//! Store-and-forward: session mailboxes in the Kademlia DHT, as a holder sees them.
//!
//! The delivery engine decides what goes into a mailbox copy and what a fetched copy
//! means (`node::delivery`); this module holds copies for everyone. Kademlia runs with
//! record filtering, so every inbound put reaches it: it verifies the copy, merges it
//! with the one held and stores the result — holders merge, never overwrite. A
//! publication (the engine's `DhtPut`) is merged with the held copy too, then put to
//! the DHT, to every connected peer and to every relay.

use std::{collections::HashMap, time::Duration};

use interlink_core::{
    mailbox::{self, Mailbox},
    wire::{AckEntry, Refusal, RefusalCode, SessionAddr},
};
use libp2p::{
    PeerId,
    kad::{self, Record, RecordKey, store::RecordStore as _},
};
use tracing::{debug, warn};

use super::{Actor, publishing::PutId};
use crate::{Event, Role};

/// How often a session fetches its own mailbox while awake.
pub(crate) const MAILBOX_POLL: Duration = Duration::from_secs(10);
/// A housekeeping tick this late means the process was stopped or the machine slept.
pub(crate) const WAKE_GAP: Duration = Duration::from_secs(3);

/// Mailbox state of a node (as a holder).
#[derive(Debug, Default)]
pub(crate) struct Mailboxes {
    /// Puts refused, for diagnostics.
    pub(crate) refused_puts: u64,
    /// Decoded copies of the records in the Kademlia store, so a merge does not verify
    /// every held envelope's signature again (each was verified when it was stored).
    /// Holds only keys the store holds, so it is bounded by the store's record limit.
    pub(super) held: HashMap<RecordKey, Mailbox>,
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

    /// Merges `mailbox` into the held copy and publishes the result (the engine's
    /// publication `engine`, if it made it): a `hold` to every connected peer and relay,
    /// whose answers say what each keeps (`node::publishing`), and a DHT put. Returns to
    /// how many peers and relays the copy was sent (not yet confirmed).
    pub(super) fn publish_mailbox(
        &mut self,
        mut merged: Mailbox,
        engine: Option<interlink_delivery::PutToken>,
    ) -> crate::HeldBy {
        let key = RecordKey::new(&merged.record_key());
        let cfg = mailbox::Config::default();
        let now = crate::now_ms();
        if let Some(held) = self.held_mailbox(&key) {
            let _ = merged.merge(held, now, &cfg);
        }
        let record = Record::new(key.clone(), merged.encode());
        // Straight to every connected peer too, as a `hold` that is answered after the
        // merge with what the peer keeps: the iterative put waits for the closest peers,
        // a stopped one (often the recipient) stalls it until the query times out, and
        // its answer says nothing about what was stored.
        let direct: Vec<PeerId> = self
            .peers
            .keys()
            .filter(|p| !self.relays.is_relay(p))
            .copied()
            .collect();
        let mut queries = self.hold_at_relays(&record);
        let mut held_by = crate::HeldBy {
            outbox: false,
            relays_asked: queries.len(),
            peers_asked: direct.len(),
            confirmed: false,
        };
        queries.extend(self.hold_at(direct, &record));
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
        self.track_publication(queries, engine);
        held_by
    }

    /// An inbound put (record filtering is on, so nothing is stored unless we do it).
    pub(super) fn on_inbound_put(&mut self, source: PeerId, record: Record) {
        if !self.within_hold_budget(source, record.value.len()) {
            let reason = over_budget();
            self.refused_put(source, &reason);
            return;
        }
        if self.relay_store.is_some() {
            let key = record.key.to_vec();
            self.relay_hold(
                &key,
                record.value,
                super::relay_store::HoldFrom::Put(source),
            );
            return;
        }
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
    /// stores the result (in memory). A relay holds through its store thread instead
    /// (`Actor::relay_hold`). Returns the envelopes of the handed copy the merged one
    /// keeps (the `hold` answer).
    pub(super) fn hold_record(
        &mut self,
        key: &RecordKey,
        value: &[u8],
    ) -> Result<Vec<AckEntry>, Refusal> {
        // Our own mailbox is ours to hold whatever it weighs; others' copies share a
        // byte budget, checked before the copy is decoded and its signatures verified
        // (a flood then costs no CPU), and again for the merged copy.
        let own = self.own_addr().is_some_and(|a| key_of(&a) == *key);
        let held_for_others = (!own).then(|| self.held_bytes_besides(key));
        if let Some(held) = held_for_others {
            self.within_held_bytes(held, value.len())?;
        }
        let now = crate::now_ms();
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
        self.mailboxes.held.insert(key.clone(), mb);
        if let Some(copy) = verified {
            // Our own mailbox, handed to us (a holder's push): to the engine now, from
            // the copy verified above rather than decoding it again.
            self.own_copy(copy);
        } else if pending {
            self.push_to_owner(&owner, key, encoded);
        }
        Ok(kept)
    }

    /// Bytes of every copy in the store but `key`'s (its own outgoing ones too).
    fn held_bytes_besides(&mut self, key: &RecordKey) -> usize {
        self.swarm
            .behaviour_mut()
            .kad
            .store_mut()
            .records()
            .filter(|r| r.key != *key)
            .map(|r| r.value.len())
            .sum()
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
        self.budgets
            .spend(peer, super::budgets::Kind::Hold, bytes, crate::now_ms())
    }
}
