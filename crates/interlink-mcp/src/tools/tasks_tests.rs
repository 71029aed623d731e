use std::time::Instant;

use interlink_core::{MsgId, wire::EnvelopeKind};
use interlink_store::inbox::Inbox;

use super::*;
use crate::read_state::{ReadState, testing::entry};

fn id(n: u32) -> MsgId {
    let mut b = [0; 16];
    b[..4].copy_from_slice(&n.to_be_bytes());
    MsgId::from_bytes(b)
}

/// `n` messages, every `every`-th from `bb` in task `t`, the rest from `aa`; one
/// receipt line per ten messages; ~`pad` bytes of text each.
fn history(dir: &std::path::Path, n: u32, every: u32, pad: usize) -> Inbox {
    let mut inbox = Inbox::open(dir, interlink_net::Clock::system().now_ms()).unwrap();
    let now = interlink_net::Clock::system().now_ms();
    let lines: Vec<(MsgId, InboxEntry)> = (0..n)
        .map(|i| {
            let kind = if i % 10 == 9 {
                EnvelopeKind::Read
            } else {
                EnvelopeKind::Message
            };
            let mut e = entry(id(i), kind);
            if i % every == 0 {
                e.sender = "bb".repeat(32);
                e.task_id = Some("t".into());
            }
            e.text = Some(format!("m{i} {}", "p".repeat(pad)));
            e.sent_at = u64::from(i);
            e.received_at = now;
            (id(i), e)
        })
        .collect();
    for chunk in lines.chunks(1000) {
        inbox
            .append_many(chunk.iter().map(|(i, e)| (*i, e)))
            .unwrap();
    }
    inbox
}

#[test]
fn history_reads_the_newest_matching_messages_from_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let _inbox = history(dir.path(), 300, 7, 10);
    let texts = |v: &[InboxEntry]| {
        v.iter()
            .map(|e| e.text.clone().unwrap_or_default())
            .map(|t| t.split(' ').next().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    let (last, more) = received_history(&SessionDir::at(dir.path()), None, None, 3).unwrap();
    // 299 is a receipt line, not a message.
    assert_eq!(texts(&last), ["m296", "m297", "m298"]);
    assert!(more);
    let bb: IdentityKey = "bb".repeat(32).parse().unwrap();
    let (from_bb, more) =
        received_history(&SessionDir::at(dir.path()), Some(&bb), Some("t"), 100).unwrap();
    assert_eq!(
        from_bb.len(),
        300_usize.div_ceil(7) - 4,
        "every 7th but receipts"
    );
    assert!(!more);
    assert!(from_bb.iter().all(|e| e.sender == "bb".repeat(32)));
    let (none, more) =
        received_history(&SessionDir::at(dir.path()), None, Some("nope"), 5).unwrap();
    assert!(none.is_empty() && !more);
}

/// `cargo test -p interlink-mcp history_bench -- --ignored --nocapture`: a session with
/// 100,000 messages of history, 98% of them acknowledged and compacted away.
#[test]
#[ignore = "benchmark"]
fn history_bench_100k_messages() {
    let dir = tempfile::tempdir().unwrap();
    let n = 100_000;
    let t = Instant::now();
    let inbox = history(dir.path(), n, 100, 200);
    let (_, end) = interlink_store::inbox::bounds(inbox.path()).unwrap();
    drop(inbox);
    std::fs::write(
        SessionDir::at(dir.path()).read_state(),
        format!(
            r#"{{"version":2,"offset":{},"consumed":[]}}"#,
            end - 500_000
        ),
    )
    .unwrap();
    let inbox = Inbox::open(dir.path(), interlink_net::Clock::system().now_ms()).unwrap();
    eprintln!(
        "built {n} lines in {:?}; hot file from {} to {end}",
        t.elapsed(),
        inbox.base()
    );
    drop(inbox);
    let t = Instant::now();
    let inbox = Inbox::open(dir.path(), interlink_net::Clock::system().now_ms()).unwrap();
    eprintln!("Inbox::open: {:?}", t.elapsed());
    drop(inbox);
    let t = Instant::now();
    let state = ReadState::load(&SessionDir::at(dir.path())).unwrap();
    eprintln!("ReadState::load: {:?}", t.elapsed());
    let t = Instant::now();
    let unread = state.unread().unwrap();
    eprintln!("unread ({}): {:?}", unread.len(), t.elapsed());
    let bb: IdentityKey = "bb".repeat(32).parse().unwrap();
    for (what, peer, task, limit) in [
        ("newest 20", None, None, 20),
        ("newest 100", None, None, 100),
        ("peer with 1%, 20", Some(&bb), None, 20),
        ("peer with 1%, task, 100", Some(&bb), Some("t"), 100),
    ] {
        let t = Instant::now();
        let (got, more) = received_history(&SessionDir::at(dir.path()), peer, task, limit).unwrap();
        eprintln!(
            "conversation_history {what}: {:?} ({} found, more {more})",
            t.elapsed(),
            got.len()
        );
    }
}
