//! Owner-only fetch, and placing copies at a mailbox's closest peers.
//!
//! A mailbox copy names senders, their sessions, message ids, times and kinds in the
//! clear (a holder needs them to merge and keep quotas), so a holder hands it to its
//! owner only: the owner signs a [`MailboxFetch`] naming the mailbox, the holder it asks
//! (its PeerId, so the holder cannot replay it elsewhere) and the time (so a copy of it
//! goes stale), and sends it over the mailbox protocol (PROTOCOL §8.5). Kademlia is used
//! for routing only — finding the mailbox key's closest peers — and its record store
//! stays empty, because it answers a get from its store to anyone.
//!
//! Publishing (`node::mailbox`) hands a copy to every connected peer and relay at once,
//! then to the closest peers a query finds; fetching asks every relay and connected
//! peer at once, then the closest peers the same query finds. Both are one
//! `get_closest_peers` query, told apart by its id.

use std::collections::{HashMap, HashSet};

use interlink_core::wire::{
    MailboxFetch, MailboxOp, MailboxOutcome, MailboxRequest, SessionAddr, Signed, VERSION,
};
use libp2p::{
    PeerId,
    kad::{self, RecordKey},
};
use serde_bytes::ByteBuf;
use tracing::{debug, warn};

use super::{
    Actor,
    budgets::Kind,
    mailbox::key_of,
    mailbox_calls::Purpose,
    publishing::{PutAnswer, PutId},
};
use crate::Role;

/// Most fetches of our own mailbox in flight (one per holder asked).
const MAX_FETCHES_IN_FLIGHT: usize = 64;
/// Most placement queries (a publication's closest-peers lookup) in flight.
const MAX_PLACEMENTS: usize = 256;
/// What a fetch request costs its sender's budget besides the copy it is answered with:
/// the signature check.
const FETCH_REQUEST_COST: usize = 4096;

/// Fetch and placement state of a node.
#[derive(Debug, Default)]
pub(crate) struct Fetching {
    /// Fetches of our own mailbox in flight.
    in_flight: usize,
    /// Holders asked by the fetch running now, so its closest peers are asked once.
    asked: HashSet<PeerId>,
    /// Placement queries → the mailbox placed and the peers already handed the copy.
    placements: HashMap<kad::QueryId, (RecordKey, HashSet<PeerId>)>,
    /// Fetch requests refused, for diagnostics.
    refused: u64,
    /// Whether a fetch of our own was answered since the node started.
    any_answered: bool,
}

impl Fetching {
    /// Fetches refused.
    pub(super) fn refused(&self) -> u64 {
        self.refused
    }

    /// One of our fetches ended; `answered`: with an answer, not a failure. Whether
    /// it is the first answer since the node started.
    pub(super) fn ended(&mut self, answered: bool) -> bool {
        self.in_flight = self.in_flight.saturating_sub(1);
        let first = answered && !self.any_answered;
        self.any_answered |= answered;
        first
    }
}

impl Actor {
    /// Starts finding `key`'s closest peers, to hand them the copy held under it once
    /// found; the query joins the publication (none past [`MAX_PLACEMENTS`]: the copy
    /// still went to every connected peer and relay).
    pub(super) fn place_at_closest(
        &mut self,
        key: RecordKey,
        asked: HashSet<PeerId>,
    ) -> Option<PutId> {
        if self.mailbox.fetching.placements.len() >= MAX_PLACEMENTS {
            return None;
        }
        self.presence_input(interlink_core::presence::node::Input::DhtNeeded);
        let query = self
            .swarm
            .behaviour_mut()
            .kad
            .get_closest_peers(key.to_vec());
        self.mailbox.fetching.placements.insert(query, (key, asked));
        Some(PutId::Closest(query))
    }

    /// Runs the fetch of this session's own mailbox if one is owed and can run: from
    /// every relay and connected peer at once, then from the mailbox key's closest
    /// peers once the DHT has a peer to ask (it joins the DHT only once presence has
    /// settled, `node::discovery`), and from the copy this node holds itself.
    pub(super) fn fetch_own_mailbox(&mut self) {
        let Some(me) = self.own_addr() else { return };
        let Some(d) = self.parts.delivery() else {
            return;
        };
        let Some(started) = d.fetch_owed() else {
            return;
        };
        if self.peers.is_empty() {
            return;
        }
        if !started {
            // A new fetch: every holder may be asked again.
            self.mailbox.fetching.asked.clear();
            let key = key_of(&me);
            if let Some(copy) = self.held_mailbox(&key).filter(|m| !m.is_empty()).cloned() {
                self.feed(interlink_delivery::Input::MailboxFetched { copy });
            }
        }
        // Relays and connected peers now (those asked already are skipped).
        let mut holders = self.relay_peers();
        holders.extend(self.peers.keys().filter(|p| !self.relays.is_relay(p)));
        self.fetch_from(holders, &me);
        let dht_empty = self
            .swarm
            .behaviour_mut()
            .kad
            .kbuckets()
            .all(|b| b.num_entries() == 0);
        if dht_empty {
            // Until the DHT has a peer, a query finds nothing: the closest peers are
            // asked when it has (`RoutingUpdated` runs this again).
            if let Some(d) = self.parts.delivery_mut() {
                d.fetch_waits_for_dht();
            }
            return;
        }
        let query = self
            .swarm
            .behaviour_mut()
            .kad
            .get_closest_peers(key_of(&me).to_vec());
        if let Some(d) = self.parts.delivery_mut() {
            d.fetch_running(query);
        }
    }

    /// Ends the own mailbox's fetch still waiting on the DHT, so the next starts at
    /// once: after the host moved, the running query waits on peers it reached over
    /// connections that are now dead, for as long as its timeout.
    pub(super) fn abandon_own_fetch(&mut self) {
        let Some(query) = self.parts.delivery_mut().and_then(|d| d.take_own_query()) else {
            return;
        };
        if let Some(mut q) = self.swarm.behaviour_mut().kad.query_mut(&query) {
            q.finish();
        }
    }

    /// Sends each of `holders` not asked yet by this fetch a signed fetch of `me`'s
    /// mailbox, addressed to it.
    fn fetch_from(&mut self, holders: Vec<PeerId>, me: &SessionAddr) {
        let Role::Session(spec) = &self.role else {
            return;
        };
        let identity = spec.identity.clone();
        let now = self.now_ms();
        for holder in holders {
            if self.mailbox.fetching.in_flight >= MAX_FETCHES_IN_FLIGHT {
                break;
            }
            if holder == *self.swarm.local_peer_id() || !self.mailbox.fetching.asked.insert(holder)
            {
                continue;
            }
            let body = MailboxFetch {
                v: VERSION,
                owner: me.key,
                owner_session: me.session.clone(),
                holder: ByteBuf::from(holder.to_bytes()),
                ts: now,
            };
            let signed = match Signed::sign(body, &identity) {
                Ok(s) => s,
                Err(e) => {
                    warn!("mailbox fetch not signed: {e}");
                    return;
                }
            };
            let request = MailboxRequest {
                v: VERSION,
                op: MailboxOp::Fetch {
                    request: ByteBuf::from(signed.to_bytes()),
                },
            };
            match self.call_mailbox(holder, request, Purpose::Fetch) {
                Ok(_) => self.mailbox.fetching.in_flight += 1,
                Err(e) => debug!(%holder, ?e, "mailbox fetch not sent"),
            }
        }
    }

    /// A step of a closest-peers query: a placement hands the copy to the peers found,
    /// our own fetch asks them; other queries are not ours.
    pub(super) fn on_closest_peers(
        &mut self,
        id: kad::QueryId,
        result: Result<kad::GetClosestPeersOk, kad::GetClosestPeersError>,
        last: bool,
    ) {
        let peers = match result {
            Ok(ok) => ok.peers,
            Err(kad::GetClosestPeersError::Timeout { peers, .. }) => peers,
        };
        for p in &peers {
            for addr in &p.addrs {
                self.swarm.add_peer_address(p.peer_id, addr.clone());
            }
        }
        let found: Vec<PeerId> = peers.into_iter().map(|p| p.peer_id).collect();
        if let Some((key, asked)) = self.mailbox.fetching.placements.get_mut(&id) {
            let new: Vec<PeerId> = found
                .into_iter()
                .filter(|p| asked.insert(*p) && !self.relays.is_relay(p))
                .collect();
            let key = key.clone();
            if let Some(record) = self.mailbox.copies.record(&key).map(<[u8]>::to_vec) {
                let holds = self.hold_at(new, &key, &record);
                self.add_to_publication(PutId::Closest(id), holds);
            }
            if last {
                self.mailbox.fetching.placements.remove(&id);
                self.on_put_result(PutId::Closest(id), PutAnswer::Ended);
            }
            return;
        }
        let Some(d) = self.parts.delivery_mut() else {
            return;
        };
        if d.own_query() != Some(id) {
            return;
        }
        if last {
            d.take_own_query();
        }
        if let Some(me) = self.own_addr() {
            self.fetch_from(found, &me);
        }
    }

    /// A holder: answers a fetch with the copy held, if the request is the mailbox
    /// owner's, fresh, and addressed to this node.
    pub(super) fn answer_fetch(&mut self, peer: PeerId, request: &[u8]) -> MailboxOutcome {
        let over_budget = MailboxOutcome::Refused {
            reason: super::mailbox::over_budget(),
        };
        // The signature check is paid for before it is made, the copy before it is sent.
        let now = self.now_ms();
        let cost = FETCH_REQUEST_COST + request.len();
        if !self.mailbox.budgets.spend(peer, Kind::Fetch, cost, now) {
            self.mailbox.fetching.refused += 1;
            return over_budget;
        }
        let me = self.swarm.local_peer_id().to_bytes();
        let key = match Signed::<MailboxFetch>::check_fetch(request, &me, now) {
            Ok(key) => RecordKey::new(&key),
            Err(reason) => {
                self.mailbox.fetching.refused += 1;
                debug!(%peer, %reason, "mailbox fetch refused");
                return MailboxOutcome::Refused { reason };
            }
        };
        let record = self.mailbox.copies.record(&key).map(<[u8]>::to_vec);
        let size = record.as_ref().map_or(0, Vec::len);
        if size > 0 && !self.mailbox.budgets.spend(peer, Kind::Fetch, size, now) {
            self.mailbox.fetching.refused += 1;
            return over_budget;
        }
        MailboxOutcome::Record {
            record: record.map(ByteBuf::from),
        }
    }
}
