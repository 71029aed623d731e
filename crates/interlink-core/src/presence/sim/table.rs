//! A report as a Markdown table, several side by side.

use std::fmt::{self, Write as _};

use super::report::Report;

/// `1234567.8` as `1,234,568`.
fn grouped(x: f64) -> String {
    let digits = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn secs(ms: Option<u64>) -> String {
    ms.map_or_else(|| "—".into(), |ms| format!("{:.2} s", ms as f64 / 1000.0))
}

fn kb(bytes_per_s: f64) -> String {
    format!("{:.1}", bytes_per_s / 1000.0)
}

type Row = (&'static str, fn(&Report) -> String);

const ROWS: [Row; 25] = [
    ("heartbeat interval at full roster", |r| {
        format!("{} s", r.interval_ms / 1000)
    }),
    ("converged nodes", |r| match r.convergence {
        Some(c) => format!(
            "{} / {}",
            grouped(c.complete as f64),
            grouped(r.nodes as f64)
        ),
        None => "—".into(),
    }),
    ("convergence p50 / max", |r| match r.convergence {
        Some(c) => format!("{} / {}", secs(c.p50_ms), secs(c.max_ms)),
        None => "—".into(),
    }),
    ("sessions behind per node at the start", |r| {
        match r.convergence {
            Some(c) => grouped(c.behind_at_start),
            None => "—".into(),
        }
    }),
    ("measured window", |r| secs(Some(r.load.window_ms))),
    ("announcements / beacons published in it", |r| {
        format!(
            "{} / {}",
            grouped(r.announcements as f64),
            grouped(r.beacons as f64)
        )
    }),
    ("gossip copies received /s per node (mean / max)", |r| {
        let l = &r.load;
        format!(
            "{} / {}",
            grouped(l.per_s(l.mean.messages)),
            grouped(l.per_s(l.max.messages))
        )
    }),
    ("  duplicates / by IWANT / beacons (mean share)", |r| {
        let m = &r.load.mean;
        let share = |x: f64| 100.0 * x / m.messages.max(1.0);
        format!(
            "{:.0} % / {:.1} % / {:.0} %",
            share(m.duplicates),
            share(m.iwant_messages),
            share(m.beacon_messages)
        )
    }),
    ("kB/s received per node (mean / max)", |r| {
        let l = &r.load;
        format!(
            "{} / {}",
            kb(l.per_s(l.mean.bytes)),
            kb(l.per_s(l.max.bytes))
        )
    }),
    ("  gossip / control / roster sync (mean kB/s)", |r| {
        let l = &r.load;
        let m = &l.mean;
        format!(
            "{} / {} / {}",
            kb(l.per_s(m.gossip_bytes)),
            kb(l.per_s(m.control_bytes)),
            kb(l.per_s(m.sync_bytes))
        )
    }),
    (
        "  gossip / control / roster sync (max kB/s, each its own node)",
        |r| {
            let l = &r.load;
            let m = &l.max;
            format!(
                "{} / {} / {}",
                kb(l.per_s(m.gossip_bytes)),
                kb(l.per_s(m.control_bytes)),
                kb(l.per_s(m.sync_bytes))
            )
        },
    ),
    ("MB received per node in the window (mean / max)", |r| {
        let l = &r.load;
        format!("{:.1} / {:.1}", l.mean.bytes / 1e6, l.max.bytes / 1e6)
    }),
    ("roster-sync announcements per node (of which stale)", |r| {
        let m = &r.load.mean;
        format!("{} ({})", grouped(m.sync_entries), grouped(m.sync_stale))
    }),
    ("roster-sync beacons per node", |r| {
        grouped(r.load.mean.sync_beacons)
    }),
    ("digest requests per node (of which differing)", |r| {
        let m = &r.load.mean;
        format!("{:.1} ({:.1})", m.digest_requests, m.digest_differs)
    }),
    (
        "published again after a repair, per node (mean / max)",
        |r| {
            let l = &r.load;
            format!("{:.1} / {}", l.mean.republished, grouped(l.max.republished))
        },
    ),
    ("IHAVEs dropped over the RPC limit /s per node", |r| {
        let l = &r.load;
        format!("{:.1}", l.per_s(l.mean.ihave_dropped))
    }),
    ("signature checks /s per node (mean / max)", |r| {
        let l = &r.load;
        format!(
            "{} / {}",
            grouped(l.per_s(l.mean.sig_checks)),
            grouped(l.per_s(l.max.sig_checks))
        )
    }),
    ("  gossipsub / announcement / beacon (mean /s)", |r| {
        let l = &r.load;
        format!(
            "{} / {:.1} / {:.1}",
            grouped(l.per_s(l.mean.gossip_sigs)),
            l.per_s(l.mean.announcement_sigs),
            l.per_s(l.mean.beacon_sigs)
        )
    }),
    ("CPU % of one core (mean / max)", |r| {
        let (mean, max) = r.load.cpu_pct();
        format!("{mean:.2} / {max:.2}")
    }),
    ("sessions not judged live at the end", |r| {
        format!("{:.3} %", 100.0 * r.not_live)
    }),
    ("connections / mesh peers per node (mean)", |r| {
        format!("{:.1} / {:.1}", r.mean_degree, r.mean_mesh)
    }),
    ("protocol", |r| r.protocol.to_string()),
    ("seed", |r| r.seed.to_string()),
    ("events simulated", |r| grouped(r.events as f64)),
];

/// The reports side by side, one column each, as a Markdown table.
pub fn table(reports: &[Report]) -> String {
    let mut out = String::from("| |");
    for r in reports {
        let _ = write!(
            out,
            " {}, {} nodes, {}, {} |",
            r.scenario,
            grouped(r.nodes as f64),
            r.heartbeat,
            r.protocol
        );
    }
    out.push_str("\n|---|");
    for _ in reports {
        out.push_str("---|");
    }
    out.push('\n');
    for (label, cell) in ROWS {
        let _ = write!(out, "| {label} |");
        for r in reports {
            let _ = write!(out, " {} |", cell(r));
        }
        out.push('\n');
    }
    out
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&table(std::slice::from_ref(self)))
    }
}
