use super::*;
use crate::Identity;

#[test]
fn domains_separate() {
    let id = Identity::from_seed(&[7; 32]);
    let sig = id.sign(Domain::Receipt, b"payload");
    assert_eq!(
        verify(&id.public(), Domain::Receipt, b"payload", &sig),
        Ok(())
    );
    for d in Domain::ALL {
        if d != Domain::Receipt {
            assert_eq!(
                verify(&id.public(), d, b"payload", &sig),
                Err(SignatureError::Invalid)
            );
        }
    }
    assert_eq!(
        verify(&id.public(), Domain::Receipt, b"payloaD", &sig),
        Err(SignatureError::Invalid)
    );
    assert_eq!(
        verify(&id.public(), Domain::Receipt, b"payload", &sig[..63]),
        Err(SignatureError::BadLength(63))
    );
}

/// More signers than keys kept: every key, kept or evicted, verifies its own
/// signatures and no other's; a key that is not a point is refused every time.
#[test]
fn kept_keys_verify_only_their_own_signatures() {
    let ids: Vec<Identity> = (0..DECOMPRESSED_KEYS as u8 + 16)
        .map(|i| Identity::from_seed(&[i; 32]))
        .collect();
    for round in 0..2 {
        for (i, id) in ids.iter().enumerate() {
            let sig = id.sign(Domain::Envelope, b"body");
            assert_eq!(
                verify(&id.public(), Domain::Envelope, b"body", &sig),
                Ok(()),
                "round {round}, signer {i}"
            );
            let other = &ids[(i + 1) % ids.len()];
            assert_eq!(
                verify(&other.public(), Domain::Envelope, b"body", &sig),
                Err(SignatureError::Invalid)
            );
        }
    }
    // y = 2 is not on the curve.
    let mut bytes = [0u8; 32];
    bytes[0] = 2;
    let not_a_point: IdentityKey = crate::identity::hex_encode(&bytes).parse().unwrap();
    for _ in 0..2 {
        assert_eq!(
            verify(&not_a_point, Domain::Envelope, b"body", &[0; 64]),
            Err(SignatureError::BadKey)
        );
    }
}

#[test]
fn tags_are_distinct_and_terminated() {
    for (i, a) in Domain::ALL.iter().enumerate() {
        assert!(a.tag().ends_with(b"\0"));
        for b in &Domain::ALL[i + 1..] {
            assert_ne!(a.tag(), b.tag());
        }
    }
}
