use super::*;

#[test]
fn a_pass_admits_one_sender_to_one_owner() {
    let (owner, sender, other) = (
        Identity::from_seed(&[1; 32]),
        Identity::from_seed(&[2; 32]),
        Identity::from_seed(&[3; 32]),
    );
    let pass = MailboxPass::issue(&owner, &sender.public());
    assert_eq!(pass.verify(&owner.public(), &sender.public()), Ok(()));
    // Not for another sender, not as another owner's, not the other way round.
    assert!(pass.verify(&owner.public(), &other.public()).is_err());
    assert!(pass.verify(&other.public(), &sender.public()).is_err());
    assert!(pass.verify(&sender.public(), &owner.public()).is_err());
    // Deterministic: issuing again gives the same bytes, so a cache is exact.
    let mut issued = IssuedPasses::default();
    assert_eq!(issued.get(&owner, &sender.public()), pass);
    assert_eq!(issued.get(&owner, &sender.public()), pass);
    // Another domain's signature over the same bytes is no pass.
    let mut p = [0u8; 64];
    p[..32].copy_from_slice(owner.public().as_bytes());
    p[32..].copy_from_slice(sender.public().as_bytes());
    let forged = MailboxPass::from_bytes(owner.sign(Domain::SealingKey, &p));
    assert!(forged.verify(&owner.public(), &sender.public()).is_err());
    // `admits` remembers successes only: asked again, a forged pass is still
    // refused and the genuine one still admitted, for its own pair only.
    for _ in 0..2 {
        assert!(pass.admits(&owner.public(), &sender.public()));
        assert!(!forged.admits(&owner.public(), &sender.public()));
        assert!(!pass.admits(&owner.public(), &other.public()));
    }
}
