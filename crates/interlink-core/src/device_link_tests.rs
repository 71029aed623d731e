use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng as _;
use serde_bytes::ByteBuf;

use super::*;
use crate::wire::{DEVICE_CODE_VERSION, INVITE_SECRET_BYTES, MAX_LINK_REQUEST_BYTES};

const NOW: u64 = 1_800_000_000_000;

fn owner() -> Identity {
    Identity::from_seed(&[7; 32])
}

fn peer(n: u8) -> PeerId {
    Identity::from_seed(&[n; 32])
        .transport_keypair(&crate::SessionId::new("link").unwrap())
        .unwrap()
        .public()
        .to_peer_id()
}

fn code_with(secret: u8) -> DeviceCode {
    let addr: multiaddr::Multiaddr = format!("/ip4/192.0.2.7/tcp/4101/p2p/{}", peer(1))
        .parse()
        .unwrap();
    DeviceCode {
        v: DEVICE_CODE_VERSION,
        key: owner().public(),
        secret: ByteArray::new([secret; INVITE_SECRET_BYTES]),
        expires: NOW + DEFAULT_CODE_LIFETIME_MS,
        addrs: vec![ByteBuf::from(addr.to_vec())],
    }
}

fn rng(n: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(n)
}

fn inviter() -> Inviter {
    Inviter::new(owner(), &code_with(9), &["/ip4/192.0.2.7/tcp/7385".into()])
}

fn respond(reply: Reply) -> LinkResponse {
    match reply {
        Reply::Respond(r) => r,
        Reply::Hold => panic!("held"),
    }
}

/// Runs hello and reveal; returns the joiner and both comparison strings.
fn to_comparison(inv: &mut Inviter, joiner_peer: PeerId) -> (Joiner, String, String) {
    let (mut j, hello) = Joiner::new(&code_with(9), NOW, &mut rng(1)).unwrap();
    let resp = respond(inv.handle(joiner_peer, &hello, NOW, &mut rng(2)));
    let (reveal, theirs) = j.accepted(&resp).unwrap();
    let resp = respond(inv.handle(joiner_peer, &reveal, NOW + 1, &mut rng(3)));
    j.revealed(&resp).unwrap();
    let ours = inv.comparison().unwrap().to_owned();
    (j, theirs, ours)
}

#[test]
fn both_confirm_and_the_identity_arrives_with_both_sides_addresses() {
    let mut inv = inviter();
    let (j, theirs, ours) = to_comparison(&mut inv, peer(2));
    assert_eq!(theirs, ours);
    assert_eq!(theirs.len(), COMPARISON_DIGITS + 1);
    assert!(
        theirs.chars().all(|c| c.is_ascii_digit() || c == '-'),
        "{theirs}"
    );
    let confirm = j.confirm(&["/ip4/192.0.2.8/tcp/7385".into()]).unwrap();
    // The joiner confirmed first: its request waits for this side's user.
    assert_eq!(
        inv.handle(peer(2), &confirm, NOW + 2, &mut rng(4)),
        Reply::Hold
    );
    assert!(inv.outcome().is_none());
    let resp = inv.decide(true, &mut rng(5)).unwrap();
    let bytes = crate::wire::encode(&resp);
    assert!(bytes.len() <= crate::wire::MAX_LINK_RESPONSE_BYTES);
    let (identity, addrs) = j
        .finish(&LinkResponse::decode(&bytes, step::CONFIRM).unwrap())
        .unwrap();
    assert_eq!(identity.public(), owner().public());
    assert_eq!(*identity.seed(), *owner().seed());
    assert_eq!(addrs, vec!["/ip4/192.0.2.7/tcp/7385".to_owned()]);
    assert_eq!(
        inv.outcome(),
        Some(&Outcome::Linked {
            addrs: vec!["/ip4/192.0.2.8/tcp/7385".into()]
        })
    );
}

#[test]
fn the_inviter_may_confirm_before_the_joiner() {
    let mut inv = inviter();
    let (j, _, _) = to_comparison(&mut inv, peer(2));
    assert_eq!(inv.decide(true, &mut rng(5)), None);
    let confirm = j.confirm(&[]).unwrap();
    let resp = respond(inv.handle(peer(2), &confirm, NOW + 2, &mut rng(4)));
    assert_eq!(j.finish(&resp).unwrap().0.public(), owner().public());
}

#[test]
fn a_declined_comparison_sends_nothing() {
    // This side's user says no after the joiner confirmed.
    let mut inv = inviter();
    let (j, _, _) = to_comparison(&mut inv, peer(2));
    let confirm = j.confirm(&[]).unwrap();
    assert_eq!(
        inv.handle(peer(2), &confirm, NOW + 2, &mut rng(4)),
        Reply::Hold
    );
    let resp = inv.decide(false, &mut rng(5)).unwrap();
    assert_eq!(resp.status, LinkStatus::Declined);
    assert_eq!(j.finish(&resp).unwrap_err(), LinkError::Declined);
    assert_eq!(inv.outcome(), Some(&Outcome::Failed(LinkError::Declined)));
    // ... and before: the later confirm is refused, nothing sealed.
    let mut inv = inviter();
    let (j, _, _) = to_comparison(&mut inv, peer(2));
    assert_eq!(inv.decide(false, &mut rng(5)), None);
    let resp = respond(inv.handle(peer(2), &j.confirm(&[]).unwrap(), NOW + 2, &mut rng(4)));
    assert!(resp.sealed.is_none());
    assert_eq!(j.finish(&resp).unwrap_err(), LinkError::Declined);
    // Only the joiner that spent the code is told so.
    let resp = respond(inv.handle(peer(3), &j.confirm(&[]).unwrap(), NOW + 2, &mut rng(4)));
    assert_eq!(resp.status, LinkStatus::Refused);
}

#[test]
fn a_wrong_secret_is_refused_and_spends_nothing() {
    let mut inv = inviter();
    let (_, hello) = Joiner::new(&code_with(10), NOW, &mut rng(1)).unwrap();
    let resp = respond(inv.handle(peer(3), &hello, NOW, &mut rng(2)));
    assert_eq!(resp, LinkResponse::status(step::HELLO, LinkStatus::Refused));
    // Still unspent: the right joiner gets through.
    let (_, theirs, ours) = to_comparison(&mut inv, peer(2));
    assert_eq!(theirs, ours);
}

#[test]
fn a_stranger_learns_nothing_from_any_step() {
    let mut inv = inviter();
    let garbage = LinkRequest {
        v: VERSION,
        step: step::REVEAL,
        commit: None,
        eph: Some(ByteArray::new([5; 32])),
        addrs: None,
        mac: ByteArray::new([0; 32]),
    };
    let resp = respond(inv.handle(peer(3), &garbage, NOW, &mut rng(2)));
    assert_eq!(
        resp,
        LinkResponse::status(step::REVEAL, LinkStatus::Refused)
    );
    let (_, theirs, ours) = to_comparison(&mut inv, peer(2));
    assert_eq!(theirs, ours);
    // After the code is taken, a stranger's reveal or confirm is refused the same way
    // and does not disturb the exchange.
    let resp = respond(inv.handle(peer(3), &garbage, NOW, &mut rng(2)));
    assert_eq!(resp.status, LinkStatus::Refused);
    assert!(inv.comparison().is_some());
}

#[test]
fn a_second_joiner_with_the_same_code_is_told_it_was_used() {
    let mut inv = inviter();
    let (j, _, _) = to_comparison(&mut inv, peer(2));
    let (_, hello) = Joiner::new(&code_with(9), NOW, &mut rng(7)).unwrap();
    let resp = respond(inv.handle(peer(4), &hello, NOW + 1, &mut rng(8)));
    assert_eq!(resp.status, LinkStatus::Used);
    let (mut second, _) = Joiner::new(&code_with(9), NOW, &mut rng(7)).unwrap();
    assert_eq!(second.accepted(&resp).unwrap_err(), LinkError::Used);
    // The first exchange goes on.
    assert_eq!(
        inv.handle(peer(2), &j.confirm(&[]).unwrap(), NOW + 2, &mut rng(4)),
        Reply::Hold
    );
    assert!(inv.decide(true, &mut rng(5)).is_some());
    // And after it, the code stays spent.
    let resp = respond(inv.handle(peer(4), &hello, NOW + 3, &mut rng(8)));
    assert_eq!(resp.status, LinkStatus::Used);
}

#[test]
fn an_expired_code_is_refused_on_both_sides() {
    assert_eq!(
        Joiner::new(&code_with(9), NOW + DEFAULT_CODE_LIFETIME_MS, &mut rng(1)).unwrap_err(),
        LinkError::Expired
    );
    let mut inv = inviter();
    let (_, hello) = Joiner::new(&code_with(9), NOW, &mut rng(1)).unwrap();
    let late = NOW + DEFAULT_CODE_LIFETIME_MS;
    let resp = respond(inv.handle(peer(2), &hello, late, &mut rng(2)));
    assert_eq!(resp.status, LinkStatus::Expired);
    assert_eq!(inv.outcome(), Some(&Outcome::Failed(LinkError::Expired)));
}

#[test]
fn the_confirmation_window_ends_a_spent_exchange() {
    let mut inv = inviter();
    let (j, _, _) = to_comparison(&mut inv, peer(2));
    assert_eq!(inv.poll_timeout(), Some(NOW + CONFIRM_WINDOW_MS));
    inv.handle_timeout(NOW + CONFIRM_WINDOW_MS);
    assert_eq!(inv.outcome(), Some(&Outcome::Failed(LinkError::TimedOut)));
    let resp = respond(inv.handle(
        peer(2),
        &j.confirm(&[]).unwrap(),
        NOW + CONFIRM_WINDOW_MS,
        &mut rng(4),
    ));
    assert!(resp.sealed.is_none());
    assert_eq!(inv.decide(true, &mut rng(5)), None);
}

#[test]
fn a_reveal_that_does_not_open_the_commitment_ends_the_exchange() {
    let mut inv = inviter();
    let (mut j, hello) = Joiner::new(&code_with(9), NOW, &mut rng(1)).unwrap();
    let resp = respond(inv.handle(peer(2), &hello, NOW, &mut rng(2)));
    let (mut reveal, _) = j.accepted(&resp).unwrap();
    // Another key than the one committed to (a man in the middle choosing late).
    reveal.eph = Some(ByteArray::new([0x42; 32]));
    let resp = respond(inv.handle(peer(2), &reveal, NOW, &mut rng(3)));
    assert_eq!(resp.status, LinkStatus::Refused);
    assert_eq!(inv.outcome(), Some(&Outcome::Failed(LinkError::Refused)));
    assert!(inv.comparison().is_none());
}

#[test]
fn an_answer_not_made_with_the_secret_is_refused_by_the_joiner() {
    // Someone who knows the code's addresses but not its secret answers the hello.
    let (mut j, _) = Joiner::new(&code_with(9), NOW, &mut rng(1)).unwrap();
    let forged = LinkResponse {
        eph: Some(ByteArray::new([3; 32])),
        mac: Some(ByteArray::new([0; 32])),
        ..LinkResponse::status(step::HELLO, LinkStatus::Ok)
    };
    assert!(matches!(j.accepted(&forged), Err(LinkError::BadAnswer(_))));
    // An inviter that holds another secret: its accept MAC does not verify.
    let mut other = Inviter::new(owner(), &code_with(10), &[]);
    let (_, hello10) = Joiner::new(&code_with(10), NOW, &mut rng(1)).unwrap();
    let resp = respond(other.handle(peer(2), &hello10, NOW, &mut rng(2)));
    assert!(matches!(j.accepted(&resp), Err(LinkError::BadAnswer(_))));
}

#[test]
fn a_sealed_offer_of_another_identity_or_altered_is_refused() {
    // An inviter with the secret but another identity than the code names (the code's
    // signature binds the key; the seed must match it).
    let mallory = Identity::from_seed(&[66; 32]);
    let mut inv = Inviter::new(mallory, &code_with(9), &[]);
    let (j, _, _) = to_comparison(&mut inv, peer(2));
    inv.decide(true, &mut rng(5));
    let resp = respond(inv.handle(peer(2), &j.confirm(&[]).unwrap(), NOW + 2, &mut rng(4)));
    assert!(matches!(j.finish(&resp), Err(LinkError::BadAnswer(_))));
    // A flipped bit in the sealed offer.
    let mut inv = inviter();
    let (j, _, _) = to_comparison(&mut inv, peer(2));
    inv.decide(true, &mut rng(5));
    let mut resp = respond(inv.handle(peer(2), &j.confirm(&[]).unwrap(), NOW + 2, &mut rng(4)));
    if let Some(s) = resp.sealed.as_mut() {
        s[0] ^= 1;
    }
    assert!(matches!(j.finish(&resp), Err(LinkError::BadAnswer(_))));
}

#[test]
fn an_altered_confirm_is_refused() {
    let mut inv = inviter();
    let (j, _, _) = to_comparison(&mut inv, peer(2));
    let mut confirm = j.confirm(&["/ip4/192.0.2.8/tcp/7385".into()]).unwrap();
    confirm.addrs = Some(vec!["/ip4/203.0.113.66/tcp/7385".into()]);
    let resp = respond(inv.handle(peer(2), &confirm, NOW + 2, &mut rng(4)));
    assert_eq!(resp.status, LinkStatus::Refused);
    assert_eq!(inv.decide(true, &mut rng(5)), None);
}

#[test]
fn man_in_the_middle_with_the_code_shows_different_strings() {
    // Mallory has the code, plays joiner to the inviter and inviter to the joiner.
    let mut inv = inviter();
    let (mut mallory_j, hello_m) = Joiner::new(&code_with(9), NOW, &mut rng(20)).unwrap();
    let resp = respond(inv.handle(peer(6), &hello_m, NOW, &mut rng(2)));
    let (reveal_m, _) = mallory_j.accepted(&resp).unwrap();
    respond(inv.handle(peer(6), &reveal_m, NOW, &mut rng(3)));
    let at_inviter = inv.comparison().unwrap().to_owned();
    let mut mallory_i = Inviter::new(owner(), &code_with(9), &[]);
    let (mut j, hello) = Joiner::new(&code_with(9), NOW, &mut rng(1)).unwrap();
    let resp = respond(mallory_i.handle(peer(2), &hello, NOW, &mut rng(21)));
    let (_, at_joiner) = j.accepted(&resp).unwrap();
    assert_ne!(at_inviter, at_joiner);
}

#[test]
fn requests_out_of_order_or_oversized_end_nothing_unexpected() {
    let mut inv = inviter();
    let (j, hello) = Joiner::new(&code_with(9), NOW, &mut rng(1)).unwrap();
    // A confirm before any hello: refused, the code unspent.
    let early = LinkRequest {
        v: VERSION,
        step: step::CONFIRM,
        commit: None,
        eph: None,
        addrs: Some(vec![]),
        mac: ByteArray::new([0; 32]),
    };
    assert_eq!(
        respond(inv.handle(peer(2), &early, NOW, &mut rng(2))).status,
        LinkStatus::Refused
    );
    assert_eq!(
        respond(inv.handle(peer(2), &hello, NOW, &mut rng(2))).status,
        LinkStatus::Ok
    );
    // The joiner's confirm before its reveal ends the exchange.
    assert!(j.confirm(&[]).is_err());
    assert_eq!(
        respond(inv.handle(peer(2), &early, NOW, &mut rng(2))).status,
        LinkStatus::Refused
    );
    assert!(matches!(inv.outcome(), Some(Outcome::Failed(_))));
    assert!(LinkRequest::decode(&vec![0xa0; MAX_LINK_REQUEST_BYTES + 1]).is_err());
}
