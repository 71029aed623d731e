//! The scenario registry.
//!
//! A scenario is one module exposing a `SCENARIO` constant; adding one is that module
//! plus one line in [`ALL`]. Each returns rows of named measurements and never hangs:
//! every wait is bounded and a timeout becomes a failed row.

use futures::future::BoxFuture;

use crate::{Context, report::Row};

mod delivery_latency;
mod hostile_load;
mod idle_cost;
mod knock_flood;
mod mailbox_dht;
mod mcp;
mod presence_sim;
mod relay_latency;
mod roster_convergence;
mod visible_after_start;
mod wake_drain;

/// A named benchmark scenario.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// The name used on the command line and in the JSON.
    pub name: &'static str,
    /// One line on what it measures.
    pub about: &'static str,
    /// Runs it. An `Err` is reported as a single failed row.
    pub run: for<'a> fn(&'a Context) -> BoxFuture<'a, anyhow::Result<Vec<Row>>>,
}

/// Every scenario, in the order they run by default.
pub const ALL: &[Scenario] = &[
    roster_convergence::SCENARIO,
    visible_after_start::SCENARIO,
    idle_cost::SCENARIO,
    delivery_latency::SCENARIO,
    wake_drain::SCENARIO,
    mailbox_dht::SCENARIO,
    relay_latency::SCENARIO,
    mcp::SCENARIO,
    hostile_load::SCENARIO,
    knock_flood::SCENARIO,
    presence_sim::SCENARIO,
];

/// Looks a scenario up by name.
pub fn find(name: &str) -> Option<&'static Scenario> {
    ALL.iter().find(|s| s.name == name)
}
