//! Relays, from both sides.
//!
//! Every node answers the mailbox protocol: `hold` merges a copy into what it holds
//! (answered after the merge — on a relay, after the commit to disk), `fetch` returns
//! the copy held to its owner (`node::fetching`). A session configured with relays
//! (`Config::relays`) dials them like bootstrap peers, listens through each one it
//! reaches (a circuit reservation, announced with its other addresses), hands every
//! mailbox copy it publishes to each of them with `hold`, and asks them for its own
//! mailbox whenever it fetches it. A relay node runs the circuit relay server and
//! counts the reservations and circuits it serves.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    time::{Duration, Instant},
};

use interlink_core::wire::{
    AckEntry, MailboxOp, MailboxOutcome, MailboxRequest, MailboxResponse, Refusal, RefusalCode,
    SessionAddr, VERSION,
};
use libp2p::{
    Multiaddr, PeerId,
    kad::RecordKey,
    multiaddr::Protocol,
    relay,
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
};
use crate::Role;

/// Most relays a session uses.
pub(crate) const MAX_RELAYS: usize = 8;
/// How late a mailbox request refused `over_budget` is answered.
const TARPIT_DELAY: Duration = Duration::from_secs(2);
/// Most late refusals waiting at once.
const MAX_TARPIT: usize = 1024;
/// Most mailboxes being pushed to their owners at once.
const MAX_PUSHES: usize = 256;
/// Peers counted as holding a reservation or circuit on this relay (each bounded by
/// the relay server's own limits; these sets only mirror them).
const MAX_SERVED: usize = 4096;
/// The first wait before a relay still reached over TCP only is dialled over QUIC
/// again…
const QUIC_RETRY_FIRST: Duration = Duration::from_secs(10);
/// …doubled after each dial that brought no QUIC connection, up to this.
const QUIC_RETRY_MAX: Duration = Duration::from_secs(300);

/// A relay this session reaches over TCP only, to be dialled over QUIC again.
#[derive(Debug)]
struct QuicRetry {
    /// The relay's listen addresses, as identify gave them.
    listen: Vec<Multiaddr>,
    next: Instant,
    wait: Duration,
}

/// Relay state of a node.
#[derive(Debug, Default)]
pub(crate) struct Relays {
    /// The relays this session uses: PeerId → address (with its `/p2p/`).
    configured: HashMap<PeerId, Multiaddr>,
    /// Relays a circuit listener was opened through.
    listening: HashSet<PeerId>,
    /// Relays reached over TCP only, to dial over QUIC again (at most the configured).
    quic_retry: HashMap<PeerId, QuicRetry>,
    /// Mailboxes with a push in flight, and whether they changed since it left.
    pushing: HashMap<RecordKey, bool>,
    /// Server side: peers holding a reservation here.
    pub(crate) reservations: HashSet<PeerId>,
    /// Server side: circuits open through here.
    pub(crate) circuits: usize,
    /// A relay: holds refused because their source network's budget was spent.
    pub(crate) network_refused: u64,
    /// A relay: holds at its store thread → who waits (bounded by the thread's queues),
    /// and the network the copy came from, charged once it is committed.
    holds: HashMap<u64, (HoldFrom, Option<std::net::IpAddr>)>,
    next_hold: u64,
    /// `over_budget` refusals waiting to be sent, oldest (soonest due) first.
    tarpit: VecDeque<(
        Instant,
        PeerId,
        ResponseChannel<MailboxResponse>,
        MailboxOutcome,
    )>,
}

impl Relays {
    /// The relays of `addrs` that name their PeerId; the others are logged and skipped.
    pub(crate) fn new(addrs: &[Multiaddr]) -> Self {
        let mut configured = HashMap::new();
        for addr in addrs.iter().take(MAX_RELAYS) {
            match addr.iter().last() {
                Some(Protocol::P2p(peer)) => {
                    configured.insert(peer, addr.clone());
                }
                _ => warn!(%addr, "relay address without /p2p/<peer id>; ignored"),
            }
        }
        Self {
            configured,
            ..Self::default()
        }
    }

    pub(crate) fn is_relay(&self, peer: &PeerId) -> bool {
        self.configured.contains_key(peer)
    }

    /// `target`'s address through each configured relay.
    pub(crate) fn circuits_to(&self, target: PeerId) -> Vec<Multiaddr> {
        self.configured
            .values()
            .map(|relay| {
                relay
                    .clone()
                    .with(Protocol::P2pCircuit)
                    .with(Protocol::P2p(target))
            })
            .collect()
    }
}

impl Actor {
    /// Registers the relays' addresses so requests to them can dial.
    pub(super) fn register_relays(&mut self) {
        for (peer, addr) in &self.relays.configured {
            self.swarm.add_peer_address(*peer, addr.clone());
        }
    }

    /// A relay told us its listen addresses (identify). A session that reached it over
    /// TCP only — RELAY.md's recipe gives one TCP address — also dials it over QUIC,
    /// at the configured host and the port the relay listens on for QUIC: hole punching
    /// (DCUtR) needs a UDP address observed from outside, and this node's TCP dials
    /// leave from fresh ports (`swarm`), so without a QUIC connection to someone
    /// outside it has none.
    pub(super) fn reach_relay_over_quic(&mut self, relay: PeerId, listen: &[Multiaddr]) {
        if !matches!(self.role, Role::Session(_)) {
            return;
        }
        let Some(info) = self.peers.get(&relay) else {
            return;
        };
        let Some(configured) = self.relays.configured.get(&relay) else {
            return;
        };
        if info.transports().contains(&"quic") {
            self.relays.quic_retry.remove(&relay);
            return;
        }
        let configured = configured.clone();
        if !self.dial_quic(relay, &configured, listen) {
            // It does not listen on QUIC (or the dial could not start): nothing to retry.
            return;
        }
        // A dial that fails (UDP blocked for a while, a handshake lost on a busy
        // machine) is tried again on a timer: identify runs again only every few
        // minutes, and until this node has a QUIC connection outside it cannot punch
        // through a NAT.
        let listen = listen
            .iter()
            .take(interlink_core::limits::MAX_LISTEN_ADDRS)
            .cloned()
            .collect();
        let retry = self.relays.quic_retry.entry(relay).or_insert(QuicRetry {
            listen: Vec::new(),
            next: Instant::now() + QUIC_RETRY_FIRST,
            wait: QUIC_RETRY_FIRST,
        });
        retry.listen = listen;
    }

    /// Every tick: dials over QUIC again the relays still reached over TCP only whose
    /// wait is over.
    pub(super) fn retry_relay_quic(&mut self, now: Instant) {
        let due: Vec<PeerId> = self
            .relays
            .quic_retry
            .iter()
            .filter(|(_, r)| now >= r.next)
            .map(|(p, _)| *p)
            .collect();
        for relay in due {
            let tcp_only = self
                .peers
                .get(&relay)
                .is_some_and(|info| !info.transports().contains(&"quic"));
            let configured = self.relays.configured.get(&relay).cloned();
            let (Some(configured), true, Some(retry)) =
                (configured, tcp_only, self.relays.quic_retry.get_mut(&relay))
            else {
                // Reached over QUIC, or gone (identify starts it again on the next
                // connection).
                self.relays.quic_retry.remove(&relay);
                continue;
            };
            retry.wait = (retry.wait * 2).min(QUIC_RETRY_MAX);
            retry.next = now + retry.wait;
            let listen = retry.listen.clone();
            debug!(%relay, "relay still reached over TCP only");
            self.dial_quic(relay, &configured, &listen);
        }
    }

    /// A connection to `peer` opened: if it is one of our relays, listen through it.
    pub(super) fn on_relay_connected(&mut self, peer: PeerId) {
        if !matches!(self.role, Role::Session(_)) || self.relays.listening.contains(&peer) {
            return;
        }
        let Some(addr) = self.relays.configured.get(&peer) else {
            return;
        };
        let circuit = addr.clone().with(Protocol::P2pCircuit);
        match self.swarm.listen_on(circuit.clone()) {
            Ok(_) => {
                info!(%circuit, "listening through relay");
                self.relays.listening.insert(peer);
            }
            Err(e) => warn!(%circuit, "cannot listen through relay: {e}"),
        }
    }

    /// The last connection to `peer` closed: its circuit listener closes with it and is
    /// opened again on the next connection.
    pub(super) fn on_relay_disconnected(&mut self, peer: &PeerId) {
        self.relays.listening.remove(peer);
        self.relays.quic_retry.remove(peer);
    }

    /// The network `peer` is connected from (`node::budgets::source_network`).
    pub(super) fn source_network(&self, peer: &PeerId) -> Option<std::net::IpAddr> {
        self.peers
            .get(peer)
            .and_then(super::PeerInfo::best)
            .and_then(|c| super::budgets::source_network(c.get_remote_address()))
    }

    /// The relays this session uses.
    pub(super) fn relay_peers(&self) -> Vec<PeerId> {
        self.relays.configured.keys().copied().collect()
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
        let roster = self.presence.node.roster();
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
                self.mailbox.fetching.answered();
                if let Some(MailboxOutcome::Record {
                    record: Some(record),
                }) = outcome
                {
                    self.on_own_copy(record);
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
        if let Some(dirty) = self.relays.pushing.get_mut(key) {
            *dirty = true;
            return;
        }
        if self.relays.pushing.len() >= MAX_PUSHES {
            return;
        }
        let Some(peer) = self
            .presence
            .node
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
            Ok(_) => {
                self.relays.pushing.insert(key.clone(), false);
            }
            // The owner fetches it on waking instead.
            Err(e) => debug!(%peer, ?e, "mailbox push not sent"),
        }
    }

    fn push_done(&mut self, key: &RecordKey, answered: bool, connection_lost: bool) {
        let dirty = self.relays.pushing.remove(key).unwrap_or(false);
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
            self.relays.network_refused += 1;
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
                let token = self.relays.next_hold;
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
                self.relays.next_hold += 1;
                self.relays.holds.insert(token, (from, net));
            }
            Err(reason) => self.answer_hold(from, Err(reason)),
        }
    }

    /// The relay's store thread finished a hold.
    pub(super) fn on_relay_held(&mut self, held: Held) {
        let Some((from, net)) = self.relays.holds.remove(&held.token) else {
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
                self.mailbox.copies.held.remove(&key);
                // An owner connected here gets the committed copy at once, as from a
                // session holder (`node::mailbox`), instead of on its next fetch.
                // Not to the owner that handed it (its own acks).
                if let Some(owner) = interlink_core::mailbox::record_address(&copy.record) {
                    let owner_peer = self
                        .presence
                        .node
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
    /// [`TARPIT_DELAY`]. A peer past its budget is refused after its request was read
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
        if over && self.relays.tarpit.len() < MAX_TARPIT {
            let due = Instant::now() + TARPIT_DELAY;
            self.relays.tarpit.push_back((due, peer, channel, outcome));
            return;
        }
        self.send_mailbox_response(peer, channel, outcome);
    }

    /// Sends the late refusals that are due (on the housekeeping tick).
    pub(super) fn flush_tarpit(&mut self, now: Instant) {
        while self
            .relays
            .tarpit
            .front()
            .is_some_and(|(due, ..)| *due <= now)
        {
            if let Some((_, peer, channel, outcome)) = self.relays.tarpit.pop_front() {
                self.send_mailbox_response(peer, channel, outcome);
            }
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

    /// A relay node listens on `address`: with no configured external address, a
    /// specific (not wildcard) listen address is taken as one, so the relay server —
    /// disabled by libp2p until it has an external address — serves on a LAN or
    /// loopback too.
    pub(super) fn relay_listen_addr(&mut self, address: &Multiaddr) {
        if !self.config.relay_server || !self.config.external_addrs.is_empty() {
            return;
        }
        let wildcard = address.iter().any(|p| match p {
            Protocol::Ip4(ip) => ip.is_unspecified(),
            Protocol::Ip6(ip) => ip.is_unspecified(),
            _ => false,
        });
        if !wildcard {
            self.swarm.add_external_address(address.clone());
        }
    }

    pub(super) fn on_relay_server(&mut self, event: relay::Event) {
        match event {
            relay::Event::ReservationReqAccepted { src_peer_id, .. } => {
                debug!(peer = %src_peer_id, "reservation accepted");
                if self.relays.reservations.len() < MAX_SERVED {
                    self.relays.reservations.insert(src_peer_id);
                }
            }
            relay::Event::ReservationClosed { src_peer_id }
            | relay::Event::ReservationTimedOut { src_peer_id } => {
                self.relays.reservations.remove(&src_peer_id);
            }
            relay::Event::CircuitReqAccepted {
                src_peer_id,
                dst_peer_id,
            } => {
                info!(src = %src_peer_id, dst = %dst_peer_id, "circuit accepted");
                self.relays.circuits = (self.relays.circuits + 1).min(MAX_SERVED);
            }
            relay::Event::CircuitClosed {
                src_peer_id,
                dst_peer_id,
                error,
            } => {
                // Shown with the accepted ones, so an operator sees what circuits are
                // open (a pair of sessions that punched through closes theirs:
                // `node::retire_circuits`).
                match error {
                    None => info!(src = %src_peer_id, dst = %dst_peer_id, "circuit closed"),
                    Some(e) => {
                        info!(src = %src_peer_id, dst = %dst_peer_id, error = %e, "circuit closed");
                    }
                }
                self.relays.circuits = self.relays.circuits.saturating_sub(1);
            }
            other => debug!(?other, "relay server"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_tried_through_each_relay_of_ours() {
        let relay =
            "/ip4/203.0.113.9/tcp/4001/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN";
        let relays = Relays::new(&[relay.parse().unwrap()]);
        let target = PeerId::random();
        let got: Vec<String> = relays
            .circuits_to(target)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(got, [format!("{relay}/p2p-circuit/p2p/{target}")]);
    }
}
