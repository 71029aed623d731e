//! When presence work happens: the IO-free state machine the node drives and the
//! presence simulator drives too ([`super::sim`], behind the `sim` feature).
//!
//! The roster ([`super::Roster`]) decides *what* a node holds; the pacer decides *when*
//! the node talks about it:
//!
//! - **heartbeats**: a full announcement when one is owed (start, a changed summary or
//!   address), else a beacon once the interval promised by the last one has passed
//!   ([`Pacer::heartbeat_interval_ms`], the adaptive rule of [`super::heartbeat`]);
//! - **roster sync**: a full request (the summary) to each peer as it joins the
//!   presence topic, and a digest request to it [`Config::recheck_after_ms`] later;
//! - **anti-entropy**: one connected peer in turn, a full request every
//!   [`Config::fast_sync_ms`] while the roster grows, else a digest request every
//!   [`Config::sync_interval_ms`]; a digest answered "different" is followed by a full
//!   request;
//! - **joining the DHT** once presence has settled.
//!
//! Time is passed in (milliseconds on any monotone-enough clock: the node passes the
//! wall clock, the simulator its own), randomness is a seed, and every decision comes
//! out as an [`Output`]: `handle(input, now)`, `handle_timeout(now)`, then
//! `poll_output()` until `None`, and `poll_timeout()` says when to call again.

use std::collections::{BTreeSet, VecDeque};

use super::heartbeat::{MIN_HEARTBEAT_MS, interval_for_rate};
use crate::limits::{HEARTBEAT_MS, SECOND_MS, TARGET_ANNOUNCEMENTS_PER_S};

/// Most connected peers the pacer takes turns over; past it a new peer is not
/// synced with by anti-entropy (it still gets its fetch on joining the topic). The
/// node's connection limits keep far below it.
pub const MAX_PEERS: usize = 4_096;

/// Most peers waiting for their second look at once; past it the oldest goes
/// (anti-entropy covers it).
pub const MAX_RECHECKS: usize = 256;

/// Most outputs waiting to be polled. A single input makes at most a handful; the
/// bound only matters to a driver that never polls.
const MAX_OUTPUTS: usize = 1_024;

/// What a roster request asks (PROTOCOL.md §8.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ask {
    /// The summary, when a peer joins the presence topic: what the responder holds
    /// that the requester does not name.
    Connect,
    /// The summary, for anti-entropy: what it brings gossip missed, and the node
    /// publishes that again.
    Repair,
    /// Only whether the responder holds the same versions (a digest).
    Digest,
}

/// Timings of a [`Pacer`]. The defaults are the node's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Anti-entropy once the roster has settled: a digest request this often, ms. An
    /// announcement that missed the gossip mesh is picked up within it instead of
    /// waiting for the next heartbeat.
    pub sync_interval_ms: u64,
    /// Anti-entropy while the roster grows: a full request this often, ms.
    /// Announcements published before the gossip mesh formed reach only part of the
    /// overlay; a fetch a second brings exactly what is missing, where waiting 10 s a
    /// round made a 100-node cold start take tens of seconds (issue 15).
    pub fast_sync_ms: u64,
    /// The roster is growing while a session new to it arrived within this long (and
    /// for this long after start), ms.
    pub settle_ms: u64,
    /// The second look at a peer after it joined the presence topic, ms: what reached
    /// the peer between its answer to the first fetch and our joining its gossip mesh
    /// was forwarded to its mesh without us, and gossipsub repairs only towards peers
    /// outside the mesh (found by the convergence bench at a cold start of 100 nodes).
    pub recheck_after_ms: u64,
    /// The DHT is joined once the roster has not grown for this long, ms…
    pub dht_settle_ms: u64,
    /// …or this long after start, whichever comes first, ms. A routing table of fewer
    /// than 20 peers makes Kademlia walk the DHT, which in an overlay of a few hundred
    /// sessions dials nearly every node; at a cold start every node walked at once and
    /// the burst of handshakes delayed presence by seconds (100 nodes: 1.3 s without,
    /// 4 s with). Presence needs only the gossip mesh and roster fetches.
    pub dht_join_latest_ms: u64,
    /// Whether there is a session to announce (observers and relays have none:
    /// no heartbeats).
    pub announces: bool,
    /// The heartbeat of a small roster, ms (the node's configured heartbeat).
    pub heartbeat_ms: u64,
    /// The adaptive rule's overlay-wide target, announcements a second
    /// ([`interval_for_rate`]); `None` keeps `heartbeat_ms` at every size.
    pub target_announcements_per_s: Option<u64>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            sync_interval_ms: 10 * SECOND_MS,
            fast_sync_ms: SECOND_MS,
            settle_ms: 10 * SECOND_MS,
            recheck_after_ms: 500,
            dht_settle_ms: SECOND_MS,
            dht_join_latest_ms: 5 * SECOND_MS,
            announces: true,
            heartbeat_ms: HEARTBEAT_MS,
            target_announcements_per_s: Some(TARGET_ANNOUNCEMENTS_PER_S),
        }
    }
}

/// What happened, for the pacer to decide on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input<P> {
    /// The driver's periodic tick (the node's second). `roster_len` is the number of
    /// sessions the roster holds, own included: it sets the heartbeat interval.
    Tick {
        /// Sessions held.
        roster_len: usize,
    },
    /// A connection to `P` is up (the first one).
    PeerConnected(P),
    /// The last connection to `P` closed.
    PeerDisconnected(P),
    /// `P` joined the presence topic: fetch its roster now and look again shortly.
    PeerSubscribed(P),
    /// A session new to the roster was added.
    RosterGrew,
    /// A digest request to `peer` was answered.
    DigestAnswered {
        /// Who answered.
        peer: P,
        /// Whether it holds the same versions.
        same: bool,
    },
    /// What this session announces changed (summary, addresses, delivery mode): the
    /// next heartbeat is a full announcement.
    AnnouncementChanged,
    /// This session published an announcement or a beacon promising `interval_ms`.
    Announced {
        /// The interval it promised.
        interval_ms: u64,
    },
    /// Something needs the DHT before presence has settled (a mailbox copy to place,
    /// a peer walking the DHT through this node).
    DhtNeeded,
}

/// What the driver does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output<P> {
    /// Send `peer` a roster request.
    AskRoster {
        /// To whom.
        peer: P,
        /// A summary (`Connect`, `Repair`) or a digest.
        ask: Ask,
    },
    /// Sign and publish a full announcement promising `interval_ms`, then report
    /// [`Input::Announced`]. A driver that cannot yet (no address, nobody to take it)
    /// does not report it, and the next tick asks again.
    Announce {
        /// The interval to promise.
        interval_ms: u64,
    },
    /// Sign and publish a beacon promising `interval_ms`, then report
    /// [`Input::Announced`].
    Beacon {
        /// The interval to promise.
        interval_ms: u64,
    },
    /// Join the DHT now: give Kademlia the peers identified so far.
    JoinDht,
}

/// The presence pacer of one node; `P` names a peer (the node's `PeerId`, the
/// simulator's node index).
#[derive(Clone, Debug)]
pub struct Pacer<P> {
    config: Config,
    started: u64,
    /// When a session new to the roster was last added (start counts).
    grew_at: Option<u64>,
    last_sync: Option<u64>,
    /// Round-robin position, started at the seed so nodes do not all begin with the
    /// same peer.
    sync_turn: usize,
    peers: BTreeSet<P>,
    /// Peers whose roster is looked at again, and when; in time order (one delay).
    rechecks: VecDeque<(P, u64)>,
    dht_joined: bool,
    /// A full announcement is owed.
    announce_due: bool,
    /// When this session last announced or beaconed, and the interval it promised.
    last_announce: Option<(u64, u64)>,
    outputs: VecDeque<Output<P>>,
}

impl<P: Ord + Copy> Pacer<P> {
    /// A pacer for a node started at `now`; `seed` picks where the anti-entropy round
    /// robin begins.
    pub fn new(config: Config, now: u64, seed: u64) -> Self {
        Self {
            config,
            started: now,
            grew_at: Some(now),
            last_sync: None,
            sync_turn: usize::try_from(seed).unwrap_or(usize::MAX),
            peers: BTreeSet::new(),
            rechecks: VecDeque::new(),
            dht_joined: false,
            announce_due: true,
            last_announce: None,
            outputs: VecDeque::new(),
        }
    }

    /// A pacer for a node that has been running a while (the simulator's converged
    /// overlay): its roster settled, the DHT joined, its last anti-entropy round at
    /// `last_sync` and its last heartbeat at `announced` promising `interval_ms`.
    pub fn running(config: Config, seed: u64, last_sync: u64, announced: (u64, u64)) -> Self {
        let mut p = Self::new(config, 0, seed);
        p.grew_at = None;
        p.dht_joined = true;
        p.last_sync = Some(last_sync);
        p.announce_due = false;
        p.last_announce = Some(announced);
        p
    }

    /// Its timings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether a full announcement is owed.
    pub fn announce_due(&self) -> bool {
        self.announce_due
    }

    /// Whether this session has announced at all.
    pub fn has_announced(&self) -> bool {
        self.last_announce.is_some()
    }

    /// Whether the DHT is joined.
    pub fn dht_joined(&self) -> bool {
        self.dht_joined
    }

    /// Whether a session new to the roster arrived within [`Config::settle_ms`].
    pub fn roster_growing(&self, now: u64) -> bool {
        self.grew_at
            .is_some_and(|t| now.saturating_sub(t) < self.config.settle_ms)
    }

    /// The interval a session holding `roster_len` sessions promises: the configured
    /// heartbeat, or longer on a large roster, so each node's presence traffic stays
    /// flat as the overlay grows ([`super::heartbeat`]).
    pub fn heartbeat_interval_ms(&self, roster_len: usize) -> u64 {
        let base = self.config.heartbeat_ms.max(1);
        match self.config.target_announcements_per_s {
            Some(target) => {
                let adaptive = interval_for_rate(roster_len, target);
                if adaptive > MIN_HEARTBEAT_MS {
                    base.max(adaptive)
                } else {
                    base
                }
            }
            None => base,
        }
    }

    /// Takes `input`, at `now`.
    pub fn handle(&mut self, input: Input<P>, now: u64) {
        match input {
            Input::Tick { roster_len } => self.tick(roster_len, now),
            Input::PeerConnected(peer) => {
                if self.peers.len() < MAX_PEERS {
                    self.peers.insert(peer);
                }
            }
            Input::PeerDisconnected(peer) => {
                self.peers.remove(&peer);
                self.rechecks.retain(|(p, _)| *p != peer);
            }
            Input::PeerSubscribed(peer) => {
                self.push(Output::AskRoster {
                    peer,
                    ask: Ask::Connect,
                });
                if self.rechecks.len() >= MAX_RECHECKS {
                    self.rechecks.pop_front();
                }
                self.rechecks
                    .push_back((peer, now.saturating_add(self.config.recheck_after_ms)));
            }
            Input::RosterGrew => self.grew_at = Some(now),
            Input::DigestAnswered { peer, same } => {
                if !same {
                    // The rosters differ: now the summary.
                    self.push(Output::AskRoster {
                        peer,
                        ask: Ask::Repair,
                    });
                }
            }
            Input::AnnouncementChanged => self.announce_due = true,
            Input::Announced { interval_ms } => {
                self.announce_due = false;
                self.last_announce = Some((now, interval_ms));
            }
            Input::DhtNeeded => self.join_dht(),
        }
    }

    /// Runs what is due at `now` between ticks: the second looks.
    pub fn handle_timeout(&mut self, now: u64) {
        while let Some(&(peer, at)) = self.rechecks.front() {
            if at > now {
                break;
            }
            self.rechecks.pop_front();
            if self.peers.contains(&peer) {
                self.push(Output::AskRoster {
                    peer,
                    ask: Ask::Digest,
                });
            }
        }
    }

    /// When [`Self::handle_timeout`] has work next, if ever.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.rechecks.front().map(|(_, at)| *at)
    }

    /// The next thing to do.
    pub fn poll_output(&mut self) -> Option<Output<P>> {
        self.outputs.pop_front()
    }

    fn push(&mut self, output: Output<P>) {
        if self.outputs.len() < MAX_OUTPUTS {
            self.outputs.push_back(output);
        }
    }

    fn tick(&mut self, roster_len: usize, now: u64) {
        self.handle_timeout(now);
        self.join_dht_when_settled(now);
        self.heartbeat(roster_len, now);
        self.anti_entropy(now);
    }

    /// A full announcement if one is owed, else a beacon once the promised interval
    /// has passed. By the clock passed in (the node's wall clock keeps counting while
    /// the machine sleeps, so a laptop that wakes beacons at once if it was away past
    /// its interval); a tick that is merely late beacons only when it is due (before,
    /// every late tick re-announced, and on an overloaded host that fed itself).
    fn heartbeat(&mut self, roster_len: usize, now: u64) {
        if !self.config.announces {
            return;
        }
        let interval_ms = self.heartbeat_interval_ms(roster_len);
        if self.announce_due {
            self.push(Output::Announce { interval_ms });
        } else if self
            .last_announce
            .is_none_or(|(at, every)| now.saturating_sub(at) >= every)
        {
            self.push(Output::Beacon { interval_ms });
        }
    }

    /// One connected peer in turn: while sessions are still arriving the rosters surely
    /// differ, so the summary at once; once settled they almost always agree, and a
    /// digest says so in a few dozen bytes instead of 8 bytes per session.
    fn anti_entropy(&mut self, now: u64) {
        let growing = self.roster_growing(now);
        let every = if growing {
            self.config.fast_sync_ms
        } else {
            self.config.sync_interval_ms
        };
        if self.peers.is_empty()
            || self
                .last_sync
                .is_some_and(|t| now.saturating_sub(t) < every)
        {
            return;
        }
        self.last_sync = Some(now);
        let turn = self.sync_turn % self.peers.len();
        self.sync_turn = self.sync_turn.wrapping_add(1);
        if let Some(&peer) = self.peers.iter().nth(turn) {
            let ask = if growing { Ask::Repair } else { Ask::Digest };
            self.push(Output::AskRoster { peer, ask });
        }
    }

    fn join_dht_when_settled(&mut self, now: u64) {
        if self.dht_joined {
            return;
        }
        let settled = self
            .grew_at
            .is_none_or(|t| now.saturating_sub(t) >= self.config.dht_settle_ms);
        if settled || now.saturating_sub(self.started) >= self.config.dht_join_latest_ms {
            self.join_dht();
        }
    }

    fn join_dht(&mut self) {
        if !self.dht_joined {
            self.dht_joined = true;
            self.push(Output::JoinDht);
        }
    }
}

#[cfg(test)]
#[path = "pacer_tests.rs"]
mod tests;
