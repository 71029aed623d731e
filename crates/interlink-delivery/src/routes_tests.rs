use super::*;

#[test]
fn the_live_window_follows_the_answers_and_backs_off_after_a_timeout() {
    let floor = 1_000;
    let mut r = Rtt::default();
    assert_eq!(
        r.timeout(floor),
        floor,
        "nothing measured: the configured window"
    );
    for _ in 0..20 {
        r.sample(50);
    }
    assert_eq!(r.timeout(floor), floor, "a fast link keeps the floor");
    // A slow, jittery link (a WAN with loss): the window grows past the floor.
    let mut slow = Rtt::default();
    for ms in [400, 900, 300, 1_200, 500, 800] {
        slow.sample(ms);
    }
    let t = slow.timeout(floor);
    assert!(t > 1_500 && t <= LIVE_TIMEOUT_CAP_MS, "{t}");
    // A timeout doubles the next window, up to the cap; an answer resets it.
    slow.timeouts = 1;
    assert_eq!(slow.timeout(floor), (2 * t).min(LIVE_TIMEOUT_CAP_MS));
    slow.timeouts = 10;
    assert_eq!(slow.timeout(floor), LIVE_TIMEOUT_CAP_MS);
    slow.sample(600);
    assert_eq!(slow.timeouts, 0);
    // A configured window above the cap is kept.
    assert_eq!(Rtt::default().timeout(20_000), 20_000);
}
