//! In-process nodes: complete session nodes on the memory transport with their own
//! inbox directories, nodes of any role from a config, bare swarms for hostile peers,
//! and bounded waits on rosters and inboxes.

use std::{sync::Arc, time::Duration};

use interlink_core::{
    Identity, SessionId,
    names::Network,
    trust::PeerPolicy,
    wire::{DeliveryMode, HostKind, SessionAddr},
};
use interlink_net::{
    Config, Delivery, Handle, Node, Role, SendOutcome, Sent, SessionSpec, behaviour::Behaviour,
};
use interlink_store::inbox::{self, INBOX_FILE};
use libp2p::{Multiaddr, PeerId, Swarm, multiaddr::Protocol};

/// The swarm key of a node of `role`: derived from identity and session for a session
/// (as in production), a fresh one otherwise.
pub fn key_for(role: &Role) -> libp2p::identity::Keypair {
    match role {
        Role::Session(s) => s.identity.transport_keypair(&s.session).unwrap(),
        Role::Observer | Role::Relay(_) => libp2p::identity::Keypair::generate_ed25519(),
    }
}

/// A real node swarm (noise, yamux, all behaviours) for `key` under `config`.
pub fn swarm(key: libp2p::identity::Keypair, config: &Config) -> Swarm<Behaviour> {
    interlink_net::build_swarm(key, config).unwrap()
}

/// A bare swarm with a fresh key and the overlay's protocols but no node logic: what a
/// hostile peer drives by hand.
pub fn raw_swarm(config: &Config) -> Swarm<Behaviour> {
    swarm(libp2p::identity::Keypair::generate_ed25519(), config)
}

/// [`raw_swarm`] on the in-process memory transport alone, negotiating each stream it
/// opens before writing to it (multistream-select V1, where the node's own swarm sends
/// its request with the proposal): a peer whose streams all stand open, negotiated,
/// before the first request arrives.
pub fn raw_swarm_negotiating_first(config: &Config) -> Swarm<Behaviour> {
    use libp2p::{
        Transport as _,
        core::{muxing::StreamMuxerBox, transport::MemoryTransport, upgrade::Version},
        noise, yamux,
    };
    libp2p::SwarmBuilder::with_new_identity()
        .with_tokio()
        .with_other_transport(|key| {
            Ok(MemoryTransport::default()
                .upgrade(Version::V1)
                .authenticate(noise::Config::new(key)?)
                .multiplex(yamux::Config::default())
                .map(|(peer, muxer), _| (peer, StreamMuxerBox::new(muxer))))
        })
        .unwrap()
        .with_behaviour(|key| Behaviour::new(key, config, None).unwrap())
        .unwrap()
        .with_swarm_config(|c| {
            c.with_substream_upgrade_protocol_override(Version::V1)
                .with_idle_connection_timeout(config.idle_connection_timeout)
        })
        .build()
}

/// A node of `role` under `config`, with the key [`key_for`] gives it.
pub fn spawn(config: Config, role: Role) -> Node {
    let swarm = swarm(key_for(&role), &config);
    Node::spawn(swarm, config, role).unwrap()
}

/// A session role of `identity#session` with the given working directory and summary
/// (host `Other`, delivery `Poll`).
pub fn session_role(
    identity: Arc<Identity>,
    session: &SessionId,
    cwd: &str,
    summary: &str,
) -> Role {
    Role::Session(Box::new(SessionSpec {
        identity,
        session: session.clone(),
        cwd: cwd.into(),
        git_label: None,
        project: None,
        summary: summary.into(),
        host: HostKind::Other,
        delivery: DeliveryMode::Poll,
        visibility: interlink_net::Visibility::Announced,
    }))
}

/// A session node with its state directory (inbox, pins) and address.
#[derive(Debug)]
pub struct Peer {
    pub node: Node,
    /// Its identity and session.
    pub addr: SessionAddr,
    /// Its state directory.
    pub dir: tempfile::TempDir,
}

impl Peer {
    /// The node's handle.
    pub fn handle(&self) -> Handle {
        self.node.handle()
    }

    /// The texts in its inbox, in order.
    pub fn inbox_texts(&self) -> Vec<String> {
        let (entries, _) = inbox::read_from(&self.dir.path().join(INBOX_FILE), 0).unwrap();
        entries.into_iter().filter_map(|e| e.text).collect()
    }
}

/// A block of 1,000 `/memory` ports no other caller in this process gets: the memory
/// transport's ports are one registry per process, which every test of a test binary
/// shares while they run in parallel.
pub fn memory_base() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(100_000);
    NEXT.fetch_add(1_000, std::sync::atomic::Ordering::Relaxed)
}

/// `/memory/<port>`.
pub fn memory(port: u64) -> Multiaddr {
    format!("/memory/{port}").parse().unwrap()
}

/// Starts session `session` of the identity `[seed; 32]` on `/memory/<port>` in a new
/// state directory, trusting `peers`, bootstrapping to `boot`.
pub fn start(
    port: u64,
    seed: u8,
    session: &str,
    peers: &[(&str, &Identity)],
    boot: Option<(u64, PeerId)>,
) -> Peer {
    start_in(
        tempfile::tempdir().unwrap(),
        port,
        seed,
        session,
        peers,
        boot,
    )
}

/// Like `start`, with a given state directory (to restart a session over its inbox).
pub fn start_in(
    dir: tempfile::TempDir,
    port: u64,
    seed: u8,
    session: &str,
    peers: &[(&str, &Identity)],
    boot: Option<(u64, PeerId)>,
) -> Peer {
    start_with(dir, port, seed, session, peers, boot, &[])
}

/// Like `start_in`, using `relays`.
pub fn start_with(
    dir: tempfile::TempDir,
    port: u64,
    seed: u8,
    session: &str,
    peers: &[(&str, &Identity)],
    boot: Option<(u64, PeerId)>,
    relays: &[Multiaddr],
) -> Peer {
    start_tuned(dir, port, seed, session, peers, boot, relays, |_| {})
}

/// Like `start_with`, with `tune` applied to the node's config last.
#[allow(clippy::too_many_arguments)] // start_with's, and the one it adds
pub fn start_tuned(
    dir: tempfile::TempDir,
    port: u64,
    seed: u8,
    session: &str,
    peers: &[(&str, &Identity)],
    boot: Option<(u64, PeerId)>,
    relays: &[Multiaddr],
    tune: impl FnOnce(&mut Config),
) -> Peer {
    let identity = Arc::new(Identity::from_seed(&[seed; 32]));
    let session = SessionId::new(session).unwrap();
    let mut policy = PeerPolicy::new();
    for (name, id) in peers {
        policy.add(*name, id.public()).unwrap();
    }
    let mut config = Config {
        max_process_memory: crate::IN_PROCESS_MEMORY,
        network: Network::default(),
        listen: vec![memory(port)],
        bootstrap: boot
            .map(|(p, id)| vec![memory(p).with(Protocol::P2p(id))])
            .unwrap_or_default(),
        mdns: false,
        relays: relays.to_vec(),
        delivery: Delivery {
            inbox_dir: Some(dir.path().to_owned()),
            policy,
            pins_file: Some(dir.path().join(interlink_store::pins::PINS_FILE)),
            address_book: None,
        },
        ..Config::default()
    };
    tune(&mut config);
    let key = identity.transport_keypair(&session).unwrap();
    let swarm = interlink_net::build_swarm(key, &config).unwrap();
    let addr = SessionAddr {
        key: identity.public(),
        session: session.clone(),
    };
    let role = Role::Session(Box::new(SessionSpec {
        identity,
        session,
        cwd: "/tmp".into(),
        git_label: None,
        project: None,
        summary: String::new(),
        host: HostKind::Other,
        delivery: DeliveryMode::Poll,
        visibility: interlink_net::Visibility::Announced,
    }));
    Peer {
        node: Node::spawn(swarm, config, role).unwrap(),
        addr,
        dir,
    }
}

/// The receipt of a message the recipient's node answered live.
pub fn delivered(outcome: SendOutcome) -> Sent {
    match outcome {
        SendOutcome::Delivered(sent) => *sent,
        other => panic!("expected a live delivery, got {other:?}"),
    }
}

/// Waits (10 s at most, else panics) until every handle sees `want` sessions.
pub async fn wait_roster(handles: &[Handle], want: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut ok = true;
        for h in handles {
            let n: usize = h
                .roster()
                .await
                .unwrap()
                .iter()
                .map(|i| i.sessions.len())
                .sum();
            ok &= n == want;
        }
        if ok {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "rosters never reached {want}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (20 s at most, else panics) until `peer`'s inbox holds exactly `want`.
pub async fn wait_inbox(peer: &Peer, want: &[String]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let texts = peer.inbox_texts();
        if texts == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "inbox never reached {want:?}; it holds {texts:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (10 s at most, else panics) until `peer`'s home holds `owner`'s mailbox pass
/// (handed over by a receipt, an envelope or a pass offer: PROTOCOL §4.3).
pub async fn wait_pass(peer: &Peer, owner: &interlink_core::IdentityKey) {
    let path = peer.dir.path().join(interlink_store::passes::PASSES_FILE);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let passes =
            interlink_store::passes::MailboxPasses::load(Some(path.clone()), peer.addr.key);
        if passes.get(owner).is_some() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} never got the pass of {}",
            peer.addr,
            owner.fingerprint()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Three sessions: Carol (a holder, nobody's peer) whom Alice and Bob — peers of each
/// other — bootstrap to, all on each other's rosters.
#[derive(Debug)]
pub struct Trio {
    /// Alice's session.
    pub alice: Peer,
    /// Bob's session.
    pub bob: Peer,
    /// Carol's session.
    pub carol: Peer,
    /// Alice's identity (seed 1).
    pub alice_id: Identity,
    /// Bob's identity (seed 2).
    pub bob_id: Identity,
    /// Carol's port and peer id: the bootstrap point.
    pub boot: Option<(u64, PeerId)>,
}

/// Starts a [`Trio`] on memory ports `base..base + 3`.
pub async fn trio(base: u64) -> Trio {
    let (alice_id, bob_id) = (Identity::from_seed(&[1; 32]), Identity::from_seed(&[2; 32]));
    let carol = start(base, 9, "carol-1", &[], None);
    let boot = Some((base, carol.handle().peer_id()));
    let alice = start(base + 1, 1, "alice-1", &[("bob", &bob_id)], boot);
    let bob = start(base + 2, 2, "bob-1", &[("alice", &alice_id)], boot);
    wait_roster(&[alice.handle(), bob.handle(), carol.handle()], 3).await;
    Trio {
        alice,
        bob,
        carol,
        alice_id,
        bob_id,
        boot,
    }
}
