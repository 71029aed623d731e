//! Summaries of repeated timings.

use std::time::Duration;

use crate::report::Measurement;

/// The value at quantile `q` (0..=1) of `sorted`, by the nearest-rank method.
pub fn quantile(sorted: &[Duration], q: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    // Sample counts here are tiny, so the float round trip is exact.
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted.get(rank - 1).copied()
}

/// `{prefix}_p50`, `_p95` and `_max` of `samples` in ms, the last two with an optional
/// upper-bound target. Empty input gives no measurements.
pub fn summary(prefix: &str, samples: &[Duration], target_ms: Option<f64>) -> Vec<Measurement> {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let mut out = Vec::new();
    for (label, q, with_target) in [("p50", 0.5, false), ("p95", 0.95, true), ("max", 1.0, true)] {
        if let Some(d) = quantile(&sorted, q) {
            let m = Measurement::ms(format!("{prefix}_{label}"), d);
            out.push(match target_ms {
                Some(t) if with_target => m.at_most(t),
                _ => m,
            });
        }
    }
    out
}

#[cfg(test)]
#[path = "stats_tests.rs"]
mod tests;
