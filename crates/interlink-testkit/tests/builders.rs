//! The kit's builders make what they say: honest objects decode, hostile ones do not.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use interlink_core::wire::{Envelope, Signed};
use interlink_testkit::{
    ids::{addr, identity, msg_id, session},
    signed::{self, forge, future_dated, message, wrong_signer},
};

const NOW: u64 = 1_790_000_000_000;

#[test]
fn an_honest_message_decodes_and_opens_for_its_recipient() {
    let (alice, bob) = (identity(1), identity(2));
    let env = message(&alice, &bob, &session("bob-1"), msg_id(7), NOW, "hi");
    let back = Signed::<Envelope>::decode(&env.to_bytes()).unwrap();
    assert_eq!(back.body().msg_id, msg_id(7));
    assert_eq!(back.body().sender, alice.public());
    // Deterministic: the same inputs give the same bytes.
    let again = message(&alice, &bob, &session("bob-1"), msg_id(7), NOW, "hi");
    assert_eq!(env.to_bytes(), again.to_bytes());
}

#[test]
fn forged_and_wrong_signer_objects_do_not_verify() {
    let (alice, bob, mallory) = (identity(1), identity(2), identity(3));
    let env = message(&alice, &bob, &session("bob-1"), msg_id(1), NOW, "hi");
    assert!(Signed::<Envelope>::decode(&forge(env.to_bytes(), env.signature())).is_err());
    let by_mallory = message(&mallory, &bob, &session("bob-1"), msg_id(1), NOW, "hi");
    let claimed = wrong_signer(by_mallory.to_bytes(), &mallory.public(), &alice.public());
    assert!(Signed::<Envelope>::decode(&claimed).is_err());
}

#[test]
fn the_envelope_builder_sets_what_it_is_told() {
    let (alice, bob) = (identity(1), identity(2));
    let env = signed::envelope(
        alice.public(),
        &session("a"),
        &addr(&bob, "b"),
        msg_id(1),
        NOW,
    )
    .id(msg_id(9))
    .ts(future_dated(NOW))
    .opaque_body()
    .sign(&alice);
    assert_eq!(env.body().msg_id, msg_id(9));
    assert!(env.body().ts > NOW + interlink_core::limits::MAX_FUTURE_SKEW_MS);
    assert_eq!(signed::backdated(NOW, 1_000), NOW - 1_000);
    assert!(signed::oversized_text().len() > interlink_core::limits::MAX_BODY_BYTES);
}
