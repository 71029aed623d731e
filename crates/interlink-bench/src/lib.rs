//! `interlink-bench`: the network benchmark harness of interlink-p2p.
//!
//! Named scenarios ([`scenarios::ALL`]) run complete nodes — in this process on the
//! memory transport or loopback TCP, or as real `interlink-p2p` processes — and return
//! rows of named measurements ([`report`]). The binary prints them as a table on
//! stdout (progress goes to stderr) and writes them all as JSON.
//!
//! Everything is bounded: each case has an overall timeout and reports a failed row
//! instead of hanging; in-process nodes ([`fleet::Fleet`]) and child processes
//! ([`process::Proc`]) are shut down when dropped; ports are chosen by the kernel (TCP)
//! or by a process-wide counter (memory transport).

pub mod fleet;
pub mod process;
pub mod report;
pub mod scenarios;
pub mod stats;

use std::{path::PathBuf, time::Instant};

use report::{Row, ScenarioReport};

/// An `interlink-p2p` binary that has the `run` command.
#[derive(Debug, Clone)]
pub struct P2p {
    pub path: PathBuf,
    /// The output of `interlink-p2p run --help` (to check for optional flags).
    pub run_help: String,
}

/// What every scenario gets.
#[derive(Debug)]
pub struct Context {
    /// Fewer and shorter cases (`--quick`).
    pub quick: bool,
    /// The session binary for process-level cases, or why they are skipped.
    pub p2p: Result<P2p, String>,
    /// `roster-convergence` node counts and runs (`--nodes`), if not the default.
    pub roster_sizes: Option<Vec<(usize, usize)>>,
}

impl Context {
    /// Finds the session binary (explicit path, else next to this binary) and checks
    /// that it has `run`.
    pub async fn new(quick: bool, p2p_bin: Option<PathBuf>) -> Self {
        let p2p = match process::find_p2p_binary(p2p_bin.as_deref()) {
            Ok(path) => process::run_command_help(&path)
                .await
                .map(|run_help| P2p { path, run_help }),
            Err(reason) => Err(reason),
        };
        Self {
            quick,
            p2p,
            roster_sizes: None,
        }
    }
}

/// Progress for people watching: stderr, never stdout (stdout is the table).
pub fn progress(msg: impl std::fmt::Display) {
    eprintln!("[bench] {msg}");
}

/// Runs `selected` scenarios in order and collects their reports.
pub async fn run(selected: &[&'static scenarios::Scenario], ctx: &Context) -> Vec<ScenarioReport> {
    let mut reports = Vec::new();
    for scenario in selected {
        progress(format_args!(
            "scenario {}: {}",
            scenario.name, scenario.about
        ));
        let start = Instant::now();
        let rows = match (scenario.run)(ctx).await {
            Ok(rows) => rows,
            Err(e) => vec![Row::failed("-", format!("{e:#}"), Vec::new())],
        };
        let wall_s = start.elapsed().as_secs_f64();
        progress(format_args!(
            "scenario {} done in {wall_s:.1} s",
            scenario.name
        ));
        reports.push(ScenarioReport {
            scenario: scenario.name,
            about: scenario.about,
            wall_s,
            rows,
        });
    }
    reports
}

/// The current UTC time as RFC 3339 (seconds), without a date-time dependency.
pub fn utc_now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (y, mo, d, h, mi, s) = interlink_core::dates::utc_fields(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

#[cfg(test)]
mod tests;
