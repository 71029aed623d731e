use interlink_core::{
    Identity, SessionId,
    wire::{EnvelopeKind, VERSION},
};

use super::*;

fn env(id: u8, ts: u64) -> Signed<Envelope> {
    let me = Identity::from_seed(&[1; 32]);
    let body = Envelope {
        v: VERSION,
        sender: me.public(),
        sender_session: SessionId::new("a").unwrap(),
        recipient: Identity::from_seed(&[2; 32]).public(),
        recipient_session: SessionId::new("b").unwrap(),
        msg_id: MsgId::from_bytes([id; 16]),
        ts,
        kind: EnvelopeKind::Goodbye,
        in_reply_to: None,
        also_about: Vec::new(),
        name: None,
        sealed: None,
        pass: None,
        reply_pass: None,
    };
    Signed::sign(body, &me).unwrap()
}

#[test]
fn entries_survive_a_reopen_in_order_until_removed_or_expired() {
    let dir = tempfile::tempdir().unwrap();
    let now = 1_800_000_000_000;
    let mut outbox = Outbox::open(dir.path()).unwrap();
    let (a, b, old) = (
        env(1, now - 2),
        env(2, now - 1),
        env(3, now - 8 * 86_400_000),
    );
    outbox.put(&[&b, &a]).unwrap();
    outbox.put(&[&old]).unwrap();
    outbox.put(&[&a]).unwrap(); // again: no second entry
    assert_eq!(outbox.len(), 3);
    drop(outbox);
    let mut outbox = Outbox::open(dir.path()).unwrap();
    let loaded = outbox.load(now).unwrap();
    assert_eq!(
        loaded,
        vec![a.clone(), b.clone()],
        "oldest first; the expired one is gone"
    );
    assert_eq!(outbox.len(), 2);
    assert_eq!(
        outbox
            .remove(&[a.body().msg_id, MsgId::from_bytes([9; 16])])
            .unwrap(),
        1
    );
    drop(outbox);
    let mut outbox = Outbox::open(dir.path()).unwrap();
    assert_eq!(outbox.load(now).unwrap(), vec![b]);
}

/// The outbox holds sealed mail: only its owner may read it, also when an earlier
/// version left the file readable by others.
#[cfg(unix)]
#[test]
fn the_outbox_file_is_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let dir = tempfile::tempdir().unwrap();
    drop(Outbox::open(dir.path()).unwrap());
    let file = dir.path().join(OUTBOX_FILE);
    assert_eq!(mode(&file), 0o600);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    drop(Outbox::open(dir.path()).unwrap());
    assert_eq!(mode(&file), 0o600, "narrowed on open");
}

/// The outbox's cost per message (docs/BENCHMARKS.md): `cargo test --release -p
/// interlink-store --lib outbox_bench -- --ignored --nocapture`.
#[test]
#[ignore = "benchmark; run by hand"]
fn outbox_bench_cost_per_message() {
    let dir = tempfile::tempdir().unwrap();
    let now = 1_800_000_000_000;
    let mut outbox = Outbox::open(dir.path()).unwrap();
    let envs: Vec<_> = (0..=255u8).map(|i| env(i, now)).collect();
    for batch in [1usize, 8, 64] {
        let rounds = 256 / batch;
        let started = std::time::Instant::now();
        for chunk in envs.chunks(batch).take(rounds) {
            let refs: Vec<_> = chunk.iter().collect();
            outbox.put(&refs).unwrap();
        }
        let put = started.elapsed();
        let started = std::time::Instant::now();
        for chunk in envs.chunks(batch).take(rounds) {
            let ids: Vec<_> = chunk.iter().map(|e| e.body().msg_id).collect();
            outbox.remove(&ids).unwrap();
        }
        let removed = started.elapsed();
        let n = (rounds * batch) as u32;
        eprintln!(
            "batch {batch:>2}: put {:?}/message ({:?}/commit), remove {:?}/message",
            put / n,
            put / rounds as u32,
            removed / n
        );
    }
}
