use interlink_core::{MsgId, wire::EnvelopeKind};
use interlink_store::inbox::Inbox;

use super::*;

fn entry(id: MsgId, text: &str) -> InboxEntry {
    InboxEntry {
        msg_id: id.to_string(),
        sender: "aa".repeat(32),
        sender_fingerprint: "0000-0000-0000".into(),
        sender_session: "s1".into(),
        reply_to: format!("{}#s1", "aa".repeat(32)),
        kind: EnvelopeKind::Message,
        task_id: Some("t1".into()),
        status: None,
        in_reply_to: None,
        also_about: Vec::new(),
        sent_at: 0,
        received_at: 1,
        text: Some(text.into()),
        name: None,
        group: None,
    }
}

#[test]
fn reads_the_only_session_and_continues_from_a_cursor() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path());
    let no_env = |_: &str| None;
    let opts = |from| Args {
        session: None,
        json: true,
        from,
    };
    let err = run(&home, &opts(0), no_env, &mut Vec::new(), &mut Vec::new());
    assert!(format!("{:#}", err.unwrap_err()).contains("--session"));

    let dir = home.session(&SessionId::new("s").unwrap()).unwrap();
    let mut inbox = Inbox::open(dir.path(), interlink_net::Clock::system().now_ms()).unwrap();
    let a = MsgId::from_bytes([1; 16]);
    inbox.append(a, &entry(a, "one\x1b[2J")).unwrap();
    let (mut out, mut progress) = (Vec::new(), Vec::new());
    run(&home, &opts(0), no_env, &mut out, &mut progress).unwrap();
    let line: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(line["text"], "one\x1b[2J");
    assert_eq!(line["petname"], serde_json::Value::Null);
    let progress = String::from_utf8(progress).unwrap();
    let next: u64 = progress.rsplit(' ').next().unwrap().trim().parse().unwrap();
    let mut out = Vec::new();
    run(&home, &opts(next), no_env, &mut out, &mut Vec::new()).unwrap();
    assert!(out.is_empty());

    // Human form: escapes control characters.
    let text = render(&entry(a, "one\x1b[2J\ntwo"), "alice", false);
    assert!(text.contains("alice 0000-0000-0000  session s1"), "{text}");
    assert!(text.contains("    one\\u{1b}[2J\n    two\n"), "{text}");
    assert!(text.contains("task t1"), "{text}");
    assert!(render(&entry(a, "x"), "alice", true).starts_with("* "));
    // A pairing line says what it is, on one line, with no empty body.
    let mut accept = entry(a, "");
    accept.kind = EnvelopeKind::PairAccept;
    accept.text = None;
    accept.name = Some("bob".into());
    let text = render(&accept, "bob", false);
    assert!(
        text.ends_with("[accepted your pair request (suggests the name \"bob\")]\n"),
        "{text}"
    );
}

#[test]
fn without_a_session_the_latest_inbox_is_read_and_the_others_named() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path());
    let no_env = |_: &str| None;
    let write = |session: &str, n: u8| {
        let dir = home.session(&SessionId::new(session).unwrap()).unwrap();
        let mut inbox = Inbox::open(dir.path(), interlink_net::Clock::system().now_ms()).unwrap();
        let id = MsgId::from_bytes([n; 16]);
        inbox.append(id, &entry(id, session)).unwrap();
    };
    write("old", 1);
    std::thread::sleep(std::time::Duration::from_millis(20));
    write("new", 2);
    let opts = |session: Option<&str>| Args {
        session: session.map(str::to_owned),
        json: false,
        from: 0,
    };
    let (mut out, mut progress) = (Vec::new(), Vec::new());
    run(&home, &opts(None), no_env, &mut out, &mut progress).unwrap();
    let (out, progress) = (
        String::from_utf8(out).unwrap(),
        String::from_utf8(progress).unwrap(),
    );
    assert!(out.contains("    new\n"), "{out}");
    assert!(progress.contains("the others: old"), "{progress}");
    // Unread until its agent acknowledged it.
    assert!(out.starts_with("* "), "{out}");
    assert!(progress.contains("1 message(s), 1 unread"), "{progress}");
    let err = run(
        &home,
        &opts(Some("nope")),
        no_env,
        &mut Vec::new(),
        &mut Vec::new(),
    );
    let err = format!("{:#}", err.unwrap_err());
    assert!(
        err.contains("session nope has no inbox") && err.contains("new, old"),
        "{err}"
    );
}
