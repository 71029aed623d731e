//! What a scenario returns — named measurements in rows — and how results are shown:
//! a plain-text table for people and a JSON document for tools and later comparison.

use std::{fmt::Write as _, path::Path};

use anyhow::Context as _;
use serde::Serialize;

/// An upper bound a measurement should stay under (the targets of the issues).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Target {
    /// The largest acceptable value, in the measurement's unit.
    pub max: f64,
}

/// One named number.
#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    /// What was measured, e.g. `converge`, `visible_p95`.
    pub name: String,
    pub value: f64,
    /// Its unit: `ms`, `MiB`, `%`, `count`.
    pub unit: &'static str,
    /// The target, when the issue sets one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    /// Whether the value meets the target (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub met: Option<bool>,
}

impl Measurement {
    /// A measurement without a target.
    pub fn new(name: impl Into<String>, value: f64, unit: &'static str) -> Self {
        Self {
            name: name.into(),
            value,
            unit,
            target: None,
            met: None,
        }
    }

    /// Adds an upper-bound target.
    #[must_use]
    pub fn at_most(mut self, max: f64) -> Self {
        self.target = Some(Target { max });
        self.met = Some(self.value <= max);
        self
    }

    /// A duration in milliseconds.
    pub fn ms(name: impl Into<String>, d: std::time::Duration) -> Self {
        Self::new(name, d.as_secs_f64() * 1000.0, "ms")
    }

    pub fn count(name: impl Into<String>, n: usize) -> Self {
        // Counts here are far below 2^52, so the conversion is exact.
        #[allow(clippy::cast_precision_loss)]
        Self::new(name, n as f64, "count")
    }
}

/// How a row (one case of a scenario) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Measured.
    Ok,
    /// Ran and failed (timeout, error); measurements, if any, are partial.
    Failed,
    /// Not run, for the given reason (missing binary, no multicast interface, ...).
    Skipped,
}

/// One case of a scenario (e.g. `50 nodes`) and what it measured.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub case: String,
    /// How it ended.
    pub status: Status,
    /// Why it failed or was skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What it measured.
    pub measurements: Vec<Measurement>,
}

impl Row {
    /// A measured case.
    pub fn ok(case: impl Into<String>, measurements: Vec<Measurement>) -> Self {
        Self {
            case: case.into(),
            status: Status::Ok,
            reason: None,
            measurements,
        }
    }

    /// A failed case, with whatever it measured before failing.
    pub fn failed(
        case: impl Into<String>,
        reason: impl Into<String>,
        partial: Vec<Measurement>,
    ) -> Self {
        Self {
            case: case.into(),
            status: Status::Failed,
            reason: Some(reason.into()),
            measurements: partial,
        }
    }

    /// A case not run.
    pub fn skipped(case: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            case: case.into(),
            status: Status::Skipped,
            reason: Some(reason.into()),
            measurements: Vec::new(),
        }
    }
}

/// Everything one scenario reported.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioReport {
    /// The scenario's registry name.
    pub scenario: &'static str,
    /// What it measures.
    pub about: &'static str,
    /// Wall time the scenario took, in seconds.
    pub wall_s: f64,
    /// Its cases.
    pub rows: Vec<Row>,
}

/// Where and how the numbers were produced.
#[derive(Clone, Debug, Serialize)]
pub struct RunInfo {
    /// UTC start time, RFC 3339.
    pub date: String,
    /// The command line.
    pub command: String,
    /// `release` or `debug`, as the bench binary was built.
    pub profile: &'static str,
    /// Whether `--quick` was given.
    pub quick: bool,
    /// CPUs available to the process.
    pub cpus: usize,
    /// Kernel release.
    pub kernel: Option<String>,
    /// The `interlink-p2p` binary used by process-level cases, if any.
    pub p2p_binary: Option<String>,
}

/// The JSON document written by `--json`.
#[derive(Debug, Serialize)]
pub struct Document<'a> {
    /// Format version of this document.
    pub format: u32,
    /// Run metadata.
    pub run: &'a RunInfo,
    /// The results.
    pub scenarios: &'a [ScenarioReport],
}

/// Writes the results as pretty JSON to `path`, creating its directory.
pub fn write_json(path: &Path, run: &RunInfo, reports: &[ScenarioReport]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let doc = Document {
        format: 1,
        run,
        scenarios: reports,
    };
    let text = serde_json::to_string_pretty(&doc).context("encoding results")?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

/// Formats a value with a precision that suits its unit.
pub fn format_value(value: f64, unit: &str) -> String {
    match unit {
        "count" => format!("{value:.0}"),
        "%" if value >= 1.0 => format!("{value:.1}"),
        "%" => format!("{value:.3}"),
        "ms" if value >= 100.0 => format!("{value:.0}"),
        _ => format!("{value:.1}"),
    }
}

/// Longest failure or skip reason shown in the table.
const TABLE_REASON_CHARS: usize = 140;

fn clip(reason: &str) -> String {
    let one_line = reason.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= TABLE_REASON_CHARS {
        one_line
    } else {
        let cut: String = one_line.chars().take(TABLE_REASON_CHARS).collect();
        format!("{cut}... (full reason in the JSON)")
    }
}

/// Renders all results as an aligned plain-text table, one line per measurement and
/// one per skipped or failed case.
pub fn table(reports: &[ScenarioReport]) -> String {
    let header = [
        "scenario", "case", "metric", "value", "unit", "target", "status",
    ];
    let mut lines: Vec<[String; 7]> = Vec::new();
    for report in reports {
        for row in &report.rows {
            let status = match (row.status, &row.reason) {
                (Status::Ok, _) => "ok".to_string(),
                (Status::Failed, Some(r)) => format!("FAILED: {}", clip(r)),
                (Status::Skipped, Some(r)) => format!("skipped: {}", clip(r)),
                (s, None) => format!("{s:?}").to_lowercase(),
            };
            // The status is printed once per row; the JSON has the full reason.
            let mut status = Some(status);
            if row.measurements.is_empty() {
                lines.push([
                    report.scenario.to_string(),
                    row.case.clone(),
                    "-".into(),
                    "-".into(),
                    String::new(),
                    String::new(),
                    status.take().unwrap_or_default(),
                ]);
            }
            for m in &row.measurements {
                let target = match (m.target, m.met) {
                    (Some(t), Some(true)) => format!("<= {} met", format_value(t.max, m.unit)),
                    (Some(t), _) => format!("<= {} MISSED", format_value(t.max, m.unit)),
                    (None, _) => String::new(),
                };
                lines.push([
                    report.scenario.to_string(),
                    row.case.clone(),
                    m.name.clone(),
                    format_value(m.value, m.unit),
                    m.unit.to_string(),
                    target,
                    status.take().unwrap_or_default(),
                ]);
            }
        }
    }
    let mut widths = header.map(str::len);
    for line in &lines {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut push = |cells: &[String; 7]| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            // Values are right-aligned, everything else left-aligned.
            let _ = if i == 3 {
                write!(text, "{cell:>w$}  ")
            } else {
                write!(text, "{cell:<w$}  ")
            };
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    push(&header.map(String::from));
    push(&widths.map(|w| "-".repeat(w)));
    for line in &lines {
        push(line);
    }
    out
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
