use super::*;

#[test]
fn the_newest_whole_slot_wins_and_a_torn_one_is_passed_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LAZY_FILE);
    assert_eq!(newest(&path).unwrap(), None, "missing: nothing");
    assert!(write(&path, 1, b"one").unwrap());
    assert!(write(&path, 2, b"two").unwrap());
    assert_eq!(newest(&path).unwrap(), Some((2, b"two".to_vec())));
    assert!(write(&path, 3, b"three").unwrap());
    assert_eq!(newest(&path).unwrap(), Some((3, b"three".to_vec())));
    // Tear generation 3's slot (slot 1): the older whole one is the state.
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(newest(&path).unwrap(), Some((2, b"two".to_vec())));
    // Zeros (a crash's lost blocks) and garbage are no state.
    std::fs::write(&path, vec![0; 2 * SLOT_BYTES]).unwrap();
    assert_eq!(newest(&path).unwrap(), None);
    std::fs::write(&path, b"{not a slot").unwrap();
    assert_eq!(newest(&path).unwrap(), None);
}

#[test]
fn a_state_too_large_for_a_slot_is_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LAZY_FILE);
    assert!(!write(&path, 1, &vec![b'x'; SLOT_BYTES]).unwrap());
    assert!(!path.exists());
    assert!(write(&path, 1, &vec![b'x'; SLOT_BYTES - HEADER_BYTES]).unwrap());
}

#[cfg(unix)]
#[test]
fn the_file_is_the_owners_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LAZY_FILE);
    write(&path, 1, b"x").unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}
