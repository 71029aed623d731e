use interlink_core::{Identity, SessionId};

use super::*;

fn mb(n: u8) -> Mailbox {
    Mailbox::new(
        Identity::from_seed(&[n; 32]).public(),
        SessionId::new("s").unwrap(),
    )
}

#[test]
fn evicts_least_recently_used_within_bytes() {
    let mut c = DecodedCache::new(500);
    c.insert([1; 32], mb(1), 40);
    c.insert([2; 32], mb(2), 40);
    assert!(c.get(&[1; 32]).is_some()); // 2 is now the least recently used
    c.insert([3; 32], mb(3), 40);
    assert!(c.get(&[2; 32]).is_none());
    assert!(c.get(&[1; 32]).is_some());
    assert!(c.get(&[3; 32]).is_some());
    c.insert([4; 32], mb(4), 101); // 505 > 500: larger than the cache, not kept
    assert!(c.get(&[4; 32]).is_none());
    assert_eq!(c.len(), 2);
    c.insert([1; 32], mb(1), 10); // replacing frees the old size
    assert_eq!(c.bytes, 250);
    assert!(c.take(&[3; 32]).is_some());
    c.remove(&[1; 32]);
    assert_eq!((c.len(), c.bytes), (0, 0));
}
