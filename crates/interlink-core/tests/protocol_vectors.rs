//! Checks the hex test vectors in docs/PROTOCOL.md against this implementation.
//!
//! Every vector is recomputed from fixed keys and fixed randomness. On a mismatch the
//! test prints the whole block as it should read, so a deliberate protocol change is a
//! copy-paste into the spec (and a version bump), never a silent drift.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{convert::Infallible, fmt::Write as _};

use interlink_core::{
    Identity, MsgId, SessionId, mailbox,
    presence::{
        Roster,
        sync::{Summary, Tag},
    },
    wire::{
        Ack, AckEntry, Announcement, Beacon, Body, DeliverResponse, DeliverResult, DeliveryMode,
        Details, DetailsReader, Envelope, EnvelopeKind, Goodbye, HostKind, INVITE_SECRET_BYTES,
        INVITE_VERSION, Invite, MailboxFetch, MailboxOp, MailboxPass, MailboxRequest,
        PresenceMessage, Receipt, ReceiptRequest, ReceiptState, Refusal, RefusalCode,
        RosterRequest, RosterResponse, SealingBinding, SessionAddr, Signed, TaskStatus, VERSION,
        gossip_message_id,
    },
};
use rand_core::{TryCryptoRng, TryRng};
use serde_bytes::ByteBuf;

/// An RNG that returns one fixed byte forever: the sealing vector's ephemeral key
/// material (`ikmE`) is then 32 bytes of that value, which any HPKE implementation can
/// feed to DeriveKeyPair.
struct FixedRng(u8);

impl TryRng for FixedRng {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(u32::from_le_bytes([self.0; 4]))
    }
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(u64::from_le_bytes([self.0; 8]))
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        dst.fill(self.0);
        Ok(())
    }
}
impl TryCryptoRng for FixedRng {}

const TS: u64 = 1_790_000_000_000;

fn hex(b: &[u8]) -> String {
    interlink_core::identity::hex_encode(b)
}

fn vectors() -> Vec<(&'static str, String)> {
    let alice = Identity::from_seed(&[0x11; 32]);
    let bob = Identity::from_seed(&[0x22; 32]);
    let sa = SessionId::new("session-a").unwrap();
    let sb = SessionId::new("session-b").unwrap();
    let alice_peer = alice.transport_keypair(&sa).unwrap().public().to_peer_id();

    // Alice's details, readable by Alice and by Bob (her peer), with her project and
    // one claim; the nonce and the content key from a fixed RNG (every byte 0x55).
    let details = Details {
        cwd: "/home/alice/eden".into(),
        git_label: Some("eden".into()),
        summary: "installing deps".into(),
        host: HostKind::Claude,
        delivery: DeliveryMode::Inbox,
        project: Some(serde_bytes::ByteArray::new([0x66; 16])),
        claims: vec![interlink_core::claims::Claim {
            pattern: "src/api/**".into(),
            exclusive: true,
            reason: "moving the API to v2".into(),
            since: TS,
            until: TS + 7_200_000,
        }],
    };
    let announcement = Signed::sign(
        Announcement {
            v: VERSION,
            identity: alice.public(),
            sealing: SealingBinding::new(&alice),
            session_id: sa.clone(),
            peer_id: ByteBuf::from(alice_peer.to_bytes()),
            addrs: vec!["/ip4/127.0.0.1/tcp/4001".into()],
            details: details
                .seal(
                    &alice,
                    &sa,
                    &[(bob.public(), bob.sealing_secret().public())],
                    &mut FixedRng(0x55),
                )
                .unwrap(),
            heartbeat_ms: interlink_core::limits::HEARTBEAT_MS,
            ts: TS,
            seq: 1,
        },
        &alice,
    )
    .unwrap();

    let mut env = Envelope {
        v: VERSION,
        sender: alice.public(),
        sender_session: sa.clone(),
        recipient: bob.public(),
        recipient_session: sb.clone(),
        msg_id: MsgId::from_bytes([0x44; 16]),
        ts: TS,
        kind: EnvelopeKind::Message,
        in_reply_to: None,
        also_about: Vec::new(),
        name: None,
        sealed: None,
        pass: Some(MailboxPass::issue(&bob, &alice.public())),
        reply_pass: Some(MailboxPass::issue(&alice, &bob.public())),
    };
    let body = Body {
        text: "hello bob".into(),
        task_id: Some("t-1".into()),
        status: Some(TaskStatus::Update),
        in_reply_to: None,
        group: None,
    };
    env.seal_body(&body, &bob.sealing_secret().public(), &mut FixedRng(0x33))
        .unwrap();
    let sealed = env.sealed.clone().unwrap();
    let envelope = Signed::sign(env, &alice)
        .unwrap()
        .with_reply_to(SessionAddr {
            key: alice.public(),
            session: sa.clone(),
        });

    // Alice's session on a roster, kept live by a beacon a minute after it announced.
    let mut roster = Roster::default();
    roster.apply_announcement(announcement.clone(), TS).unwrap();
    let beacon = Signed::sign(
        Beacon::new(
            alice.public(),
            Tag::of_announcement(announcement.body()),
            interlink_core::limits::HEARTBEAT_MS,
            TS + 60_000,
            2,
        ),
        &alice,
    )
    .unwrap();
    roster.apply_beacon(beacon.clone(), TS + 60_000).unwrap();
    let beacon_msg = PresenceMessage::Beacon(beacon.clone()).to_bytes();

    let receipt = Signed::sign(
        Receipt {
            v: VERSION,
            recipient: bob.public(),
            recipient_session: sb.clone(),
            sender: alice.public(),
            msg_ids: vec![MsgId::from_bytes([0x44; 16])],
            state: ReceiptState::Delivered,
            ts: TS + 1,
            pass: Some(MailboxPass::issue(&bob, &alice.public())),
        },
        &bob,
    )
    .unwrap();
    let ack = Signed::sign(
        Ack {
            v: VERSION,
            owner: bob.public(),
            owner_session: sb.clone(),
            entries: vec![AckEntry(alice.public(), MsgId::from_bytes([0x44; 16]))],
            ts: TS + 2,
        },
        &bob,
    )
    .unwrap();
    let goodbye = Signed::sign(
        Goodbye {
            v: VERSION,
            identity: alice.public(),
            session_id: sa.clone(),
            ts: TS + 3,
            seq: 2,
        },
        &alice,
    )
    .unwrap();
    let fetch = Signed::sign(
        MailboxFetch {
            v: VERSION,
            owner: bob.public(),
            owner_session: sb.clone(),
            holder: ByteBuf::from(alice_peer.to_bytes()),
            ts: TS + 4,
        },
        &bob,
    )
    .unwrap();
    // Bob joins by Alice's invite: his knock carries its secret, sealed to her.
    let invite = Invite {
        v: INVITE_VERSION,
        key: alice.public(),
        name: "alice".into(),
        session: sa.clone(),
        secret: serde_bytes::ByteArray::new([0x55; INVITE_SECRET_BYTES]),
        expires: TS + 3_600_000,
        relays: Vec::new(),
        // `/ip4/127.0.0.1/tcp/4001/p2p/<session-a's PeerId>`.
        addrs: vec![ByteBuf::from({
            let mut a = vec![0x04, 127, 0, 0, 1, 0x06, 0x0f, 0xa1, 0xa5, 0x03];
            let peer = alice_peer.to_bytes();
            a.push(u8::try_from(peer.len()).unwrap());
            a.extend_from_slice(&peer);
            a
        })],
    };
    let mut knock = Envelope {
        v: VERSION,
        sender: bob.public(),
        sender_session: sb.clone(),
        recipient: alice.public(),
        recipient_session: sa.clone(),
        msg_id: MsgId::from_bytes([0x66; 16]),
        ts: TS + 5,
        kind: EnvelopeKind::Knock,
        in_reply_to: None,
        also_about: Vec::new(),
        name: Some("bob".into()),
        sealed: None,
        pass: None,
        reply_pass: None,
    };
    knock
        .seal_invite(
            &[0x55; INVITE_SECRET_BYTES],
            &alice.sealing_secret().public(),
            &mut FixedRng(0x33),
        )
        .unwrap();
    let knock = Signed::sign(knock, &bob).unwrap();

    // Alice links her second machine: a device code, then the exchange (§4.11, §8.8)
    // with every random byte fixed — the joiner's ephemeral key material 32 bytes of
    // 0x33, the waiting node's 0x44, and the HPKE seal's ephemeral key 0x55.
    let (device_code, device_msgs) = device_link(&alice, &alice_peer);

    // Bob's knock carries no passes and no reply_to (PROTOCOL.md says so): a real
    // `join` knock also carries Bob's pass for Alice as its reply_pass (the joiner
    // adds the inviter to its peers first), which the vector leaves out.

    // Bob's agent was handed three of Alice's messages: one `host_queued` envelope
    // about all three (version 10).
    let host_queued = Signed::sign(
        Envelope {
            v: VERSION,
            sender: bob.public(),
            sender_session: sb.clone(),
            recipient: alice.public(),
            recipient_session: sa.clone(),
            msg_id: MsgId::from_bytes([0x77; 16]),
            ts: TS + 6,
            kind: EnvelopeKind::HostQueued,
            in_reply_to: Some(MsgId::from_bytes([0x44; 16])),
            also_about: vec![MsgId::from_bytes([0x45; 16]), MsgId::from_bytes([0x46; 16])],
            name: None,
            sealed: None,
            pass: None,
            reply_pass: None,
        },
        &bob,
    )
    .unwrap();

    vec![
        ("alice.seed", hex(&[0x11; 32])),
        ("alice.identity_key", alice.public().to_hex()),
        (
            "alice.fingerprint",
            alice.public().fingerprint().to_string(),
        ),
        (
            "alice.sealing_key",
            hex(alice.sealing_secret().public().as_bytes()),
        ),
        ("alice.session-a.peer_id", alice_peer.to_base58()),
        ("bob.seed", hex(&[0x22; 32])),
        ("bob.identity_key", bob.public().to_hex()),
        (
            "bob.sealing_key",
            hex(bob.sealing_secret().public().as_bytes()),
        ),
        (
            "bob.session-b.mailbox_key",
            hex(&mailbox::record_key(&bob.public(), &sb)),
        ),
        (
            "announcement.details.plaintext",
            hex(&cbor4ii::serde::to_vec(Vec::new(), &details).unwrap()),
        ),
        ("announcement.wire", hex(&announcement.to_bytes())),
        (
            "bob.mailbox_pass_for_alice",
            hex(MailboxPass::issue(&bob, &alice.public()).as_bytes()),
        ),
        (
            "envelope.body.plaintext",
            hex(&cbor4ii::serde::to_vec(Vec::new(), &body).unwrap()),
        ),
        ("envelope.seal.enc", hex(sealed.enc.as_slice())),
        ("envelope.seal.ct", hex(&sealed.ct)),
        ("envelope.wire", hex(&envelope.to_bytes())),
        ("receipt.wire", hex(&receipt.to_bytes())),
        (
            "receipt_request.wire",
            hex(&cbor4ii::serde::to_vec(
                Vec::new(),
                &ReceiptRequest {
                    v: VERSION,
                    receipt: ByteBuf::from(receipt.to_bytes()),
                },
            )
            .unwrap()),
        ),
        (
            "deliver_response.wire",
            hex(&cbor4ii::serde::to_vec(
                Vec::new(),
                &DeliverResponse {
                    v: VERSION,
                    receipt: Some(ByteBuf::from(receipt.to_bytes())),
                    results: vec![
                        DeliverResult { refused: None },
                        DeliverResult {
                            refused: Some(Refusal::new(
                                RefusalCode::StoreFailed,
                                "the recipient could not store the message",
                            )),
                        },
                    ],
                },
            )
            .unwrap()),
        ),
        ("ack.wire", hex(&ack.to_bytes())),
        ("goodbye.wire", hex(&goodbye.to_bytes())),
        ("mailbox_fetch.wire", hex(&fetch.to_bytes())),
        (
            "mailbox_fetch_request.wire",
            hex(&cbor4ii::serde::to_vec(
                Vec::new(),
                &MailboxRequest {
                    v: VERSION,
                    op: MailboxOp::Fetch {
                        request: ByteBuf::from(fetch.to_bytes()),
                    },
                },
            )
            .unwrap()),
        ),
        (
            "roster_tag",
            hex(&Tag::of_announcement(announcement.body()).0),
        ),
        (
            "roster_request.wire",
            hex(&cbor4ii::serde::to_vec(
                Vec::new(),
                &RosterRequest::with_summary(&Summary::of(&roster, TS + 60_000)),
            )
            .unwrap()),
        ),
        // A node that holds the announcement but missed the beacon, at a time it
        // judges the session away: its tag is marked.
        (
            "roster_request_away.wire",
            hex(&cbor4ii::serde::to_vec(
                Vec::new(),
                &RosterRequest::with_summary(&Summary::of(
                    &{
                        let mut r = Roster::default();
                        r.apply_announcement(announcement.clone(), TS).unwrap();
                        r
                    },
                    TS + interlink_core::limits::LIVE_WINDOW_MS,
                )),
            )
            .unwrap()),
        ),
        ("roster_digest", hex(&roster.digest())),
        (
            "roster_digest_request.wire",
            hex(
                &cbor4ii::serde::to_vec(Vec::new(), &RosterRequest::with_digest(roster.digest()))
                    .unwrap(),
            ),
        ),
        ("beacon.wire", hex(&beacon.to_bytes())),
        (
            "roster_response.wire",
            hex(&cbor4ii::serde::to_vec(
                Vec::new(),
                &RosterResponse::new(&roster.answer(&RosterRequest::default(), TS).unwrap()),
            )
            .unwrap()),
        ),
        ("invite.code", invite.encode(&alice).unwrap()),
        ("knock_invite.wire", hex(&knock.to_bytes())),
        ("host_queued_three.wire", hex(&host_queued.to_bytes())),
        ("device.code", device_code),
        ("device_hello.wire", hex(&device_msgs[0])),
        ("device_accept.wire", hex(&device_msgs[1])),
        ("device_reveal.wire", hex(&device_msgs[2])),
        ("device_reveal_ok.wire", hex(&device_msgs[3])),
        (
            "device_comparison",
            String::from_utf8(device_msgs[4].clone()).unwrap(),
        ),
        ("device_confirm.wire", hex(&device_msgs[5])),
        ("device_sealed.wire", hex(&device_msgs[6])),
        ("presence_beacon.msg", hex(&beacon_msg)),
        (
            "gossip_id(presence_beacon.msg)",
            hex(&gossip_message_id(&beacon_msg)),
        ),
    ]
}

/// The device code of the vectors (secret 16 bytes of `0x77`, expiring 5 minutes after
/// `TS`, the invite's address) and the exchange's messages in order: hello, its answer,
/// reveal, its answer, the comparison string (UTF-8), confirm (with the joiner's
/// address `/ip4/192.0.2.8/tcp/7385`), and the sealed answer (with Alice's
/// `/ip4/192.0.2.7/tcp/7385`).
fn device_link(alice: &Identity, alice_peer: &libp2p_identity::PeerId) -> (String, Vec<Vec<u8>>) {
    use interlink_core::{
        device_link::{Inviter, Joiner, Reply},
        wire::{DEVICE_CODE_VERSION, DeviceCode},
    };
    let code = DeviceCode {
        v: DEVICE_CODE_VERSION,
        key: alice.public(),
        secret: serde_bytes::ByteArray::new([0x77; INVITE_SECRET_BYTES]),
        expires: TS + 300_000,
        addrs: vec![ByteBuf::from({
            let mut a = vec![0x04, 127, 0, 0, 1, 0x06, 0x0f, 0xa1, 0xa5, 0x03];
            let peer = alice_peer.to_bytes();
            a.push(u8::try_from(peer.len()).unwrap());
            a.extend_from_slice(&peer);
            a
        })],
    };
    let text = code.encode(alice).unwrap();
    let mut inviter = Inviter::new(
        Identity::from_seed(&alice.seed()),
        &code,
        &["/ip4/192.0.2.7/tcp/7385".to_owned()],
    );
    let (mut joiner, hello) = Joiner::new(&code, TS, &mut FixedRng(0x33)).unwrap();
    let answer = |r: Reply| match r {
        Reply::Respond(r) => r,
        Reply::Hold => panic!("held"),
    };
    let accept = answer(inviter.handle(*alice_peer, &hello, TS, &mut FixedRng(0x44)));
    let (reveal, comparison) = joiner.accepted(&accept).unwrap();
    let reveal_ok = answer(inviter.handle(*alice_peer, &reveal, TS, &mut FixedRng(0x44)));
    let confirm = joiner
        .confirm(&["/ip4/192.0.2.8/tcp/7385".to_owned()])
        .unwrap();
    assert_eq!(
        inviter.handle(*alice_peer, &confirm, TS, &mut FixedRng(0x44)),
        Reply::Hold
    );
    let sealed = inviter.decide(true, &mut FixedRng(0x55)).unwrap();
    (
        text,
        vec![
            enc(&hello),
            enc(&accept),
            enc(&reveal),
            enc(&reveal_ok),
            comparison.into_bytes(),
            enc(&confirm),
            enc(&sealed),
        ],
    )
}

/// CBOR of one of the exchange's messages.
fn enc<T: serde::Serialize>(v: &T) -> Vec<u8> {
    cbor4ii::serde::to_vec(Vec::new(), v).unwrap()
}

/// Renders vectors as they appear in the spec: `name =` then the value in 64-char lines.
fn render(vs: &[(&str, String)]) -> String {
    let mut out = String::new();
    for (name, value) in vs {
        let _ = writeln!(out, "{name} =");
        let chars: Vec<char> = value.chars().collect();
        for chunk in chars.chunks(64) {
            let _ = writeln!(out, "    {}", chunk.iter().collect::<String>());
        }
    }
    out
}

/// Parses every `name =` block inside the spec's ```vectors fences.
fn parse_spec(spec: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut inside = false;
    for line in spec.lines() {
        if line.trim_start().starts_with("```") {
            inside = line.trim() == "```vectors";
            continue;
        }
        if !inside {
            continue;
        }
        if let Some(name) = line.strip_suffix(" =") {
            out.push((name.trim().to_string(), String::new()));
        } else if let Some(last) = out.last_mut() {
            last.1.push_str(line.trim());
        }
    }
    out
}

#[test]
fn spec_vectors_match_the_implementation() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/PROTOCOL.md");
    let spec = std::fs::read_to_string(path).expect("docs/PROTOCOL.md is readable");
    let computed = vectors();
    let documented = parse_spec(&spec);
    let expected: Vec<(String, String)> = computed
        .iter()
        .map(|(n, v)| (n.to_string(), v.clone()))
        .collect();
    assert!(
        documented == expected,
        "docs/PROTOCOL.md vectors differ from the implementation; they should read:\n```vectors\n{}```",
        render(&computed)
    );
}

#[test]
fn spec_vectors_decode_and_verify() {
    // The documented bytes must also decode and verify on their own (what another
    // implementation would do with them).
    let vs = vectors();
    let get = |n: &str| {
        let h = &vs.iter().find(|(k, _)| *k == n).unwrap().1;
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
    };
    let ann = Signed::<Announcement>::decode(&get("announcement.wire")).unwrap();
    // Bob (a reader) opens Alice's details; a stranger cannot.
    let opened = DetailsReader::new(&Identity::from_seed(&[0x22; 32]))
        .open(ann.body())
        .unwrap();
    assert_eq!(
        cbor4ii::serde::to_vec(Vec::new(), &opened).unwrap(),
        get("announcement.details.plaintext")
    );
    assert!(
        DetailsReader::new(&Identity::from_seed(&[0x33; 32]))
            .open(ann.body())
            .is_none()
    );
    // A beacon verifies under the identity of the announcement its tag names.
    let beacon = interlink_core::wire::Unverified::<Beacon>::decode(&get("beacon.wire")).unwrap();
    assert_eq!(beacon.claimed().tag(), Tag::of_announcement(ann.body()));
    beacon.signed_by(ann.body().identity).verify().unwrap();
    let response: RosterResponse =
        cbor4ii::serde::from_slice(&get("roster_response.wire")).unwrap();
    assert_eq!(response.announcements.len(), 1);
    assert_eq!(response.beacons.len(), 1);
    let env = Signed::<Envelope>::decode(&get("envelope.wire")).unwrap();
    let bob = Identity::from_seed(&[0x22; 32]);
    assert_eq!(
        env.body().open_text(&bob.sealing_secret()).unwrap(),
        "hello bob"
    );
    let receipt = Signed::<Envelope>::decode(&get("host_queued_three.wire")).unwrap();
    assert_eq!(receipt.body().kind, EnvelopeKind::HostQueued);
    assert_eq!(receipt.body().also_about.len(), 2);
    let knock = Signed::<Envelope>::decode(&get("knock_invite.wire")).unwrap();
    // What PROTOCOL.md says these two carry, so an implementer can re-derive them:
    // no passes and no reply_to (as a real join's knock: the joiner pins the inviter
    // only once it confirmed).
    for e in [&receipt, &knock] {
        assert_eq!(e.body().pass, None);
        assert_eq!(e.body().reply_pass, None);
        assert_eq!(e.raw_reply_to(), None);
    }
    assert_eq!(receipt.body().sealed, None);
    assert_eq!(knock.body().in_reply_to, None);
    let alice_id = Identity::from_seed(&[0x11; 32]);
    assert_eq!(
        interlink_core::trust::Knock::from_envelope(knock.body())
            .open_invite(&alice_id.sealing_secret()),
        Some([0x55; INVITE_SECRET_BYTES])
    );
    let code = &vs.iter().find(|(k, _)| *k == "invite.code").unwrap().1;
    assert_eq!(Invite::decode(code).unwrap().key, alice_id.public());
    // The documented exchange: the joiner's side of it, from the documented answers,
    // ends with Alice's identity.
    {
        use interlink_core::{
            device_link::Joiner,
            wire::{DeviceCode, LinkResponse, link_step},
        };
        let code =
            DeviceCode::decode(&vs.iter().find(|(k, _)| *k == "device.code").unwrap().1).unwrap();
        let (mut joiner, hello) = Joiner::new(&code, TS, &mut FixedRng(0x33)).unwrap();
        assert_eq!(
            cbor4ii::serde::to_vec(Vec::new(), &hello).unwrap(),
            get("device_hello.wire")
        );
        let accept = LinkResponse::decode(&get("device_accept.wire"), link_step::HELLO).unwrap();
        let (_, comparison) = joiner.accepted(&accept).unwrap();
        assert_eq!(
            comparison,
            vs.iter()
                .find(|(k, _)| *k == "device_comparison")
                .unwrap()
                .1
        );
        joiner
            .confirm(&["/ip4/192.0.2.8/tcp/7385".to_owned()])
            .unwrap();
        let sealed = LinkResponse::decode(&get("device_sealed.wire"), link_step::CONFIRM).unwrap();
        let (identity, addrs) = joiner.finish(&sealed).unwrap();
        assert_eq!(identity.public(), alice_id.public());
        assert_eq!(addrs, vec!["/ip4/192.0.2.7/tcp/7385".to_owned()]);
    }
    Signed::<Receipt>::decode(&get("receipt.wire")).unwrap();
    Signed::<Ack>::decode(&get("ack.wire")).unwrap();
    Signed::<Goodbye>::decode(&get("goodbye.wire")).unwrap();
    let alice = Identity::from_seed(&[0x11; 32]);
    let alice_peer = alice
        .transport_keypair(&SessionId::new("session-a").unwrap())
        .unwrap()
        .public()
        .to_peer_id();
    assert_eq!(
        Signed::<MailboxFetch>::check_fetch(
            &get("mailbox_fetch.wire"),
            &alice_peer.to_bytes(),
            TS + 4
        ),
        Ok(mailbox::record_key(
            &bob.public(),
            &SessionId::new("session-b").unwrap()
        ))
    );
}
