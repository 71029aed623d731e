//! In-process nodes: complete `interlink-net` nodes (noise, yamux, every behaviour) in
//! the bench process, on the memory transport or on loopback TCP.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use interlink_core::{Identity, SessionId, names::Network, presence::IdentityView};
use interlink_net::{Config, Event, Handle, Node, Role};
use libp2p::{Multiaddr, multiaddr::Protocol};
use tokio::sync::broadcast;

/// Next free `/memory/N` port. The memory transport is one registry per process, so a
/// process-wide counter keeps every run's nodes apart without fixed numbers.
static NEXT_MEMORY_PORT: AtomicU64 = AtomicU64::new(1 << 20);

/// `Config::max_process_memory` for every node the bench runs inside its own process.
/// The node's guard refuses connections once the *process* passes a budget sized for one
/// session per process; here many nodes, and what earlier scenarios left allocated,
/// share one process, and past 256 MiB a later scenario's every dial was refused.
pub const IN_BENCH_PROCESS_MEMORY: Option<usize> = Some(usize::MAX);

/// Reserves `n` consecutive memory ports; returns the first.
pub fn memory_ports(n: u64) -> u64 {
    NEXT_MEMORY_PORT.fetch_add(n, Ordering::Relaxed)
}

/// `/memory/<port>`.
pub fn memory_addr(port: u64) -> Multiaddr {
    Multiaddr::empty().with(Protocol::Memory(port))
}

/// `/ip4/127.0.0.1/tcp/0`: loopback, a port chosen by the kernel.
pub fn loopback_tcp() -> Multiaddr {
    Multiaddr::empty()
        .with(Protocol::Ip4(std::net::Ipv4Addr::LOCALHOST))
        .with(Protocol::Tcp(0))
}

/// `/ip4/0.0.0.0/tcp/0`: every interface, a port chosen by the kernel. mDNS needs it:
/// libp2p-mdns answers on an interface only with listen addresses of that interface,
/// so a loopback-only node is never found by mDNS.
pub fn any_tcp() -> Multiaddr {
    Multiaddr::empty()
        .with(Protocol::Ip4(std::net::Ipv4Addr::UNSPECIFIED))
        .with(Protocol::Tcp(0))
}

/// A small, fixed set of identities (seeded, so runs are comparable).
pub fn identities(n: u8) -> Vec<Arc<Identity>> {
    (1..=n)
        .map(|seed| Arc::new(Identity::from_seed(&[seed; 32])))
        .collect()
}

/// The session role of a bench node.
pub fn session_role(identity: Arc<Identity>, session: &SessionId) -> Role {
    interlink_testkit::node::session_role(
        identity,
        session,
        &format!("/bench/{session}"),
        "interlink-bench",
    )
}

/// Builds and spawns a session node with the production transport key
/// (identity + session id → PeerId), its memory guard lifted
/// ([`IN_BENCH_PROCESS_MEMORY`]).
pub fn spawn_session(
    identity: &Arc<Identity>,
    session: &SessionId,
    mut config: Config,
) -> anyhow::Result<Node> {
    config.max_process_memory = IN_BENCH_PROCESS_MEMORY;
    let key = identity
        .transport_keypair(session)
        .context("deriving the transport key")?;
    let swarm = interlink_net::build_swarm(key, &config).context("building the swarm")?;
    Node::spawn(swarm, config, session_role(identity.clone(), session)).context("spawning node")
}

/// Nodes that are shut down when the fleet is dropped, so a scenario that fails or
/// times out half-way leaves no node tasks running.
#[derive(Debug, Default)]
pub struct Fleet {
    nodes: Vec<Node>,
}

impl Fleet {
    /// Adds a node.
    pub fn push(&mut self, node: Node) {
        self.nodes.push(node);
    }

    /// Handles to every node, in insertion order.
    pub fn handles(&self) -> Vec<Handle> {
        self.nodes.iter().map(Node::handle).collect()
    }

    /// Shuts every node down concurrently (goodbyes first), waiting at most `limit`.
    /// Returns false if some did not finish in time (they are still cancelled).
    pub async fn shutdown(mut self, limit: Duration) -> bool {
        let nodes = std::mem::take(&mut self.nodes);
        let all = futures::future::join_all(nodes.into_iter().map(Node::shutdown));
        tokio::time::timeout(limit, all).await.is_ok()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        // Cancelling is synchronous; each task publishes its goodbye and ends by itself.
        for node in &self.nodes {
            node.handle().shutdown();
        }
    }
}

/// The node's first listen address, with its `/p2p/` suffix, once it has one.
pub async fn first_listen_addr(handle: &Handle, limit: Duration) -> anyhow::Result<Multiaddr> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let diag = handle.diagnostics().await?;
        if let Some(addr) = diag.listen_addrs.first() {
            return Ok(addr.clone().with(Protocol::P2p(handle.peer_id())));
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "node had no listen address after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A one-line view of a node's state, for failure reports.
pub async fn describe(handle: &Handle) -> String {
    let sessions = match handle.roster().await {
        Ok(r) => session_count(&r).to_string(),
        Err(e) => format!("? ({e})"),
    };
    match handle.diagnostics().await {
        Ok(d) => format!(
            "{sessions} sessions, {} connected, {} topic peers, {} mesh peers, {} listen addrs",
            d.connected.len(),
            d.topic_peers,
            d.mesh_peers.len(),
            d.listen_addrs.len()
        ),
        Err(e) => format!("{sessions} sessions, diagnostics: {e}"),
    }
}

/// Total sessions on a roster.
pub fn session_count(roster: &[IdentityView]) -> usize {
    roster.iter().map(|i| i.sessions.len()).sum()
}

/// Whether a roster lists `session` under the identity whose key is `key_hex`
/// (`session` `None`: any session of that identity).
pub fn roster_has(roster: &[IdentityView], key_hex: &str, session: Option<&SessionId>) -> bool {
    roster
        .iter()
        .filter(|i| i.key.to_hex() == key_hex)
        .any(|i| session.is_none_or(|s| i.sessions.iter().any(|v| &v.addr.session == s)))
}

/// Roster re-check interval between events while waiting for a session.
const VISIBLE_POLL: Duration = Duration::from_millis(5);

/// A long-running session that other sessions join.
#[derive(Debug)]
pub struct Peer {
    /// Owns the node (shut down on drop).
    pub fleet: Fleet,
    pub handle: Handle,
    /// Its identity key, hex.
    pub key: String,
    /// Its first listen address, with `/p2p/`.
    pub addr: Multiaddr,
}

impl Peer {
    /// Starts the peer on `network`, listening on `listen` (use a port 0 address).
    pub async fn start(network: Network, listen: Multiaddr, mdns: bool) -> anyhow::Result<Self> {
        let identity = Arc::new(Identity::from_seed(&[200; 32]));
        let config = Config {
            network,
            listen: vec![listen],
            mdns,
            ..Config::default()
        };
        let mut fleet = Fleet::default();
        let node = spawn_session(&identity, &SessionId::new("bench-peer")?, config)?;
        let handle = node.handle();
        fleet.push(node);
        let addr = first_listen_addr(&handle, Duration::from_secs(5)).await?;
        Ok(Self {
            fleet,
            handle,
            key: identity.public().to_hex(),
            addr,
        })
    }
}

/// Waits until `on`'s roster lists `key_hex` (and `session`, if given); returns when it
/// saw it. Wakes on every event of `on` (subscribe before starting the session) and
/// re-checks every few ms in case one was missed.
pub async fn wait_visible(
    on: &Handle,
    events: &mut broadcast::Receiver<Event>,
    key_hex: &str,
    session: Option<&SessionId>,
    limit: Duration,
) -> anyhow::Result<Instant> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let roster = on.roster().await?;
        if roster_has(&roster, key_hex, session) {
            return Ok(Instant::now());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "not visible within {limit:?}"
        );
        tokio::select! {
            _ = events.recv() => {}
            () = tokio::time::sleep(VISIBLE_POLL) => {}
        }
    }
}

/// Waits (bounded, best effort) until `on`'s roster no longer lists `key_hex`, so the
/// next run starts from the same state.
pub async fn wait_gone(on: &Handle, key_hex: &str, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        match on.roster().await {
            Ok(r) if roster_has(&r, key_hex, None) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            _ => return,
        }
    }
}

/// A paired sender's live path to `to`: `count` messages of `body`, one at a time; the
/// latencies of those delivered, sorted.
pub async fn live_latencies(
    handle: &Handle,
    to: &interlink_core::wire::SessionAddr,
    body: &str,
    count: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut latency = Vec::with_capacity(count);
    for _ in 0..count {
        let start = Instant::now();
        if let interlink_net::SendOutcome::Delivered(_) = handle
            .send(interlink_net::OutgoingMessage::text(
                to.clone(),
                body.to_owned(),
            ))
            .await?
        {
            latency.push(start.elapsed());
        }
    }
    latency.sort();
    Ok(latency)
}

/// The same path under load: messages one at a time until `until`; the latencies of
/// those delivered (unsorted) and how many were not.
pub async fn live_until(
    handle: &Handle,
    to: &interlink_core::wire::SessionAddr,
    body: &str,
    until: Instant,
) -> (Vec<Duration>, usize) {
    let mut latency = Vec::new();
    let mut not_delivered = 0usize;
    while Instant::now() < until {
        let start = Instant::now();
        match handle
            .send(interlink_net::OutgoingMessage::text(
                to.clone(),
                body.to_owned(),
            ))
            .await
        {
            Ok(interlink_net::SendOutcome::Delivered(_)) => latency.push(start.elapsed()),
            _ => not_delivered += 1,
        }
    }
    (latency, not_delivered)
}
