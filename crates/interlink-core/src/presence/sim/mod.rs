//! A seeded discrete-event simulation of the presence protocol at overlay scale
//! (issue 15 item 3): how long rosters take to converge, and what presence costs
//! each node, at 10,000 sessions.
//!
//! N full nodes, one session each, are modelled as the node is built: protocol 8 by
//! default ([`Params::default`]), protocol 7 as the model had it before
//! ([`Params::v7`], [`Protocol`]), so a report can set the two side by side.
//!
//! **What runs, and what is modelled.** Two simulators, on the same [`Params`]. At
//! the sizes a real roster per node fits (hundreds of sessions), [`real`] runs the
//! node's whole presence, [`crate::presence::node::PresenceNode`], for every session
//! — roster, roster answers, announce rules, pacer, real signatures — and models only
//! the network: links of per-link latency, gossip as a flood with a duplicate cache,
//! request-response. At 10,000 sessions the compact model (the scenarios below)
//! runs: in protocol 8 every simulated node runs the pacer,
//! [`crate::presence::pacer::Pacer`], whose
//! heartbeats (announcement or beacon, and the interval promised), its roster
//! requests on a new peer, its second looks, its anti-entropy round robin and the
//! digest-or-summary choice are the pacer's outputs, fed with the same inputs the
//! node feeds it (tick, peer up and down, subscription, a session new to the roster,
//! a digest answered). Rosters, gossipsub and links are modelled compactly: a real
//! [`crate::presence::Roster`] per node would hold 10,000 signed announcements, about
//! 60 GB at 10,000 nodes, so a node's roster here is one `u16` per session. A test
//! runs both at 100 sessions and holds their convergence within one tick of each
//! other (`the_real_node_and_the_compact_model_agree_at_100`).
//!
//! **Overlay.** Each node dials up to 24 random peers (on a cold start only nodes
//! already running, as Kademlia finds them; connections are symmetric, 256 inbound at
//! most), over links of per-link latency. Gossipsub runs with the node's settings
//! ([`Gossip`]): a publisher floods its message to every connected peer; a node
//! validates a new message, then forwards it to its mesh peers except its source and
//! its publisher; a peer that connects while the mesh is below `mesh_n_low` is meshed
//! at once, and every heartbeat keeps the mesh between `mesh_n_low` and `mesh_n_high`
//! and sends IHAVEs with the ids of the last three heartbeats to `max(6, ¼ of its
//! non-mesh peers)` peers, which IWANT what they lack. An IHAVE above the node's frame
//! limit (64 KiB; 9,280 bytes before this simulation found IHAVEs of more than ~126
//! ids dropped) fails to decode at the receiver and is dropped. Each session
//! re-announces on its [`HeartbeatRule`]: the adaptive rule of
//! [`crate::presence::heartbeat`] as built, or a fixed 30 s (protocol 8: on the
//! pacer's 1 s tick once the interval has passed); every message carries the interval
//! receivers judge liveness by.
//!
//! **Protocol 8.** A session publishes its announcement once, when a first peer is
//! connected; every later heartbeat is a beacon (137 bytes against 473), which keeps
//! it live but names no new announcement version. A session is live at a node while
//! the newest sign of life the node holds (announcement or beacon) is younger than
//! three of the intervals it promised. Gossipsub is unsigned with 16-byte content ids
//! (42 bytes of framing per message): no check per copy. A node checks an
//! announcement new to it (two Ed25519 checks) and a beacon newer than what it holds
//! (one); it forwards without a check a copy of what it holds, and ignores (neither
//! checks nor forwards, nor advertises) older beacons and any beacon of an
//! announcement it does not hold. Roster sync: a full request (the summary, 8 bytes
//! per announcement held, and when the requester judges any session away or overdue
//! a bitmap of one bit per tag) to each peer as it connects, both ways, and a digest request
//! (16 bytes) to it 500 ms later; anti-entropy to one connected peer in turn, a full
//! request every second while the roster is growing (a session new to it within 10 s,
//! or the node started within 10 s) and a digest request every 10 s after. A digest
//! is answered `same` or not, framing only; on a difference the requester sends a
//! full request. A full answer carries every announcement the summary does not name,
//! each with its newest beacon, and the newest beacon of each session marked
//! that the responder judges live. What the answer to an anti-entropy or follow-up
//! full request brings that is new to the requester (at most 32 messages) it
//! publishes again, under the same content id: nodes that have seen it drop it.
//!
//! **Protocol 7.** Every heartbeat is a new announcement version (450 bytes, 100 of
//! gossipsub framing with its signature, 71-byte message ids); gossipsub checks the
//! signature of every copy received, duplicates included; roster sync is a full
//! request on every new connection, both ways, and every 10 s to one peer round robin,
//! answered with every version the summary does not name (older ones too). This is
//! the model as it was before protocol 8, figure for figure (a test pins it).
//!
//! Every copy received is counted (duplicates too) with its bytes and the checks it
//! costs. CPU is estimated from [`Costs`]: signature checks, decodes, summary tags,
//! IHAVE id lookups, and in protocol 8 the content-id hash of every copy and the
//! digests.
//!
//! Three scenarios, each a [`Report`] ([`table`] sets several side by side):
//! [`cold_start`], [`partition_heal`], [`steady_state`].
//!
//! What is simplified: GRAFT and PRUNE take effect at once; there is no peer
//! scoring, prune backoff, opportunistic grafting or IDONTWANT (every presence
//! message is below its 1,000-byte threshold anyway); copies arriving while a node
//! validates do not spare their senders the forward (0.6 % of copies at 1,000 nodes);
//! links neither lose nor reorder and have no bandwidth limit; a node's CPU never
//! delays it beyond the validation time; an IHAVE advertises the messages *published*
//! in the last three heartbeats that the node holds (gossipsub's cache holds those
//! *received* in them, so a message published again is not advertised); gossipsub
//! remembers every id it has seen for the whole run (the node's duplicate cache keeps
//! them 60 s), and takes a beacon older than the newest it has seen of that session
//! for a duplicate (the node would decode and ignore it); an oversized IHAVE is
//! dropped without the stream reset that would follow; rosters have no identity cap
//! (the real one holds 1,024 untrusted identities: 10,000 single-session identities
//! would not fit) and no summary cap (16,384 tags); roster requests in flight are not
//! capped (512 a node); a session's announcement never
//! changes and no session leaves, so a summary names exactly the sessions whose
//! announcement a node holds and two nodes' digests agree when they hold the same
//! sessions; a response is not cut at 1 MiB; the node's 1 s timers run in phase with
//! its gossipsub heartbeat; only the end of a partition is simulated message by
//! message ([`Params::partition_full_ms`]).

mod gossip;
mod live;
mod params;
mod partition;
pub mod real;
mod repair;
mod report;
mod schedule;
mod sync;
mod table;
#[cfg(test)]
mod tests;
mod world;

pub use params::{Costs, Gossip, HeartbeatRule, Params, Protocol, Wire};
pub use report::{Convergence, Load, PerNode, Report, Scenario};
pub use table::table;

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
/// links are redialled. Converged, in protocol 7, when every node holds every
/// session's version as of the heal; in protocol 8 (whose beacons are not sent to a
/// node that judges their session live), when every node holds a sign of every
/// session that is live at the heal. Times and load are from the heal (the load
/// until convergence, and at least [`Params::settle_ms`]). Only the last
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
