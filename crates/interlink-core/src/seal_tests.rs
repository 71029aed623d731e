use super::*;
use crate::Identity;
use rand_chacha::{ChaCha20Rng, rand_core::SeedableRng};

#[test]
fn seal_open_round_trip_and_binding() {
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let bob = Identity::from_seed(&[2; 32]).sealing_secret();
    let eve = Identity::from_seed(&[3; 32]).sealing_secret();
    let s = seal(b"hello bob", &bob.public(), b"aad", &mut rng).unwrap();
    assert_eq!(s.ct.len(), NONCE_BYTES + 9 + TAG_BYTES);
    assert_eq!(open(&s, &bob, b"aad").unwrap(), b"hello bob");
    assert_eq!(open(&s, &bob, b"other"), Err(SealError::Open));
    assert_eq!(open(&s, &eve, b"aad"), Err(SealError::Open));
    let mut altered = s.clone();
    altered.ct[NONCE_BYTES] ^= 1;
    assert_eq!(open(&altered, &bob, b"aad"), Err(SealError::Open));
    let mut short = s.clone();
    short.ct.truncate(NONCE_BYTES + TAG_BYTES - 1);
    assert_eq!(open(&short, &bob, b"aad"), Err(SealError::Open));
}

#[test]
fn one_context_seals_many_bodies_with_distinct_nonces() {
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    let bob = Identity::from_seed(&[2; 32]).sealing_secret();
    let ctx = SealContext::new(&bob.public(), &mut rng).unwrap();
    let a = ctx.seal(b"one", b"aad-1", &mut rng).unwrap();
    let b = ctx.seal(b"two", b"aad-2", &mut rng).unwrap();
    assert_eq!(a.enc, b.enc, "one encapsulation for the context");
    assert_ne!(a.ct[..NONCE_BYTES], b.ct[..NONCE_BYTES]);
    let opener = OpenContext::new(&a.enc, &bob).unwrap();
    assert_eq!(opener.open(&a, b"aad-1").unwrap(), b"one");
    assert_eq!(opener.open(&b, b"aad-2").unwrap(), b"two");
    // The aad of one body does not open another.
    assert_eq!(opener.open(&b, b"aad-1"), Err(SealError::Open));
    // Another recipient's secret yields another key.
    let eve = Identity::from_seed(&[3; 32]).sealing_secret();
    let wrong = OpenContext::new(&a.enc, &eve).unwrap();
    assert_eq!(wrong.open(&a, b"aad-1"), Err(SealError::Open));
}
