use super::*;

#[test]
fn nearest_rank() {
    let v: Vec<Duration> = (1..=20).map(Duration::from_millis).collect();
    assert_eq!(quantile(&v, 0.5), Some(Duration::from_millis(10)));
    assert_eq!(quantile(&v, 0.95), Some(Duration::from_millis(19)));
    assert_eq!(quantile(&v, 1.0), Some(Duration::from_millis(20)));
    assert_eq!(quantile(&[], 0.5), None);
}
