use interlink_core::{MsgId, wire::EnvelopeKind};
use interlink_store::{
    inbox::{Inbox, InboxEntry},
    sent_log::{SentEntry, SentLog, State},
};

use super::*;

const ALICE: &str = "aa";
const BOB: &str = "bb";

fn id(n: u32) -> MsgId {
    let mut b = [0; 16];
    b[..4].copy_from_slice(&n.to_be_bytes());
    MsgId::from_bytes(b)
}

fn received_entry(sender: &str, n: u32, text: &str, at: u64) -> InboxEntry {
    InboxEntry {
        msg_id: id(n).to_string(),
        sender: sender.repeat(32),
        sender_fingerprint: "0000-0000-0000".into(),
        sender_session: "theirs".into(),
        reply_to: format!("{}#theirs", sender.repeat(32)),
        kind: EnvelopeKind::Message,
        task_id: None,
        status: None,
        in_reply_to: None,
        also_about: Vec::new(),
        sent_at: at,
        received_at: at,
        text: Some(text.into()),
        name: None,
        group: None,
    }
}

fn sent_entry(to: &str, n: u32, text: &str, at: u64, state: State) -> SentEntry {
    SentEntry {
        msg_id: id(n).to_string(),
        to_key: to.repeat(32),
        to_session: "theirs".into(),
        state,
        task_id: None,
        status: None,
        in_reply_to: None,
        text: text.into(),
        truncated: false,
        sent_at: at,
        delivered_at: None,
        read_at: None,
        not_kept: None,
        held_by: None,
        group: None,
        thread: None,
    }
}

/// A home whose `session` received `received` and sent `sent`.
fn fill(home: &Home, session: &str, received: &[InboxEntry], sent: &[SentEntry]) {
    let dir = home
        .session(&interlink_core::SessionId::new(session).unwrap())
        .unwrap();
    let mut inbox = Inbox::open(dir.path(), 1).unwrap();
    let ids: Vec<(MsgId, &InboxEntry)> = received
        .iter()
        .map(|e| (e.msg_id.parse().unwrap(), e))
        .collect();
    inbox
        .append_many(ids.iter().map(|(i, e)| (*i, *e)))
        .unwrap();
    let mut log = SentLog::load(&dir);
    for e in sent {
        log.record(e.clone());
    }
    log.save(&dir).unwrap();
}

fn home() -> (tempfile::TempDir, Home) {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path().join("home"));
    std::fs::create_dir_all(home.path()).unwrap();
    (tmp, home)
}

#[test]
fn search_finds_words_in_both_directions_newest_first_with_filters() {
    let (_tmp, home) = home();
    fill(
        &home,
        "s1",
        &[
            received_entry(ALICE, 1, "The Schema migration is done", 1_000),
            received_entry(BOB, 2, "lunch?", 2_000),
            received_entry(BOB, 3, "Grüße: MIGRATION of the schema, part 2", 3_000),
        ],
        &[sent_entry(
            ALICE,
            4,
            "migration: please review the schema",
            2_500,
            State::Delivered,
        )],
    );
    fill(
        &home,
        "s2",
        &[],
        &[sent_entry(BOB, 5, "schema", 500, State::Queued)],
    );

    let (found, more) = search(&home, &Query::words("schema MIGRATION"));
    assert!(!more);
    let ids: Vec<&str> = found.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(
        ids,
        [id(3).to_string(), id(4).to_string(), id(1).to_string()],
        "{found:#?}"
    );
    assert_eq!(found[0].direction, Direction::In);
    assert_eq!(found[0].state, "received");
    assert_eq!(found[1].direction, Direction::Out);
    assert_eq!(found[1].state, "delivered");
    assert_eq!(found[1].session, "s1");

    // A word that is not ASCII is matched case aside on the decoded text.
    let (found, _) = search(&home, &Query::words("GRÜSSE"));
    assert!(found.is_empty(), "ß and SS are different words here");
    let (found, _) = search(&home, &Query::words("grüße"));
    assert_eq!(found.len(), 1);

    // By peer (key start), session, state, time; and a limit.
    let mut q = Query::words("schema");
    q.peer = Some("bbbb".into());
    let (found, _) = search(&home, &q);
    assert_eq!(found.iter().map(|m| m.at).collect::<Vec<_>>(), [3_000, 500]);
    q.session = Some("s2".into());
    assert_eq!(search(&home, &q).0.len(), 1);
    let mut q = Query::words("");
    q.state = Some("queued".into());
    assert_eq!(search(&home, &q).0[0].id, id(5).to_string());
    let mut q = Query::words("");
    q.since = Some(2_000);
    assert_eq!(search(&home, &q).0.len(), 3);
    let mut q = Query::words("");
    q.limit = 2;
    let (found, more) = search(&home, &q);
    assert_eq!(found.len(), 2);
    assert!(more);
}

#[test]
fn the_line_prefilter_never_drops_a_match() {
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(line_may_hold(
        br#"{"text":"Hello World"}"#,
        &words(&["world"])
    ));
    assert!(!line_may_hold(br#"{"text":"Hello"}"#, &words(&["world"])));
    // Words JSON would escape, or not ASCII, are left to the decoded text.
    assert!(line_may_hold(br#"{"text":"a \"q\""}"#, &words(&["\"q\""])));
    assert!(line_may_hold(br#"{"text":"x"}"#, &words(&["ä"])));
    assert!(contains_ascii_nocase(b"xxABCxx", b"abc"));
    assert!(!contains_ascii_nocase(b"xxABxCx", b"abc"));
    assert!(contains_ascii_nocase(b"abc", b""));
}

/// A home with 100 sessions of 1,000 messages each (half received, half sent): how long
/// a search for a rare word, a common word, and a filter alone take. On demand:
/// `cargo test -p interlink-p2p --release bench_search -- --ignored --nocapture`.
/// With `INTERLINK_BENCH_HOME=<dir>` the home is written there and kept (to point
/// `interlink-p2p ui` at it).
#[test]
#[ignore = "benchmark: run on demand"]
fn bench_search_100k() {
    let (_tmp, home) = home();
    let home = match std::env::var_os("INTERLINK_BENCH_HOME") {
        Some(dir) => Home::new(std::path::PathBuf::from(dir)),
        None => home,
    };
    let words = [
        "deploy", "schema", "review", "tests", "flaky", "merge", "auth", "docs",
    ];
    let mut n = 0u32;
    for s in 0..100 {
        let mut received = Vec::new();
        let mut sent = Vec::new();
        for i in 0..500u32 {
            n += 1;
            let w = words[(n as usize) % words.len()];
            let text = format!(
                "message {n}: could you look at the {w} change in src/module_{i}.rs before \
                 the next release? It touches the {w} path and the tests around it."
            );
            received.push(received_entry(ALICE, n, &text, u64::from(n)));
            n += 1;
            sent.push(sent_entry(BOB, n, &text, u64::from(n), State::Delivered));
        }
        // The sent log keeps its newest MAX_SENT.
        fill(&home, &format!("session-{s:03}"), &received, &sent);
    }
    n += 1;
    fill(
        &home,
        "session-rare",
        &[received_entry(
            ALICE,
            n,
            "the zeppelin word appears once",
            u64::from(n),
        )],
        &[],
    );
    for (what, query) in [
        ("rare word", Query::words("zeppelin")),
        ("common word (limit 50)", Query::words("schema")),
        (
            "the page's overview (newest 200, no words)",
            Query {
                limit: 200,
                ..Query::default()
            },
        ),
        ("filter only: state read", {
            let mut q = Query::words("");
            q.state = Some("read".into());
            q
        }),
    ] {
        let mut times = Vec::new();
        for _ in 0..7 {
            let start = std::time::Instant::now();
            let (found, _) = search(&home, &query);
            times.push(start.elapsed());
            assert!(what.starts_with("filter") || !found.is_empty(), "{what}");
        }
        times.sort();
        println!(
            "search 100k, {what}: median {:?}, best {:?}",
            times[3], times[0]
        );
    }
}

#[test]
fn a_thread_says_which_received_messages_the_agent_consumed() {
    let (_tmp, home) = home();
    let received = [
        received_entry(ALICE, 1, "first", 10),
        received_entry(ALICE, 2, "second", 20),
        received_entry(BOB, 3, "third", 30),
    ];
    let sent = [sent_entry(BOB, 4, "answer", 40, State::Delivered)];
    fill(&home, "s1", &received, &sent);
    let dir = home
        .session(&interlink_core::SessionId::new("s1").unwrap())
        .unwrap();
    let query = Query {
        limit: 10,
        ..Query::default()
    };

    // Nothing read yet (no read.json): every received message is unread; a sent one
    // is not marked.
    let (mut found, _) = search(&home, &query);
    mark_consumed(&dir, &mut found);
    let marks = |found: &[Message]| -> Vec<(String, Option<bool>)> {
        found.iter().map(|m| (m.text.clone(), m.consumed)).collect()
    };
    assert_eq!(
        marks(&found),
        [
            ("answer".to_owned(), None),
            ("third".to_owned(), Some(false)),
            ("second".to_owned(), Some(false)),
            ("first".to_owned(), Some(false)),
        ]
    );

    // The agent acknowledges the second (out of order): only it is consumed.
    interlink_store::read_state::ReadState::load(&dir)
        .unwrap()
        .acknowledge(&[id(2)])
        .unwrap();
    let (mut found, _) = search(&home, &query);
    mark_consumed(&dir, &mut found);
    assert_eq!(marks(&found)[2], ("second".to_owned(), Some(true)));
    assert_eq!(marks(&found)[3], ("first".to_owned(), Some(false)));
    assert_eq!(marks(&found)[1], ("third".to_owned(), Some(false)));
}
