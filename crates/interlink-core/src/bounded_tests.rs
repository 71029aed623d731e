use super::*;

#[test]
fn the_least_recently_used_entry_leaves_first() {
    let mut m = LruMap::new(2);
    assert!(m.entry(1, || "a").1.is_none());
    assert!(m.entry(2, || "b").1.is_none());
    // Using 1 makes 2 the oldest.
    assert_eq!(m.touch(&1).map(|v| *v), Some("a"));
    assert_eq!(m.entry(3, || "c").1, Some((2, "b")));
    // A read that is not a use leaves the order: 1 goes next.
    assert_eq!(m.get(&1), Some(&"a"));
    assert_eq!(m.entry(4, || "d").1, Some((1, "a")));
    // An existing key is used, not replaced, and evicts nothing.
    let (v, gone) = m.entry(3, || "x");
    assert_eq!((*v, gone), ("c", None));
    assert_eq!(m.len(), 2);
    assert_eq!(m.oldest(), Some((&4, &"d")));
    m.retain(|k, _| *k != 4);
    assert_eq!(m.iter().map(|(k, _)| *k).collect::<Vec<_>>(), vec![3]);
    assert_eq!(LruMap::<u8, u8>::new(0).entry(1, || 1).1, None);
}

#[test]
fn a_full_map_evicts_in_constant_time() {
    // 100,000 fresh keys through a map of 4,096: each insert evicts one, and the
    // survivors are the newest.
    let mut m = LruMap::new(4096);
    for k in 0..100_000u32 {
        m.entry(k, || k);
    }
    assert_eq!(m.len(), 4096);
    assert_eq!(m.oldest(), Some((&(100_000 - 4096), &(100_000 - 4096))));
}
