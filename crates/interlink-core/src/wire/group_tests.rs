#![allow(clippy::unwrap_used, clippy::expect_used)]

use rand_chacha::{ChaCha20Rng, rand_core::SeedableRng};

use super::*;
use crate::wire::tests::bare_message;
use crate::{
    Identity, SessionId,
    limits::{
        MAX_BODY_BYTES, MAX_ENVELOPE_BYTES, MAX_GROUP_RECIPIENTS, MAX_GROUP_TAG_BYTES,
        MAX_NAME_BYTES, MAX_SESSION_ID_BYTES, MAX_TASK_ID_BYTES,
    },
    wire::{Body, Envelope, OpenError, Signed, TaskStatus},
};

fn identity(n: u8) -> Identity {
    Identity::from_seed(&[n; 32])
}

fn addr(n: u8, session: &str) -> SessionAddr {
    SessionAddr {
        key: identity(n).public(),
        session: SessionId::new(session).unwrap(),
    }
}

fn tag(members: Vec<SessionAddr>) -> GroupTag {
    GroupTag {
        name: "team".into(),
        thread: MsgId::from_bytes([3; 16]),
        members,
    }
}

/// The largest tag the bounds allow: the longest name, every member slot, the longest
/// session ids.
fn largest_tag() -> GroupTag {
    GroupTag {
        name: "n".repeat(MAX_NAME_BYTES),
        thread: MsgId::from_bytes([3; 16]),
        members: (0..MAX_GROUP_RECIPIENTS)
            .map(|i| {
                let session = format!("{i:03}{}", "s".repeat(MAX_SESSION_ID_BYTES - 3));
                addr(10 + u8::try_from(i).unwrap(), &session)
            })
            .collect(),
    }
}

#[test]
fn bounds_of_a_tag() {
    let ok = tag(vec![addr(2, "b-1"), addr(3, "c-1"), addr(2, "b-2")]);
    ok.check().unwrap();
    assert!(largest_tag().check().is_ok());

    let field = |t: &GroupTag| match t.check() {
        Err(WireError::InvalidField { field, .. }) => field,
        other => panic!("expected a refused field, got {other:?}"),
    };
    assert_eq!(field(&tag(vec![])), "body.group.members");
    let mut too_many = largest_tag();
    too_many.members.push(addr(200, "one-more"));
    assert_eq!(field(&too_many), "body.group.members");
    assert_eq!(
        field(&tag(vec![addr(2, "b-1"), addr(2, "b-1")])),
        "body.group.members"
    );
    for bad in [
        "",
        "has space",
        "new\nline",
        &"n".repeat(MAX_NAME_BYTES + 1),
    ] {
        let mut t = ok.clone();
        t.name = bad.to_owned();
        assert_eq!(field(&t), "body.group.name", "{bad:?}");
    }
    // Body::check holds a body to its tag's bounds.
    let mut body = Body::text("hi");
    body.group = Some(tag(vec![]));
    assert!(body.check().is_err());
    body.group = Some(ok);
    body.check().unwrap();
}

/// The room kept for a tag holds the largest one, and a message with the longest text,
/// task id and tag still fits an envelope.
#[test]
fn the_largest_tag_fits_beside_the_longest_text() {
    let (a, b) = (identity(1), identity(2));
    let mut largest = largest_tag();
    // The copy's recipient is among the members (a key is as long as any other).
    largest.members[0].key = b.public();
    let encoded = super::super::encode(&largest).len();
    assert!(encoded <= MAX_GROUP_TAG_BYTES, "{encoded} bytes");
    assert_eq!(
        encoded, 5_738,
        "limits::MAX_GROUP_TAG_BYTES names this size"
    );

    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let mut env = bare_message(&a, &b, &mut rng);
    env.recipient_session = largest.members[0].session.clone();
    let body = Body {
        text: "x".repeat(MAX_BODY_BYTES),
        task_id: Some("t".repeat(MAX_TASK_ID_BYTES)),
        status: Some(TaskStatus::NeedsInput),
        in_reply_to: Some(MsgId::from_bytes([9; 16])),
        group: Some(largest),
    };
    body.check().unwrap();
    env.seal_body(&body, &b.sealing_secret().public(), &mut rng)
        .unwrap();
    let signed = Signed::sign(env, &a).unwrap();
    let wire = signed.to_bytes();
    assert!(wire.len() <= MAX_ENVELOPE_BYTES, "{} bytes", wire.len());
    let back = Signed::<Envelope>::decode(&wire).unwrap();
    assert_eq!(back.body().open_body(&b.sealing_secret()).unwrap(), body);
}

/// A direct message's body has no `group` key at all (it encodes as before version 7),
/// a group message's has it last; both open to what was sealed, and the tag is not in
/// the clear.
#[test]
fn the_tag_is_sealed_and_optional() {
    let (a, b) = (identity(1), identity(2));
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let direct = Body::text("hi");
    let bytes = super::super::encode(&direct);
    assert!(!bytes.windows(5).any(|w| w == b"group"));

    let members = vec![addr(2, "s-b"), addr(3, "carol-session-1")];
    let grouped = Body {
        group: Some(tag(members)),
        ..Body::text("hi all")
    };
    let bytes = super::super::encode(&grouped);
    let at = bytes.windows(5).position(|w| w == b"group").unwrap();
    let reply = bytes.windows(11).position(|w| w == b"in_reply_to").unwrap();
    assert!(at > reply, "group comes after in_reply_to");

    let mut env = bare_message(&a, &b, &mut rng);
    env.seal_body(&grouped, &b.sealing_secret().public(), &mut rng)
        .unwrap();
    let wire = Signed::sign(env, &a).unwrap().to_bytes();
    assert!(!wire.windows(15).any(|w| w == b"carol-session-1"));
    assert!(!wire.windows(4).any(|w| w == b"team"));
    let back = Signed::<Envelope>::decode(&wire).unwrap();
    assert_eq!(back.body().open_body(&b.sealing_secret()).unwrap(), grouped);
}

/// A sender that seals a tag beyond the bounds anyway: the body opens but is refused
/// as malformed (`unopenable` on the wire), like any invalid body.
#[test]
fn an_oversized_tag_does_not_open() {
    let (a, b) = (identity(1), identity(2));
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let mut t = largest_tag();
    t.members.push(addr(250, "extra"));
    let body = Body {
        group: Some(t),
        ..Body::text("hi")
    };
    assert!(body.check().is_err());
    let mut env = bare_message(&a, &b, &mut rng);
    // seal_body does not check; a hostile sender skips the check.
    env.seal_body(&body, &b.sealing_secret().public(), &mut rng)
        .unwrap();
    assert_eq!(
        env.open_body(&b.sealing_secret()),
        Err(OpenError::Malformed)
    );
}

/// PROTOCOL §4.3: a copy's tag lists its recipient session and never the sending one.
/// A paired peer that breaks either is refused (`unopenable`), so it cannot show the
/// recipient a group the copy was not sent to, or pose as a fellow recipient.
#[test]
fn a_tag_must_list_the_recipient_and_not_the_sender() {
    let (a, b) = (identity(1), identity(2));
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let opened = |members: Vec<SessionAddr>, rng: &mut ChaCha20Rng| {
        let body = Body {
            group: Some(tag(members)),
            ..Body::text("hi all")
        };
        let mut env = bare_message(&a, &b, rng);
        env.seal_body(&body, &b.sealing_secret().public(), rng)
            .unwrap();
        env.open_body(&b.sealing_secret())
    };
    // The bare message goes from (1, s-a) to (2, s-b).
    assert!(opened(vec![addr(2, "s-b"), addr(3, "c")], &mut rng).is_ok());
    assert_eq!(
        opened(vec![addr(3, "c")], &mut rng),
        Err(OpenError::Group("does not list the recipient session"))
    );
    assert_eq!(
        opened(vec![addr(2, "another-session")], &mut rng),
        Err(OpenError::Group("does not list the recipient session"))
    );
    assert_eq!(
        opened(vec![addr(2, "s-b"), addr(1, "s-a")], &mut rng),
        Err(OpenError::Group("lists the sending session"))
    );
    // The sender's other sessions may be members (a group that includes its own
    // identity's sessions).
    assert!(opened(vec![addr(2, "s-b"), addr(1, "s-other")], &mut rng).is_ok());
}
