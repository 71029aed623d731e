//! One presence-simulator scenario with knobs from the environment, for exploring by
//! hand, and the real node's figures. An integration test, so the crate's own sources
//! read no environment.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use interlink_core::{
    limits::SECOND_MS,
    presence::sim::{
        HeartbeatRule, Params, Protocol, cold_start, partition_heal, real, steady_state,
    },
};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// One scenario with knobs from the environment, for exploring: `SIM_WHAT` (`cold`,
/// `heal`, `steady`: the fixed 30 s heartbeat unless `SIM_RULE` says otherwise,
/// `adaptive`), `SIM_PROTO` (`v7`, `v8`: the default), `SIM_RULE` (`fixed`,
/// `adaptive`: the default but for `steady`), `SIM_N`, `SIM_SEED`, and in ms
/// `SIM_STEADY`, `SIM_WARMUP`, `SIM_FULL`, `SIM_PARTITION`, `SIM_SETTLE`; wire sizes
/// `SIM_FRAMING`, `SIM_MSGID`, `SIM_ANN`, `SIM_BEACON`; gossipsub's `SIM_MESH_HIGH`.
/// Run with
/// `SIM_WHAT=heal SIM_N=1000 cargo test -p interlink-core --release --test presence_sim_one -- --ignored --nocapture`.
#[test]
#[ignore = "a manual run"]
fn presence_sim_one() {
    let which = std::env::var("SIM_WHAT").unwrap_or_default();
    let protocol = match std::env::var("SIM_PROTO").as_deref() {
        Ok("v7") => Protocol::V7,
        _ => Protocol::V8,
    };
    let mut p = Params::default()
        .with_protocol(protocol)
        .with_nodes(env("SIM_N", 200) as usize);
    p.warmup_ms = env("SIM_WARMUP", p.warmup_ms);
    p.partition_full_ms = env("SIM_FULL", p.partition_full_ms);
    p.partition_ms = env("SIM_PARTITION", p.partition_ms);
    p.settle_ms = env("SIM_SETTLE", p.settle_ms);
    p.seed = env("SIM_SEED", p.seed);
    p.steady_ms = env("SIM_STEADY", 60_000);
    p.wire.gossip_framing = env("SIM_FRAMING", p.wire.gossip_framing);
    p.wire.message_id = env("SIM_MSGID", p.wire.message_id);
    p.wire.announcement = env("SIM_ANN", p.wire.announcement);
    p.wire.beacon = env("SIM_BEACON", p.wire.beacon);
    p.gossip.mesh_n_high = env("SIM_MESH_HIGH", p.gossip.mesh_n_high as u64) as usize;
    match (std::env::var("SIM_RULE").as_deref(), which.as_str()) {
        (Ok("fixed"), _) | (Err(_), "steady") => p.heartbeat = HeartbeatRule::FIXED,
        (Ok("adaptive"), _) | (_, "adaptive") => p.heartbeat = HeartbeatRule::ADAPTIVE,
        _ => {}
    }
    let t = Instant::now();
    let r = match which.as_str() {
        "heal" => partition_heal(&p),
        "steady" | "adaptive" => steady_state(&p),
        _ => cold_start(&p),
    };
    eprintln!("{r}\nwall {:.2} s", t.elapsed().as_secs_f64());
}

/// The convergence figures of docs/BENCHMARKS.md with the real node (100 and 200
/// sessions), the compact model's beside them: `SIM_N=200 cargo test -p
/// interlink-core --release --test presence_sim_one -- --ignored real_node_figures
/// --nocapture`.
#[test]
#[ignore = "a manual run"]
fn real_node_figures() {
    let n = env("SIM_N", 100) as usize;
    let p = Params::default()
        .with_nodes(n)
        .with_partition_ms(120 * SECOND_MS);
    let t = Instant::now();
    let r = real::run(
        &p,
        &real::Plan {
            partition: Some((p.start_spread_ms + 20 * SECOND_MS, p.partition_ms)),
            departures: n / 20,
        },
    );
    let wall = t.elapsed().as_secs_f64();
    eprintln!(
        "{n} real nodes: cold {:?}\nheal {:?}\ngoodbyes {:?}\n{:.0} checks/node; final views {:?}; wall {wall:.1} s",
        r.cold,
        r.heal,
        r.departed,
        r.verified,
        r.views.iter().collect::<std::collections::BTreeSet<_>>(),
    );
    // The compact model on the same parameters, for the table beside it.
    let t = Instant::now();
    let (cold, heal) = (cold_start(&p), partition_heal(&p));
    eprintln!(
        "{n} compact: {}\n{}\nwall {:.1} s",
        cold,
        heal,
        t.elapsed().as_secs_f64()
    );
}
