//! Costs of the core's hot paths: signing, verifying, sealing, opening, merging.
//!
//! Run: `cargo bench -p interlink-core --bench core` (numbers in docs/BENCHMARKS.md).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{hint::black_box, sync::OnceLock};

use criterion::{Criterion, criterion_group, criterion_main};
use interlink_core::{
    Identity, MsgId, SessionId,
    mailbox::{self, Mailbox},
    seal,
    wire::{
        Ack, AckEntry, Announcement, DeliveryMode, Details, DetailsReader, Envelope, EnvelopeKind,
        HostKind, ReaderKey, SealingBinding, Signed, VERSION,
    },
};
use rand_chacha::{ChaCha20Rng, rand_core::SeedableRng};

const NOW: u64 = 1_790_000_000_000;

struct Fixture {
    alice: Identity,
    bob: Identity,
    bob_session: SessionId,
    text: String,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| Fixture {
        alice: Identity::from_seed(&[1; 32]),
        bob: Identity::from_seed(&[2; 32]),
        bob_session: SessionId::new("bob-1").unwrap(),
        text: "x".repeat(1024),
    })
}

fn envelope(from: &Identity, f: &Fixture, n: u64, rng: &mut ChaCha20Rng) -> Envelope {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&n.to_le_bytes());
    let mut env = Envelope {
        v: VERSION,
        sender: from.public(),
        sender_session: SessionId::new("alice-1").unwrap(),
        recipient: f.bob.public(),
        recipient_session: f.bob_session.clone(),
        msg_id: MsgId::from_bytes(id),
        ts: NOW - 1000 + n,
        kind: EnvelopeKind::Message,
        in_reply_to: None,
        also_about: Vec::new(),
        name: None,
        sealed: None,
        pass: None,
        reply_pass: None,
    };
    env.seal_text(&f.text, &f.bob.sealing_secret().public(), rng)
        .unwrap();
    env
}

fn bench_wire(c: &mut Criterion) {
    let f = fixture();
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let env = envelope(&f.alice, f, 1, &mut rng);
    let wire = Signed::sign(env.clone(), &f.alice).unwrap().to_bytes();
    let bob_secret = f.bob.sealing_secret();
    let bob_key = bob_secret.public();

    c.bench_function("envelope 1KiB: sign+encode", |b| {
        b.iter(|| {
            Signed::sign(black_box(env.clone()), &f.alice)
                .unwrap()
                .to_bytes()
        })
    });
    c.bench_function("envelope 1KiB: decode+verify", |b| {
        b.iter(|| Signed::<Envelope>::decode(black_box(&wire)).unwrap())
    });
    c.bench_function("body 1KiB: seal", |b| {
        b.iter(|| seal::seal(black_box(f.text.as_bytes()), &bob_key, b"aad", &mut rng).unwrap())
    });
    let sealed = seal::seal(f.text.as_bytes(), &bob_key, b"aad", &mut rng).unwrap();
    c.bench_function("body 1KiB: open", |b| {
        b.iter(|| seal::open(black_box(&sealed), &bob_secret, b"aad").unwrap())
    });
    c.bench_function("envelope 1KiB: decode+verify+open", |b| {
        b.iter(|| {
            let e = Signed::<Envelope>::decode(black_box(&wire)).unwrap();
            e.body().open_text(&bob_secret).unwrap()
        })
    });
    // What a node does per message once the sender's context (and the recipient's
    // matching one) exist: no Diffie-Hellman.
    let ctx = seal::SealContext::new(&bob_key, &mut rng).unwrap();
    c.bench_function("body 1KiB: seal in a context", |b| {
        b.iter(|| {
            ctx.seal(black_box(f.text.as_bytes()), b"aad", &mut rng)
                .unwrap()
        })
    });
    let in_ctx = ctx.seal(f.text.as_bytes(), b"aad", &mut rng).unwrap();
    let opener = seal::OpenContext::new(&in_ctx.enc, &bob_secret).unwrap();
    c.bench_function("body 1KiB: open in a context", |b| {
        b.iter(|| opener.open(black_box(&in_ctx), b"aad").unwrap())
    });
    let opener = seal::OpenContext::new(
        &Signed::<Envelope>::decode(&wire)
            .unwrap()
            .body()
            .sealed_enc()
            .unwrap(),
        &bob_secret,
    )
    .unwrap();
    c.bench_function("envelope 1KiB: decode+verify+open in a context", |b| {
        b.iter(|| {
            let e = Signed::<Envelope>::decode(black_box(&wire)).unwrap();
            e.body().open_body_in(&opener).unwrap()
        })
    });
}

fn bench_mailbox(c: &mut Criterion) {
    let f = fixture();
    let cfg = mailbox::Config::default();
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    // 256 envelopes from 8 senders (within the per-sender quota), split across two
    // replicas that overlap by half, plus an owner ack of 32 of them.
    let senders: Vec<Identity> = (10..18).map(|n| Identity::from_seed(&[n; 32])).collect();
    let all: Vec<Signed<Envelope>> = (0..256u64)
        .map(|n| {
            let from = &senders[(n % 8) as usize];
            Signed::sign(envelope(from, f, n, &mut rng), from).unwrap()
        })
        .collect();
    let mut a = Mailbox::new(f.bob.public(), f.bob_session.clone());
    let mut b = Mailbox::new(f.bob.public(), f.bob_session.clone());
    for (i, e) in all.iter().enumerate() {
        if i < 192 {
            a.insert(e.clone(), NOW, &cfg).unwrap();
        }
        if i >= 64 {
            b.insert(e.clone(), NOW, &cfg).unwrap();
        }
    }
    let ack = Signed::sign(
        Ack {
            v: VERSION,
            owner: f.bob.public(),
            owner_session: f.bob_session.clone(),
            entries: all[..32]
                .iter()
                .map(|e| AckEntry(e.body().sender, e.body().msg_id))
                .collect(),
            ts: NOW,
        },
        &f.bob,
    )
    .unwrap();
    b.apply_ack(ack, NOW, &cfg).unwrap();
    let b_bytes = b.encode();

    c.bench_function("mailbox 256: merge (in memory)", |bench| {
        bench.iter(|| {
            let mut m = a.clone();
            m.merge(black_box(&b), NOW, &cfg).unwrap();
            m
        })
    });
    c.bench_function("mailbox 256: decode+verify+merge+encode", |bench| {
        bench.iter(|| {
            let (other, rejected) = Mailbox::decode(black_box(&b_bytes), NOW, &cfg).unwrap();
            assert!(rejected.is_empty());
            let mut m = a.clone();
            m.merge(&other, NOW, &cfg).unwrap();
            m.encode()
        })
    });
}

/// The floors under the numbers above: the raw primitives on this machine.
fn bench_primitives(c: &mut Criterion) {
    use ed25519_dalek::{Signer, SigningKey, Verifier, VerifyingKey};
    let f = fixture();
    let sk = SigningKey::from_bytes(&[7; 32]);
    let msg = vec![0u8; 1100];
    let sig = sk.sign(&msg);
    let vk_bytes = sk.verifying_key().to_bytes();
    let vk = sk.verifying_key();
    c.bench_function("primitive: ed25519 key decompress", |b| {
        b.iter(|| VerifyingKey::from_bytes(black_box(&vk_bytes)).unwrap())
    });
    c.bench_function("primitive: ed25519 verify_strict 1.1KiB", |b| {
        b.iter(|| vk.verify_strict(black_box(&msg), &sig).unwrap())
    });
    c.bench_function("primitive: ed25519 verify 1.1KiB", |b| {
        b.iter(|| vk.verify(black_box(&msg), &sig).unwrap())
    });
    let secret = f.bob.sealing_secret();
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let empty = seal::seal(b"", &secret.public(), b"", &mut rng).unwrap();
    c.bench_function(
        "primitive: HPKE open of an empty body (DH + key schedule)",
        |b| b.iter(|| seal::open(black_box(&empty), &secret, b"").unwrap()),
    );
}

/// What sealed presence details cost (PROTOCOL §4.1 "Details"): sealing at each
/// announcement, and what a reader pays per announcer (once) and per announcement.
fn bench_details(c: &mut Criterion) {
    let f = fixture();
    let session = SessionId::new("alice-1").unwrap();
    let details = Details {
        cwd: "/home/alice/work/acme-billing".into(),
        git_label: Some("acme-billing".into()),
        summary: "migrating the invoices table".into(),
        host: HostKind::Claude,
        delivery: DeliveryMode::Inbox,
        project: None,
        claims: Vec::new(),
    };
    let peers: Vec<_> = (10..15u8)
        .map(|n| {
            let id = Identity::from_seed(&[n; 32]);
            (id.public(), id.sealing_secret().public())
        })
        .chain([(f.bob.public(), f.bob.sealing_secret().public())])
        .collect();
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    c.bench_function("details: seal for own identity + 6 peers", |b| {
        b.iter(|| details.seal(&f.alice, &session, &peers, &mut rng).unwrap())
    });
    let ann = Announcement {
        v: VERSION,
        identity: f.alice.public(),
        sealing: SealingBinding::new(&f.alice),
        session_id: session.clone(),
        peer_id: serde_bytes::ByteBuf::new(),
        addrs: Vec::new(),
        details: details.seal(&f.alice, &session, &peers, &mut rng).unwrap(),
        heartbeat_ms: 30_000,
        ts: NOW,
        seq: 1,
    };
    let bob_secret = f.bob.sealing_secret();
    c.bench_function(
        "details: a new announcer's reader key (X25519 + HKDF)",
        |b| {
            b.iter(|| {
                ReaderKey::agree(
                    &bob_secret,
                    &ann.sealing.key,
                    &ann.identity,
                    &f.bob.public(),
                )
                .unwrap()
            })
        },
    );
    let mut reader = DetailsReader::new(&f.bob);
    c.bench_function("details: open, announcer known (a peer)", |b| {
        b.iter(|| reader.open(black_box(&ann)).unwrap())
    });
    let mut stranger = DetailsReader::new(&Identity::from_seed(&[99; 32]));
    c.bench_function("details: open, announcer known (not a reader)", |b| {
        b.iter(|| assert!(stranger.open(black_box(&ann)).is_none()))
    });
}

/// Claims (docs/CLAIMS.md, BENCHMARKS.md): ranking a full board (64 sessions with 8
/// exclusive claims each, 512 claims) — realistic paths, and patterns chosen so that
/// no pair parts early (every one starts with a wildcard and none overlaps) — and the
/// check an edit makes against 1,000 claims.
fn bench_claims(c: &mut Criterion) {
    use interlink_core::{
        claims::{Board, Claim, MAX_BOARD_SESSIONS, MAX_CLAIMS_PER_SESSION},
        wire::SessionAddr,
    };
    let addr = |i: usize| SessionAddr {
        key: interlink_core::IdentityKey::from_bytes([(i % 251) as u8; 32]),
        session: SessionId::new(format!("s{i}")).unwrap(),
    };
    let claim = |pattern: String, since: u64| Claim {
        pattern,
        exclusive: true,
        reason: "bench".into(),
        since,
        until: since + 3_600_000,
    };
    let now = 1_000_000;
    let full = |pattern: &dyn Fn(usize, usize) -> String| {
        let mut board = Board::new();
        for s in 0..MAX_BOARD_SESSIONS {
            let set = (0..MAX_CLAIMS_PER_SESSION)
                .map(|k| claim(pattern(s, k), 1 + (s * 8 + k) as u64))
                .collect();
            board.set(addr(s), set, now).unwrap();
        }
        board
    };
    let paths = |s: usize, k: usize| format!("crates/c{}/src/m{}/**", s % 40, s * 8 + k);
    let adversarial = |s: usize, k: usize| format!("*/*{}x*/y{}z*/**", s * 8 + k, s);
    for (name, pattern) in [
        (
            "claims/rank 512 (paths)",
            &paths as &dyn Fn(usize, usize) -> String,
        ),
        ("claims/rank 512 (no early parting)", &adversarial),
    ] {
        let board = full(pattern);
        let last = addr(MAX_BOARD_SESSIONS - 1);
        let set: Vec<Claim> = (0..MAX_CLAIMS_PER_SESSION)
            .map(|k| claim(pattern(MAX_BOARD_SESSIONS - 1, k), 5))
            .collect();
        c.bench_function(name, |b| {
            b.iter(|| {
                let mut board = board.clone();
                // Replacing one session's set ranks the whole board again.
                board.set(last.clone(), set.clone(), now).unwrap();
                board
            })
        });
    }
    // The hook's check (interlink_mcp's held_against over a board view): each claim's
    // pattern parsed and matched against the edited path; 1,000 claims.
    let patterns: Vec<String> = (0..1_000)
        .map(|i| format!("crates/c{}/src/m{}/**", i / 8, i % 8))
        .collect();
    c.bench_function("claims/check an edit against 1,000 claims", |b| {
        b.iter(|| {
            patterns
                .iter()
                .filter(|p| {
                    interlink_core::claims::Pattern::parse(p)
                        .is_ok_and(|p| p.covers(black_box("crates/c77/src/m3/handler.rs")))
                })
                .count()
        })
    });
}

criterion_group!(
    benches,
    bench_claims,
    bench_wire,
    bench_mailbox,
    bench_primitives,
    bench_details
);
criterion_main!(benches);
