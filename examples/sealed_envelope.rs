//! Two identities exchange one signed, sealed message and a receipt, in memory.
//!
//! Run: `cargo run -p interlink-examples --example sealed_envelope`
//!
//! Shows the core's wire API end to end: Bob announces himself (binding his sealing
//! key to his identity), Alice verifies that announcement, seals a message to Bob's
//! session, Bob verifies and opens it and signs a receipt that Alice verifies.

use interlink_core::{
    Identity, MsgId, SessionId,
    wire::{
        Announcement, DeliveryMode, Details, DetailsReader, Envelope, EnvelopeKind, HostKind,
        Receipt, ReceiptState, SealingBinding, Signed, VERSION,
    },
};
use serde_bytes::ByteBuf;

fn main() -> anyhow::Result<()> {
    let mut rng = rand_core::UnwrapErr(getrandom::SysRng);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as u64;
    let alice = Identity::generate(&mut rng);
    let bob = Identity::generate(&mut rng);
    let (alice_session, bob_session) = (SessionId::random(&mut rng), SessionId::random(&mut rng));

    // Bob announces, his details readable by Alice (his peer) and his own sessions; the
    // bytes would travel on the gossipsub topic.
    let bob_peer = bob.transport_keypair(&bob_session)?.public().to_peer_id();
    let announcement = Signed::sign(
        Announcement {
            v: VERSION,
            identity: bob.public(),
            sealing: SealingBinding::new(&bob),
            session_id: bob_session.clone(),
            peer_id: ByteBuf::from(bob_peer.to_bytes()),
            addrs: vec!["/ip4/127.0.0.1/tcp/4001".into()],
            details: Details {
                cwd: "/home/bob/api".into(),
                git_label: Some("api".into()),
                summary: "refactoring the auth layer".into(),
                host: HostKind::Other,
                delivery: DeliveryMode::Poll,
                project: None,
                claims: Vec::new(),
            }
            .seal(
                &bob,
                &bob_session,
                &[(alice.public(), alice.sealing_secret().public())],
                &mut rng,
            )?,
            heartbeat_ms: interlink_core::limits::HEARTBEAT_MS,
            ts: now,
            seq: 1,
        },
        &bob,
    )?
    .to_bytes();

    // Alice verifies it and learns Bob's sealing key and session; Bob sealed his
    // details for her too (a stranger would read only his identity and addresses).
    let seen = Signed::<Announcement>::decode(&announcement)?;
    let details = DetailsReader::new(&alice)
        .open(seen.body())
        .ok_or_else(|| anyhow::anyhow!("Bob's details are not sealed for Alice"))?;
    println!(
        "alice sees {} session {} ({})",
        seen.body().identity.fingerprint(),
        seen.body().session_id,
        details.summary
    );

    let mut env = Envelope {
        v: VERSION,
        sender: alice.public(),
        sender_session: alice_session,
        recipient: seen.body().identity,
        recipient_session: seen.body().session_id.clone(),
        msg_id: MsgId::random(&mut rng),
        ts: now,
        kind: EnvelopeKind::Message,
        in_reply_to: None,
        also_about: Vec::new(),
        name: None,
        sealed: None,
        pass: None,
        reply_pass: None,
    };
    env.seal_text(
        "which endpoint issues refresh tokens?",
        &seen.body().sealing.key,
        &mut rng,
    )?;
    let wire = Signed::sign(env, &alice)?.to_bytes();
    println!(
        "alice sends {} bytes (body sealed; holders see ciphertext only)",
        wire.len()
    );

    // Bob verifies the signature and opens the body.
    let got = Signed::<Envelope>::decode(&wire)?;
    let text = got.body().open_text(&bob.sealing_secret())?;
    println!(
        "bob reads from {}: {text:?}",
        got.body().sender.fingerprint()
    );

    let receipt = Signed::sign(
        Receipt {
            v: VERSION,
            recipient: bob.public(),
            recipient_session: bob_session,
            sender: got.body().sender,
            msg_ids: vec![got.body().msg_id],
            state: ReceiptState::Delivered,
            ts: now,
            pass: None,
        },
        &bob,
    )?
    .to_bytes();
    let receipt = Signed::<Receipt>::decode(&receipt)?;
    println!(
        "alice holds bob's signed receipt for {}: {:?}",
        receipt.body().msg_ids[0],
        receipt.body().state
    );
    Ok(())
}
