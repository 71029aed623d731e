//! The node task: owns the swarm, runs presence and discovery, serves handles.

mod addresses;
mod admission;
mod blocking;
mod budgets;
mod delivery;
mod discovery;
mod exchange;
mod fetching;
mod held_live;
mod hold_check;
mod hole_punch;
mod inbound;
mod knock_budget;
mod live_stream;
mod mailbox;
mod mailbox_calls;
mod mailbox_server;
mod nat;
mod pairing;
mod presence;
mod publishing;
mod quic_upgrade;
mod relay_client;
mod relay_server;
mod relay_store;
mod retire_circuits;
mod roaming;
mod roles;
mod roster_sync;
mod sealing;
mod sending;
mod store;
mod tailnet;
mod tarpit;
mod well_known;
mod worker;

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use futures::StreamExt;
use interlink_core::presence::node::Input as PresenceInput;
use interlink_delivery::Input;
use libp2p::{
    Multiaddr, PeerId, Swarm, gossipsub, request_response,
    swarm::{SwarmEvent, dial_opts::DialOpts},
};
use tokio::{
    sync::{broadcast, mpsc},
    task::JoinHandle,
};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::{
    COMMAND_CHANNEL_CAPACITY, Config, ConnectedPeer, Diagnostics, EVENT_CHANNEL_CAPACITY, Event,
    Handle, NetError, Role,
    behaviour::{Behaviour, BehaviourEvent},
    diagnostics,
    handle::Command,
};

/// The housekeeping tick: re-announcement, roster sweep, bootstrap redial.
const TICK: Duration = Duration::from_secs(1);
/// How often pending messages are published to their recipients' mailboxes again
/// (session nodes hold copies in memory; holders come and go).
const REPUBLISH: Duration = Duration::from_secs(300);
/// After a retryable refusal, how long before the live path is tried again.
const LIVE_RETRY: Duration = Duration::from_secs(5);
pub(crate) use roaming::{PING_INTERVAL, PING_TIMEOUT};
/// How long shutdown keeps driving the swarm so the goodbye leaves.
const GOODBYE_FLUSH: Duration = Duration::from_millis(300);

/// A running node: its handle and its task.
#[derive(Debug)]
pub struct Node {
    handle: Handle,
    task: JoinHandle<()>,
    /// A subscription made before the task started (see [`Node::take_events`]).
    early_events: Option<broadcast::Receiver<Event>>,
}

impl Node {
    /// Starts listening on `config.listen`, dials the bootstrap peers and spawns the
    /// node task on the current tokio runtime.
    pub fn spawn(
        mut swarm: Swarm<Behaviour>,
        config: Config,
        role: Role,
    ) -> Result<Self, NetError> {
        for addr in &config.listen {
            crate::ports::check_free(addr).map_err(|reason| NetError::Listen {
                addr: addr.to_string(),
                reason,
            })?;
            swarm
                .listen_on(addr.clone())
                .map_err(|e| NetError::Listen {
                    addr: addr.to_string(),
                    reason: error_chain(&e),
                })?;
        }
        let topic = gossipsub::IdentTopic::new(config.network.announce_topic());
        swarm
            .behaviour_mut()
            .gossipsub
            .subscribe(&topic)
            .map_err(|e| NetError::Setup(format!("subscribe: {e}")))?;

        let (cmd_tx, cmd_rx) = mpsc::channel(COMMAND_CHANNEL_CAPACITY);
        let (ev_tx, early_events) = broadcast::channel(EVENT_CHANNEL_CAPACITY);
        let cancel = CancellationToken::new();
        let handle = Handle {
            commands: cmd_tx,
            events: ev_tx.clone(),
            peer_id: *swarm.local_peer_id(),
            cancel: cancel.clone(),
        };
        let parts = roles::role_parts(&config, &role)?;
        let config_relay_server = config.relay_server;
        let presence_state = presence::Presence::new(
            &config,
            &role,
            swarm.local_peer_id(),
            config.clock.now_ms(),
            topic,
        );
        let tailnet = tailnet::Tailnet::new(config.tailnet.as_ref());
        let mailbox = mailbox::Service {
            copies: mailbox::Mailboxes::new(config.max_mailbox_records),
            fetching: fetching::Fetching::default(),
            calls: mailbox_calls::MailboxCalls::default(),
            publishing: publishing::Publishing::default(),
            budgets: budgets::Budgets::new(if config_relay_server { 8 } else { 1 }),
            network_budgets: budgets::NetworkBudgets::new(config.network_growth_burst),
            blocking: blocking::Blocking::default(),
            server: mailbox_server::MailboxServer::default(),
        };
        // Sessions keep an address book and hold the host's well-known port; an
        // observer only dials the port to meet this host's sessions; a relay has its
        // own fixed port and no book.
        let (port, hold, book) = match &role {
            Role::Session(_) => (config.well_known_port, config.hold_well_known_port, true),
            Role::Observer => (config.well_known_port, false, false),
            Role::Relay(_) => (0, false, false),
        };
        let well_known = well_known::WellKnown::new(
            port,
            hold,
            &config.listen,
            swarm.local_peer_id(),
            Instant::now(),
        );
        let stable_port = if config.well_known_port == 0 {
            crate::config::WELL_KNOWN_PORT
        } else {
            config.well_known_port
        };
        let addresses =
            addresses::Addresses::new(config.delivery.address_book.clone(), book, stable_port);
        let keys = sealing::Keys::new(interlink_store::pins::SealingPins::load(
            config.delivery.pins_file.clone(),
        ));
        let mut actor = Actor {
            presence: presence_state,
            // Relays are bootstrap peers too: a session that knows only a relay sees
            // the whole overlay through it.
            bootstrap: discovery::Bootstrap::new(
                &[config.bootstrap.as_slice(), config.relays.as_slice()].concat(),
            ),
            relays: relay_client::RelayClient::new(
                &config.relays,
                matches!(role, Role::Session(_)),
            ),
            relay_server: relay_server::RelayServer::default(),
            swarm,
            config,
            role,
            commands: cmd_rx,
            events: ev_tx,
            cancel,
            listen_addrs: Vec::new(),
            peers: HashMap::new(),
            parts,
            mailbox,
            keys,
            last_tick: Instant::now(),
            started: Instant::now(),
            dead_connections: 0,
            upgrades: Default::default(),
            held_live: Default::default(),
            hole_punch: Default::default(),
            retire: Default::default(),
            tailnet,
            addresses,
            well_known,
        };
        actor.refresh_trusted();
        actor.book_policy_changed();
        actor.start_live_streams();
        for addr in &actor.config.external_addrs {
            actor.swarm.add_external_address(addr.clone());
        }
        for (peer, addr) in actor.relays.relays() {
            actor.swarm.add_peer_address(*peer, addr.clone());
        }
        actor.load_durable_mailboxes();
        // The engine's start-up outputs: a drain of the own mailbox (run once the DHT
        // has a peer), the restored outbox's copies, the timer.
        actor.run_outputs();
        actor.bootstrap.dial_due(&mut actor.swarm, Instant::now());
        // The first read of the tailnet's status, at once rather than on the first tick.
        actor.tailnet_tick();
        actor.well_known.try_take(&mut actor.swarm, Instant::now());
        actor.dial_book(Instant::now());
        let task = tokio::spawn(async move { actor.run().await });
        Ok(Self {
            handle,
            task,
            early_events: Some(early_events),
        })
    }

    /// The node's events from its very start, for the first caller (then `None`).
    /// [`Handle::events`] sees only what happens after it is called, and a node that
    /// just started may already have news — a peer's receipt for mail it collected
    /// arrives as soon as the peer sees this session again. Unread, the subscription
    /// holds at most [`EVENT_CHANNEL_CAPACITY`] events, then reports `Lagged`.
    pub fn take_events(&mut self) -> Option<broadcast::Receiver<Event>> {
        self.early_events.take()
    }

    /// A handle to the node.
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// Stops the node at once, without a goodbye, as a crash would. For tests and
    /// benchmarks that need a session to vanish.
    pub fn abort(self) {
        self.task.abort();
    }

    /// Shuts the node down (goodbye first) and waits for its task to end.
    pub async fn shutdown(self) {
        self.handle.shutdown();
        if let Err(e) = self.task.await {
            warn!("node task ended abnormally: {e}");
        }
    }
}

/// What the node knows about a connected peer.
#[derive(Debug, Default)]
struct PeerInfo {
    /// Its connections and how each was made (bounded by the swarm's limits).
    connections: HashMap<libp2p::swarm::ConnectionId, libp2p::core::ConnectedPoint>,
    rtt: Option<Duration>,
    agent: Option<String>,
}

impl PeerInfo {
    /// Its best connection: a direct one if there is one.
    fn best(&self) -> Option<&libp2p::core::ConnectedPoint> {
        self.connections
            .values()
            .min_by_key(|c| diagnostics::transport_of(c).1)
    }

    /// The transports of its connections, each once, in order.
    fn transports(&self) -> Vec<&'static str> {
        let mut all: Vec<&'static str> = self
            .connections
            .values()
            .map(|c| diagnostics::transport_of(c).0)
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    }
}

/// The node task's state: the swarm, and the components that share it. Presence,
/// discovery, mailbox holding and relaying run on every node; the role adds its parts
/// ([`roles::Parts`]).
struct Actor {
    swarm: Swarm<Behaviour>,
    config: Config,
    role: Role,
    commands: mpsc::Receiver<Command>,
    events: broadcast::Sender<Event>,
    cancel: CancellationToken,
    presence: presence::Presence,
    listen_addrs: Vec<Multiaddr>,
    /// Connected peers. Bounded by the swarm's connections.
    peers: HashMap<PeerId, PeerInfo>,
    bootstrap: discovery::Bootstrap,
    /// What this node's role adds: delivery, a relay's store, the hold checker.
    parts: roles::Parts,
    mailbox: mailbox::Service,
    relays: relay_client::RelayClient,
    relay_server: relay_server::RelayServer,
    keys: sealing::Keys,
    last_tick: Instant,
    /// When the node started.
    started: Instant,
    /// Connections closed as dead: a ping unanswered, or bound to an address that
    /// went away ([`roaming`]).
    dead_connections: u64,
    /// Peers being moved from TCP to QUIC ([`quic_upgrade`]).
    upgrades: quic_upgrade::QuicUpgrades,
    /// Live deliveries waiting for closing connections ([`held_live`]).
    held_live: held_live::HeldLive,
    /// The UDP addresses this node was observed at ([`hole_punch`]).
    hole_punch: hole_punch::HolePunch,
    /// Relayed connections closed once a direct one is up ([`retire_circuits`]).
    retire: retire_circuits::RetireCircuits,
    /// Tailnet discovery, if on ([`tailnet`]).
    tailnet: Option<tailnet::Tailnet>,
    /// Where paired identities and this user's own were reached ([`addresses`]).
    addresses: addresses::Addresses,
    /// The host's well-known port ([`well_known`]).
    well_known: well_known::WellKnown,
}

impl Actor {
    /// Now on the node's clock ([`crate::Config::clock`]).
    fn now_ms(&self) -> u64 {
        self.config.clock.now_ms()
    }

    async fn run(&mut self) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Deadlines the tick is too coarse for: the engine's timer (a live attempt's
            // timeout), a settle caller's.
            let engine_at = self.parts.delivery().and_then(|d| d.timer()).map(|at| {
                let wait = Duration::from_millis(at.saturating_sub(self.now_ms()));
                tokio::time::Instant::now() + wait
            });
            let settle_at = self
                .mailbox
                .publishing
                .next_deadline()
                .into_iter()
                .chain(self.presence_deadline())
                .chain(self.retire.poll_timeout())
                .chain(self.held_live.poll_timeout())
                .min()
                .map(tokio::time::Instant::from_std);
            // The held-knocks file's coalesced write (`node::pairing`).
            let knocks_at = self
                .parts
                .delivery()
                .and_then(|d| d.held_file_due())
                .map(|at| {
                    let wait = Duration::from_millis(at.saturating_sub(self.now_ms()));
                    tokio::time::Instant::now() + wait
                });
            let deadline = engine_at
                .into_iter()
                .chain(settle_at)
                .chain(knocks_at)
                .min();
            let wake = deadline.unwrap_or_else(|| tokio::time::Instant::now() + TICK);
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => break,
                done = self.parts.next_done() => match done {
                    roles::WorkDone::Store(done) => self.on_store_done(done),
                    roles::WorkDone::Held(held) => self.on_relay_held(held),
                    roles::WorkDone::Live(event) => self.on_live_stream(event),
                    roles::WorkDone::Checked(checked) => {
                        self.on_hold_checked(checked);
                        self.run_outputs();
                    }
                },
                Some(cmd) = self.commands.recv() => self.on_command(cmd),
                read = tailnet::next_read(&mut self.tailnet) => self.on_tailnet_read(read),
                // Before the swarm: a busy swarm is always ready, and a tick polled
                // after it starved (heartbeats and anti-entropy went late, and a tick
                // seconds late reads as the process having been stopped).
                _ = tick.tick() => self.on_tick(),
                event = self.swarm.select_next_some() => self.on_swarm_event(event),
                () = tokio::time::sleep_until(wake), if deadline.is_some() => {
                    self.on_engine_timer();
                    self.answer_settle_waiters(Instant::now());
                    self.presence_timeout();
                    self.retire_circuits_due(Instant::now());
                    self.advance_upgrades(Instant::now());
                    self.save_held_knocks(false);
                }
            }
        }
        // A write the interval was still holding back.
        self.save_held_knocks(true);
        self.addresses
            .save_if_due(Instant::now(), self.now_ms(), true);
        self.goodbye().await;
    }

    fn emit(&self, event: Event) {
        // No subscribers is fine; a lagging one sees `Lagged`.
        let _ = self.events.send(event);
    }

    fn on_tick(&mut self) {
        let now = Instant::now();
        // A tick far later than due: the process was stopped (SIGSTOP) or the machine
        // slept. Fetch the mailbox and re-announce at once rather than on the timers.
        if now.duration_since(self.last_tick) >= mailbox::WAKE_GAP {
            info!(gap = ?now.duration_since(self.last_tick), "woke up");
            self.addresses.network_changed(now);
            self.drive(Input::Wake);
        }
        self.last_tick = now;
        self.flush_tarpit(now);
        self.flush_knock_tarpit(now);
        self.advance_upgrades(now);
        self.retire_circuits_due(now);
        self.relay_client_tick(now);
        self.lift_blocks();
        // Expired sessions swept; heartbeats, anti-entropy, second looks, joining the
        // DHT; the announcement no peer has taken yet, if any: the presence node's.
        self.presence_input(PresenceInput::Tick);
        self.bootstrap.dial_due(&mut self.swarm, now);
        self.well_known.try_take(&mut self.swarm, now);
        self.dial_book(now);
        self.addresses.save_if_due(now, self.now_ms(), false);
        discovery::periodic(self, now);
        self.tailnet_tick();
        self.fetch_own_mailbox();
        self.on_engine_timer();
        self.run_outputs();
        if let Some(d) = self.parts.delivery() {
            // Cheap when nothing is due; a compaction runs on the store thread.
            let _ = d.store(store::Op::Compact);
        }
    }

    fn on_command(&mut self, cmd: Command) {
        match cmd {
            Command::Roster(tx) => {
                let now = self.now_ms();
                let _ = tx.send(self.presence.views(now));
            }
            Command::Diagnostics(tx) => {
                let _ = tx.send(self.diagnostics());
            }
            Command::SetSummary(summary, tx) => {
                self.set_details(|d| d.summary = summary);
                let _ = tx.send(());
            }
            Command::SetClaims(claims, tx) => {
                self.set_details(|d| d.claims = claims);
                let _ = tx.send(());
            }
            Command::SetDelivery(delivery, tx) => {
                if let Role::Session(spec) = &mut self.role
                    && spec.delivery != delivery
                {
                    spec.delivery = delivery;
                    self.set_details(|d| d.delivery = delivery);
                }
                let _ = tx.send(());
            }
            Command::Departed(key, tx) => {
                let _ = tx.send(self.presence.roster().departed(&key));
            }
            Command::Goodbye(tx) => {
                let _ = tx.send(self.publish_goodbye());
            }
            Command::Send(msg, tx) => self.send_message(*msg, tx),
            Command::Settle(timeout, tx) => self.settle(timeout, tx),
            Command::HeldMailbox(addr, tx) => {
                let _ = tx.send(self.held_mailbox_info(&addr));
            }
            Command::SetPolicy(policy, tx) => {
                self.drive(Input::SetPolicy(policy));
                self.refresh_trusted();
                self.book_policy_changed();
                // A key just admitted whose sessions are on the roster: pinned now, and
                // offered this user's pass (they were not peers when they appeared, so
                // nothing was offered then).
                self.pin_roster_peers();
                self.offer_pass_to_roster_peers();
                let _ = tx.send(());
            }
            Command::Dial(addr, tx) => {
                let res = self
                    .swarm
                    .dial(DialOpts::unknown_peer_id().address(addr).build())
                    .map_err(|e| NetError::Dial(e.to_string()));
                let _ = tx.send(res);
            }
        }
    }

    fn on_swarm_event(&mut self, event: SwarmEvent<BehaviourEvent>) {
        if let Some(m) = &self.config.swarm_metrics {
            record_metrics(&m.0, &event);
        }
        match event {
            SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(ev)) => self.on_gossipsub(ev),
            SwarmEvent::Behaviour(BehaviourEvent::Roster(ev)) => self.on_roster_fetch(ev),
            SwarmEvent::Behaviour(BehaviourEvent::Deliver(ev)) => self.on_deliver(ev),
            SwarmEvent::Behaviour(BehaviourEvent::Mailbox(ev)) => self.on_mailbox_protocol(ev),
            SwarmEvent::Behaviour(BehaviourEvent::Receipts(ev)) => self.on_receipt_protocol(ev),
            SwarmEvent::Behaviour(BehaviourEvent::RelayServer(ev)) => self.relay_server.handle(ev),
            SwarmEvent::Behaviour(ev) => discovery::on_behaviour_event(self, ev),
            SwarmEvent::NewListenAddr { address, .. } => {
                info!(%address, "listening");
                self.relay_listen_addr(&address);
                if !self.listen_addrs.contains(&address) {
                    self.listen_addrs.push(address.clone());
                    // The first address: announced now rather than on the next tick (the
                    // first tick ran before the swarm had listened, so waiting made a
                    // new session invisible to roster fetches for up to a second). The
                    // rest of a burst of addresses goes out with the next tick.
                    self.presence_input(PresenceInput::AddressAdded);
                }
                self.on_listen_addr_new(&address);
                self.emit(Event::ListenAddr(address));
            }
            SwarmEvent::NewExternalAddrCandidate { address } => self.on_addr_candidate(&address),
            SwarmEvent::ExternalAddrConfirmed { address } => self.on_external_addr(&address, true),
            SwarmEvent::ExternalAddrExpired { address } => self.on_external_addr(&address, false),
            SwarmEvent::ExpiredListenAddr { address, .. } => {
                self.listen_addrs.retain(|a| a != &address);
                self.presence_input(PresenceInput::AnnouncementChanged);
                self.on_listen_addr_expired(&address);
            }
            SwarmEvent::ConnectionEstablished {
                peer_id,
                connection_id,
                endpoint,
                num_established,
                ..
            } => {
                self.bootstrap
                    .on_connected(peer_id, endpoint.get_remote_address());
                self.tailnet_connected(peer_id, connection_id, &endpoint);
                self.addresses.on_established(connection_id, self.now_ms());
                self.well_known.on_established(connection_id);
                self.presence.connected();
                self.presence_input(PresenceInput::PeerConnected(peer_id));
                debug!(%peer_id, ?connection_id, ?endpoint, "connection opened");
                let info = self.peers.entry(peer_id).or_default();
                info.connections.insert(connection_id, endpoint);
                // Also a sign of life.
                self.peer_connected(peer_id, true);
                self.feed_relay_client(relay_client::Input::Connected(peer_id));
                self.on_upgrade_connected(peer_id);
                self.on_retire_connected(peer_id, connection_id);
                if self.peers.len() == 1 {
                    // Back from having no peers: whatever was queued for us may be there,
                    // and what we queued has a peer to hold it now.
                    self.drive(Input::Wake);
                }
                if num_established.get() == 1 {
                    debug!(%peer_id, "connected");
                    // The roster fetch waits for the peer's subscription to the presence
                    // topic (`node::presence`): by then the peer is in our gossip mesh,
                    // and we in its, so what reaches it after it answers is forwarded
                    // to us. Fetched at connection, what arrived at the peer between its
                    // answer and our joining its mesh was lost to us, and to everyone
                    // that would have heard it from us.
                    self.emit(Event::PeerConnected(peer_id));
                }
            }
            SwarmEvent::ConnectionClosed {
                peer_id,
                connection_id,
                num_established,
                ..
            } if num_established > 0 => {
                debug!(%peer_id, ?connection_id, num_established, "connection closed");
                self.addresses.on_closed(connection_id, Instant::now());
                self.well_known.on_closed(connection_id, Instant::now());
                if let Some(info) = self.peers.get_mut(&peer_id) {
                    info.connections.remove(&connection_id);
                }
                // The kept stream is left alone: it may be on another connection, and
                // replacing it cut the answers of what it carried (the recipient keeps
                // only a peer's newest stream). If it was on this one, its next read or
                // write fails, what it carried is reported lost and goes again, and the
                // next delivery opens a stream on what is left.
                self.on_upgrade_closed(peer_id, connection_id);
                self.on_retire_closed(peer_id, connection_id);
            }
            SwarmEvent::ConnectionClosed {
                peer_id,
                connection_id,
                ..
            } => {
                debug!(%peer_id, "disconnected");
                self.peer_connected(peer_id, false);
                self.addresses.on_closed(connection_id, Instant::now());
                self.well_known.on_closed(connection_id, Instant::now());
                self.peers.remove(&peer_id);
                self.presence_input(PresenceInput::PeerDisconnected(peer_id));
                self.feed_relay_client(relay_client::Input::Disconnected(peer_id));
                self.on_upgrade_disconnected(&peer_id, connection_id);
                self.on_retire_closed(peer_id, connection_id);
                if let Some(streams) = self.parts.delivery_mut().and_then(|d| d.streams()) {
                    streams.forget(&peer_id);
                }
                self.bootstrap.on_disconnected(peer_id, Instant::now());
                self.tailnet_disconnected(&peer_id);
                self.emit(Event::PeerDisconnected(peer_id));
            }
            SwarmEvent::OutgoingConnectionError {
                peer_id,
                error,
                connection_id,
            } => {
                debug!(?peer_id, %error, "dial failed");
                self.tailnet_dial_failed(connection_id);
                self.addresses.on_dial_failed(connection_id);
                self.well_known.on_dial_failed(connection_id);
            }
            SwarmEvent::ListenerClosed { listener_id, .. }
            | SwarmEvent::ListenerError { listener_id, .. } => {
                self.well_known
                    .on_listener_closed(&mut self.swarm, listener_id, Instant::now());
            }
            _ => {}
        }
    }

    fn diagnostics(&mut self) -> Diagnostics {
        let gs = &self.swarm.behaviour().gossipsub;
        let topic_hash = self.presence.topic_hash();
        let mesh_peers = gs.mesh_peers(&topic_hash).copied().collect();
        let topic_peers = gs
            .all_peers()
            .filter(|(_, topics)| topics.contains(&&topic_hash))
            .count();
        let kad_routing_table = self
            .swarm
            .behaviour_mut()
            .kad
            .kbuckets()
            .map(|b| b.num_entries())
            .sum();
        let gs = &self.swarm.behaviour().gossipsub;
        let connected = self
            .peers
            .iter()
            .filter_map(|(peer_id, info)| {
                let best = info.best()?;
                let (transport, relayed) = diagnostics::transport_of(best);
                Some(ConnectedPeer {
                    score: gs.peer_score(peer_id),
                    peer_id: *peer_id,
                    addr: diagnostics::shown_addr(best).clone(),
                    rtt_us: info
                        .rtt
                        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
                    agent: info.agent.clone(),
                    connections: info.connections.len(),
                    relayed,
                    transport,
                    transports: info.transports(),
                })
            })
            .collect();
        let relay_reservations = self
            .listen_addrs
            .iter()
            .filter(|a| {
                a.iter()
                    .any(|p| matches!(p, libp2p::multiaddr::Protocol::P2pCircuit))
            })
            .cloned()
            .collect();
        let mailboxes_held = self.mailbox.copies.len();
        let (served_reservations, served_circuits) = self.relay_server.served();
        let nat = self
            .swarm
            .behaviour()
            .autonat
            .as_ref()
            .map(|a| match a.nat_status() {
                libp2p::autonat::NatStatus::Public(addr) => format!("public {addr}"),
                libp2p::autonat::NatStatus::Private => "private".to_owned(),
                libp2p::autonat::NatStatus::Unknown => "unknown".to_owned(),
            });
        Diagnostics {
            well_known_port: self.well_known.holds().then_some(self.well_known.port()),
            address_book_dials: self.addresses.dialled(),
            external_addrs: self.swarm.external_addresses().cloned().collect(),
            nat,
            served_reservations,
            served_circuits,
            mailboxes_held,
            mailbox_puts_refused: self.mailbox.copies.refused(),
            mailbox_fetches_refused: self.mailbox.fetching.refused(),
            mailbox_requests_waiting: self.mailbox.calls.waiting(),
            holds_refused_network: self.mailbox.server.network_refusals(),
            mailbox_connections_closed: self.mailbox.blocking.closed(),
            dead_connections_closed: self.dead_connections,
            tcp_moved_to_quic: self.upgrades.retired(),
            circuits_to_punch_again: self.hole_punch.again(),
            circuits_closed_for_direct: self.retire.retired(),
            presence: self.presence.cost(),
            peer_id: Some(*self.swarm.local_peer_id()),
            listen_addrs: self.listen_addrs.clone(),
            connected,
            mesh_peers,
            topic_peers,
            kad_routing_table,
            relay_reservations,
        }
    }

    /// Publishes the goodbye (unless [`Handle::say_goodbye`] did already) and keeps the
    /// swarm running until it has had [`GOODBYE_FLUSH`] to leave: gossipsub only queues
    /// it, and a process that exits at once closes its connections with the goodbye
    /// still in the queue. A goodbye said earlier has had part of that time already.
    async fn goodbye(&mut self) {
        self.publish_goodbye();
        let flush_until = self.presence.goodbye_at().map(|at| at + GOODBYE_FLUSH);
        let until = match flush_until {
            Some(at) if at > Instant::now() => at,
            // Copies published just before leaving still reach their holders.
            _ if !self.mailbox.calls.is_idle() => Instant::now() + GOODBYE_FLUSH,
            _ => return,
        };
        let deadline = tokio::time::sleep_until(tokio::time::Instant::from_std(until));
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                () = &mut deadline => break,
                // Events during the flush are dropped, the node is going away, except
                // that each mailbox request ending lets the next one waiting for that
                // peer out (`node::mailbox_calls`): copies published just before
                // leaving still reach their holders.
                event = self.swarm.select_next_some() => {
                    if let SwarmEvent::Behaviour(BehaviourEvent::Mailbox(
                        request_response::Event::Message {
                            message: request_response::Message::Response { request_id, .. },
                            ..
                        }
                        | request_response::Event::OutboundFailure { request_id, .. },
                    )) = event
                    {
                        self.end_call(request_id);
                    }
                }
            }
        }
    }
}

/// The next answer of the store thread; never, for a node without one.
/// `e` and its causes, `: `-separated: some transports' errors say nothing themselves
/// (QUIC's listen error is an empty string around the `io::Error` that says why).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.retain(|p| !p.is_empty());
    parts.dedup();
    parts.join(": ")
}

/// Feeds libp2p's metrics the events they count.
fn record_metrics(m: &libp2p::metrics::Metrics, event: &SwarmEvent<BehaviourEvent>) {
    use libp2p::metrics::Recorder as _;
    m.record(event);
    match event {
        SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(ev)) => m.record(ev),
        SwarmEvent::Behaviour(BehaviourEvent::Kad(ev)) => m.record(ev),
        SwarmEvent::Behaviour(BehaviourEvent::Identify(ev)) => m.record(ev),
        SwarmEvent::Behaviour(BehaviourEvent::Ping(ev)) => m.record(ev),
        SwarmEvent::Behaviour(BehaviourEvent::RelayServer(ev)) => m.record(ev),
        _ => {}
    }
}
