//! The short-lived session the pairing commands run (`pair request`, `invite`,
//! `join`): it takes the acceptance that comes back, and holds the knocks that arrive,
//! in a session directory of its own — so an answer that comes while no command runs
//! waits in its mailbox for the next one.

use std::time::Duration;

use anyhow::Context as _;
use interlink_core::{
    IdentityKey, SessionId,
    presence::Presence,
    routing::RouteRequest,
    wire::{DeliveryMode, EnvelopeKind, HostKind, INVITE_SECRET_BYTES, SessionAddr},
};
use interlink_mcp::cli::{
    route as sender,
    session::{Describe, POLICY_PICKUP, session_spec, start_node, wait_listening},
};
use interlink_net::{Config, Delivery, Handle, Node, SendOutcome};
use interlink_store::SessionLock;
use interlink_store::paths::{Home, SessionDir};
use interlink_store::{pairing, policy};
use libp2p::Multiaddr;

/// The session id of `pair request` and `join`: one for every run, so an acceptance
/// that arrives after a command gave up waiting is fetched by the next one.
pub const PAIR_SESSION: &str = "pair-cli";
/// How often the session's inbox and held knocks are read while waiting.
const POLL: Duration = Duration::from_millis(200);
/// Once a target shows on the roster, how long its sessions must stay unchanged
/// before one is chosen.
const ROUTE_SETTLE: Duration = Duration::from_millis(300);

/// A running pairing session.
pub struct PairingSession {
    node: Node,
    #[allow(missing_docs)]
    pub handle: Handle,
    /// Its address.
    pub own: SessionAddr,
    /// Its directory (inbox, held knocks).
    pub dir: SessionDir,
    /// The clock of the node's configuration, for everything the command stamps.
    pub clock: interlink_net::Clock,
    home: Home,
    _lock: SessionLock,
}

/// Longest wait for the well-known port's listen addresses to show.
const WELL_KNOWN_WAIT: Duration = Duration::from_secs(1);

impl std::fmt::Debug for PairingSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PairingSession")
            .field("own", &self.own)
            .finish_non_exhaustive()
    }
}

impl PairingSession {
    /// Starts session `session` of this user with `config` and waits until it listens.
    pub async fn start(
        home: &Home,
        mut config: Config,
        session: SessionId,
        summary: &str,
    ) -> anyhow::Result<Self> {
        let dir = home.session(&session)?;
        let lock = dir.claim("pair", config.clock.now_ms()).with_context(|| {
            format!("another pairing command is running in this home (session {session})")
        })?;
        config.delivery = Delivery {
            inbox_dir: Some(dir.path().to_owned()),
            policy: policy::load(home)?,
            pins_file: Some(home.pins()),
            address_book: Some(home.addresses()),
        };
        let describe = Describe {
            summary: summary.into(),
            cwd: std::env::current_dir().context("reading the current directory")?,
            host: HostKind::Other,
            delivery: DeliveryMode::Poll,
        };
        let spec = session_spec(home, session.clone(), describe)?;
        let key = spec.identity.public();
        let node = start_node(spec, &config)?;
        let handle = node.handle();
        if let Err(e) = wait_listening(&handle, &config.listen).await {
            node.shutdown().await;
            return Err(e.into());
        }
        Ok(Self {
            node,
            handle,
            own: SessionAddr { key, session },
            dir,
            clock: config.clock,
            home: home.clone(),
            _lock: lock,
        })
    }

    /// Its listen addresses, each ending in `/p2p/<peer id>`.
    pub async fn addrs(&self) -> anyhow::Result<Vec<Multiaddr>> {
        let peer = self.handle.peer_id();
        Ok(self
            .handle
            .diagnostics()
            .await?
            .listen_addrs
            .iter()
            .map(|a| interlink_net::dialable(a, peer))
            .collect())
    }

    /// Its listen addresses as [`PairingSession::addrs`], once those on the host's
    /// well-known port are among them if it holds the port (they appear a moment
    /// after the others; waited for at most [`WELL_KNOWN_WAIT`]).
    pub async fn addrs_with_well_known(&self) -> anyhow::Result<Vec<Multiaddr>> {
        let until = tokio::time::Instant::now() + WELL_KNOWN_WAIT;
        loop {
            let diag = self.handle.diagnostics().await?;
            let shown = match diag.well_known_port {
                None => true,
                Some(port) => diag.listen_addrs.iter().any(|a| {
                    a.iter()
                        .any(|p| matches!(p, libp2p::multiaddr::Protocol::Tcp(n) if n == port))
                }),
            };
            if shown || tokio::time::Instant::now() >= until {
                let peer = self.handle.peer_id();
                return Ok(diag
                    .listen_addrs
                    .iter()
                    .map(|a| interlink_net::dialable(a, peer))
                    .collect());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The identity on the roster that `text` designates — a full key, or a
    /// fingerprint or key prefix of at least 4 hex digits — waiting up to `wait` for
    /// it to show.
    pub async fn find_identity(&self, text: &str, wait: Duration) -> anyhow::Result<IdentityKey> {
        let pattern = interlink_core::trust::KeyPattern::parse(text).with_context(|| {
            format!(
                "{text:?}: give a peer's name, or the fingerprint `interlink-p2p peers` shows \
                 (at least 4 hex digits of it or of the key)"
            )
        })?;
        let until = tokio::time::Instant::now() + wait;
        loop {
            let hits: Vec<IdentityKey> = self
                .handle
                .roster()
                .await?
                .iter()
                .map(|i| i.key)
                .filter(|k| *k != self.own.key && pattern.matches(k))
                .collect();
            match hits.as_slice() {
                [one] => return Ok(*one),
                [] if tokio::time::Instant::now() < until => {
                    tokio::time::sleep(POLL).await;
                }
                [] => anyhow::bail!(
                    "no identity on the overlay matches {text:?} within {wait:?}; {}",
                    "check `interlink-p2p peers`: a knock needs one of its sessions online"
                ),
                many => anyhow::bail!(
                    "{text:?} matches several identities: {}; give more digits",
                    many.iter()
                        .map(|k| k.fingerprint().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
    }

    /// A live session of `key` to knock: `preferred` if it is on the roster, else the
    /// one the routing rules choose; waits up to `wait` for one to show.
    pub async fn live_session(
        &self,
        key: IdentityKey,
        preferred: Option<&SessionId>,
        wait: Duration,
    ) -> anyhow::Result<SessionId> {
        let until = tokio::time::Instant::now() + wait;
        loop {
            let roster = self.handle.roster().await?;
            let sessions: Vec<_> = roster
                .iter()
                .filter(|i| i.key == key)
                .flat_map(|i| &i.sessions)
                .filter(|s| s.presence != Presence::Gone)
                .collect();
            if let Some(p) = preferred
                && sessions.iter().any(|s| s.addr.session == *p)
            {
                return Ok(p.clone());
            }
            if !sessions.is_empty() || tokio::time::Instant::now() >= until {
                let req = RouteRequest {
                    target: key,
                    session: None,
                    own: &self.own,
                    sticky: None,
                    remembered: None,
                };
                let settle = sender::Wait {
                    until: tokio::time::Instant::now() + ROUTE_SETTLE,
                    settle: ROUTE_SETTLE,
                };
                match sender::route_when_seen(&self.handle, &req, settle).await {
                    Ok(r) if r.presence != Presence::Gone => return Ok(r.session),
                    _ if tokio::time::Instant::now() < until => {}
                    _ => anyhow::bail!(
                        "no session of {} showed on the overlay within {} s",
                        key.fingerprint(),
                        wait.as_secs()
                    ),
                }
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Sends a knock (with an invite's secret, for `join`) or an acceptance to `to`;
    /// returns `delivered` or `queued`.
    pub async fn send(
        &self,
        to: SessionAddr,
        kind: EnvelopeKind,
        name: &str,
        invite: Option<[u8; INVITE_SECRET_BYTES]>,
    ) -> anyhow::Result<&'static str> {
        match sender::send_pairing_with(&self.handle, name, to, kind, invite).await? {
            SendOutcome::Delivered(_) => Ok("delivered"),
            SendOutcome::Queued { .. } => {
                // Leave it a moment to reach the mailbox holders before the node stops.
                let _ = self.handle.settle(Duration::from_secs(3)).await;
                Ok("queued")
            }
        }
    }

    /// Applies the edited `peers.json` to this node, then waits until the home's other
    /// running sessions have too, before an acceptance tells the other side to write.
    pub async fn admit_edited_peers(&self) -> anyhow::Result<()> {
        self.handle.set_policy(policy::load(&self.home)?).await?;
        tokio::time::sleep(POLICY_PICKUP).await;
        Ok(())
    }

    /// Waits up to `wait` for `key` to accept this user's request (a `pair_accept` in
    /// this session's inbox, also one that arrived during an earlier run); then pins
    /// it like the MCP side does and returns its petname.
    pub async fn wait_accept(
        &self,
        key: &IdentityKey,
        wait: Duration,
    ) -> anyhow::Result<Option<String>> {
        let until = tokio::time::Instant::now() + wait;
        let hex = key.to_hex();
        // The whole inbox once (an acceptance may have come in an earlier run), then
        // only what was appended since.
        let mut offset = 0;
        loop {
            let (entries, end) =
                interlink_store::inbox::read_positioned_from(&self.dir.inbox(), offset)?;
            offset = end;
            if let Some((accept, _)) = entries
                .iter()
                .rev()
                .find(|(e, _)| e.kind == EnvelopeKind::PairAccept && e.sender == hex)
            {
                let asked = pairing::take_outgoing(&self.home, key)?;
                let name = policy::edit(&self.home, |p| {
                    if let Some(existing) = p.name_of(key) {
                        return Ok::<_, anyhow::Error>(existing.to_owned());
                    }
                    let petname = asked.and_then(|a| a.petname);
                    let name =
                        pairing::free_name(p, petname.as_deref().or(accept.name.as_deref()), key);
                    p.add(name.clone(), *key)?;
                    Ok(name)
                })?;
                return Ok(Some(name));
            }
            if tokio::time::Instant::now() >= until {
                return Ok(None);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The knocks this session's node holds (strangers'), newest last.
    pub fn held_knocks(&self) -> Vec<interlink_store::knocks::HeldKnock> {
        interlink_store::knocks::load(self.dir.path())
    }

    /// Stops the node (the goodbye first).
    pub async fn shutdown(self) {
        self.node.shutdown().await;
    }
}
