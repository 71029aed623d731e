//! A seeded discrete-event simulation of the presence protocol at overlay scale
//! (issue 15 item 3): how long rosters take to converge, and what presence costs
//! each node, at 10,000 sessions.
//!
//! N full nodes, one session each, are modelled as the node is built. Each dials up
//! to 24 random peers (on a cold start only nodes already running, as Kademlia finds
//! them; connections are symmetric, 256 inbound at most), over links of per-link
//! latency. Gossipsub runs with the node's settings ([`Gossip`]): a publisher floods
//! its announcement to every connected peer; a node validates a new message, then
//! forwards it to its mesh peers except its source and its publisher; a peer that
//! connects while the mesh is below `mesh_n_low` is meshed at once, and every
//! heartbeat keeps the mesh between `mesh_n_low` and `mesh_n_high` and sends IHAVEs
//! with the ids of the last three heartbeats to `max(6, ¼ of its non-mesh peers)`
//! peers, which IWANT what they lack. An IHAVE above the node's frame limit (64 KiB;
//! 9,280 bytes before this simulation found IHAVEs of more than ~126 ids dropped)
//! fails to decode at the receiver and is dropped. Roster sync by summary (protocol v7) runs on every new connection, both
//! ways, and every 10 s to one peer round robin (the node
//! syncs every second while its roster is still growing; the model keeps the slower
//! pace, so its cold starts are an upper bound). Each session re-announces on its
//! [`HeartbeatRule`]: the fixed 30 s of today, or the adaptive rule of
//! [`crate::presence::heartbeat`], whose announcements carry the interval receivers
//! judge liveness by.
//!
//! Every copy received is counted (duplicates too) with its bytes and the checks it
//! costs: gossipsub verifies each copy's libp2p signature; the node verifies an
//! announcement (two Ed25519 checks) only when it is new to the roster, since it
//! recognises copies it holds ([`crate::presence::Roster::knows`]). CPU is estimated
//! from [`Costs`].
//!
//! Three scenarios, each a [`Report`] ([`table`] sets several side by side):
//! [`cold_start`], [`partition_heal`], [`steady_state`] (and
//! [`heartbeat_comparison`], the steady state under both rules).
//!
//! What is simplified: GRAFT and PRUNE take effect at once; there is no peer
//! scoring, prune backoff, opportunistic grafting or IDONTWANT (announcements are
//! below its 1,000-byte threshold anyway); copies arriving while a node validates
//! do not spare their senders the forward (0.6 % of copies at 1,000 nodes); links
//! neither lose nor reorder and have no bandwidth limit; a node's CPU never delays it
//! beyond the validation time; an IHAVE advertises the messages *published* in the
//! last three heartbeats that the node holds (gossipsub's cache holds those
//! *received* in them); an oversized IHAVE is dropped without the stream reset that
//! would follow; rosters have no identity cap (the real one holds 1,024 untrusted
//! identities: 10,000 single-session identities would not fit); only the end of a
//! partition is simulated message by message ([`Params::partition_full_ms`]).

mod gossip;
mod params;
mod report;
mod schedule;
mod sync;
#[cfg(test)]
mod tests;
mod world;

pub use params::{Costs, Gossip, HeartbeatRule, Params, Wire};
pub use report::{Convergence, Load, PerNode, Report, Scenario, table};

use world::{ORIGIN_US, US, World};

/// Cold start: the nodes start uniformly within `start_spread_ms` and connect as
/// they find each other. Converged when every node holds the first announcement of
/// every session; times are from the first start. The load is from the first start
/// until convergence, and at least [`Params::settle_ms`].
pub fn cold_start(p: &Params) -> Report {
    let mut w = World::cold(p);
    let before = w.snapshot();
    let deadline = (w.p.start_spread_ms + w.p.timeout_ms) * US;
    w.run_until_converged(deadline);
    let convergence = w.convergence(0, w.n as f64);
    w.run_until(w.now.max(w.p.settle_ms * US));
    w.report(Scenario::ColdStart, &before, 0, Some(convergence))
}

/// Partition heal: a converged overlay is split into two halves (every link between
/// them cut) for `partition_ms`, during which sessions keep re-announcing; then the
/// links are redialled. Converged when every node holds every session's version as
/// of the heal; times and load are from the heal (the load until convergence, and at
/// least [`Params::settle_ms`]). Only the last
/// [`Params::partition_full_ms`] of the partition are simulated message by message.
pub fn partition_heal(p: &Params) -> Report {
    let mut w = World::converged(p);
    w.run_until(ORIGIN_US + w.p.warmup_ms * US);
    w.partition();
    let healed = w.now + w.p.partition_ms * US;
    let full = w.p.partition_full_ms.min(w.p.partition_ms) * US;
    if full < healed - w.now {
        w.quiet = true;
        w.run_until(healed - full);
        w.quiet = false;
        w.converge_halves();
    }
    w.run_until(healed);
    w.heal();
    let behind = w.mean_behind();
    let before = w.snapshot();
    w.run_until_converged(healed + w.p.timeout_ms * US);
    let convergence = w.convergence(healed, behind);
    w.run_until(w.now.max(healed + w.p.settle_ms * US));
    w.report(Scenario::PartitionHeal, &before, healed, Some(convergence))
}

/// Steady state: a converged overlay, heartbeats spread evenly, measured over
/// `steady_ms` after `warmup_ms`.
pub fn steady_state(p: &Params) -> Report {
    let mut w = World::converged(p);
    w.run_until(ORIGIN_US + w.p.warmup_ms * US);
    let start = w.now;
    let before = w.snapshot();
    w.run_until(start + w.p.steady_ms * US);
    w.report(Scenario::SteadyState, &before, start, None)
}

/// The steady state under the fixed 30 s heartbeat and under the adaptive rule as
/// it would ship, otherwise alike.
pub fn heartbeat_comparison(p: &Params) -> (Report, Report) {
    (
        steady_state(&p.clone().with_heartbeat(HeartbeatRule::FIXED)),
        steady_state(&p.clone().with_heartbeat(HeartbeatRule::ADAPTIVE)),
    )
}
