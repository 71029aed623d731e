use super::*;
use crate::limits::MINUTE_MS;

#[test]
fn small_rosters_keep_the_fixed_heartbeat() {
    for n in [0, 1, 2, 100, 599, 600] {
        assert_eq!(heartbeat_interval_ms(n), HEARTBEAT_MS, "roster of {n}");
    }
}

#[test]
fn the_interval_grows_with_the_roster_then_stops_at_ten_minutes() {
    assert_eq!(heartbeat_interval_ms(601), 30_050);
    assert_eq!(heartbeat_interval_ms(1_000), 50 * SECOND_MS);
    assert_eq!(heartbeat_interval_ms(10_000), 500 * SECOND_MS);
    assert_eq!(heartbeat_interval_ms(12_000), MAX_HEARTBEAT_MS);
    assert_eq!(heartbeat_interval_ms(1_000_000), MAX_HEARTBEAT_MS);
    assert_eq!(heartbeat_interval_ms(usize::MAX), MAX_HEARTBEAT_MS);
    let mut last = 0;
    for n in (0..20_000).step_by(37) {
        let i = heartbeat_interval_ms(n);
        assert!(i >= last, "not monotone at {n}");
        last = i;
    }
}

#[test]
fn the_overlay_rate_stays_at_the_target_between_the_clamps() {
    for n in [700usize, 1_000, 5_000, 10_000, 12_000] {
        let per_s = n as f64 * 1000.0 / heartbeat_interval_ms(n) as f64;
        assert!(
            (per_s - TARGET_ANNOUNCEMENTS_PER_S as f64).abs() < 0.01,
            "{n} sessions: {per_s} announcements/s"
        );
    }
    // Beyond the upper clamp the rate grows again, slowly: N / 600 s.
    let per_s = 60_000.0 * 1000.0 / heartbeat_interval_ms(60_000) as f64;
    assert!((per_s - 100.0).abs() < 0.01);
}

#[test]
fn another_target_rate_scales_the_interval() {
    assert_eq!(interval_for_rate(500, 5), 100 * SECOND_MS);
    // A target of zero is read as one a second.
    assert_eq!(interval_for_rate(500, 0), 500 * SECOND_MS);
}

#[test]
fn the_live_window_is_three_clamped_intervals() {
    assert_eq!(live_window_ms(HEARTBEAT_MS), LIVE_WINDOW_MS);
    assert_eq!(live_window_ms(0), LIVE_WINDOW_MS);
    assert_eq!(live_window_ms(500 * SECOND_MS), 1_500 * SECOND_MS);
    assert_eq!(live_window_ms(u64::MAX), 30 * MINUTE_MS);
}
