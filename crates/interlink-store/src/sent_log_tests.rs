use interlink_core::Identity;

use super::*;

fn entry(id: usize, to: &IdentityKey) -> SentEntry {
    SentEntry {
        msg_id: format!("{id:032x}"),
        to_key: to.to_hex(),
        to_session: "s".into(),
        state: State::Queued,
        task_id: None,
        status: None,
        in_reply_to: None,
        text: String::new(),
        truncated: false,
        sent_at: id as u64,
        delivered_at: None,
        read_at: None,
        not_kept: None,
        held_by: None,
        group: None,
        thread: None,
    }
}

fn addr(id: &IdentityKey, session: &str) -> SessionAddr {
    SessionAddr {
        key: *id,
        session: interlink_core::SessionId::new(session).unwrap(),
    }
}

#[test]
fn a_later_state_without_a_delivered_receipt_sets_the_delivery_time() {
    let bob = Identity::from_seed(&[2; 32]).public();
    let mut log = SentLog::default();
    for i in 0..3 {
        log.record(entry(i, &bob));
    }
    let id = |i: usize| format!("{i:032x}");
    // Queued → read: delivered then, too.
    assert!(log.mark_read(&id(0), &bob, 7));
    let e = log.get(&id(0)).unwrap();
    assert_eq!(
        (e.state, e.delivered_at, e.read_at),
        (State::Read, Some(7), Some(7))
    );
    // Queued → host_queued: likewise; the late delivered receipt changes nothing.
    assert!(log.mark_host_queued(&id(1), &bob, 8));
    assert!(!log.mark_delivered(&id(1), &addr(&bob, "s"), 9));
    assert!(log.mark_read(&id(1), &bob, 10));
    let e = log.get(&id(1)).unwrap();
    assert_eq!(
        (e.state, e.delivered_at, e.read_at),
        (State::Read, Some(8), Some(10))
    );
    // Delivered first: the later states keep its time.
    assert!(log.mark_delivered(&id(2), &addr(&bob, "s"), 3));
    assert!(log.mark_host_queued(&id(2), &bob, 4));
    assert!(log.mark_read(&id(2), &bob, 5));
    assert_eq!(log.get(&id(2)).unwrap().delivered_at, Some(3));
}

/// A group message is one entry per copy; its thread finds them all, and each copy
/// moves on by its own receipts.
#[test]
fn a_group_thread_lists_its_copies() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = SessionDir::at(tmp.path());
    let bob = Identity::from_seed(&[2; 32]).public();
    let carol = Identity::from_seed(&[3; 32]).public();
    let thread = "ab".repeat(16);
    let mut log = SentLog::default();
    for (i, to) in [(1, &bob), (2, &carol)] {
        let mut e = entry(i, to);
        e.group = Some("team".into());
        e.thread = Some(thread.clone());
        log.record(e);
    }
    log.record(entry(3, &bob));
    assert!(log.mark_delivered(&format!("{:032x}", 1), &addr(&bob, "s"), 5));
    let states: Vec<(String, State)> = log
        .in_thread(&thread)
        .map(|e| (e.to_key.clone(), e.state))
        .collect();
    assert_eq!(
        states,
        [
            (bob.to_hex(), State::Delivered),
            (carol.to_hex(), State::Queued)
        ]
    );
    log.save(&dir).unwrap();
    let again = SentLog::load(&dir);
    assert_eq!(again.in_thread(&thread).count(), 2);
    assert_eq!(again.get(&format!("{:032x}", 3)).unwrap().thread, None);
}

#[test]
fn states_move_forward_and_the_log_is_bounded_and_saved() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = SessionDir::at(tmp.path());
    let bob = Identity::from_seed(&[2; 32]).public();
    let eve = Identity::from_seed(&[3; 32]).public();
    let mut log = SentLog::load(&dir);
    for i in 0..=MAX_SENT {
        log.record(entry(i, &bob));
    }
    assert!(log.get(&format!("{:032x}", 0)).is_none());
    let id = format!("{:032x}", 5);
    // A read receipt signed by someone else does not count.
    assert!(!log.mark_read(&id, &eve, 1));
    // Nor a delivered receipt from another identity, or another session of bob's.
    assert!(!log.mark_delivered(&id, &addr(&eve, "s"), 1));
    assert!(!log.mark_delivered(&id, &addr(&bob, "other"), 1));
    assert!(log.mark_delivered(&id, &addr(&bob, "s"), 1));
    assert!(!log.mark_host_queued(&id, &eve, 2));
    assert!(log.mark_host_queued(&id, &bob, 2));
    assert!(log.mark_read(&id, &bob, 2));
    assert!(!log.mark_host_queued(&id, &bob, 3));
    // Read never goes back to delivered.
    assert!(!log.mark_delivered(&id, &addr(&bob, "s"), 3));
    assert_eq!(log.get(&id).unwrap().delivered_at, Some(1));
    log.save(&dir).unwrap();
    assert!(!log.is_dirty());
    let again = SentLog::load(&dir);
    assert_eq!(again.get(&id).unwrap().state, State::Read);
    assert_eq!(again.iter().count(), MAX_SENT);

    let mut e = entry(9, &bob);
    e.set_text(&"é".repeat(MAX_SENT_TEXT));
    assert!(e.truncated && e.text.len() <= MAX_SENT_TEXT);
}

#[test]
fn an_id_recorded_again_replaces_its_entry_and_an_evicted_id_is_forgotten() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = SessionDir::at(tmp.path());
    let bob = Identity::from_seed(&[2; 32]).public();
    let mut log = SentLog::default();
    for i in 0..MAX_SENT {
        log.record(entry(i, &bob));
    }
    // Recorded again (a queued copy receipted, say): one entry, now the newest.
    let mut again = entry(3, &bob);
    again.state = State::Delivered;
    log.record(again);
    assert_eq!(log.iter().count(), MAX_SENT);
    assert_eq!(log.iter().filter(|e| e.sent_at == 3).count(), 1);
    assert_eq!(log.iter().last().unwrap().state, State::Delivered);
    // The oldest is pushed out by the next one, and with it every way to find it.
    let oldest = format!("{:032x}", 0);
    log.record(entry(MAX_SENT, &bob));
    assert!(log.get(&oldest).is_none());
    assert!(!log.mark_delivered(&oldest, &addr(&bob, "s"), 1));
    // Sent again under the same id after it was pushed out: found again.
    log.record(entry(0, &bob));
    assert!(log.mark_delivered(&oldest, &addr(&bob, "s"), 1));
    // The index holds what the log holds, no more: it is bounded with it.
    assert_eq!(log.ids.len(), MAX_SENT);
    assert!(log.entries.iter().all(|e| log.ids.contains(&e.msg_id)));
    // A file that holds an id twice (written by hand, say) loads as one entry each,
    // the later one kept.
    let mut twice: VecDeque<SentEntry> = [entry(7, &bob), entry(8, &bob)].into();
    let mut later = entry(7, &bob);
    later.state = State::Read;
    twice.push_back(later);
    let file = File {
        version: VERSION,
        sent: twice,
    };
    SentLog::write(&dir, &serde_json::to_vec(&file).unwrap()).unwrap();
    let loaded = SentLog::load(&dir);
    assert_eq!(loaded.iter().count(), 2);
    assert_eq!(
        loaded.get(&format!("{:032x}", 7)).unwrap().state,
        State::Read
    );
    assert!(!loaded.is_dirty());
}
