//! How often a session re-announces itself, as a function of the roster it sees
//! (issue 15).
//!
//! With a fixed [`HEARTBEAT_MS`] every session announces every 30 s, so an overlay of
//! N sessions carries N / 30 announcements a second and every node receives, checks
//! and forwards all of them: the per-node cost grows linearly with N and the overlay's
//! with N². The adaptive rule instead holds the whole overlay near
//! [`TARGET_ANNOUNCEMENTS_PER_S`]: a session that sees `roster_len` sessions waits
//! `roster_len / TARGET` seconds between announcements, never less than the classic
//! 30 s (small teams keep today's behaviour exactly) and never more than
//! [`MAX_HEARTBEAT_MS`] (so a silent session is noticed within half an hour).
//!
//! An announcement carries its sender's interval, and a receiver judges the session
//! live for three of its intervals ([`live_window_ms`]), as it does today with
//! 3 × 30 s = [`crate::limits::LIVE_WINDOW_MS`]. Every node computes its interval from
//! its own roster, so nodes with slightly different rosters pick slightly different
//! intervals; the rule is monotone and the receiver trusts the interval the sender
//! signed, so that does not matter.
//!
//! The simulator in [`super::sim`] measures what the rule buys at 10,000 sessions.

use crate::limits::{HEARTBEAT_MS, LIVE_WINDOW_MS, SECOND_MS};

pub use crate::limits::{MAX_HEARTBEAT_MS, TARGET_ANNOUNCEMENTS_PER_S};

/// Shortest interval the adaptive rule picks: today's fixed heartbeat.
pub const MIN_HEARTBEAT_MS: u64 = HEARTBEAT_MS;

/// The re-announcement interval of a session that sees `roster_len` sessions (its
/// own included): `roster_len × 1000 / TARGET_ANNOUNCEMENTS_PER_S` ms, clamped to
/// `[MIN_HEARTBEAT_MS, MAX_HEARTBEAT_MS]`.
///
/// Up to 600 sessions this is the fixed 30 s; at 10,000 it is 500 s; from 12,000 on
/// it stays at 10 minutes.
pub fn heartbeat_interval_ms(roster_len: usize) -> u64 {
    interval_for_rate(roster_len, TARGET_ANNOUNCEMENTS_PER_S)
}

/// [`heartbeat_interval_ms`] for another overlay-wide target rate (announcements per
/// second, at least one); the simulator uses it to exercise the rule at small sizes.
pub fn interval_for_rate(roster_len: usize, target_per_s: u64) -> u64 {
    let n = u64::try_from(roster_len).unwrap_or(u64::MAX);
    let raw = n.saturating_mul(SECOND_MS) / target_per_s.max(1);
    raw.clamp(MIN_HEARTBEAT_MS, MAX_HEARTBEAT_MS)
}

/// `window_ms`, the live window for the standard heartbeat, stretched for a session
/// that announces every `interval_ms`: in proportion to the interval, first clamped
/// like the rule's own, so a sender can neither claim to stay live for more than
/// twenty windows (half an hour by default) nor, by claiming a tiny interval, drop out
/// sooner than with the standard heartbeat. The roster judges by it
/// ([`super::Config::live_window_for`]).
pub fn stretch_live_window(window_ms: u64, interval_ms: u64) -> u64 {
    window_ms.saturating_mul(interval_ms.clamp(MIN_HEARTBEAT_MS, MAX_HEARTBEAT_MS)) / HEARTBEAT_MS
}

/// How long an announcement that carries `interval_ms` keeps its session live with the
/// default live window: three intervals ([`stretch_live_window`] of
/// [`LIVE_WINDOW_MS`], which is three standard heartbeats).
pub fn live_window_ms(interval_ms: u64) -> u64 {
    stretch_live_window(LIVE_WINDOW_MS, interval_ms)
}

#[cfg(test)]
#[path = "heartbeat_tests.rs"]
mod tests;
