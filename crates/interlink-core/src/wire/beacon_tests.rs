use super::*;
use crate::{
    Identity,
    wire::{Signed, VERSION},
};

fn beacon(signer: &Identity) -> Signed<Beacon> {
    Signed::sign(
        Beacon::new(signer.public(), Tag([7; 8]), 30_000, 1_790_000_000_000, 42),
        signer,
    )
    .unwrap()
}

#[test]
fn a_beacon_verifies_only_under_the_identity_it_is_named_for() {
    let alice = Identity::from_seed(&[1; 32]);
    let bob = Identity::from_seed(&[2; 32]);
    let bytes = beacon(&alice).to_bytes();
    assert!(bytes.len() < 150, "a beacon is {} bytes", bytes.len());
    let peek = Unverified::<Beacon>::decode(&bytes).unwrap();
    assert_eq!(peek.claimed().tag(), Tag([7; 8]));
    assert_eq!(peek.claimed().v, VERSION);
    // Nobody named: refused before any signature check.
    assert!(matches!(
        peek.clone().verify(),
        Err(WireError::InvalidField { field: "of", .. })
    ));
    assert!(matches!(
        peek.clone().signed_by(bob.public()).verify(),
        Err(WireError::BadSignature { .. })
    ));
    let ok = peek.signed_by(alice.public()).verify().unwrap();
    assert_eq!(ok.body().seq, 42);
    assert_eq!(ok.to_bytes(), bytes);
}

#[test]
fn signing_for_another_identity_is_refused() {
    let alice = Identity::from_seed(&[1; 32]);
    let bob = Identity::from_seed(&[2; 32]);
    let b = Beacon::new(bob.public(), Tag([0; 8]), 30_000, 1, 1);
    assert!(Signed::sign(b, &alice).is_err());
}
