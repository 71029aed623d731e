use super::*;

#[test]
fn hook_input() {
    let id = session_from_hook_input(r#"{"session_id":"abc-1","hook_event_name":"Stop"}"#).unwrap();
    assert_eq!(id.as_str(), "abc-1");
    assert!(session_from_hook_input("{}").is_err());
    assert!(session_from_hook_input("not json").is_err());
    assert!(session_from_hook_input(r#"{"session_id":""}"#).is_err());
}

#[test]
fn times_out_and_a_second_waiter_gives_up() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path());
    let s = SessionId::new("w").unwrap();
    let out = wait(&home, &s, Some(Duration::from_millis(50))).unwrap();
    assert!(matches!(out, Outcome::TimedOut));
    let dir = home.session(&s).unwrap();
    let held = std::fs::File::open(dir.wait_lock()).unwrap();
    held.lock().unwrap();
    let out = wait(&home, &s, Some(Duration::from_secs(5))).unwrap();
    assert!(matches!(out, Outcome::AlreadyWaiting));
}

fn message(n: u8) -> (interlink_core::MsgId, InboxEntry) {
    let id = interlink_core::MsgId::from_bytes([n; 16]);
    let e = interlink_store::read_state::testing::entry(
        id,
        interlink_core::wire::EnvelopeKind::Message,
    );
    (id, e)
}

#[test]
fn each_message_wakes_the_agent_once() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path());
    let s = SessionId::new("once").unwrap();
    let dir = home.session(&s).unwrap();
    create_private_dir(dir.path()).unwrap();
    let mut inbox =
        interlink_store::inbox::Inbox::open(dir.path(), interlink_net::Clock::system().now_ms())
            .unwrap();
    let (one, e) = message(1);
    inbox.append(one, &e).unwrap();
    let short = Some(Duration::from_millis(250));

    let Outcome::Messages { new, still_unread } = wait(&home, &s, short).unwrap() else {
        panic!("the first message wakes the agent");
    };
    assert_eq!((new.len(), still_unread), (1, 0));
    // The agent stopped without acknowledging: the hook runs again and waits.
    assert!(matches!(wait(&home, &s, short).unwrap(), Outcome::TimedOut));

    // A new message wakes it, and the old one is counted.
    let (two, e) = message(2);
    inbox.append(two, &e).unwrap();
    let Outcome::Messages { new, still_unread } = wait(&home, &s, short).unwrap() else {
        panic!("a new message wakes the agent");
    };
    assert_eq!(new[0].msg_id, two.to_string());
    assert_eq!((new.len(), still_unread), (1, 1));
    let text = render_messages(&home, &new, still_unread);
    assert!(
        text.contains("1 new message for this session (1 earlier message still unread)"),
        "{text}"
    );
    assert!(
        text.contains(&format!("text {two}")) && !text.contains(&format!("text {one}")),
        "{text}"
    );

    // Acknowledged messages leave the file, so it only holds live ids.
    ReadState::load(&dir).unwrap().acknowledge(&[one]).unwrap();
    assert!(matches!(wait(&home, &s, short).unwrap(), Outcome::TimedOut));
    let (three, e) = message(3);
    inbox.append(three, &e).unwrap();
    assert!(matches!(
        wait(&home, &s, short).unwrap(),
        Outcome::Messages { .. }
    ));
    let kept = load_woken(&dir.woken());
    let aa = "aa".repeat(32);
    assert_eq!(
        kept,
        [format!("{aa}:{two}"), format!("{aa}:{three}")]
            .into_iter()
            .collect()
    );

    // Another sender's message under an announced id is a new message: it wakes.
    let (_, mut copy) = message(2);
    copy.sender = "bb".repeat(32);
    inbox.append(two, &copy).unwrap();
    let Outcome::Messages { new, still_unread } = wait(&home, &s, short).unwrap() else {
        panic!("a second sender's message under the same id wakes the agent");
    };
    assert_eq!(
        (new.len(), new[0].sender.as_str()),
        (1, copy.sender.as_str())
    );
    assert_eq!(still_unread, 2);
}
