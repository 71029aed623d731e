use interlink_core::Identity;

use super::*;

#[test]
fn passes_verify_persist_and_merge_across_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(PASSES_FILE);
    let me = Identity::from_seed(&[1; 32]);
    let (bob, carol, mallory) = (
        Identity::from_seed(&[2; 32]),
        Identity::from_seed(&[3; 32]),
        Identity::from_seed(&[4; 32]),
    );
    let mut one = MailboxPasses::load(Some(path.clone()), me.public());
    let mut two = MailboxPasses::load(Some(path.clone()), me.public());
    let bobs = MailboxPass::issue(&bob, &me.public());
    assert!(one.learn(bob.public(), bobs));
    assert!(!one.learn(bob.public(), bobs), "not new");
    // A pass for someone else, or passed off as another owner's, is not kept.
    assert!(!one.learn(
        mallory.public(),
        MailboxPass::issue(&mallory, &carol.public())
    ));
    assert!(!one.learn(carol.public(), bobs));
    // A second session learns another; the file keeps both.
    assert!(two.learn(carol.public(), MailboxPass::issue(&carol, &me.public())));
    let three = MailboxPasses::load(Some(path.clone()), me.public());
    assert_eq!(three.len(), 2);
    assert_eq!(three.get(&bob.public()), Some(bobs));
    // Loaded for another holder, none of them verifies.
    assert!(MailboxPasses::load(Some(path), carol.public()).is_empty());
}
