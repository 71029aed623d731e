//! `presence-sim`: presence at 1,000 and 10,000 sessions on the seeded simulator, which
//! runs the node's own presence state machine (`interlink_core::presence::pacer`) per
//! simulated node: the cold start, a partition's heal (with the adaptive heartbeat and
//! the fixed 30 s one) and the steady state's traffic and CPU per node. Deterministic
//! for a seed; minutes of CPU at 10,000 in a release build. `--nodes` picks the sizes
//! (the runs part is ignored: one run is the answer); `--quick` runs 200.

use std::time::Instant;

use interlink_core::presence::sim::{
    self, HeartbeatRule, Params, Report, cold_start, partition_heal, steady_state,
};

use super::Scenario;
use crate::{
    Context, progress,
    report::{Measurement, Row},
};

pub(crate) const SCENARIO: Scenario = Scenario {
    name: "presence-sim",
    about: "presence at 1,000 and 10,000 sessions on the simulator running the node's state machine",
    run: |ctx| Box::pin(async move { Ok(run(ctx)) }),
};

const DEFAULT_SIZES: [usize; 2] = [1_000, 10_000];
const QUICK_SIZE: usize = 200;
/// The fixed heartbeat's steady state above 1,000 is measured over two whole periods
/// (phases spread evenly) rather than the default window: it costs seconds of CPU per
/// simulated second.
const FIXED_STEADY_ABOVE_1K_MS: u64 = 60_000;

fn run(ctx: &Context) -> Vec<Row> {
    let sizes: Vec<usize> = match &ctx.roster_sizes {
        Some(sizes) => sizes.iter().map(|(n, _)| *n).collect(),
        None if ctx.quick => vec![QUICK_SIZE],
        None => DEFAULT_SIZES.to_vec(),
    };
    let mut rows = Vec::new();
    for nodes in sizes {
        let p = Params::default().with_nodes(nodes);
        let fixed = p.clone().with_heartbeat(HeartbeatRule::FIXED);
        let fixed_steady_ms = if nodes > 1_000 {
            FIXED_STEADY_ABOVE_1K_MS
        } else {
            p.steady_ms
        };
        let timed = |name: &str, run: &dyn Fn() -> Report| {
            let t = Instant::now();
            let r = run();
            progress(format_args!(
                "presence-sim: {name} at {nodes}: {:.1} s wall",
                t.elapsed().as_secs_f64()
            ));
            r
        };
        let cold = timed("cold start", &|| cold_start(&p));
        let heal = timed("partition heal, adaptive", &|| partition_heal(&p));
        let heal_fixed = timed("partition heal, fixed 30 s", &|| partition_heal(&fixed));
        let steady_fixed = timed("steady, fixed 30 s", &|| {
            steady_state(&fixed.clone().with_steady_ms(fixed_steady_ms))
        });
        let steady = timed("steady, adaptive", &|| steady_state(&p));
        progress(format_args!(
            "\n{}\n{}",
            sim::table(&[cold.clone(), heal.clone(), heal_fixed.clone()]),
            sim::table(&[steady_fixed.clone(), steady.clone()])
        ));
        for (case, r) in [
            ("cold start", &cold),
            ("partition heal, adaptive", &heal),
            ("partition heal, fixed 30 s", &heal_fixed),
        ] {
            rows.push(convergence_row(format!("{case}, {nodes} sessions"), r));
        }
        for (case, r) in [
            ("steady, fixed 30 s", &steady_fixed),
            ("steady, adaptive", &steady),
        ] {
            rows.push(load_row(format!("{case}, {nodes} sessions"), r));
        }
    }
    rows
}

fn convergence_row(case: String, r: &Report) -> Row {
    let Some(c) = r.convergence else {
        return Row::failed(case, "no convergence measured", Vec::new());
    };
    let ms =
        |name: &str, v: Option<u64>| Measurement::new(name, v.map_or(f64::NAN, |v| v as f64), "ms");
    let measurements = vec![
        ms("p50", c.p50_ms),
        ms("max", c.max_ms),
        Measurement::count("complete", c.complete),
    ];
    if c.complete < r.nodes {
        return Row::failed(
            case,
            format!("{} of {} nodes got there", c.complete, r.nodes),
            measurements,
        );
    }
    Row::ok(case, measurements)
}

fn load_row(case: String, r: &Report) -> Row {
    let (cpu_mean, cpu_max) = r.load.cpu_pct();
    Row::ok(
        case,
        vec![
            Measurement::new(
                "kB/s mean",
                r.load.per_s(r.load.mean.bytes) / 1000.0,
                "kB/s",
            ),
            Measurement::new("kB/s max", r.load.per_s(r.load.max.bytes) / 1000.0, "kB/s"),
            Measurement::new("CPU mean", cpu_mean, "%"),
            Measurement::new("CPU max", cpu_max, "%"),
            Measurement::new("not live", r.not_live * 100.0, "%"),
        ],
    )
}
