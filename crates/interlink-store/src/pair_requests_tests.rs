use interlink_core::Identity;

use super::*;

#[test]
fn requests_survive_in_the_file_bounded() {
    let dir = tempfile::tempdir().unwrap();
    assert!(load(dir.path()).is_empty());
    let keys: Vec<IdentityKey> = (0..=MAX_PENDING_PAIR_REQUESTS)
        .map(|i| Identity::from_seed(&[u8::try_from(i % 250).unwrap() + 1; 32]).public())
        .collect();
    save(dir.path(), &keys).unwrap();
    let loaded = load(dir.path());
    assert_eq!(loaded.len(), MAX_PENDING_PAIR_REQUESTS);
    assert_eq!(loaded.last(), keys.last());
    let mut gate = interlink_core::trust::Gate::new(Default::default());
    for key in load(dir.path()) {
        gate.note_pair_request(key);
    }
    assert_eq!(
        gate.pending_pair_requests().len(),
        MAX_PENDING_PAIR_REQUESTS
    );
    std::fs::write(path(dir.path()), b"not json").unwrap();
    assert!(load(dir.path()).is_empty());
}
