use super::*;
use crate::Identity;

#[test]
fn presence_message_round_trip_and_refusals() {
    let a = Identity::from_seed(&[1; 32]);
    let ann = Signed::sign(super::super::tests::announcement(&a, "s1", "x"), &a).unwrap();
    let msg = PresenceMessage::Announcement(ann.clone());
    let none = |_: &Beacon| None;
    assert_eq!(PresenceMessage::decode(&msg.to_bytes(), none).unwrap(), msg);
    assert!(PresenceMessage::decode(&[0xa0], none).is_err());
    assert!(PresenceMessage::decode(&vec![0; MAX_PRESENCE_MESSAGE_BYTES + 1], none).is_err());
    // An announcement's bytes under the goodbye key do not verify as a goodbye.
    let wrong = encode(&PresenceWire::Goodbye(ByteBuf::from(ann.to_bytes())));
    assert!(PresenceMessage::decode(&wrong, none).is_err());
    let answer = crate::presence::sync::Answer {
        entries: vec![(&ann, None)],
        ..Default::default()
    };
    let resp = RosterResponse::new(&answer);
    assert_eq!(resp.announcements.len(), 1);
    assert!(resp.beacons.is_empty() && !resp.same);
}

#[test]
fn a_beacon_travels_under_its_own_key_and_verifies_under_the_named_identity() {
    let a = Identity::from_seed(&[1; 32]);
    let beacon = Signed::sign(
        Beacon::new(
            a.public(),
            crate::presence::sync::Tag([3; 8]),
            30_000,
            1_790_000_000_000,
            9,
        ),
        &a,
    )
    .unwrap();
    let msg = PresenceMessage::Beacon(beacon);
    let bytes = msg.to_bytes();
    assert!(
        bytes.len() <= 160,
        "a beacon message is {} bytes",
        bytes.len()
    );
    assert_eq!(
        PresenceMessage::decode(&bytes, |b| {
            assert_eq!(b.tag(), crate::presence::sync::Tag([3; 8]));
            Some(a.public())
        })
        .unwrap(),
        msg
    );
    assert!(PresenceMessage::decode(&bytes, |_| None).is_err());
    let other = Identity::from_seed(&[2; 32]).public();
    assert!(PresenceMessage::decode(&bytes, |_| Some(other)).is_err());
}

#[test]
fn the_gossip_id_names_the_content() {
    let one = gossip_message_id(b"one");
    assert_eq!(one, gossip_message_id(b"one"));
    assert_ne!(one, gossip_message_id(b"two"));
    assert_eq!(one.len(), GOSSIP_ID_BYTES);
}
