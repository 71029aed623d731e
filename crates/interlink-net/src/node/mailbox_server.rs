//! The mailbox protocol's server side, on every node: `hold` merges a copy into what
//! the node holds (answered after the merge — on a relay, after the commit to disk),
//! `fetch` returns the copy held to its owner (`node::fetching`); a changed copy is
//! pushed to its owner when it is connected here. And the client side's answers:
//! a session hands every mailbox copy it publishes to each relay it uses with `hold`
//! (`node::relay_client`), and asks them for its own mailbox whenever it fetches it.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use interlink_core::wire::{
    AckEntry, MailboxOp, MailboxOutcome, MailboxRequest, MailboxResponse, Refusal, RefusalCode,
    SessionAddr, VERSION,
};
use libp2p::{
    PeerId,
    kad::RecordKey,
    request_response::{self, ResponseChannel},
};
use serde_bytes::ByteBuf;
use tracing::{debug, info, warn};

use super::{
    Actor,
    exchange::Exchange,
    mailbox_calls::{CallId, Purpose},
    publishing::{PutAnswer, PutId},
    relay_store::{Held, Hold, HoldFrom},
    tarpit::Tarpit,
};
use crate::{Event, Role};

/// How late a mailbox request refused `over_budget` is answered.
const TARPIT_DELAY: Duration = Duration::from_secs(2);
/// Most late refusals waiting at once.
const MAX_TARPIT: usize = 1024;
/// Most mailboxes being pushed to their owners at once.
const MAX_PUSHES: usize = 256;

/// A mailbox answer: to whom, on what, saying what.
type Answer = (PeerId, ResponseChannel<MailboxResponse>, MailboxOutcome);

/// The server side's own state: pushes in flight, a relay's holds at its store
/// thread, the late refusals.
#[derive(Debug)]
pub(crate) struct MailboxServer {
    /// Mailboxes with a push in flight, and whether they changed since it left.
    pushing: HashMap<RecordKey, bool>,
    /// A relay: holds at its store thread → who waits (bounded by the thread's queues),
    /// and the network the copy came from, charged once it is committed.
    holds: HashMap<u64, (HoldFrom, Option<std::net::IpAddr>)>,
    next_hold: u64,
    /// A relay: holds refused because their source network's budget was spent.
    network_refused: u64,
    tarpit: Tarpit<Answer>,
}

impl Default for MailboxServer {
    fn default() -> Self {
        Self {
            pushing: HashMap::new(),
            holds: HashMap::new(),
            next_hold: 0,
            network_refused: 0,
            tarpit: Tarpit::new(TARPIT_DELAY, MAX_TARPIT),
        }
    }
}

impl MailboxServer {
    /// Whether a push of `key` may start: not while one is in flight (it is marked
    /// changed, to push again when answered), nor past [`MAX_PUSHES`].
    fn may_push(&mut self, key: &RecordKey) -> bool {
        if let Some(dirty) = self.pushing.get_mut(key) {
            *dirty = true;
            return false;
        }
        self.pushing.len() < MAX_PUSHES
    }

    fn pushing(&mut self, key: &RecordKey) {
        self.pushing.insert(key.clone(), false);
    }

    /// The push of `key` ended; whether the copy changed meanwhile.
    fn push_ended(&mut self, key: &RecordKey) -> bool {
        self.pushing.remove(key).unwrap_or(false)
    }

    fn next_hold(&self) -> u64 {
        self.next_hold
    }

    fn holding(&mut self, token: u64, from: HoldFrom, net: Option<std::net::IpAddr>) {
        self.next_hold += 1;
        self.holds.insert(token, (from, net));
    }

    fn held(&mut self, token: u64) -> Option<(HoldFrom, Option<std::net::IpAddr>)> {
        self.holds.remove(&token)
    }

    fn refused_network(&mut self) {
        self.network_refused += 1;
    }

    /// Holds refused because their source network's budget was spent.
    pub(crate) fn network_refusals(&self) -> u64 {
        self.network_refused
    }

    /// Keeps `answer` until it is due; gives it back when too many wait.
    fn answer_late(&mut self, answer: Answer, now: Instant) -> Result<(), Answer> {
        self.tarpit.hold(answer, now)
    }

    fn late_due(&mut self, now: Instant) -> Option<Answer> {
        self.tarpit.poll_due(now)
    }
}

impl Actor {
    /// The network `peer` is connected from (`node::budgets::source_network`).
    pub(super) fn source_network(&self, peer: &PeerId) -> Option<std::net::IpAddr> {
        self.peers
            .get(peer)
            .and_then(super::PeerInfo::best)
            .and_then(|c| super::budgets::source_network(c.get_remote_address()))
    }

    /// The relays this session uses.
    pub(super) fn relay_peers(&self) -> Vec<PeerId> {
        self.relays.relays().map(|(p, _)| *p).collect()
    }

    /// Sends `record` to every relay we use; returns the requests, for confirmation.
    pub(super) fn hold_at_relays(&mut self, key: &RecordKey, record: &[u8]) -> Vec<PutId> {
        let peers = self.relay_peers();
        self.hold_at(peers, key, record)
    }

    /// Hands `record` (the copy under `key`) to each of `peers` with `hold`; returns the
    /// requests.
    pub(super) fn hold_at(
        &mut self,
        peers: Vec<PeerId>,
        key: &RecordKey,
        record: &[u8],
    ) -> Vec<PutId> {
        peers
            .into_iter()
            .filter_map(|peer| {
                let request = MailboxRequest {
                    v: VERSION,
                    op: MailboxOp::Hold {
                        key: ByteBuf::from(key.to_vec()),
                        record: ByteBuf::from(record.to_vec()),
                    },
                };
                // A copy that cannot even wait is not handed to that peer; the
                // publication counts only the holds that went out.
                match self.call_mailbox(peer, request, Purpose::Hold) {
                    Ok(id) => Some(PutId::Hold(id)),
                    Err(e) => {
                        debug!(%peer, ?e, "mailbox copy not handed over");
                        None
                    }
                }
            })
            .collect()
    }

    pub(super) fn on_mailbox_protocol(
        &mut self,
        event: request_response::Event<MailboxRequest, MailboxResponse>,
    ) {
        let Some(exchange) = Exchange::of(event, "mailbox") else {
            return;
        };
        match exchange {
            Exchange::Asked {
                peer,
                connection,
                request,
                channel,
            } => {
                if request.op == MailboxOp::Unread {
                    // More mailbox streams at once than a connection may open (an honest
                    // node keeps 2 requests in flight): resetting each one costs this node
                    // a stream negotiation per retry, so the connection goes instead.
                    drop(channel);
                    self.shut_out(peer, connection);
                    return;
                }
                if let MailboxOp::Hold { record, .. } = &request.op
                    && !self.within_hold_budget(peer, record.len())
                {
                    let reason = super::mailbox::over_budget();
                    self.answer_hold(HoldFrom(peer, channel), Err(reason));
                    return;
                }
                match request {
                    MailboxRequest {
                        v: VERSION,
                        op: MailboxOp::Hold { key, record },
                    } => {
                        // Answered once the copy is checked (a session: off the Swarm
                        // task) or committed (a relay's store).
                        let from = HoldFrom(peer, channel);
                        if self.parts.relay_store().is_some() {
                            self.relay_hold(&key, record.into_vec(), from);
                        } else {
                            self.session_hold(
                                RecordKey::new(&key.as_slice()),
                                record.into_vec(),
                                from,
                            );
                        }
                    }
                    MailboxRequest {
                        v: VERSION,
                        op: MailboxOp::Fetch { request },
                    } => {
                        let outcome = self.answer_fetch(peer, &request);
                        self.respond_mailbox(peer, channel, outcome);
                    }
                    MailboxRequest { v, .. } => {
                        let reason = Refusal::new(
                            RefusalCode::UnsupportedVersion,
                            format!("mailbox protocol version {v}; this node speaks {VERSION}"),
                        );
                        self.send_mailbox_response(
                            peer,
                            channel,
                            MailboxOutcome::Refused { reason },
                        );
                    }
                }
            }
            Exchange::Ended { peer, id, result } => {
                let Some(calls) = self.end_call(id) else {
                    return;
                };
                // The connection it went on closed (a dead one, found by ping): the
                // peer may still be reachable on another.
                let connection_lost = matches!(
                    result,
                    Err(request_response::OutboundFailure::ConnectionClosed)
                );
                let outcome = result.ok().map(|r| r.outcome);
                if let Some(MailboxOutcome::Refused { reason }) = &outcome {
                    debug!(%peer, %reason, "a peer refused a mailbox request");
                }
                for (call, purpose) in calls {
                    self.on_mailbox_answer(peer, call, purpose, outcome.as_ref(), connection_lost);
                }
            }
        }
    }

    /// Whether `peer`'s word that it keeps a copy counts towards `queued`: a relay we
    /// use, or a node of a session of our own identity or of a peer. Any node may be
    /// handed a copy (the DHT's closest peers are strangers), but a stranger that
    /// answers "kept" and drops the copy would make a session without an outbox promise
    /// what nobody keeps.
    fn trusts_holder(&self, peer: &PeerId) -> bool {
        let roster = self.presence.roster();
        self.relays.is_relay(peer)
            || roster
                .announcements()
                .any(|a| a.body().peer_id() == Some(*peer) && roster.is_trusted(&a.body().identity))
    }

    /// One of our mailbox requests was answered (`None`: it failed, and
    /// `connection_lost` when the connection it went on closed): handed to the part of
    /// the node that made it.
    fn on_mailbox_answer(
        &mut self,
        peer: PeerId,
        call: CallId,
        purpose: Purpose,
        outcome: Option<&MailboxOutcome>,
        connection_lost: bool,
    ) {
        match purpose {
            Purpose::Push(key) => self.push_done(&key, outcome.is_some(), connection_lost),
            Purpose::Fetch => {
                if self.mailbox.fetching.ended(outcome.is_some()) {
                    // Once a run: a line an operator (and a process test) can wait for.
                    info!(holder = %peer, "own mailbox fetched");
                }
                if let Some(MailboxOutcome::Record {
                    record: Some(record),
                }) = outcome
                {
                    self.on_own_copy(record);
                }
                if outcome.is_some() {
                    self.emit(Event::MailboxFetched { holder: peer });
                }
            }
            Purpose::Hold => {
                let answer = match outcome {
                    Some(MailboxOutcome::Held { kept }) if self.trusts_holder(&peer) => {
                        PutAnswer::Kept(kept.clone())
                    }
                    Some(MailboxOutcome::Held { .. }) => {
                        debug!(%peer, "a holder we have no reason to trust says it keeps a copy; not counted");
                        PutAnswer::Ended
                    }
                    _ => PutAnswer::Ended,
                };
                self.on_put_result(PutId::Hold(call), answer);
            }
        }
    }

    /// Hands a mailbox copy with pending mail straight to its owner if it is connected
    /// here. A stopped owner reads the request the moment it resumes — before its wake
    /// detection or its next poll would fetch — like the predecessor's open long-poll.
    /// One push per mailbox is in flight; changes meanwhile are pushed when it is
    /// answered, and the copy again when the connection it went on closed under it (a
    /// dead connection beside a live one: the owner moved and dialled back) — not
    /// after a timeout: an owner that did not answer in time fetches on waking.
    pub(super) fn push_to_owner(&mut self, owner: &SessionAddr, key: &RecordKey, record: Vec<u8>) {
        if !self.mailbox.server.may_push(key) {
            return;
        }
        let Some(peer) = self
            .presence
            .roster()
            .get(owner)
            .and_then(|a| a.body().peer_id())
        else {
            return;
        };
        if !self.peers.contains_key(&peer) {
            return;
        }
        let request = MailboxRequest {
            v: VERSION,
            op: MailboxOp::Hold {
                key: ByteBuf::from(key.to_vec()),
                record: ByteBuf::from(record),
            },
        };
        match self.call_mailbox(peer, request, Purpose::Push(key.clone())) {
            Ok(_) => self.mailbox.server.pushing(key),
            // The owner fetches it on waking instead.
            Err(e) => debug!(%peer, ?e, "mailbox push not sent"),
        }
    }

    fn push_done(&mut self, key: &RecordKey, answered: bool, connection_lost: bool) {
        let dirty = self.mailbox.server.push_ended(key);
        if !(answered && dirty || connection_lost) {
            return;
        }
        let Some(mb) = self.held_mailbox(key).filter(|m| !m.is_empty()) else {
            return;
        };
        let (owner, record) = (mb.address(), mb.encode());
        self.push_to_owner(&owner, key, record);
    }

    fn send_mailbox_response(
        &mut self,
        peer: PeerId,
        channel: ResponseChannel<MailboxResponse>,
        outcome: MailboxOutcome,
    ) {
        let response = MailboxResponse {
            v: VERSION,
            outcome,
        };
        if self
            .swarm
            .behaviour_mut()
            .mailbox
            .send_response(channel, response)
            .is_err()
        {
            debug!(%peer, "mailbox response not sent: connection closed");
        }
    }

    /// A relay: hands a copy to its store thread; the peer's `hold` is answered when the
    /// thread reports back.
    pub(super) fn relay_hold(&mut self, key: &[u8], record: Vec<u8>, from: HoldFrom) {
        let refuse = |code, detail: &str| Refusal::new(code, detail);
        let net = self.source_network(&from.0);
        if let Some(net) = net
            && !self.mailbox.network_budgets.has_room(net, self.now_ms())
        {
            self.mailbox.server.refused_network();
            let reason = Refusal::new(
                RefusalCode::OverBudget,
                format!(
                    "this relay's store took all it takes from {net} for now \
                     (PROTOCOL §8.5); send it again later"
                ),
            );
            self.answer_hold(from, Err(reason));
            return;
        }
        let result = match (<[u8; 32]>::try_from(key), self.parts.relay_store()) {
            (Err(_), _) => Err(refuse(RefusalCode::Malformed, "record key is not 32 bytes")),
            (Ok(_), None) => Err(refuse(RefusalCode::NotASession, "this node is no relay")),
            (Ok(key), Some(store)) => {
                let token = self.mailbox.server.next_hold();
                store
                    .send(Hold { token, key, record })
                    .map(|()| token)
                    .map_err(|_| {
                        refuse(
                            RefusalCode::OverBudget,
                            "the relay's store is busy; send it again later",
                        )
                    })
            }
        };
        match result {
            Ok(token) => {
                self.mailbox.server.holding(token, from, net);
            }
            Err(reason) => self.answer_hold(from, Err(reason)),
        }
    }

    /// The relay's store thread finished a hold.
    pub(super) fn on_relay_held(&mut self, held: Held) {
        let Some((from, net)) = self.mailbox.server.held(held.token) else {
            return;
        };
        let key = RecordKey::new(&held.key);
        let result = match held.result {
            Ok(copy) => {
                if let Some(net) = net {
                    self.mailbox
                        .network_budgets
                        .charge(net, copy.grew_by, self.now_ms());
                }
                // The store verified it; the decoded cache is filled again only if asked.
                self.mailbox.copies.forget_decoded(&key);
                // An owner connected here gets the committed copy at once, as from a
                // session holder (`node::mailbox`), instead of on its next fetch.
                // Not to the owner that handed it (its own acks).
                if let Some(owner) = interlink_core::mailbox::record_address(&copy.record) {
                    let owner_peer = self
                        .presence
                        .roster()
                        .get(&owner)
                        .and_then(|a| a.body().peer_id());
                    if owner_peer != Some(from.0) {
                        self.push_to_owner(&owner, &key, copy.record.clone());
                    }
                }
                self.store_record(&key, copy.record).map(|()| copy.kept)
            }
            Err(r) => Err(r.to_wire()),
        };
        self.answer_hold(from, result);
    }

    pub(super) fn answer_hold(&mut self, from: HoldFrom, result: Result<Vec<AckEntry>, Refusal>) {
        let HoldFrom(peer, channel) = from;
        if let Err(reason) = &result {
            self.refused_put(peer, reason);
        }
        let outcome = match result {
            Ok(kept) => MailboxOutcome::Held { kept },
            Err(reason) => MailboxOutcome::Refused { reason },
        };
        self.respond_mailbox(peer, channel, outcome);
    }

    /// Answers a mailbox request; an `over_budget` refusal only after
    /// [`TARPIT_DELAY`] (`node::tarpit`). A peer past its budget is refused after its request was read
    /// in full; answering at once would let it send the next one at once, and a few
    /// peers streaming copies to be refused keep this node busy decrypting them
    /// (issue 13, item 2). Answered late, each request a peer keeps in flight costs it
    /// the delay. The requests waiting hold only their response channel (at most
    /// [`MAX_TARPIT`]; past it they are answered at once).
    fn respond_mailbox(
        &mut self,
        peer: PeerId,
        channel: ResponseChannel<MailboxResponse>,
        outcome: MailboxOutcome,
    ) {
        let over = matches!(
            &outcome,
            MailboxOutcome::Refused { reason } if reason.code == RefusalCode::OverBudget
        );
        let (peer, channel, outcome) = if over {
            match self
                .mailbox
                .server
                .answer_late((peer, channel, outcome), Instant::now())
            {
                Ok(()) => return,
                Err(now) => now,
            }
        } else {
            (peer, channel, outcome)
        };
        self.send_mailbox_response(peer, channel, outcome);
    }

    /// Sends the late refusals that are due (on the housekeeping tick).
    pub(super) fn flush_tarpit(&mut self, now: Instant) {
        while let Some((peer, channel, outcome)) = self.mailbox.server.late_due(now) {
            self.send_mailbox_response(peer, channel, outcome);
        }
    }

    /// A relay node: what its stored mailboxes are, held in memory from the start.
    pub(super) fn load_durable_mailboxes(&mut self) {
        let Role::Relay(spec) = &self.role else {
            return;
        };
        let store = spec.store.clone();
        let mut loaded = 0usize;
        for key in store.keys() {
            let Some(value) = store.get(&key) else {
                continue;
            };
            match self.mailbox.copies.store(&RecordKey::new(&key), value) {
                Ok(()) => loaded += 1,
                Err(e) => {
                    warn!("mailbox not served (still held on disk): {e}");
                    break;
                }
            }
        }
        info!(mailboxes = loaded, "relay: stored mailboxes loaded");
    }
}
