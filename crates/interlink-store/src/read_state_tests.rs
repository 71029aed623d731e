use super::{testing::entry, *};
use crate::inbox::Inbox;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn id(n: u8) -> MsgId {
    MsgId::from_bytes([n; 16])
}

fn ids(entries: &[InboxEntry]) -> Vec<String> {
    entries.iter().map(|e| e.msg_id.clone()).collect()
}

#[test]
fn unread_from_skips_a_prefix_with_nothing_unread() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    inbox
        .append(id(1), &entry(id(1), EnvelopeKind::HostQueued))
        .unwrap();
    inbox
        .append(id(2), &entry(id(2), EnvelopeKind::Read))
        .unwrap();
    inbox
        .append(id(3), &entry(id(3), EnvelopeKind::Message))
        .unwrap();
    let state = ReadState::load(&SessionDir::at(dir.path())).unwrap();
    let (unread, clean) = state.unread_from(0).unwrap();
    assert_eq!(ids(&unread), vec![id(3).to_string()]);
    assert!(clean > 0, "the two receipts are a clean prefix");
    // From the hint: the same answer without the prefix.
    let (again, clean_again) = state.unread_from(clean).unwrap();
    assert_eq!(ids(&again), vec![id(3).to_string()]);
    assert_eq!(clean_again, clean);
    // A hint past the end of the file (inbox replaced) is ignored.
    let (all, _) = state.unread_from(u64::MAX).unwrap();
    assert_eq!(ids(&all), vec![id(3).to_string()]);
}

#[test]
fn acknowledged_messages_stay_consumed_across_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    for n in 1..=3 {
        inbox
            .append(id(n), &entry(id(n), EnvelopeKind::Message))
            .unwrap();
    }
    inbox
        .append(id(9), &entry(id(9), EnvelopeKind::Goodbye))
        .unwrap();
    let mut state = ReadState::load(&SessionDir::at(dir.path())).unwrap();
    assert_eq!(ids(&state.unread().unwrap()).len(), 3);

    // Out of order: the newest first; the offset cannot move yet.
    let acked = state.acknowledge(&[id(3), id(7)]).unwrap();
    assert_eq!((acked.consumed, acked.unknown), (vec![id(3)], vec![id(7)]));
    assert_eq!(state.offset, 0);
    let state2 = ReadState::load(&SessionDir::at(dir.path())).unwrap();
    assert_eq!(
        ids(&state2.unread().unwrap()),
        [id(1).to_string(), id(2).to_string()]
    );

    // The oldest two: the offset moves past all four lines (the goodbye too), and
    // no ids need remembering.
    let acked = state.acknowledge(&[id(1), id(2), id(3)]).unwrap();
    assert_eq!(acked.consumed, vec![id(1), id(2)]);
    assert_eq!(acked.already, vec![id(3)]);
    let state = ReadState::load(&SessionDir::at(dir.path())).unwrap();
    assert!(state.unread().unwrap().is_empty());
    assert!(state.consumed.is_empty());
    assert!(state.offset > 0);
    let mut state = state;
    let again = state.acknowledge(&[id(1)]).unwrap();
    assert_eq!(again.already, vec![id(1)]);

    // A new message after the offset is unread.
    inbox
        .append(id(4), &entry(id(4), EnvelopeKind::Message))
        .unwrap();
    assert_eq!(ids(&state.unread().unwrap()), [id(4).to_string()]);
}

fn from(sender: &str, n: u8) -> InboxEntry {
    let mut e = entry(id(n), EnvelopeKind::Message);
    e.sender = sender.repeat(32);
    e.reply_to = format!("{}#s", sender.repeat(32));
    e
}

/// A paired peer that copies another sender's id must not get the genuine message
/// acknowledged unread: the bare id is ambiguous and consumes neither; each is
/// acknowledged by `<sender>:<id>`, and only its sender gets the read receipt.
#[test]
fn one_id_from_two_senders_is_ambiguous_until_the_sender_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    inbox.append(id(1), &from("aa", 1)).unwrap();
    inbox.append(id(1), &from("bb", 1)).unwrap();
    inbox.append(id(2), &from("aa", 2)).unwrap();
    let mut state = ReadState::load(&SessionDir::at(dir.path())).unwrap();
    let unread = state.unread().unwrap();
    assert_eq!(unread.len(), 3, "both senders' messages are there");
    let acked = state.acknowledge(&[id(1), id(2)]).unwrap();
    assert_eq!(acked.consumed, vec![id(2)], "the unambiguous one only");
    assert_eq!(acked.ambiguous.len(), 1);
    assert_eq!(acked.ambiguous[0].0, id(1));
    assert_eq!(acked.ambiguous[0].1.len(), 2);
    assert_eq!(
        state.unread().unwrap().len(),
        2,
        "both id-1 messages still unread"
    );

    let bb: AckId = format!("{}:{}", "bb".repeat(32), id(1)).parse().unwrap();
    let acked = state.acknowledge(&[bb]).unwrap();
    assert_eq!(acked.consumed, vec![id(1)]);
    assert_eq!(
        acked
            .consumed_keys
            .iter()
            .map(|(k, _)| k.to_hex())
            .collect::<Vec<_>>(),
        ["bb".repeat(32)],
        "bb's message only"
    );
    let state = ReadState::load(&SessionDir::at(dir.path())).unwrap();
    let left = state.unread().unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].sender, "aa".repeat(32));
    // Alone now: the bare id names it.
    let mut state = state;
    assert_eq!(state.acknowledge(&[id(1)]).unwrap().consumed, vec![id(1)]);
    assert!(state.unread().unwrap().is_empty());
    assert!("not-an-id".parse::<AckId>().is_err());
}

#[test]
fn another_senders_message_under_an_acknowledged_id_stays_unread() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    inbox.append(id(1), &from("aa", 1)).unwrap();
    inbox.append(id(2), &from("bb", 2)).unwrap();
    let mut state = ReadState::load(&SessionDir::at(dir.path())).unwrap();
    // Out of order: the offset stays before id 1, id 2 is remembered with its sender.
    state.acknowledge(&[id(2)]).unwrap();
    inbox.append(id(2), &from("aa", 2)).unwrap();
    let state = ReadState::load(&SessionDir::at(dir.path())).unwrap();
    let unread = state.unread().unwrap();
    let got: Vec<(String, String)> = unread
        .iter()
        .map(|e| (e.sender[..2].to_owned(), e.msg_id.clone()))
        .collect();
    assert_eq!(
        got,
        [
            ("aa".into(), id(1).to_string()),
            ("aa".into(), id(2).to_string())
        ]
    );
    // A version 1 file's bare id still means "any sender".
    std::fs::write(
        SessionDir::at(dir.path()).read_state(),
        format!(r#"{{"version":1,"offset":0,"consumed":["{}"]}}"#, id(2)),
    )
    .unwrap();
    let state = ReadState::load(&SessionDir::at(dir.path())).unwrap();
    assert_eq!(ids(&state.unread().unwrap()), [id(1).to_string()]);
}

/// Both senders' message `n` of [`fill`], each named with its sender.
fn both(n: u8) -> [AckId; 2] {
    ["aa", "bb"].map(|s| AckId {
        sender: Some(s.repeat(32).parse().unwrap()),
        id: id(n),
    })
}

/// Fills the inbox with `n` messages of about 1 KiB (enough to compact).
fn fill(inbox: &mut Inbox, first: u8, n: u8) {
    for i in first..first + n {
        let mut e = entry(id(i), EnvelopeKind::Message);
        e.text = Some(format!("{i} {}", "x".repeat(1100)));
        e.received_at = now_ms();
        let batch: Vec<(MsgId, InboxEntry)> = (0..2u8)
            .map(|k| {
                let mut e = e.clone();
                // Two senders per id: 2 * n lines.
                e.sender = if k == 0 { "aa" } else { "bb" }.repeat(32);
                (id(i), e)
            })
            .collect();
        inbox
            .append_many(batch.iter().map(|(i, e)| (*i, e)))
            .unwrap();
    }
}

#[test]
fn acknowledged_messages_stay_known_after_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms())
        .unwrap()
        .with_compact_min_bytes(200 * 1024);
    fill(&mut inbox, 0, 150);
    let mut state = ReadState::load(&SessionDir::at(dir.path())).unwrap();
    let all: Vec<AckId> = (0..150).flat_map(both).collect();
    for chunk in all.chunks(100) {
        state.acknowledge(chunk).unwrap();
    }
    assert!(state.unread().unwrap().is_empty());
    assert!(inbox.compact(now_ms()).unwrap());
    assert!(inbox.base() > 0);
    fill(&mut inbox, 150, 2);
    let mut state = ReadState::load(&SessionDir::at(dir.path())).unwrap();
    assert_eq!(state.unread().unwrap().len(), 4);
    // An archived id is known (the saved index), not unknown.
    let [a150, b150] = both(150);
    let acked = state
        .acknowledge(&[AckId::from(id(3)), a150, b150, AckId::from(id(200))])
        .unwrap();
    assert_eq!(acked.already, vec![id(3)]);
    assert_eq!(acked.consumed, vec![id(150), id(150)]);
    assert_eq!(acked.unknown, vec![id(200)]);
    assert_eq!(ids(&state.unread().unwrap()), vec![id(151).to_string(); 2]);
}

#[test]
fn messages_expired_into_the_archive_unconsumed_count_as_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms())
        .unwrap()
        .with_compact_min_bytes(200 * 1024);
    fill(&mut inbox, 0, 150);
    let mut state = ReadState::load(&SessionDir::at(dir.path())).unwrap();
    // One acknowledged out of order: its id must not stay in the state forever.
    state.acknowledge(&both(5)).unwrap();
    let later = now_ms() + crate::inbox::HOT_RETENTION_MS + 1000;
    assert!(inbox.compact(later).unwrap());
    fill(&mut inbox, 150, 1);
    let mut state = ReadState::load(&SessionDir::at(dir.path())).unwrap();
    assert_eq!(ids(&state.unread().unwrap()), vec![id(150).to_string(); 2]);
    state.acknowledge(&both(150)).unwrap();
    assert!(state.consumed.is_empty());
    // The offset moved into the hot file (it is checked when read, not at load).
    assert!(
        state.offset >= inbox.base(),
        "{} < {}",
        state.offset,
        inbox.base()
    );
}

#[test]
fn a_missing_inbox_has_nothing_unread() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = ReadState::load(&SessionDir::at(dir.path())).unwrap();
    assert!(state.unread().unwrap().is_empty());
    assert_eq!(state.acknowledge(&[id(1)]).unwrap().unknown, vec![id(1)]);
}

#[test]
fn a_lazy_acknowledgement_is_as_visible_as_a_synced_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    for n in 1..=2 {
        inbox
            .append(id(n), &entry(id(n), EnvelopeKind::Message))
            .unwrap();
    }
    let mut state = ReadState::load(&SessionDir::at(dir.path())).unwrap();
    let acked = state.acknowledge_with(&[id(1)], Durability::Lazy).unwrap();
    assert_eq!(acked.consumed, vec![id(1)]);
    // Another reader (the Stop hook, a restart) sees it at once.
    let again = ReadState::load(&SessionDir::at(dir.path())).unwrap();
    assert_eq!(ids(&again.unread().unwrap()), [id(2).to_string()]);
    // No temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
}

fn inbox_of(dir: &Path, n: u8) {
    let mut inbox = Inbox::open(dir, now_ms()).unwrap();
    for i in 1..=n {
        inbox
            .append(id(i), &entry(id(i), EnvelopeKind::Message))
            .unwrap();
    }
}

fn unread_ids(dir: &Path) -> Vec<String> {
    ids(&ReadState::load(&SessionDir::at(dir))
        .unwrap()
        .unread()
        .unwrap())
}

/// A lazy mark (a channel push) neither replaces nor touches `read.json`: it goes
/// into `read.lazy`, which every reader (a restart, the Stop hook, the compactor)
/// reads too, and the newer of the two is the state, whichever way they were written.
#[test]
fn a_lazy_mark_leaves_read_json_alone_and_the_newest_state_wins() {
    let dir = tempfile::tempdir().unwrap();
    inbox_of(dir.path(), 4);
    let session = SessionDir::at(dir.path());
    let mut state = ReadState::load(&session).unwrap();
    state.acknowledge(&[id(1)]).unwrap();
    let json = session.read_state();
    let synced = std::fs::read(&json).unwrap();

    ReadState::load(&session)
        .unwrap()
        .acknowledge_with(&[id(2)], Durability::Lazy)
        .unwrap();
    assert_eq!(
        std::fs::read(&json).unwrap(),
        synced,
        "read.json not rewritten"
    );
    assert_eq!(
        unread_ids(dir.path()),
        [id(3).to_string(), id(4).to_string()]
    );
    let offset = consumed_offset(dir.path());
    assert!(offset > 0, "the compactor sees the lazy offset");

    // A synced acknowledgement after it writes read.json, newer than the slot.
    ReadState::load(&session)
        .unwrap()
        .acknowledge(&[id(3)])
        .unwrap();
    assert_eq!(unread_ids(dir.path()), [id(4).to_string()]);
    // And a lazy one after that is newer again.
    ReadState::load(&session)
        .unwrap()
        .acknowledge_with(&[id(4)], Durability::Lazy)
        .unwrap();
    assert!(unread_ids(dir.path()).is_empty());
}

/// The newest slot torn (a machine crash mid-write): the state before it is read, so
/// the message pushed since is pushed again — at least once, never lost, no error.
#[test]
fn a_torn_lazy_slot_gives_the_state_before_it() {
    let dir = tempfile::tempdir().unwrap();
    inbox_of(dir.path(), 3);
    let session = SessionDir::at(dir.path());
    for n in 1..=2 {
        ReadState::load(&session)
            .unwrap()
            .acknowledge_with(&[id(n)], Durability::Lazy)
            .unwrap();
    }
    assert_eq!(unread_ids(dir.path()), [id(3).to_string()]);
    let path = dir.path().join(lazy::LAZY_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    // Generation 2 is in slot 0; tear its last byte.
    let end = bytes[..lazy::SLOT_BYTES]
        .iter()
        .rposition(|b| *b != 0)
        .unwrap();
    bytes[end] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(
        unread_ids(dir.path()),
        [id(2).to_string(), id(3).to_string()]
    );
    // Marking goes on from there.
    ReadState::load(&session)
        .unwrap()
        .acknowledge_with(&[id(2)], Durability::Lazy)
        .unwrap();
    assert_eq!(unread_ids(dir.path()), [id(3).to_string()]);
}

/// A state too large for a slot (many messages consumed out of order) goes to
/// `read.json`, and a file written before `read.lazy` existed (no generation) loads.
#[test]
fn a_large_lazy_state_goes_to_read_json_and_an_old_file_loads() {
    let dir = tempfile::tempdir().unwrap();
    inbox_of(dir.path(), 100);
    let session = SessionDir::at(dir.path());
    // Every other one of 100, the first left unread: 50 ids of 32 hex digits with
    // their senders (about 100 bytes each) do not fit in a slot.
    let odd: Vec<MsgId> = (1..=50).map(|i| id(2 * i)).collect();
    ReadState::load(&session)
        .unwrap()
        .acknowledge_with(&odd, Durability::Lazy)
        .unwrap();
    assert!(!dir.path().join(lazy::LAZY_FILE).exists());
    assert_eq!(unread_ids(dir.path()).len(), 50);

    std::fs::write(
        session.read_state(),
        br#"{"version":2,"offset":0,"consumed":[]}"#,
    )
    .unwrap();
    assert_eq!(unread_ids(dir.path()).len(), 100);
}
