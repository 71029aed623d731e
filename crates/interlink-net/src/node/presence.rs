//! Presence on the node: the shell around `interlink_core::presence::node`, the
//! IO-free presence of one node (its roster, its pacer and the announce rules). This
//! routes swarm events in (gossipsub messages, subscriptions, connections, the tick)
//! and carries its outputs out: publishing on the presence topic, roster requests
//! (`node::roster_sync`), and what the rest of the node does when a session is learnt
//! or heard from.

use std::{collections::HashMap, time::Instant};

use interlink_core::{
    IdentityKey, SealingKey,
    presence::{
        IdentityView, Roster,
        node::{Input, Kind, Output, Own, PresenceNode, Verdict},
        pacer::{self, Ask, Pacer},
        sync::SummaryError,
    },
    wire::{DetailsReader, MAX_PRESENCE_READERS, RosterRequest, RosterResponse},
};
use libp2p::{PeerId, gossipsub, request_response};
use tracing::{debug, trace, warn};

use super::{Actor, discovery};
use crate::{Config, Event, Role, diagnostics::PresenceCost};

/// The randomness the node seals its details with.
type SysRng = rand_core::UnwrapErr<getrandom::SysRng>;

/// Presence state of a node: its presence node and what the swarm side keeps.
pub(super) struct Presence {
    node: PresenceNode<PeerId, SysRng>,
    topic: gossipsub::IdentTopic,
    /// This node's roster requests in flight and what each asked.
    asks: HashMap<request_response::OutboundRequestId, Ask>,
    /// What presence has cost so far ([`crate::diagnostics::PresenceCost`]); what the
    /// presence node counts itself (checks, republished) is read from it.
    cost: PresenceCost,
    /// When the goodbye was handed to gossipsub: shutdown keeps the swarm running
    /// until it has had time to leave (`Actor::goodbye`).
    goodbye_at: Option<Instant>,
    /// Opens the details of the announcements held, for the views handed out (none
    /// for nodes without an identity: observers and relays).
    details: Option<DetailsReader>,
}

impl Presence {
    /// The presence of a node with `config` in `role`, started at `now_ms`, on `topic`.
    pub(super) fn new(
        config: &Config,
        role: &Role,
        local: &PeerId,
        now_ms: u64,
        topic: gossipsub::IdentTopic,
    ) -> Self {
        Self {
            node: new(config, role, local, now_ms),
            topic,
            asks: HashMap::new(),
            cost: PresenceCost::default(),
            goodbye_at: None,
            details: match role {
                Role::Session(spec) => Some(DetailsReader::new(&spec.identity)),
                Role::Observer | Role::Relay(_) => None,
            },
        }
    }

    /// The roster held.
    pub(super) fn roster(&self) -> &Roster {
        self.node.roster()
    }

    /// The roster, to set whom it trusts.
    pub(super) fn roster_mut(&mut self) -> &mut Roster {
        self.node.roster_mut()
    }

    /// Whether the node has joined the DHT (the pacer says when).
    pub(super) fn dht_joined(&self) -> bool {
        self.node.pacer().dht_joined()
    }

    /// The presence topic's hash.
    pub(super) fn topic_hash(&self) -> gossipsub::TopicHash {
        self.topic.hash()
    }

    /// When the goodbye was handed to gossipsub, if it was.
    pub(super) fn goodbye_at(&self) -> Option<Instant> {
        self.goodbye_at
    }

    /// The roster's sessions now, with the details this node may open.
    pub(super) fn views(&mut self, now: u64) -> Vec<IdentityView> {
        let mut views = self.node.roster().view(now);
        if let Some(reader) = self.details.as_mut() {
            reader.fill(&mut views);
        }
        views
    }

    /// A peer's roster request arrived (answered or not): its summary is counted.
    pub(super) fn requested(&mut self, request: &RosterRequest) {
        self.cost.summary_bytes += (request.have.len() + request.away.len()) as u64;
    }

    /// The answer to a peer's roster request.
    pub(super) fn answer(
        &self,
        request: &RosterRequest,
        now: u64,
    ) -> Result<RosterResponse, SummaryError> {
        self.node.answer(request, now)
    }

    /// Whether another roster request may be sent ([`MAX_ROSTER_REQUESTS`] in flight
    /// at most).
    ///
    /// [`MAX_ROSTER_REQUESTS`]: super::roster_sync::MAX_ROSTER_REQUESTS
    pub(super) fn may_ask(&self) -> bool {
        self.asks.len() < super::roster_sync::MAX_ROSTER_REQUESTS
    }

    /// Roster request `id`, asking `ask`, was sent.
    pub(super) fn asked(&mut self, id: request_response::OutboundRequestId, ask: Ask) {
        self.cost.roster_fetches += 1;
        self.asks.insert(id, ask);
    }

    /// Roster request `id` failed.
    pub(super) fn ask_failed(&mut self, id: request_response::OutboundRequestId) {
        self.asks.remove(&id);
    }

    /// Roster request `id` was answered with `response`: what it asked. An answer to no
    /// request of ours is read as one to a connect request: applied (every entry
    /// verified), not republished.
    pub(super) fn ask_answered(
        &mut self,
        id: request_response::OutboundRequestId,
        response: &RosterResponse,
    ) -> Ask {
        self.cost.roster_bytes += response
            .announcements
            .iter()
            .chain(&response.beacons)
            .map(|a| a.len() as u64)
            .sum::<u64>();
        self.asks.remove(&id).unwrap_or(Ask::Connect)
    }

    /// A roster request left unanswered: over its budget.
    pub(super) fn over_budget(&mut self) {
        self.cost.roster_over_budget += 1;
    }

    /// A connection opened.
    pub(super) fn connected(&mut self) {
        self.cost.connections += 1;
    }

    /// What presence has cost so far.
    pub(super) fn cost(&self) -> PresenceCost {
        PresenceCost {
            verified: self.node.verified(),
            republished: self.node.republished(),
            ..self.cost
        }
    }
}

/// The presence node of a node with `config` in `role`, started at `now_ms`.
/// Anti-entropy's round robin starts at the last byte of the node's `PeerId`, so
/// nodes do not all begin with the same peer. Observers, relays and sender sessions
/// ([`crate::Visibility::Sender`]) announce nothing.
fn new(config: &Config, role: &Role, local: &PeerId, now_ms: u64) -> PresenceNode<PeerId, SysRng> {
    let own = match role {
        Role::Session(s) if s.visibility == crate::Visibility::Announced => Some(Own {
            identity: s.identity.clone(),
            session: s.session.clone(),
            peer_id: local.to_bytes(),
            details: interlink_core::wire::Details {
                cwd: s.cwd.clone(),
                git_label: s.git_label.clone(),
                summary: s.summary.clone(),
                host: s.host,
                delivery: s.delivery,
                project: s.project.map(|p| serde_bytes::ByteArray::new(p.0)),
                claims: Vec::new(),
            },
        }),
        Role::Session(_) | Role::Observer | Role::Relay(_) => None,
    };
    let seed = local.to_bytes().last().copied().map_or(0, u64::from);
    let pacer = pacer::Config {
        announces: own.is_some(),
        heartbeat_ms: u64::try_from(config.heartbeat.as_millis()).unwrap_or(u64::MAX),
        ..pacer::Config::default()
    };
    PresenceNode::new(
        Roster::new(config.presence),
        Pacer::new(pacer, now_ms, seed),
        own,
        rand_core::UnwrapErr(getrandom::SysRng),
        now_ms,
    )
}

impl Actor {
    /// The presence node takes `input` now, and the node does what it decides. What
    /// an announcement would say (addresses, readers) is brought up to date first:
    /// any input may make the pacer announce, and both are cheap to read (a few
    /// addresses; the trusted identities, a roster lookup each), about once a second
    /// and per connection, subscription or roster answer — never per gossip message.
    pub(super) fn presence_input(&mut self, input: Input<PeerId>) {
        self.refresh_own();
        let now = self.now_ms();
        self.presence.node.handle(input, now);
        self.run_presence();
    }

    /// The presence node's timer: the second looks that are due.
    pub(super) fn presence_timeout(&mut self) {
        let now = self.now_ms();
        self.presence.node.handle_timeout(now);
        self.run_presence();
    }

    /// When the presence node's timer is due, on the task's clock.
    pub(super) fn presence_deadline(&self) -> Option<std::time::Instant> {
        self.presence.node.poll_timeout().map(|at| {
            std::time::Instant::now()
                + std::time::Duration::from_millis(at.saturating_sub(self.now_ms()))
        })
    }

    /// Announces anew when the identities that may read this session's details
    /// changed: a peer added or removed, a peer's sealing key learnt.
    pub(super) fn reannounce_if_readers_changed(&mut self) {
        self.presence_input(Input::ReadersChanged);
    }

    /// The details changed: announced at once.
    pub(super) fn set_details(&mut self, change: impl FnOnce(&mut interlink_core::wire::Details)) {
        let Some(mut details) = self.presence.node.own().map(|o| o.details.clone()) else {
            return;
        };
        change(&mut details);
        self.presence_input(Input::Details(details));
    }

    /// Publishes the goodbye; returns whether there was one to send.
    pub(super) fn publish_goodbye(&mut self) -> bool {
        let before = self.presence.goodbye_at;
        self.presence_input(Input::Leave);
        before.is_none() && self.presence.goodbye_at.is_some()
    }

    /// Brings the announcement's addresses and readers up to date (sessions only).
    fn refresh_own(&mut self) {
        if self.presence.node.own().is_none() {
            return;
        }
        let addrs = self
            .announced_addrs()
            .iter()
            .map(|a| a.to_string())
            .collect();
        let listening = !self.listen_addrs.is_empty();
        self.presence.node.set_addresses(addrs, listening);
        let readers = self.presence_readers();
        self.presence.node.set_readers(readers);
    }

    /// Whom this session's details are sealed for, besides its own identity: its peers
    /// whose sealing key it knows (from the roster, else pinned), those with a session
    /// on the roster first, at most [`MAX_PRESENCE_READERS`] - 1. A stranger reads only
    /// what a knock needs: the identity, its sealing key, the session id, addresses.
    fn presence_readers(&self) -> Vec<(IdentityKey, SealingKey)> {
        let Some(d) = self.parts.delivery() else {
            return Vec::new();
        };
        let own = self.own_addr().map(|a| a.key);
        let roster = self.presence.node.roster();
        let mut on_roster = Vec::new();
        let mut pinned = Vec::new();
        for (_, key) in d.engine().gate().policy().iter() {
            if Some(*key) == own {
                continue;
            }
            if let Some(binding) = roster.sealing_binding_of(key) {
                on_roster.push((*key, binding.key));
            } else if let Some(sealing) = self.keys.pinned(key) {
                pinned.push((*key, sealing));
            }
        }
        on_roster.sort_by_key(|(k, _)| *k);
        pinned.sort_by_key(|(k, _)| *k);
        on_roster.extend(pinned);
        on_roster.truncate(MAX_PRESENCE_READERS - 1);
        on_roster
    }

    /// Carries out what the presence node decided.
    fn run_presence(&mut self) {
        while let Some(output) = self.presence.node.poll_output() {
            match output {
                Output::Publish { kind, bytes } => self.publish_presence(kind, bytes),
                Output::AskRoster { peer, ask, request } => self.ask_roster(peer, request, ask),
                Output::JoinDht => discovery::join_dht(self),
                // A new or newer announcement, however it arrived: the peer's sealing
                // key is pinned, its mail is routed afresh and it is offered this
                // user's pass; by gossip it is a sign of life (its mail tried live).
                Output::Learned { addr, live, .. } => {
                    self.pin_sealing_key(addr.key);
                    self.book_announcement(&addr);
                    self.route_session(&addr);
                    self.offer_pass(&addr);
                    if live && let Some(peer) = self.peer_of(&addr) {
                        self.peer_alive(peer);
                    }
                }
                // A beacon is a sign of life of the session's node, and its presence may
                // have changed (away to live).
                Output::Heard(addr) => {
                    if let Some(peer) = self.peer_of(&addr) {
                        self.peer_alive(peer);
                    }
                    self.emit(Event::RosterChanged);
                }
                // Gone: its mail goes to its mailbox without a live attempt first.
                Output::Departed(addr) => self.route_session(&addr),
                Output::RosterChanged => self.emit(Event::RosterChanged),
                Output::Rejected { from, reason } => {
                    debug!(%from, %reason, "roster entry rejected");
                    self.emit(Event::Rejected { from, reason });
                }
                Output::Failed(reason) => warn!("{reason}"),
            }
        }
    }

    /// The PeerId the announcement of `addr` held names.
    fn peer_of(&self, addr: &interlink_core::wire::SessionAddr) -> Option<PeerId> {
        self.presence
            .node
            .roster()
            .get(addr)
            .and_then(|a| a.body().peer_id())
    }

    /// Publishes a presence message on the topic.
    fn publish_presence(&mut self, kind: Kind, bytes: Vec<u8>) {
        let topic = self.presence.topic.clone();
        match self
            .swarm
            .behaviour_mut()
            .gossipsub
            .publish(topic, bytes.clone())
        {
            Ok(_) => {
                if kind == Kind::Goodbye {
                    self.presence.goodbye_at = Some(Instant::now());
                }
                trace!(?kind, "presence published");
            }
            // Nobody is subscribed yet: kept for the first peer that subscribes.
            Err(gossipsub::PublishError::NoPeersSubscribedToTopic)
                if kind == Kind::Announcement =>
            {
                let now = self.now_ms();
                self.presence.node.handle(Input::NotPublished(bytes), now);
            }
            // A beacon nobody takes: the next one will be, or a roster fetch carries it.
            // A republished copy gossip brought meanwhile is `Duplicate`: nothing to
            // repair.
            Err(e) => debug!(?kind, "presence not published: {e}"),
        }
    }

    pub(super) fn on_gossipsub(&mut self, event: gossipsub::Event) {
        match event {
            gossipsub::Event::Message {
                propagation_source,
                message_id,
                message,
            } => {
                let cost = &mut self.presence.cost;
                cost.gossip_messages += 1;
                cost.gossip_bytes += message.data.len() as u64;
                let now = self.now_ms();
                let verdict = self.presence.node.receive(&message.data, now);
                self.run_presence();
                let acceptance = match verdict {
                    Verdict::Accept => gossipsub::MessageAcceptance::Accept,
                    Verdict::Ignore => gossipsub::MessageAcceptance::Ignore,
                    Verdict::Reject(reason) => {
                        debug!(from = %propagation_source, %reason, "presence message rejected");
                        self.emit(Event::Rejected {
                            from: propagation_source,
                            reason,
                        });
                        gossipsub::MessageAcceptance::Reject
                    }
                };
                self.swarm
                    .behaviour_mut()
                    .gossipsub
                    .report_message_validation_result(&message_id, &propagation_source, acceptance);
            }
            gossipsub::Event::Subscribed { peer_id, topic }
                if topic == self.presence.topic.hash() =>
            {
                // Its roster now, and a second look shortly; our announcement, owed or
                // not taken yet, now that someone can take it.
                self.presence_input(Input::PeerSubscribed(peer_id));
            }
            gossipsub::Event::SlowPeer {
                peer_id,
                failed_messages,
            } => {
                // Presence messages gossipsub dropped for this peer (queue full, or not
                // sent within the publish or forward window).
                debug!(peer = %peer_id, ?failed_messages, "gossipsub dropped messages to a slow peer");
            }
            _ => {}
        }
    }
}
