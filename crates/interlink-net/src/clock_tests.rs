use super::Clock;

#[test]
fn an_offset_moves_the_clock_and_nothing_else() {
    let later = Clock::offset_by(3_600_000);
    let now = Clock::system().now_ms();
    let moved = later.now_ms();
    assert!(moved >= now + 3_600_000 && moved < now + 3_700_000);
    assert_eq!(Clock::offset_by(-(now as i64) - 10).now_ms(), 0);
}
