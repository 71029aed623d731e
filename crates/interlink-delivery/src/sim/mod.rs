//! A seeded discrete-event simulator for the [`Engine`](crate::Engine).
//!
//! N nodes, each an engine plus simulated durable storage (an outbox map and an inbox
//! list that survive a crash; everything else is lost), exchange live requests,
//! receipts and DHT puts and gets over links with per-link latency. A
//! [`Schedule`] generated from a seed adds pauses (SIGSTOP: the node processes
//! nothing, messages to it wait and are handled on resume), crashes with restarts from
//! durable state only, partitions, disk-full periods and short writes (the store rolls
//! a failed write back), clock skew within the tolerance, and a hostile paired node
//! that copies other senders' message ids under its own identity (racing the genuine
//! message live and into the mailbox), sends backdated and future-dated envelopes and
//! floods quotas. The DHT: every honest node holds copies; a put merges into up to
//! three reachable holders with the real [`Mailbox::merge`](interlink_core::mailbox::Mailbox::merge),
//! a get returns the copies of every reachable holder.
//!
//! [`run`] plays a schedule and [`check`] tests the product's promises on the result;
//! a failing case prints its seed and schedule, and [`replay_case`] plays it again.

mod check;
mod hostile;
mod io;
mod schedule;
#[cfg(test)]
mod tests;
mod trace;
mod world;

pub use check::{Violation, check};
pub use schedule::{Attack, Fault, Params, Schedule, SendPlan};
pub use world::{Line, Report, Sent, World};

use crate::Config;

/// The engine configuration the simulator uses: the real bounds, shorter periods so a
/// few simulated minutes exercise every path, and a 10-minute live window.
pub fn sim_config() -> Config {
    use interlink_core::limits::{MINUTE_MS, SECOND_MS};
    Config::default()
        .with_timing(SECOND_MS, 10 * SECOND_MS, 2 * MINUTE_MS, 5 * SECOND_MS)
        .with_live_window(10 * MINUTE_MS)
}

/// Plays `schedule` with `config` (its policy is replaced per node) and returns what
/// happened.
pub fn run(schedule: &Schedule, config: &Config) -> Report {
    World::new(schedule.clone(), config.clone()).run()
}

/// Generates, plays and checks the case of `seed`; on failure the error carries the
/// schedule and the violations, printable.
pub fn run_case(seed: u64, params: &Params, config: &Config) -> Result<Report, String> {
    let schedule = Schedule::generate(seed, params);
    let report = run(&schedule, config);
    match check(&report) {
        Ok(()) => Ok(report),
        Err(v) => Err(format!(
            "seed {seed} failed: {v:?}\nschedule: {schedule:#?}\nreplay: replay_case({seed})"
        )),
    }
}

/// Replays the default-shaped case of `seed` under the simulator's config.
pub fn replay_case(seed: u64) -> Result<Report, String> {
    run_case(seed, &Params::default(), &sim_config())
}
