//! A fault schedule, generated from a seed and printable.

use interlink_core::limits::{MAX_FUTURE_SKEW_MS, MINUTE_MS, SECOND_MS};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

/// A number in `0..n` (0 when `n` is 0).
pub(crate) fn below(rng: &mut ChaCha8Rng, n: u64) -> u64 {
    if n == 0 { 0 } else { rng.next_u64() % n }
}

/// True with probability `pct` percent.
pub(crate) fn chance(rng: &mut ChaCha8Rng, pct: u64) -> bool {
    below(rng, 100) < pct
}

/// The shape of generated cases.
#[derive(Clone, Debug)]
pub struct Params {
    /// Honest nodes.
    pub honest: usize,
    /// Whether a hostile paired node joins.
    pub hostile: bool,
    /// Messages each honest node sends.
    pub msgs_per_node: usize,
    /// Faults in the active phase.
    pub faults: usize,
    /// Length of the active phase (sends and faults), ms.
    pub active_ms: u64,
    /// Length of the calm phase after it (everything healed), ms.
    pub calm_ms: u64,
    /// Whether the hostile node copies other senders' ids (off only to isolate other
    /// faults while the wire's acks name ids alone).
    pub copy_ids: bool,
    /// How many of the honest nodes (the last ones) are shell commands
    /// ([`Schedule::shell`]).
    pub shells: usize,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            honest: 3,
            hostile: true,
            msgs_per_node: 5,
            faults: 4,
            active_ms: 5 * MINUTE_MS,
            calm_ms: 5 * MINUTE_MS,
            copy_ids: true,
            shells: 0,
        }
    }
}

/// One scheduled fault; times are ms after the start, global clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The node is stopped (SIGSTOP) for a while.
    Pause {
        #[allow(missing_docs)]
        node: usize,
        /// From.
        at: u64,
        /// How long.
        for_ms: u64,
    },
    /// The node crashes and restarts from its durable state.
    Crash {
        #[allow(missing_docs)]
        node: usize,
        /// When.
        at: u64,
        /// Down for.
        for_ms: u64,
        /// Its clock after the restart, relative to the global one.
        new_skew: i64,
    },
    /// The link between two nodes is cut.
    Partition {
        /// One end.
        a: usize,
        /// Other end.
        b: usize,
        /// From.
        at: u64,
        /// How long.
        for_ms: u64,
    },
    /// The node's wall clock steps back beyond the skew tolerance, then is corrected
    /// (NTP): mail to it looks future-dated meanwhile.
    ClockStep {
        #[allow(missing_docs)]
        node: usize,
        /// From.
        at: u64,
        /// The step, ms (negative: back).
        by_ms: i64,
        /// How long until corrected.
        for_ms: u64,
    },
    /// The node's disk is full: every write fails.
    DiskFull {
        #[allow(missing_docs)]
        node: usize,
        /// From.
        at: u64,
        /// How long.
        for_ms: u64,
    },
}

/// One planned send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendPlan {
    /// When (global ms after start).
    pub at: u64,
    /// Sending node.
    pub from: usize,
    /// Receiving node.
    pub to: usize,
    /// Whether the sender knows the recipient's node (on its roster).
    pub routed: bool,
    /// Whether the hostile node races a copy of this message's id.
    pub raced: bool,
}

/// What the hostile node does besides racing copies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attack {
    /// Copies ids it reads in the DHT into envelopes of its own, live and mailbox.
    CopyFromDht {
        /// When.
        at: u64,
    },
    /// Sends envelopes dated outside every window (backdated and future-dated).
    BadDates {
        /// When.
        at: u64,
        /// Target.
        to: usize,
    },
    /// Floods a recipient past its quota, live and into the mailbox.
    Flood {
        /// When.
        at: u64,
        /// Target.
        to: usize,
        /// Messages.
        count: usize,
    },
    /// Many fresh identities, none holding a pass, put backdated envelopes into a
    /// recipient's mailbox (the byte-eviction attack of issue 13): holders must keep
    /// them apart from the paired senders' mail.
    StrangerFlood {
        /// When.
        at: u64,
        /// Target.
        to: usize,
        /// Fresh identities.
        strangers: usize,
    },
}

/// A whole case: who, what is sent, what goes wrong. Printable, and regenerated
/// exactly from `(seed, params)`.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// The seed it came from (also seeds the run).
    pub seed: u64,
    /// Honest nodes (`0..honest`); the hostile one, if any, is `honest`.
    pub honest: usize,
    /// Whether a hostile node is present.
    pub hostile: bool,
    /// Per node clock offset at start, within the skew tolerance.
    pub skew: Vec<i64>,
    /// Per node, percent of writes that fail short.
    pub short_write_pct: Vec<u64>,
    /// One-way latency per ordered link, ms.
    pub latency: Vec<Vec<u64>>,
    /// `roster[i][j]`: node `i` knows node `j`'s route (else it has the mailbox only).
    pub roster: Vec<Vec<bool>>,
    /// The sends, by time.
    pub sends: Vec<SendPlan>,
    #[allow(missing_docs)]
    pub faults: Vec<Fault>,
    /// The hostile node's actions.
    pub attacks: Vec<Attack>,
    /// End of the active phase.
    pub active_ms: u64,
    /// End of the run.
    pub end_ms: u64,
    /// `shell[i]`: honest node `i` is a shell command (`interlink-p2p send`), not a
    /// session: no outbox and no inbox, it only sends. Each of its runs is a fresh
    /// session of its identity that starts at a send and exits once every message is
    /// answered (a crash ends a run early). Nothing is sent to it.
    pub shell: Vec<bool>,
}

impl Schedule {
    /// The schedule of `seed` under `params`.
    pub fn generate(seed: u64, p: &Params) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_5eed);
        let n = p.honest + usize::from(p.hostile);
        let half_skew = MAX_FUTURE_SKEW_MS / 2;
        let skew_of = |rng: &mut ChaCha8Rng| below(rng, 2 * half_skew) as i64 - half_skew as i64;
        let skew = (0..n)
            .map(|i| if i < p.honest { skew_of(&mut rng) } else { 0 })
            .collect();
        let short_write_pct = (0..n)
            .map(|_| {
                if chance(&mut rng, 30) {
                    below(&mut rng, 20)
                } else {
                    0
                }
            })
            .collect();
        let latency = (0..n)
            .map(|_| (0..n).map(|_| 1 + below(&mut rng, 300)).collect())
            .collect();
        let roster: Vec<Vec<bool>> = (0..n)
            .map(|_| (0..n).map(|_| chance(&mut rng, 85)).collect())
            .collect();
        let shells = p.shells.min(p.honest.saturating_sub(2));
        let sessions = p.honest - shells;
        let shell: Vec<bool> = (0..n).map(|i| i >= sessions && i < p.honest).collect();
        let mut sends = Vec::new();
        for (from, known) in roster.iter().enumerate().take(p.honest) {
            for _ in 0..p.msgs_per_node {
                // To another session: nothing is sent to a shell command.
                let to = if from < sessions {
                    let to = below(&mut rng, sessions as u64 - 1) as usize;
                    if to >= from { to + 1 } else { to }
                } else {
                    below(&mut rng, sessions as u64) as usize
                };
                sends.push(SendPlan {
                    at: below(&mut rng, p.active_ms),
                    from,
                    to,
                    routed: known[to],
                    raced: p.hostile && p.copy_ids && chance(&mut rng, 25),
                });
            }
        }
        sends.sort_by_key(|s| (s.at, s.from));
        let mut faults = Vec::new();
        for _ in 0..p.faults {
            let node = below(&mut rng, p.honest as u64) as usize;
            let at = below(&mut rng, p.active_ms);
            let for_ms = SECOND_MS + below(&mut rng, 2 * MINUTE_MS);
            faults.push(match below(&mut rng, 5) {
                0 => Fault::Pause { node, at, for_ms },
                1 => Fault::Crash {
                    node,
                    at,
                    for_ms,
                    new_skew: skew_of(&mut rng),
                },
                2 => {
                    let mut b = below(&mut rng, n as u64 - 1) as usize;
                    if b >= node {
                        b += 1;
                    }
                    Fault::Partition {
                        a: node,
                        b,
                        at,
                        for_ms,
                    }
                }
                3 => Fault::DiskFull { node, at, for_ms },
                _ => Fault::ClockStep {
                    node,
                    at,
                    by_ms: -((3 * MINUTE_MS + below(&mut rng, 3 * MINUTE_MS)) as i64),
                    for_ms,
                },
            });
        }
        let mut attacks = Vec::new();
        if p.hostile {
            for _ in 0..3 {
                let at = below(&mut rng, p.active_ms);
                let to = below(&mut rng, p.honest as u64) as usize;
                attacks.push(match below(&mut rng, 5) {
                    0 | 1 if p.copy_ids => Attack::CopyFromDht { at },
                    0 | 1 => Attack::BadDates { at, to },
                    2 => Attack::BadDates { at, to },
                    // Enough to fill the strangers' room (32), few enough to sign
                    // cheaply; the regression case floods past every cap.
                    3 => Attack::StrangerFlood {
                        at,
                        to,
                        strangers: 5 + below(&mut rng, 4) as usize,
                    },
                    _ => Attack::Flood {
                        at,
                        to,
                        count: 70 + below(&mut rng, 20) as usize,
                    },
                });
            }
        }
        Schedule {
            seed,
            honest: p.honest,
            hostile: p.hostile,
            skew,
            short_write_pct,
            latency,
            roster,
            sends,
            faults,
            attacks,
            active_ms: p.active_ms,
            end_ms: p.active_ms + 2 * MINUTE_MS + p.calm_ms,
            shell,
        }
    }

    /// Nodes in all (honest and hostile).
    pub fn nodes(&self) -> usize {
        self.honest + usize::from(self.hostile)
    }

    /// Whether node `i` is a shell command.
    pub fn is_shell(&self, i: usize) -> bool {
        self.shell.get(i).copied().unwrap_or(false)
    }
}
