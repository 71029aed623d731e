use super::*;

fn id(n: u8) -> MsgId {
    MsgId::from_bytes([n; 16])
}

#[test]
fn time_window() {
    let now = 1_000_000_000;
    assert_eq!(check_time(now, now, 10), Ok(()));
    assert_eq!(check_time(now - 10, now, 10), Ok(()));
    assert_eq!(
        check_time(now - 11, now, 10),
        Err(TimeError::Stale {
            age_ms: 11,
            window_ms: 10
        })
    );
    assert_eq!(check_time(now + MAX_FUTURE_SKEW_MS, now, 10), Ok(()));
    assert!(matches!(
        check_time(now + MAX_FUTURE_SKEW_MS + 1, now, 10),
        Err(TimeError::FutureDated { .. })
    ));
}

#[test]
fn replay_rejected_until_expiry_and_bounded() {
    let mut set = ReplaySet::new(3, 100);
    set.insert(id(1), 0).unwrap();
    assert_eq!(set.insert(id(1), 50), Err(Replayed(id(1))));
    set.insert(id(1), 100).unwrap(); // expired, accepted again
    set.insert(id(2), 100).unwrap();
    set.insert(id(3), 100).unwrap();
    set.insert(id(4), 100).unwrap(); // evicts id(1)
    assert_eq!(set.len(), 3);
    assert!(!set.contains(&id(1)));
    assert!(set.contains(&id(4)));
}
