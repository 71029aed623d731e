//! Node configuration.

use std::{path::PathBuf, sync::Arc, time::Duration};

use interlink_core::{
    Identity, SessionId,
    limits::{AWAY_RETENTION_MS, HEARTBEAT_MS, LIVE_WINDOW_MS},
    names::Network,
    trust::PeerPolicy,
    wire::{DeliveryMode, HostKind},
};
use libp2p::Multiaddr;

/// The port (TCP and QUIC) one session of each host holds, so that an address
/// remembered yesterday still reaches the host today whatever sessions run there
/// (`node::well_known`). Below every common ephemeral range (Linux 32768–60999,
/// Windows and macOS 49152–65535), so a session's random port never takes it.
pub const WELL_KNOWN_PORT: u16 = 7385;

/// What a node is on the overlay.
#[derive(Clone, Debug)]
pub enum Role {
    /// An agent session: announces itself and stays on the roster.
    Session(Box<SessionSpec>),
    /// An observer (`interlink-p2p peers`): joins the overlay and reads the roster, but
    /// never announces itself.
    Observer,
    /// An always-on relay (`interlink-relay`): never announces itself; forwards
    /// presence, answers roster fetches, runs the circuit relay server, and holds
    /// mailboxes in a durable store, answering a mailbox `hold` only once committed.
    Relay(RelaySpec),
}

/// What a relay node holds its mailboxes in.
#[derive(Clone, Debug)]
pub struct RelaySpec {
    /// The durable mailbox store.
    pub store: Arc<dyn crate::DurableMailboxes>,
}

/// The session a node announces.
#[derive(Clone, Debug)]
pub struct SessionSpec {
    /// The identity that signs.
    pub identity: Arc<Identity>,
    /// The session id.
    pub session: SessionId,
    /// Working directory.
    pub cwd: String,
    /// Git root label.
    pub git_label: Option<String>,
    /// The project of the working directory, for claims on its files.
    pub project: Option<interlink_core::claims::ProjectId>,
    /// Initial summary.
    pub summary: String,
    /// Agent host.
    pub host: HostKind,
    /// Delivery mode.
    pub delivery: DeliveryMode,
    /// Whether the session is on the rosters.
    pub visibility: Visibility,
}

/// Whether a session node is on the rosters: a routable session, or a short-lived
/// sender that nobody should pick as a recipient.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Visibility {
    /// Announces itself, beacons while it runs and says goodbye when it stops: on
    /// every roster, in `discover`, a candidate recipient.
    #[default]
    Announced,
    /// Never announces, beacons or says goodbye, like an observer, but signs and
    /// sends messages as its session (the shell `send`). Nothing about it reaches a
    /// roster, so it is never a candidate recipient, never in `discover` or a
    /// "several sessions" choice, and leaves nothing behind when it exits. Its
    /// messages carry the unsigned reply-to hint (PROTOCOL.md §3.1) naming
    /// `reply_to`, a session of the same identity, when there is one: replies and
    /// read receipts go there rather than to a session id nobody collects.
    Sender {
        /// The session of this identity that replies go to.
        reply_to: Option<SessionId>,
    },
}

/// Configuration of a node.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where every timestamp the node makes or checks comes from.
    pub clock: crate::Clock,
    /// The overlay; topic and protocol ids include its name.
    pub network: Network,
    /// Addresses to listen on.
    pub listen: Vec<Multiaddr>,
    /// The host's well-known port ([`WELL_KNOWN_PORT`] unless configured; `0`: none).
    /// A session that holds it ([`Config::hold_well_known_port`]) listens on it too,
    /// TCP and QUIC; a session that does not dials it on this host, to meet the one
    /// that does; and the address book prefers peers' addresses on it.
    pub well_known_port: u16,
    /// Whether this node tries to hold [`Config::well_known_port`] (agent sessions: the
    /// MCP server and `run`); retried every second or two while another session of the
    /// host holds it, so it is taken over when that one exits. Only session nodes hold
    /// it.
    pub hold_well_known_port: bool,
    /// Peers dialled at start and redialled with backoff while disconnected.
    pub bootstrap: Vec<Multiaddr>,
    /// Whether mDNS discovery runs.
    pub mdns: bool,
    /// How long an idle connection stays open. Presence links must outlive the
    /// heartbeat, so this is far above libp2p's 10 s default.
    pub idle_connection_timeout: Duration,
    /// Re-announcement interval (30 s; shortened only by test knobs).
    pub heartbeat: Duration,
    /// Presence windows and caps.
    pub presence: interlink_core::presence::Config,
    /// Most peers this node dials on its own (discovery stops adding peers beyond it).
    pub max_dialed_peers: usize,
    /// Inbound delivery (sessions only).
    pub delivery: Delivery,
    /// Relays this session uses (each with its `/p2p/<id>`): dialled like bootstrap
    /// peers, asked for a circuit reservation (the session listens and announces
    /// through it), given a durable copy of every mailbox put, and asked for the
    /// session's own mailbox on start and wake.
    pub relays: Vec<Multiaddr>,
    /// Runs the circuit relay server (relay nodes only).
    pub relay_server: bool,
    /// Addresses others can reach this node on, advertised as confirmed external
    /// addresses (a relay's public or tailnet address).
    pub external_addrs: Vec<Multiaddr>,
    /// Most mailbox records held in memory (and served to the DHT).
    pub max_mailbox_records: usize,
    /// Process memory above which new connections are denied; `None`: the role's
    /// default (`behaviour::connection_caps`). In-process tests and benchmarks running
    /// many nodes in one process raise it.
    pub max_process_memory: Option<usize>,
    /// Mailbox streams open at once per connection
    /// ([`crate::behaviour::MAILBOX_STREAMS_PER_CONNECTION`]); a benchmark's attacker
    /// raises it to libp2p's default, as a hostile peer's own build would.
    pub mailbox_streams_per_connection: usize,
    /// Live-delivery streams open at once per connection
    /// ([`crate::behaviour::DELIVER_STREAMS_PER_CONNECTION`]; a test's attacker raises
    /// it, as a hostile build would).
    pub deliver_streams_per_connection: usize,
    /// Whether live delivery uses a kept stream per peer (`node::live_stream`) where
    /// the peer speaks it; off, every delivery is a request, as an older node sends
    /// (tests of the fallback turn it off).
    pub live_streams: bool,
    /// Relays: what copies from one source network may add to the store at once before
    /// only the hourly refill is left (`node::budgets::NETWORK_GROWTH_BURST`).
    pub network_growth_burst: u64,
    /// Most bytes of mailbox copies a session node holds in memory (for others, and
    /// its own outgoing copies); beyond it inbound copies are refused `over_budget`.
    /// Not used by relays, whose durable store has its own caps.
    pub max_held_bytes: usize,
    /// libp2p's own metrics (connections, gossipsub, Kademlia, identify, ping, relay),
    /// recorded from the swarm's events when set (the relay sets it).
    pub swarm_metrics: Option<SwarmMetrics>,
    /// Tailnet discovery ([`crate::tailnet`]): the online devices `tailscale status
    /// --json` lists are probed at the well-known port. `None` (the library's default;
    /// the `interlink-p2p` commands turn it on unless the settings say `tailnet =
    /// false`): never.
    pub tailnet: Option<Tailnet>,
}

/// Tailnet discovery's settings.
#[derive(Clone, Debug, Default)]
pub struct Tailnet {
    /// The Tailscale CLI to run; `None`: `tailscale` found on `PATH` at each read.
    pub cli: Option<PathBuf>,
    /// The bounds and timers of the probes.
    pub probes: crate::tailnet::Config,
}

/// Where a session's delivered messages go and whom it accepts them from.
#[derive(Clone, Debug, Default)]
pub struct Delivery {
    /// The session's inbox directory; without one the node refuses every delivery.
    pub inbox_dir: Option<PathBuf>,
    /// The peers policy (deny by default). Replace it at run time with
    /// [`crate::Handle::set_policy`].
    pub policy: PeerPolicy,
    /// Where the sealing keys of peers are pinned ([`interlink_store::pins`]), shared by the
    /// user's sessions (`<home>/sealing_keys.json`); `None` keeps them in memory. The
    /// mailbox passes peers issued this user are kept beside it
    /// ([`interlink_store::passes::PASSES_FILE`]).
    pub pins_file: Option<PathBuf>,
    /// The address book ([`interlink_store::address_book`], `<home>/addresses.json`),
    /// shared by the user's sessions: where paired identities and this user's own were
    /// reached, dialled at start and after a network change. `None` keeps it in memory.
    pub address_book: Option<PathBuf>,
}

/// A handle to libp2p's metrics, registered in a `prometheus-client` registry by
/// whoever serves them.
#[derive(Clone)]
pub struct SwarmMetrics(pub std::sync::Arc<libp2p::metrics::Metrics>);

impl std::fmt::Debug for SwarmMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SwarmMetrics")
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            clock: crate::Clock::system(),
            network: Network::default(),
            listen: default_listen(),
            well_known_port: 0,
            hold_well_known_port: false,
            bootstrap: Vec::new(),
            mdns: true,
            idle_connection_timeout: Duration::from_secs(3600),
            heartbeat: Duration::from_millis(HEARTBEAT_MS),
            presence: interlink_core::presence::Config {
                live_window_ms: LIVE_WINDOW_MS,
                away_retention_ms: AWAY_RETENTION_MS,
                ..Default::default()
            },
            max_dialed_peers: 24,
            delivery: Delivery::default(),
            relays: Vec::new(),
            relay_server: false,
            external_addrs: Vec::new(),
            max_mailbox_records: crate::behaviour::MAX_MAILBOX_RECORDS,
            max_process_memory: None,
            mailbox_streams_per_connection: crate::behaviour::MAILBOX_STREAMS_PER_CONNECTION,
            deliver_streams_per_connection: crate::behaviour::DELIVER_STREAMS_PER_CONNECTION,
            live_streams: true,
            network_growth_burst: crate::behaviour::NETWORK_GROWTH_BURST,
            max_held_bytes: crate::behaviour::MAX_HELD_BYTES,
            swarm_metrics: None,
            tailnet: None,
        }
    }
}

/// All interfaces, TCP and QUIC, port 0.
pub fn default_listen() -> Vec<Multiaddr> {
    ["/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"]
        .iter()
        .filter_map(|a| a.parse().ok())
        .collect()
}
