use interlink_core::Identity;

use super::*;

#[test]
fn pins_verify_persist_and_merge_across_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(PINS_FILE);
    let (a, b, c) = (
        Identity::from_seed(&[1; 32]),
        Identity::from_seed(&[2; 32]),
        Identity::from_seed(&[3; 32]),
    );
    let mut one = SealingPins::load(Some(path.clone()));
    let mut two = SealingPins::load(Some(path.clone()));
    assert!(one.learn(a.public(), SealingBinding::new(&a)));
    assert!(!one.learn(a.public(), SealingBinding::new(&a)), "not new");
    // A binding that is not the identity's own is refused.
    assert!(!one.learn(c.public(), SealingBinding::new(&b)));
    assert!(two.learn(b.public(), SealingBinding::new(&b)));
    let back = SealingPins::load(Some(path.clone()));
    assert_eq!(
        back.len(),
        2,
        "the second session's save kept the first's pin"
    );
    assert_eq!(back.get(&a.public()), Some(a.sealing_secret().public()));
    assert_eq!(back.get(&c.public()), None);
    // A tampered file grants nothing.
    let text = std::fs::read_to_string(&path).unwrap();
    let forged = text.replace(
        &interlink_core::identity::hex_encode(a.sealing_secret().public().as_bytes()),
        &interlink_core::identity::hex_encode(c.sealing_secret().public().as_bytes()),
    );
    std::fs::write(&path, forged).unwrap();
    assert_eq!(SealingPins::load(Some(path)).get(&a.public()), None);
}
