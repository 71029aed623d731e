use std::{fs, time::Instant};

use super::*;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

const A: &str = "aa";
/// A compaction threshold the tests reach with a few hundred messages.
const SMALL: u64 = 200 * 1024;
const B: &str = "bb";

fn key(hex2: &str) -> IdentityKey {
    hex2.repeat(32).parse().unwrap()
}

fn entry_from(sender: &str, id: MsgId, text: &str) -> InboxEntry {
    InboxEntry {
        msg_id: id.to_string(),
        sender: sender.repeat(32),
        sender_fingerprint: "0000-0000-0000".into(),
        sender_session: "s".into(),
        reply_to: format!("{}#s", sender.repeat(32)),
        kind: EnvelopeKind::Message,
        task_id: None,
        status: None,
        in_reply_to: None,
        also_about: Vec::new(),
        sent_at: 1,
        received_at: now_ms(),
        text: Some(text.into()),
        name: None,
        group: None,
    }
}

fn entry(id: MsgId, text: &str) -> InboxEntry {
    entry_from(A, id, text)
}

fn id(n: u32) -> MsgId {
    let mut b = [0; 16];
    b[..4].copy_from_slice(&n.to_be_bytes());
    MsgId::from_bytes(b)
}

fn texts(entries: &[InboxEntry]) -> Vec<String> {
    entries.iter().filter_map(|e| e.text.clone()).collect()
}

fn set_consumed(dir: &Path, offset: u64) {
    fs::write(
        dir.join(CONSUMED_CURSOR_FILE),
        format!(r#"{{"version":1,"offset":{offset},"consumed":[]}}"#),
    )
    .unwrap();
}

/// Appends `n` messages of about 1 KiB each (one sync per 100), numbered from `first`.
fn fill(inbox: &mut Inbox, first: u32, n: u32) {
    let pad = "x".repeat(1000);
    let all: Vec<(MsgId, InboxEntry)> = (first..first + n)
        .map(|i| (id(i), entry(id(i), &format!("m{i} {pad}"))))
        .collect();
    for chunk in all.chunks(100) {
        inbox
            .append_many(chunk.iter().map(|(i, e)| (*i, e)))
            .unwrap();
    }
}

#[test]
fn appends_dedupes_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (id(1), id(2));
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    assert_eq!(inbox.append(a, &entry(a, "one")).unwrap(), Appended::New);
    assert_eq!(
        inbox.append(a, &entry(a, "one again")).unwrap(),
        Appended::Duplicate
    );
    drop(inbox);
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    assert!(inbox.holds(&key(A), &a));
    assert_eq!(
        inbox.append(a, &entry(a, "replayed")).unwrap(),
        Appended::Duplicate
    );
    assert_eq!(inbox.append(b, &entry(b, "two")).unwrap(), Appended::New);
    let (all, end) = read_from(inbox.path(), 0).unwrap();
    assert_eq!(texts(&all), ["one", "two"]);
    let (none, same) = read_from(inbox.path(), end).unwrap();
    assert!(none.is_empty());
    assert_eq!(same, end);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(inbox.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}

#[test]
fn a_batch_of_receipts_is_appended_and_deduplicated_like_messages() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    let rid = id(7);
    let mut receipt = entry(rid, "");
    receipt.kind = EnvelopeKind::HostQueued;
    receipt.text = None;
    assert_eq!(inbox.append(rid, &receipt).unwrap(), Appended::New);
    assert_eq!(inbox.append(rid, &receipt).unwrap(), Appended::Duplicate);
    // Written without a sync, still there for readers and after reopening.
    let (entries, _) = read_from(inbox.path(), 0).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].kind, EnvelopeKind::HostQueued);
    drop(inbox);
    let inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    assert!(inbox.holds(&key(A), &rid));
}

#[test]
fn two_senders_with_one_id_are_two_messages() {
    let dir = tempfile::tempdir().unwrap();
    let shared = id(1);
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    // The copier delivers first; the genuine sender's message is stored all the same.
    assert_eq!(
        inbox
            .append(shared, &entry_from(B, shared, "copied id"))
            .unwrap(),
        Appended::New
    );
    assert!(inbox.holds(&key(B), &shared));
    assert!(
        !inbox.holds(&key(A), &shared),
        "B's line is not A's message"
    );
    assert_eq!(
        inbox
            .append(shared, &entry_from(A, shared, "genuine"))
            .unwrap(),
        Appended::New
    );
    // In one batch too, and each sender's retry is still a duplicate.
    let c = id(2);
    let out = inbox
        .append_many([
            (c, &entry_from(A, c, "a2")),
            (c, &entry_from(B, c, "b2")),
            (c, &entry_from(A, c, "a2 again")),
        ])
        .unwrap();
    assert_eq!(out, [Appended::New, Appended::New, Appended::Duplicate]);
    drop(inbox);
    let inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    assert!(inbox.holds(&key(A), &shared) && inbox.holds(&key(B), &shared));
    assert!(!inbox.holds(&key(A), &id(3)));
    let (all, _) = read_from(inbox.path(), 0).unwrap();
    assert_eq!(texts(&all), ["copied id", "genuine", "a2", "b2"]);
}

#[test]
fn a_torn_last_line_is_cut_off_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let a = id(1);
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    inbox.append(a, &entry(a, "whole")).unwrap();
    let path = inbox.path().to_owned();
    drop(inbox);
    let whole_len = fs::metadata(&path).unwrap().len();
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(br#"{"msg_id":"0202"#).unwrap();
    drop(f);
    // A reader stops before the torn line...
    let (entries, end) = read_from(&path, 0).unwrap();
    assert_eq!((entries.len(), end), (1, whole_len));
    let (newest, _) = read_newest(&path, 10, 100, None, |_| true).unwrap();
    assert_eq!(texts(&newest), ["whole"]);
    // ...and the writer cuts it off.
    let inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    assert_eq!(inbox.len(), 1);
    assert_eq!(fs::metadata(&path).unwrap().len(), whole_len);
}

/// Everything a reader can ask of an inbox, to compare a padded one with a plain one.
fn readers_view(path: &Path) -> impl PartialEq + std::fmt::Debug {
    let (all, end) = read_positioned_from(path, 0).unwrap();
    // From some cursors: every 37th line end, and the last two.
    let cursors = all.iter().step_by(37).chain(all.iter().rev().take(2));
    let from_each: Vec<_> = cursors
        .map(|(_, at)| read_positioned_from(path, *at).unwrap().1)
        .collect();
    let (hot, start, hot_end) = read_hot_from(path, end).unwrap();
    let (newest, more) = read_newest(path, 5, 1000, None, |_| true).unwrap();
    (
        all,
        from_each,
        (hot, start, hot_end),
        (newest, more),
        bounds(path).unwrap(),
    )
}

#[test]
fn the_padding_is_invisible_to_every_reader() {
    let (plain_dir, padded_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let open = |dir: &Path| {
        Inbox::open(dir, now_ms())
            .unwrap()
            .with_compact_min_bytes(32 * 1024)
    };
    let (mut plain, mut padded) = (open(plain_dir.path()), open(padded_dir.path()));
    // No padding before the first message.
    padded.pad(now_ms());
    assert_eq!(fs::metadata(padded.path()).unwrap().len(), 0);
    let mut grew = 0;
    // Batches of one line, of many, and of one line longer than the padding; a
    // compaction halfway; a reopen at the end.
    for step in 0u32..60 {
        let n = [1, 7, 1, 30][step as usize % 4];
        let size = if step == 18 || step == 44 {
            100_000
        } else {
            300
        };
        let text = "t".repeat(size);
        let batch: Vec<(MsgId, InboxEntry)> = (0..n)
            .map(|k| id(step * 100 + k))
            .map(|i| (i, entry(i, &format!("{i} {text}"))))
            .collect();
        for inbox in [&mut plain, &mut padded] {
            inbox
                .append_many(batch.iter().map(|(i, e)| (*i, e)))
                .unwrap();
        }
        let before = fs::metadata(padded.path()).unwrap().len();
        padded.pad(now_ms());
        grew += u32::from(fs::metadata(padded.path()).unwrap().len() > before);
        if step == 30 {
            let (_, end) = read_from(plain.path(), 0).unwrap();
            set_consumed(plain_dir.path(), end / 2);
            set_consumed(padded_dir.path(), end / 2);
            assert!(plain.compact(now_ms()).unwrap());
            assert!(padded.compact(now_ms()).unwrap());
            padded.pad(now_ms());
        }
        assert_eq!(
            readers_view(padded.path()),
            readers_view(plain.path()),
            "step {step}"
        );
    }
    assert!(grew >= 4, "the padding was topped up {grew} times");
    let (_, end) = read_from(padded.path(), 0).unwrap();
    let padded_len = fs::metadata(padded.path()).unwrap().len();
    // Topped up in quick succession, it grew to the most there is.
    assert!(padded_len > end + MAX_PADDING / 2, "{padded_len} {end}");
    assert!(padded_len <= end + MAX_PADDING, "{padded_len} {end}");
    // After a crash (no close), reopening keeps clean padding as it is...
    std::mem::forget(padded);
    drop(plain);
    let (plain, padded) = (open(plain_dir.path()), open(padded_dir.path()));
    assert_eq!(fs::metadata(padded.path()).unwrap().len(), padded_len);
    assert_eq!(readers_view(padded.path()), readers_view(plain.path()));
    assert_eq!(padded.len(), plain.len());
    // ...and a clean close cuts it off.
    let path = padded.path().to_owned();
    drop(padded);
    assert_eq!(
        fs::metadata(&path).unwrap().len(),
        fs::metadata(plain.path()).unwrap().len()
    );
}

#[test]
fn an_append_within_the_padding_leaves_the_file_length_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    inbox.append(id(100), &entry(id(100), "first")).unwrap();
    let first = fs::metadata(inbox.path()).unwrap().len();
    inbox.pad(now_ms());
    let padded = fs::metadata(inbox.path()).unwrap().len();
    assert_eq!(padded, first + MIN_PADDING);
    for i in 0..10 {
        inbox.append(id(i), &entry(id(i), "within")).unwrap();
        // No new length for `fdatasync` to commit.
        assert_eq!(fs::metadata(inbox.path()).unwrap().len(), padded);
    }
    let bytes = fs::read(inbox.path()).unwrap();
    let (_, end) = read_from(inbox.path(), 0).unwrap();
    let data = usize::try_from(end).unwrap();
    assert_eq!(bytes[..data].iter().filter(|b| **b == b'\n').count(), 11);
    assert!(
        bytes[data..].iter().all(|b| *b == b' '),
        "spaces, no newline"
    );
    // The padding is topped up only once less than half of it is left.
    inbox.pad(now_ms());
    assert_eq!(fs::metadata(inbox.path()).unwrap().len(), padded);
}

#[test]
fn the_padding_grows_only_while_the_inbox_is_busy() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    let text = "q".repeat(40 * 1024);
    let padding = |inbox: &Inbox| {
        let (_, end) = read_from(inbox.path(), 0).unwrap();
        fs::metadata(inbox.path()).unwrap().len() - end
    };
    // Each 40 KiB message leaves less than half of the padding: a top-up each time.
    let mut t = 1_000_000;
    for i in 0..4 {
        inbox.append(id(i), &entry(id(i), &text)).unwrap();
        t += PADDING_GROWS_WITHIN_MS + 1;
        inbox.pad(t);
        assert_eq!(padding(&inbox), MIN_PADDING, "a quiet inbox, message {i}");
    }
    let mut want = MIN_PADDING;
    for i in 4..40 {
        inbox.append(id(i), &entry(id(i), &text)).unwrap();
        let before = padding(&inbox);
        t += 100;
        inbox.pad(t);
        if before < want / 2 {
            want = (want * 2).min(MAX_PADDING);
            assert_eq!(padding(&inbox), want, "a busy inbox, message {i}");
        } else {
            assert_eq!(padding(&inbox), before, "enough left, message {i}");
        }
    }
    assert_eq!(want, MAX_PADDING);
}

#[test]
fn a_cursor_in_the_padding_belongs_to_a_replaced_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    inbox.append(id(1), &entry(id(1), "one")).unwrap();
    inbox.pad(now_ms());
    let (_, end) = read_from(inbox.path(), 0).unwrap();
    // At the end of the data: nothing new, and the cursor stays.
    let (none, start, same) = read_hot_from(inbox.path(), end).unwrap();
    assert_eq!((none.len(), start, same), (0, end, end));
    // Past it, inside the padding or beyond the file: read from the base, as for a
    // cursor past the end of an unpadded file.
    for past in [end + 1, end + 100, end + 2 * MIN_PADDING] {
        let (all, start, _) = read_hot_from(inbox.path(), past).unwrap();
        assert_eq!(
            (texts_of(&all), start),
            (vec!["one".to_owned()], 0),
            "{past}"
        );
    }
    assert_eq!(bounds(inbox.path()).unwrap(), (0, end));
}

/// A reader that opened the file before a clean close cut its padding off reads on
/// as if it had opened it after.
#[test]
fn a_reader_opened_before_the_padding_is_cut_off_reads_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    for i in 0..3 {
        inbox
            .append(id(i), &entry(id(i), &format!("m{i}")))
            .unwrap();
        inbox.pad(now_ms() + u64::from(i) * 100);
    }
    let path = inbox.path().to_owned();
    let (_, end) = read_from(&path, 0).unwrap();
    let mut seg = Segment::open(&path).unwrap().unwrap();
    assert!(seg.len > end + MIN_PADDING / 2);
    drop(inbox);
    assert_eq!(fs::metadata(&path).unwrap().len(), end);
    assert_eq!(seg.data_end().unwrap(), end);
    assert!(seg.reaches(end).unwrap());
    assert!(!seg.reaches(end + 1).unwrap());
    let mut lines = Vec::new();
    let (lo, hi) = (seg.header_len, seg.len);
    segment::scan_back(&mut seg.file, lo, hi, &mut |l: &[u8]| {
        lines.push(String::from_utf8_lossy(l).into_owned());
        true
    })
    .unwrap();
    assert_eq!(lines.len(), 3);
    assert!(lines[0].contains("\"m2\""), "{lines:?}");
}

fn texts_of(positioned: &[(InboxEntry, u64)]) -> Vec<String> {
    positioned
        .iter()
        .filter_map(|(e, _)| e.text.clone())
        .collect()
}

/// What a crash can leave in or past the padding: a line torn mid-write, bytes of a
/// later page that reached the disk before an earlier one, zeros where the file grew.
/// Readers stop at the data's end; opening the inbox cuts the rest off, and the next
/// line lands right after the last good one.
#[test]
fn what_a_crash_leaves_in_the_padding_is_cut_off_on_open() {
    let torn = br#"{"msg_id":"0202"#.to_vec();
    let late_page = [
        b" ".repeat(300),
        br#"x":1}"#.to_vec(),
        b"\n".to_vec(),
        serde_json::to_vec(&entry(id(9), "late")).unwrap(),
        b"\n".to_vec(),
    ]
    .concat();
    let zeros = vec![0u8; 5000];
    for (name, tail) in [("torn", torn), ("late page", late_page), ("zeros", zeros)] {
        let dir = tempfile::tempdir().unwrap();
        let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
        inbox.append(id(1), &entry(id(1), "whole")).unwrap();
        inbox.pad(now_ms());
        let path = inbox.path().to_owned();
        std::mem::forget(inbox); // a crash: no close
        let (_, whole) = read_from(&path, 0).unwrap();
        assert!(fs::metadata(&path).unwrap().len() > whole + 5000);
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        write_at(&f, &tail, whole).unwrap();
        drop(f);
        let (entries, end) = read_from(&path, 0).unwrap();
        assert_eq!(
            (texts(&entries), end),
            (vec!["whole".to_owned()], whole),
            "{name}"
        );
        let (newest, _) = read_newest(&path, 10, 100, None, |_| true).unwrap();
        if name != "late page" {
            // (Until the writer reopens, history may show a line from the late page.)
            assert_eq!(texts(&newest), ["whole"], "{name}");
        }
        let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
        assert_eq!(inbox.len(), 1, "{name}");
        assert_eq!(fs::metadata(&path).unwrap().len(), whole, "{name}: cut off");
        inbox.append(id(2), &entry(id(2), "next")).unwrap();
        inbox.pad(now_ms());
        let (entries, _) = read_from(&path, 0).unwrap();
        assert_eq!(texts(&entries), ["whole", "next"], "{name}");
        let (newest, _) = read_newest(&path, 10, 100, None, |_| true).unwrap();
        assert_eq!(texts(&newest), ["whole", "next"], "{name}");
    }
}

#[test]
fn a_failed_append_leaves_no_fragment() {
    let cases = [
        // A short write: part of the batch reached the file.
        (10, io::ErrorKind::StorageFull, true),
        (0, io::ErrorKind::StorageFull, true),
        (usize::MAX, io::ErrorKind::WriteZero, true),
        // Everything written, the sync failed.
        (usize::MAX, io::ErrorKind::Other, false),
        (37, io::ErrorKind::PermissionDenied, false),
    ];
    for (after, kind, retryable) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
        inbox.append(id(1), &entry(id(1), "first")).unwrap();
        let len = fs::metadata(inbox.path()).unwrap().len();
        inbox.fault = Some(Fault { after, kind });
        let err = inbox
            .append_many([
                (id(2), &entry(id(2), "lost")),
                (id(3), &entry(id(3), "too")),
            ])
            .unwrap_err();
        assert!(matches!(err, InboxError::Write { .. }), "{err}");
        assert_eq!(err.is_retryable(), retryable, "{kind:?}");
        assert_eq!(fs::metadata(inbox.path()).unwrap().len(), len, "{kind:?}");
        // Not indexed: the sender's retry is stored, and so is the next line, whole.
        assert_eq!(
            inbox.append(id(2), &entry(id(2), "retried")).unwrap(),
            Appended::New
        );
        inbox.append(id(4), &entry(id(4), "next")).unwrap();
        let (all, _) = read_from(inbox.path(), 0).unwrap();
        assert_eq!(texts(&all), ["first", "retried", "next"], "{kind:?}");
    }
}

#[test]
fn compaction_moves_consumed_lines_and_keeps_every_cursor_valid() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms())
        .unwrap()
        .with_compact_min_bytes(SMALL);
    fill(&mut inbox, 0, 400);
    let path = inbox.path().to_owned();
    let (before, end) = read_positioned_from(&path, 0).unwrap();
    assert_eq!(before.len(), 400);
    // The agent consumed the first 300; a follower is still at line 100.
    let consumed = before[299].1;
    let follower = before[99].1;
    set_consumed(dir.path(), consumed);
    assert!(inbox.compact(now_ms()).unwrap());
    assert_eq!(inbox.base(), consumed);
    #[cfg(unix)]
    for name in [INBOX_FILE, ARCHIVE_FILE, INDEX_FILE] {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(dir.path().join(name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{name}");
    }
    assert!(fs::metadata(&path).unwrap().len() < end - consumed + 64);
    assert_eq!(bounds(&path).unwrap(), (consumed, end));
    // Every cursor reads what it read before, at the same offsets.
    for cursor in [0, follower, consumed, before[350].1, end] {
        let (after, new_end) = read_positioned_from(&path, cursor).unwrap();
        let expected: Vec<_> = before
            .iter()
            .filter(|(_, e)| *e > cursor)
            .cloned()
            .collect();
        assert_eq!(after, expected, "cursor {cursor}");
        assert_eq!(new_end, end);
    }
    // Appends continue at the logical end.
    inbox.append(id(400), &entry(id(400), "new")).unwrap();
    let (tail, _) = read_from(&path, end).unwrap();
    assert_eq!(texts(&tail), ["new"]);
    // The history reads across both files, newest last.
    let (newest, more) = read_newest(&path, 3, 1000, None, |_| true).unwrap();
    assert!(more);
    assert_eq!(newest[2].text.as_deref(), Some("new"));
    assert!(newest[0].text.as_deref().unwrap().starts_with("m398 "));
    let (odd, _) = read_newest(&path, 200, 1000, None, |e| e.msg_id == id(5).to_string()).unwrap();
    assert_eq!(odd.len(), 1, "an archived message is found by a filter");
    // After a reopen the archived messages are still known (saved index).
    drop(inbox);
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    assert!(inbox.holds(&key(A), &id(0)));
    assert_eq!(
        inbox.append(id(0), &entry(id(0), "replay")).unwrap(),
        Appended::Duplicate
    );
    assert_eq!(inbox.len(), 401);
}

#[test]
fn unconsumed_lines_leave_the_hot_file_after_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms())
        .unwrap()
        .with_compact_min_bytes(SMALL);
    let old = now_ms() - HOT_RETENTION_MS - 1000;
    let pad = "y".repeat(1000);
    let batch: Vec<(MsgId, InboxEntry)> = (0..300)
        .map(|i| {
            let mut e = entry(id(i), &format!("old{i} {pad}"));
            e.received_at = old;
            (id(i), e)
        })
        .collect();
    inbox
        .append_many(batch.iter().map(|(i, e)| (*i, e)))
        .unwrap();
    inbox.append(id(300), &entry(id(300), "fresh")).unwrap();
    // Nothing consumed (no read.json).
    assert!(inbox.compact(now_ms()).unwrap());
    let (base, _) = bounds(inbox.path()).unwrap();
    let (hot, _) = read_from(inbox.path(), base).unwrap();
    assert_eq!(texts(&hot), ["fresh"]);
    let (all, _) = read_from(inbox.path(), 0).unwrap();
    assert_eq!(all.len(), 301, "still readable from the archive");
}

#[test]
fn the_index_forgets_what_no_envelope_can_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    let mut stale = entry(id(1), "old");
    stale.received_at = now_ms() - INDEX_TTL_MS - 1000;
    inbox.append(id(1), &stale).unwrap();
    inbox.append(id(2), &entry(id(2), "new")).unwrap();
    drop(inbox);
    let inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    assert!(!inbox.holds(&key(A), &id(1)));
    assert!(inbox.holds(&key(A), &id(2)));

    // Past the capacity the oldest go first.
    let mut index = Index::default();
    for n in 0..=u32::try_from(MAX_INDEX_ENTRIES).unwrap() {
        index.insert(key(A), id(n), u64::from(n));
    }
    let max = u32::try_from(MAX_INDEX_ENTRIES).unwrap();
    assert!(index.len() <= MAX_INDEX_ENTRIES && index.len() > MAX_INDEX_ENTRIES / 2);
    assert!(!index.contains(&key(A), &id(0)));
    assert!(index.contains(&key(A), &id(max)));
    // And the saved file, sorted, answers readers by binary search.
    index.fold();
    let mut f = File::create(dir.path().join(INDEX_FILE)).unwrap();
    index.write_to(&mut f).unwrap();
    drop(f);
    assert!(saved_index_has(dir.path(), &id(max)).unwrap());
    assert!(saved_index_has(dir.path(), &id(max - 5)).unwrap());
    assert!(!saved_index_has(dir.path(), &id(0)).unwrap());
    assert!(!saved_index_has(dir.path(), &id(max + 1)).unwrap());
    let reloaded = Index::load(&dir.path().join(INDEX_FILE)).unwrap();
    assert_eq!(reloaded.len(), index.len());
}

#[test]
fn a_compaction_that_crashed_before_the_swap_is_repaired_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms())
        .unwrap()
        .with_compact_min_bytes(SMALL);
    fill(&mut inbox, 0, 600);
    let (lines, end) = read_positioned_from(inbox.path(), 0).unwrap();
    set_consumed(dir.path(), lines[299].1);
    assert!(inbox.compact(now_ms()).unwrap());
    let path = inbox.path().to_owned();
    drop(inbox);
    // As if a second compaction copied lines to the archive and died before the
    // rename: the hot file still has them.
    let hot = fs::read(&path).unwrap();
    let nl = hot.iter().position(|b| *b == b'\n').unwrap();
    let mut archive = OpenOptions::new()
        .append(true)
        .open(dir.path().join(ARCHIVE_FILE))
        .unwrap();
    archive.write_all(&hot[nl + 1..nl + 1 + 5000]).unwrap();
    drop(archive);
    let (seen, e) = read_positioned_from(&path, 0).unwrap();
    assert_eq!((seen.len(), e), (600, end), "readers ignore the leftover");
    let inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    let (seen, _) = read_positioned_from(inbox.path(), 0).unwrap();
    assert_eq!(seen, lines);
    let arch = Segment::open(&dir.path().join(ARCHIVE_FILE))
        .unwrap()
        .unwrap();
    assert_eq!(arch.end(), inbox.base());
}

#[test]
fn reading_from_the_end_matches_reading_from_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    // Lines longer than a read chunk, and multi-byte characters on chunk boundaries.
    for i in 0..60u32 {
        let size = [10, 70_000, 300, 140_000, 5][i as usize % 5];
        let text = format!("{i} {}", "é→".repeat(size / 5));
        inbox.append(id(i), &entry(id(i), &text)).unwrap();
    }
    let (forward, _) = read_from(inbox.path(), 0).unwrap();
    let (back, more) = read_newest(inbox.path(), 100, 1000, None, |_| true).unwrap();
    assert!(!more);
    assert_eq!(back, forward);
    let (last, more) = read_newest(inbox.path(), 7, 1000, Some(&A.repeat(32)), |_| true).unwrap();
    assert!(more);
    assert_eq!(last, forward[53..]);
    let (none, _) = read_newest(inbox.path(), 7, 1000, Some(&B.repeat(32)), |_| true).unwrap();
    assert!(none.is_empty());
    // The scan bound stops early and says there may be more.
    let (some, more) = read_newest(inbox.path(), 100, 4, None, |_| true).unwrap();
    assert_eq!((some.len(), more), (4, true));
}

/// A reader polling with its cursor while the writer appends and compacts again and
/// again (the reader rule, in another thread rather than another process: the file
/// system does the same) sees every message once, in order.
#[test]
fn a_reader_sees_every_line_once_while_the_writer_compacts() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms())
        .unwrap()
        .with_compact_min_bytes(SMALL);
    let path = inbox.path().to_owned();
    let total: u32 = 1500;
    let reader = std::thread::spawn(move || {
        let mut cursor = 0;
        let mut seen: Vec<u32> = Vec::new();
        let deadline = Instant::now() + std::time::Duration::from_secs(60);
        while seen.len() < total as usize && Instant::now() < deadline {
            let (entries, end) = read_from(&path, cursor).unwrap();
            for e in entries {
                let n = e.text.unwrap().split(' ').next().unwrap()[1..]
                    .parse()
                    .unwrap();
                seen.push(n);
            }
            cursor = end;
        }
        seen
    });
    let mut compactions = 0;
    for start in (0..total).step_by(100) {
        fill(&mut inbox, start, 100);
        // The agent consumes all but the newest 50.
        let (_, end) = bounds(inbox.path()).unwrap();
        set_consumed(dir.path(), end.saturating_sub(50 * 1040));
        if inbox.compact(now_ms()).unwrap() {
            compactions += 1;
        }
    }
    let seen = reader.join().unwrap();
    assert!(compactions >= 3, "{compactions} compactions");
    assert_eq!(seen, (0..total).collect::<Vec<_>>());
}

#[test]
fn a_trimmed_archive_keeps_its_newest_half_and_cursors_resume_at_its_base() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms())
        .unwrap()
        .with_compact_min_bytes(SMALL);
    fill(&mut inbox, 0, 400);
    let path = inbox.path().to_owned();
    let (lines, end) = read_positioned_from(&path, 0).unwrap();
    set_consumed(dir.path(), lines[299].1);
    assert!(inbox.compact(now_ms()).unwrap());
    let archive = dir.path().join(ARCHIVE_FILE);
    let before = fs::metadata(&archive).unwrap().len();
    trim_archive(&archive, before / 2).unwrap();
    let kept = Segment::open(&archive).unwrap().unwrap();
    assert!(kept.len <= before / 4 + 2048, "{} of {before}", kept.len);
    assert!(kept.base > 0);
    assert_eq!(kept.end(), inbox.base(), "still ends at the hot base");
    // A cursor from before the trim resumes at the archive's base: the lines after it,
    // at their old offsets.
    let (seen, new_end) = read_positioned_from(&path, 0).unwrap();
    assert_eq!(new_end, end);
    let expected: Vec<_> = lines
        .iter()
        .filter(|(_, e)| *e > kept.base)
        .cloned()
        .collect();
    assert_eq!(seen, expected);
    let (newest, _) = read_newest(&path, 500, 1000, None, |_| true).unwrap();
    assert_eq!(newest.len(), expected.len());
}

/// A real full file system: Linux only (tmpfs, mount).
#[cfg(target_os = "linux")]
mod full_disk {
    use super::*;

    /// A 1 MiB tmpfs, unmounted on drop; `None` (SKIPPED) where it cannot be mounted
    /// (it needs root), which fails under CI.
    fn small_tmpfs() -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(dir.path())
            .output();
        let ok = mounted.as_ref().is_ok_and(|o| o.status.success());
        if !ok {
            let why = match &mounted {
                Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_owned(),
                Err(e) => e.to_string(),
            };
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the tmpfs test: mount failed: {why}"
            );
            eprintln!("SKIPPED: cannot mount a tmpfs: {why}");
            return None;
        }
        Some(Tmpfs(dir))
    }

    struct Tmpfs(tempfile::TempDir);

    impl Tmpfs {
        fn path(&self) -> &Path {
            self.0.path()
        }

        /// An inbox on it holding one line, "before".
        fn inbox_with_one_line(&self) -> Inbox {
            let mut inbox = Inbox::open(&self.path().join("session"), now_ms()).unwrap();
            inbox.append(id(0), &entry(id(0), "before")).unwrap();
            inbox
        }

        /// Fills the file system with `filler`.
        fn fill(&self) {
            let mut f = File::create(self.path().join("filler")).unwrap();
            let block = vec![0u8; 4096];
            loop {
                match f.write(&block) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::StorageFull => break,
                    Err(e) => panic!("filling: {e}"),
                }
            }
        }

        fn free(&self) {
            fs::remove_file(self.path().join("filler")).unwrap();
        }
    }

    impl Drop for Tmpfs {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount")
                .arg(self.path())
                .status();
        }
    }

    #[test]
    fn a_full_disk_is_retryable_and_leaves_no_fragment() {
        let Some(mnt) = small_tmpfs() else {
            return;
        };
        let mut inbox = mnt.inbox_with_one_line();
        mnt.fill();
        let len = fs::metadata(inbox.path()).unwrap().len();
        // A batch larger than any free page left in the inbox's last block.
        let big = "z".repeat(20_000);
        let err = inbox.append(id(1), &entry(id(1), &big)).unwrap_err();
        assert!(err.is_retryable(), "{err}");
        assert_eq!(
            fs::metadata(inbox.path()).unwrap().len(),
            len,
            "no fragment"
        );
        let (lines, _) = read_from(inbox.path(), 0).unwrap();
        assert_eq!(texts(&lines), ["before"]);
        // Space again: the retry goes through, every line readable.
        mnt.free();
        assert_eq!(
            inbox.append(id(1), &entry(id(1), &big)).unwrap(),
            Appended::New
        );
        inbox.append(id(2), &entry(id(2), "after")).unwrap();
        let (lines, _) = read_from(inbox.path(), 0).unwrap();
        assert_eq!(
            texts(&lines),
            ["before".to_owned(), big, "after".to_owned()]
        );
        drop(inbox);
    }

    /// The padding on a full disk: growing it fails and leaves the file as it was; the
    /// padding already there is room the next small lines need no new space for; a batch
    /// larger than it fails like an append, and is cut off with the padding.
    #[test]
    fn on_a_full_disk_the_padding_gives_up_cleanly_and_still_takes_small_lines() {
        let Some(mnt) = small_tmpfs() else {
            return;
        };
        let mut inbox = mnt.inbox_with_one_line();
        let data = fs::metadata(inbox.path()).unwrap().len();
        mnt.fill();
        inbox.pad(now_ms());
        assert_eq!(
            fs::metadata(inbox.path()).unwrap().len(),
            data,
            "no half padding"
        );
        mnt.free();
        inbox.pad(now_ms());
        let padded = fs::metadata(inbox.path()).unwrap().len();
        assert_eq!(padded, data + MIN_PADDING);
        mnt.fill();
        inbox.append(id(1), &entry(id(1), "within")).unwrap();
        assert_eq!(fs::metadata(inbox.path()).unwrap().len(), padded);
        let big = "z".repeat(100_000);
        let err = inbox.append(id(2), &entry(id(2), &big)).unwrap_err();
        assert!(err.is_retryable(), "{err}");
        let (lines, end) = read_from(inbox.path(), 0).unwrap();
        assert_eq!(texts(&lines), ["before", "within"]);
        assert_eq!(
            fs::metadata(inbox.path()).unwrap().len(),
            end,
            "no fragment"
        );
        mnt.free();
        inbox.append(id(2), &entry(id(2), &big)).unwrap();
        inbox.pad(now_ms());
        let (lines, _) = read_from(inbox.path(), 0).unwrap();
        assert_eq!(
            texts(&lines),
            ["before".to_owned(), "within".to_owned(), big]
        );
        drop(inbox);
    }
}

/// `cargo test -p interlink-store --lib inbox_bench -- --ignored --nocapture`: opening
/// and querying an inbox with 100,000 messages of history.
#[test]
#[ignore = "benchmark"]
fn inbox_bench_open_and_history_with_100k_messages() {
    let dir = tempfile::tempdir().unwrap();
    let mut inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    let n: u32 = 100_000;
    let t = Instant::now();
    let all: Vec<(MsgId, InboxEntry)> = (0..n)
        .map(|i| {
            let sender = if i % 100 == 0 { B } else { A };
            (
                id(i),
                entry_from(sender, id(i), &format!("message {i} {}", "t".repeat(200))),
            )
        })
        .collect();
    for chunk in all.chunks(1000) {
        inbox
            .append_many(chunk.iter().map(|(i, e)| (*i, e)))
            .unwrap();
    }
    let (_, end) = bounds(inbox.path()).unwrap();
    set_consumed(dir.path(), end - 20_000);
    drop(inbox);
    eprintln!("built {n} messages in {:?}", t.elapsed());
    let t = Instant::now();
    let inbox = Inbox::open(dir.path(), now_ms()).unwrap(); // compacts
    eprintln!("first open (compacting) {:?}", t.elapsed());
    drop(inbox);
    let t = Instant::now();
    let inbox = Inbox::open(dir.path(), now_ms()).unwrap();
    let open = t.elapsed();
    assert_eq!(inbox.len(), n as usize);
    eprintln!(
        "open: {open:?} (index {} entries, hot base {})",
        inbox.len(),
        inbox.base()
    );
    let t = Instant::now();
    let index = Index::load(&dir.path().join(INDEX_FILE)).unwrap();
    eprintln!(
        "of which the index: {:?} ({} entries)",
        t.elapsed(),
        index.len()
    );
    let t = Instant::now();
    let (last, _) = read_newest(inbox.path(), 20, 10_000, None, |_| true).unwrap();
    eprintln!("newest 20: {:?}", t.elapsed());
    assert_eq!(last.len(), 20);
    let b = B.repeat(32);
    let t = Instant::now();
    let (from_b, _) = read_newest(inbox.path(), 20, 10_000, Some(&b), |_| true).unwrap();
    eprintln!(
        "newest 20 of a 1% peer: {:?} ({} found)",
        t.elapsed(),
        from_b.len()
    );
    // One routine compaction: the agent consumed the newest 1.1 MiB of messages.
    let mut inbox = inbox;
    fill(&mut inbox, n, 1100);
    let (_, end) = bounds(inbox.path()).unwrap();
    set_consumed(dir.path(), end);
    let t = Instant::now();
    assert!(inbox.compact(now_ms()).unwrap());
    eprintln!(
        "a compaction of 1.1 MiB with a 100,000-entry index: {:?}",
        t.elapsed()
    );
}
