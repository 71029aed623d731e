use super::*;

const RATE: Rate = Rate {
    burst: 10,
    per: 1,
    period_ms: 2000,
};

#[test]
fn a_burst_then_the_rate_and_no_partial_refill_is_lost() {
    let mut b = TokenBucket::full(RATE, 0);
    assert!(b.try_take(10));
    assert!(!b.try_take(1));
    // 1.5 periods: one token, and the half period is kept...
    b.refill(RATE, 3000);
    assert_eq!(b.level(), 1);
    // ...so another half period makes the second.
    b.refill(RATE, 4000);
    assert_eq!(b.level(), 2);
    // Never past the burst, and a long idle starts the count afresh.
    b.refill(RATE, 1_000_000);
    assert_eq!(b.level(), 10);
    b.try_take(10);
    b.refill(RATE, 1_001_999);
    assert_eq!(b.level(), 0);
    b.refill(RATE, 1_002_000);
    assert_eq!(b.level(), 1);
}

#[test]
fn a_debt_is_refilled_first() {
    let mut b = TokenBucket::empty(0);
    b.charge(3);
    assert_eq!(b.level(), -3);
    b.refill(RATE, 8000);
    assert_eq!(b.level(), 1);
    assert!(!b.try_take(2));
    assert!(b.try_take(1));
    // A clock that goes back adds nothing.
    b.refill(RATE, 10);
    assert_eq!(b.level(), 0);
}
