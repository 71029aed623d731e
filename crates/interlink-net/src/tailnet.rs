//! Tailnet discovery, the IO-free part: what `tailscale status --json` says
//! ([`parse_status`]), and which of its online peers to probe at the well-known port,
//! when ([`Probes`]).
//!
//! A tailnet has no multicast, so mDNS finds nothing across it; but the Tailscale CLI
//! knows every device of the tailnet and whether it is online. A session probes the
//! online ones at [`crate::config::WELL_KNOWN_PORT`] (one session of each host listens
//! there): a dial with no peer id, answered by whatever interlink node holds the port —
//! identify and presence then decide what the connection is, as for a peer found by
//! mDNS. The node's shell (`node::tailnet`) runs the CLI and dials; this module only
//! decides, on a clock the caller gives, so its tests run without a network or a CLI.
//!
//! Bounds: at most [`Config::max_peers`] peers are tracked (the rest of a large tailnet
//! is never probed), probes are paced by a token bucket ([`Config::probes_per_minute`]),
//! a peer that answered is not probed again while its connection lasts, and one that
//! did not is probed again only after a backoff that doubles up to
//! [`Config::max_backoff`].

use std::{
    collections::{BTreeMap, VecDeque},
    net::IpAddr,
    time::{Duration, Instant},
};

use libp2p::{Multiaddr, multiaddr::Protocol};
use serde::Deserialize;

/// The most bytes of `tailscale status --json` read: about 2 KB a peer, so room for a
/// few thousand devices; anything longer is refused rather than parsed.
pub const MAX_STATUS_BYTES: usize = 4 * 1024 * 1024;
/// The most online peers kept from one status (before [`Config::max_peers`] applies):
/// what the parse hands on is bounded whatever the tailnet's size.
pub const MAX_LISTED_PEERS: usize = 4096;
/// The most addresses kept per peer (Tailscale gives one IPv4 and one IPv6).
const MAX_IPS_PER_PEER: usize = 4;

/// The peers of the tailnet as one run of `tailscale status --json` saw them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// This device's own tailnet addresses (never probed).
    pub self_ips: Vec<IpAddr>,
    /// The online peers, each with its addresses, in the order of their node keys.
    pub online: Vec<Peer>,
    /// Peers listed offline (counted for the logs, never probed).
    pub offline: usize,
}

/// One online peer of the tailnet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Its host name, for the logs.
    pub host_name: String,
    /// Its tailnet addresses.
    pub ips: Vec<IpAddr>,
}

/// Why a status was not used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// More than [`MAX_STATUS_BYTES`].
    #[error("tailscale status is longer than {MAX_STATUS_BYTES} bytes")]
    TooLong,
    /// Not the JSON shape of `ipnstate.Status`.
    #[error("tailscale status is not the expected JSON: {0}")]
    Json(String),
    /// Tailscale runs but is not connected (`BackendState` other than `Running`): its
    /// peer list is stale.
    #[error("tailscale is not running (BackendState {0:?})")]
    NotRunning(String),
}

/// The fields of Tailscale's `ipnstate.Status` this reads; the rest is ignored.
#[derive(Deserialize)]
struct RawStatus {
    #[serde(rename = "BackendState", default)]
    backend_state: Option<String>,
    #[serde(rename = "Self", default)]
    me: Option<RawPeer>,
    /// Keyed by node key; `null` or absent when the tailnet has no other device.
    #[serde(rename = "Peer", default)]
    peer: Option<BTreeMap<String, RawPeer>>,
}

/// The fields of `ipnstate.PeerStatus` this reads.
#[derive(Deserialize)]
struct RawPeer {
    #[serde(rename = "HostName", default)]
    host_name: Option<String>,
    #[serde(rename = "TailscaleIPs", default)]
    ips: Option<Vec<String>>,
    #[serde(rename = "Online", default)]
    online: Option<bool>,
}

/// Parses the output of `tailscale status --json`. Pure: the shell reads at most
/// [`MAX_STATUS_BYTES`] + 1 bytes and hands them here.
pub fn parse_status(bytes: &[u8]) -> Result<Status, ParseError> {
    if bytes.len() > MAX_STATUS_BYTES {
        return Err(ParseError::TooLong);
    }
    let raw: RawStatus =
        serde_json::from_slice(bytes).map_err(|e| ParseError::Json(e.to_string()))?;
    if let Some(state) = raw.backend_state
        && state != "Running"
    {
        return Err(ParseError::NotRunning(state.chars().take(32).collect()));
    }
    let self_ips = raw.me.map(|me| ips_of(&me)).unwrap_or_default();
    let mut status = Status {
        self_ips,
        ..Status::default()
    };
    for (_, peer) in raw.peer.unwrap_or_default() {
        if peer.online != Some(true) {
            status.offline += 1;
            continue;
        }
        let ips: Vec<IpAddr> = ips_of(&peer)
            .into_iter()
            .filter(|ip| !status.self_ips.contains(ip))
            .collect();
        if ips.is_empty() || status.online.len() >= MAX_LISTED_PEERS {
            continue;
        }
        status.online.push(Peer {
            host_name: peer
                .host_name
                .unwrap_or_default()
                .chars()
                .filter(|c| !c.is_control())
                .take(64)
                .collect(),
            ips,
        });
    }
    Ok(status)
}

/// A peer's usable addresses: parsed, unicast, at most [`MAX_IPS_PER_PEER`].
fn ips_of(peer: &RawPeer) -> Vec<IpAddr> {
    peer.ips
        .iter()
        .flatten()
        .filter_map(|s| s.parse::<IpAddr>().ok())
        .filter(|ip| !ip.is_unspecified() && !ip.is_loopback() && !ip.is_multicast())
        .take(MAX_IPS_PER_PEER)
        .collect()
}

/// The bounds and timers of [`Probes`].
#[derive(Clone, Debug)]
pub struct Config {
    /// The port probed (the well-known port).
    pub port: u16,
    /// The most peers tracked and probed; the rest of a larger tailnet is left alone.
    pub max_peers: usize,
    /// Probes started per minute at most, and the burst allowed at once.
    pub probes_per_minute: u32,
    /// How long a probe may take before it counts as unanswered.
    pub probe_timeout: Duration,
    /// First wait before probing again a peer that did not answer; doubles.
    pub min_backoff: Duration,
    /// Longest wait before probing again a peer that did not answer.
    pub max_backoff: Duration,
    /// How often the tailnet's status is read again.
    pub refresh: Duration,
    /// Shortest time between two reads of the status (a change of network reports
    /// several addresses at once).
    pub min_refresh: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            port: crate::config::WELL_KNOWN_PORT,
            max_peers: MAX_PEERS,
            probes_per_minute: PROBES_PER_MINUTE,
            probe_timeout: Duration::from_secs(20),
            min_backoff: Duration::from_secs(60),
            max_backoff: Duration::from_secs(30 * 60),
            refresh: Duration::from_secs(5 * 60),
            min_refresh: Duration::from_secs(10),
        }
    }
}

/// The most tailnet peers probed (a person's or a small team's devices fit many times).
pub const MAX_PEERS: usize = 64;
/// Probes started per minute at most (also the burst at start): 64 peers are all
/// probed within two minutes of start.
pub const PROBES_PER_MINUTE: u32 = 32;

/// A connection that lasted this long was a session's, not a node that drops whoever
/// dials it ([`Input::Disconnected`]).
const STABLE: Duration = Duration::from_secs(5 * 60);

/// What [`Probes`] is told.
#[derive(Clone, Debug)]
pub enum Input {
    /// A fresh status of the tailnet.
    Status(Status),
    /// The status could not be read (no CLI, a timeout, a parse error): tried again at
    /// the next refresh.
    StatusFailed,
    /// The probe of `ip` (or another connection with a peer at `ip`) connected.
    Answered(IpAddr),
    /// The probe of `ip` failed.
    NoAnswer(IpAddr),
    /// The last connection with the peer at `ip` closed: probe it again after the
    /// first backoff (its session may have been replaced by another of its host's).
    Disconnected(IpAddr),
    /// The host's addresses changed: read the status again, and probe the peers that
    /// did not answer without waiting out their backoff.
    NetworkChanged,
}

/// What [`Probes`] asks the shell to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Run `tailscale status --json` and hand back [`Input::Status`] or
    /// [`Input::StatusFailed`].
    ReadStatus,
    /// Dial `addr` with no peer id; hand back [`Input::Answered`] or
    /// [`Input::NoAnswer`] for `ip`.
    Dial {
        /// The peer's address.
        ip: IpAddr,
        /// `ip` at the well-known port, over TCP.
        addr: Multiaddr,
    },
}

/// Where one tracked peer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// To be probed at the given time.
    Due(Instant),
    /// A probe started at the given time.
    Probing(Instant),
    /// Connected since the given time: not probed while the connection lasts.
    Answered(Instant),
}

#[derive(Clone, Debug)]
struct Target {
    ip: IpAddr,
    state: State,
    /// The wait after the next unanswered probe.
    backoff: Duration,
}

/// Counters for the logs and the benchmark.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Probes started.
    pub probes: u64,
    /// Probes answered.
    pub answered: u64,
    /// Probes unanswered (failed or timed out).
    pub unanswered: u64,
    /// Statuses read.
    pub statuses: u64,
    /// Online peers left out by [`Config::max_peers`] at the last status.
    pub over_cap: usize,
}

/// Which tailnet peers to probe, and when. `handle` inputs, then take every
/// `poll_output`, and call `handle_timeout` at `poll_timeout`.
#[derive(Debug)]
pub struct Probes {
    config: Config,
    targets: Vec<Target>,
    /// Probe tokens available, and when the bucket was last refilled.
    tokens: f64,
    refilled: Instant,
    /// When the status is to be read next; `None` while a read runs.
    next_read: Option<Instant>,
    /// When the last read was asked for.
    last_read: Option<Instant>,
    outputs: VecDeque<Output>,
    stats: Stats,
}

impl Probes {
    /// A component that reads the status at `now`.
    pub fn new(config: Config, now: Instant) -> Self {
        let tokens = f64::from(config.probes_per_minute);
        Self {
            config,
            targets: Vec::new(),
            tokens,
            refilled: now,
            next_read: Some(now),
            last_read: None,
            outputs: VecDeque::new(),
            stats: Stats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Feeds one input.
    pub fn handle(&mut self, input: Input, now: Instant) {
        match input {
            Input::Status(status) => self.on_status(status, now),
            Input::StatusFailed => {
                self.next_read = Some(now + self.config.refresh);
            }
            Input::Answered(ip) => {
                if let Some(t) = self.targets.iter_mut().find(|t| t.ip == ip) {
                    if matches!(t.state, State::Probing(_)) {
                        self.stats.answered += 1;
                    }
                    if !matches!(t.state, State::Answered(_)) {
                        t.state = State::Answered(now);
                    }
                }
            }
            Input::NoAnswer(ip) => self.unanswered(ip, now),
            Input::Disconnected(ip) => {
                let (min, max) = (self.config.min_backoff, self.config.max_backoff);
                if let Some(t) = self.target_mut(ip)
                    && let State::Answered(since) = t.state
                {
                    // A connection that lasted was a session: probe again after the
                    // first backoff (another session of that host may hold the port
                    // now). One dropped at once (a node of another overlay, which is
                    // disconnected after identify) backs off as an unanswered probe
                    // does, so it is not reconnected every minute.
                    if now.saturating_duration_since(since) >= STABLE {
                        t.backoff = min;
                    }
                    t.state = State::Due(now + t.backoff);
                    t.backoff = (t.backoff * 2).min(max);
                }
            }
            Input::NetworkChanged => {
                for t in &mut self.targets {
                    if let State::Due(_) = t.state {
                        t.state = State::Due(now);
                        t.backoff = self.config.min_backoff;
                    }
                }
                let earliest = self
                    .last_read
                    .map_or(now, |at| (at + self.config.min_refresh).max(now));
                if let Some(next) = &mut self.next_read {
                    *next = (*next).min(earliest);
                }
            }
        }
        self.run(now);
    }

    /// Acts on the time: reads due, probes due, probes timed out.
    pub fn handle_timeout(&mut self, now: Instant) {
        let timeout = self.config.probe_timeout;
        let late: Vec<IpAddr> = self
            .targets
            .iter()
            .filter(|t| matches!(t.state, State::Probing(at) if now >= at + timeout))
            .map(|t| t.ip)
            .collect();
        for ip in late {
            self.unanswered(ip, now);
        }
        self.run(now);
    }

    /// The next thing to do, if any.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When [`Probes::handle_timeout`] has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let token_at = if self.tokens >= 1.0 {
            self.refilled
        } else {
            let per_token = 60.0 / f64::from(self.config.probes_per_minute.max(1));
            self.refilled + Duration::from_secs_f64((1.0 - self.tokens) * per_token)
        };
        let probes = self.targets.iter().filter_map(|t| match t.state {
            State::Due(at) => Some(at.max(token_at)),
            State::Probing(at) => Some(at + self.config.probe_timeout),
            State::Answered(_) => None,
        });
        probes.chain(self.next_read).min()
    }

    /// Whether `ip` is one of the peers tracked.
    pub fn tracks(&self, ip: IpAddr) -> bool {
        self.targets.iter().any(|t| t.ip == ip)
    }

    fn target_mut(&mut self, ip: IpAddr) -> Option<&mut Target> {
        self.targets.iter_mut().find(|t| t.ip == ip)
    }

    fn unanswered(&mut self, ip: IpAddr, now: Instant) {
        let max = self.config.max_backoff;
        if let Some(t) = self.targets.iter_mut().find(|t| t.ip == ip)
            && matches!(t.state, State::Probing(_))
        {
            t.state = State::Due(now + t.backoff);
            t.backoff = (t.backoff * 2).min(max);
            self.stats.unanswered += 1;
        }
    }

    fn on_status(&mut self, status: Status, now: Instant) {
        self.stats.statuses += 1;
        self.next_read = Some(now + self.config.refresh);
        // One address per peer: IPv4 where it has one (every Tailscale device does,
        // unless the tailnet is IPv6-only), so a device costs one probe, not two.
        let wanted: Vec<IpAddr> = status
            .online
            .iter()
            .filter_map(|p| {
                p.ips
                    .iter()
                    .find(|ip| ip.is_ipv4())
                    .or_else(|| p.ips.first())
                    .copied()
            })
            .filter(|ip| !status.self_ips.contains(ip))
            .collect();
        self.stats.over_cap = wanted.len().saturating_sub(self.config.max_peers);
        let wanted = &wanted[..wanted.len().min(self.config.max_peers)];
        // Peers gone offline are forgotten (their connections, if any, live on their
        // own); peers still online keep their state and backoff.
        self.targets.retain(|t| wanted.contains(&t.ip));
        for ip in wanted {
            if self.target_mut(*ip).is_none() {
                self.targets.push(Target {
                    ip: *ip,
                    state: State::Due(now),
                    backoff: self.config.min_backoff,
                });
            }
        }
    }

    /// Queues what is due at `now`: a status read, and probes while tokens last.
    fn run(&mut self, now: Instant) {
        if self.next_read.is_some_and(|at| at <= now) {
            self.next_read = None;
            self.last_read = Some(now);
            self.outputs.push_back(Output::ReadStatus);
        }
        self.refill(now);
        let port = self.config.port;
        for t in &mut self.targets {
            if self.tokens < 1.0 {
                break;
            }
            if let State::Due(at) = t.state
                && at <= now
            {
                self.tokens -= 1.0;
                self.stats.probes += 1;
                t.state = State::Probing(now);
                self.outputs.push_back(Output::Dial {
                    ip: t.ip,
                    addr: tcp_addr(t.ip, port),
                });
            }
        }
    }

    fn refill(&mut self, now: Instant) {
        let rate = f64::from(self.config.probes_per_minute);
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate / 60.0).min(rate);
        self.refilled = now;
    }
}

/// `/ip4|ip6/<ip>/tcp/<port>`.
pub fn tcp_addr(ip: IpAddr, port: u16) -> Multiaddr {
    Multiaddr::empty()
        .with(Protocol::from(ip))
        .with(Protocol::Tcp(port))
}

/// The IP an address starts with, if it does.
pub fn ip_of(addr: &Multiaddr) -> Option<IpAddr> {
    match addr.iter().next()? {
        Protocol::Ip4(a) => Some(IpAddr::V4(a)),
        Protocol::Ip6(a) => Some(IpAddr::V6(a)),
        _ => None,
    }
}

#[cfg(test)]
#[path = "tailnet_tests.rs"]
mod tests;
