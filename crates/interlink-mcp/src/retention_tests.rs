use std::time::Duration;

use interlink_core::MsgId;
use interlink_core::wire::EnvelopeKind;
use interlink_store::inbox::{Inbox, InboxEntry};

use super::*;

fn entry(id: MsgId) -> InboxEntry {
    InboxEntry {
        msg_id: id.to_string(),
        sender: "aa".repeat(32),
        sender_fingerprint: "0000-0000-0000".into(),
        sender_session: "s1".into(),
        reply_to: format!("{}#s1", "aa".repeat(32)),
        kind: EnvelopeKind::Message,
        task_id: None,
        status: None,
        in_reply_to: None,
        also_about: Vec::new(),
        sent_at: 0,
        received_at: 1,
        text: Some("hi".into()),
        name: None,
        group: None,
    }
}

#[test]
fn only_ended_idle_read_sessions_go() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path());
    let make = |id: &str, unread: bool| {
        let dir = home.session(&SessionId::new(id).unwrap()).unwrap();
        let mut inbox = Inbox::open(dir.path(), interlink_net::Clock::system().now_ms()).unwrap();
        if unread {
            let m = MsgId::from_bytes([1; 16]);
            inbox.append(m, &entry(m)).unwrap();
        }
        dir
    };
    make("old-read", false);
    make("old-unread", true);
    make("fresh", false);
    let held = make("old-held", false);
    let _lock = held
        .claim("mcp", interlink_net::Clock::system().now_ms())
        .unwrap();
    let me = SessionId::new("me").unwrap();
    make("me", false);
    let now = SystemTime::now();
    // Nothing is old yet.
    assert!(sweep(&home, &me, now, interlink_net::Clock::system()).is_empty());
    let later = now + Duration::from_millis(RETENTION_MS + 60_000);
    // "fresh" had a change just before the sweep.
    std::fs::write(home.sessions().join("fresh").join("note"), b"x").unwrap();
    let f = std::fs::File::options()
        .write(true)
        .open(home.sessions().join("fresh").join("note"))
        .unwrap();
    f.set_modified(later - Duration::from_secs(60)).unwrap();
    let removed = sweep(&home, &me, later, interlink_net::Clock::system());
    assert_eq!(removed, vec!["old-read".to_owned()]);
    for kept in ["old-unread", "old-held", "fresh", "me"] {
        assert!(home.sessions().join(kept).is_dir(), "{kept} kept");
    }
}
