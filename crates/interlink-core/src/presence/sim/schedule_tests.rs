use super::*;

#[test]
fn events_come_out_by_time_then_push_order() {
    let mut q = Queue::default();
    q.push(5, Ev::Tick(1));
    q.push(3, Ev::Tick(2));
    q.push(5, Ev::Tick(3));
    q.push(9, Ev::Tick(4));
    let mut out = Vec::new();
    while let Some((at, ev)) = q.pop_until(8) {
        out.push((at, ev));
    }
    assert_eq!(out, [(3, Ev::Tick(2)), (5, Ev::Tick(1)), (5, Ev::Tick(3))]);
    assert_eq!(q.pop_until(9), Some((9, Ev::Tick(4))));
    // Far beyond the ring, then something near pushed later: still in order.
    q.push(10_000_000, Ev::Tick(5));
    q.push(20, Ev::Tick(6));
    q.push(20, Ev::Tick(7));
    assert_eq!(q.pop_until(19), None);
    assert_eq!(q.pop_until(u64::MAX), Some((20, Ev::Tick(6))));
    // Pushed into the bucket being drained: sorted in.
    q.push(20, Ev::Tick(8));
    assert_eq!(q.pop_until(u64::MAX), Some((20, Ev::Tick(7))));
    assert_eq!(q.pop_until(u64::MAX), Some((20, Ev::Tick(8))));
    assert_eq!(q.pop_until(9_999_999), None);
    assert_eq!(q.pop_until(u64::MAX), Some((10_000_000, Ev::Tick(5))));
    assert_eq!(q.pop_until(u64::MAX), None);
}

#[test]
fn the_rng_stays_in_range_and_repeats_from_its_seed() {
    let mut a = Rng::new(7);
    let mut b = Rng::new(7);
    for _ in 0..1000 {
        let x = a.between(3, 9);
        assert!((3..=9).contains(&x));
        assert_eq!(x, b.between(3, 9));
    }
    assert_eq!(a.below(0), 0);
    let hits = (0..10_000).filter(|_| a.chance(0.25)).count();
    assert!((2_200..2_800).contains(&hits), "{hits}");
}
