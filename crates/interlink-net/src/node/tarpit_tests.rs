use super::*;

#[test]
fn items_come_back_after_the_delay_in_order_and_past_capacity_at_once() {
    let start = Instant::now();
    let mut t = Tarpit::new(Duration::from_secs(2), 2);
    assert_eq!(t.hold(1, start), Ok(()));
    assert_eq!(t.hold(2, start + Duration::from_secs(1)), Ok(()));
    assert_eq!(t.hold(3, start + Duration::from_secs(1)), Err(3), "full");
    assert_eq!(t.poll_due(start + Duration::from_millis(1999)), None);
    assert_eq!(t.poll_due(start + Duration::from_secs(2)), Some(1));
    assert_eq!(t.poll_due(start + Duration::from_secs(2)), None);
    assert_eq!(t.poll_due(start + Duration::from_secs(3)), Some(2));
    assert_eq!(t.poll_due(start + Duration::from_secs(9)), None);
}
