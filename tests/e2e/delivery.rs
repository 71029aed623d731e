//! Message delivery between real processes on loopback: `run` sessions that take
//! messages, `send` from a shell as a short-lived session, `inbox` to read them.
//!
//! Every user has its own home (identity, `peers.json`, inboxes) and pairs with the
//! others through `peer add`, as people would. Live sends are receipted; a recipient
//! that is stopped, killed or restarted gets its mail from the DHT mailbox, exactly
//! once; a stranger is refused with the reason.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    collections::HashSet,
    time::{Duration, Instant},
};

use interlink_e2e::{
    process::DEADLINE,
    user::{User, outcomes},
};

/// A live window long enough that a loaded machine never shows a running session as
/// away, with a heartbeat well inside it.
const STEADY: &[(&str, &str)] = &[
    ("INTERLINK_TEST_LIVE_WINDOW_MS", "10000"),
    ("INTERLINK_TEST_HEARTBEAT_MS", "1000"),
];

/// Two users who have paired with each other.
fn pair(a: &str, b: &str) -> (User, User) {
    let a = User::new(a, STEADY).unwrap();
    let b = User::new(b, STEADY).unwrap();
    a.pair_with(&b).unwrap();
    b.pair_with(&a).unwrap();
    (a, b)
}

fn texts(entries: &[serde_json::Value]) -> Vec<&str> {
    entries.iter().filter_map(|e| e["text"].as_str()).collect()
}

fn ids(entries: &[serde_json::Value]) -> Vec<&str> {
    entries
        .iter()
        .filter_map(|e| e["msg_id"].as_str())
        .collect()
}

#[test]
fn live_messages_both_ways_and_to_self() {
    let (alice, bob) = pair("alice", "bob");
    let a = alice.start("e2e-live-a", None).unwrap();
    let boot = a.loopback_addr().unwrap().to_owned();
    let b = bob.start("e2e-live-b", Some(&boot)).unwrap();

    let (out, took) = alice
        .send(
            &boot,
            "bob",
            &["--task", "t-1", "--status", "needs_input", "hello bob"],
            None,
        )
        .unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    let sent = outcomes(&out.stdout, "delivered");
    assert_eq!(sent.len(), 1, "{}{}", out.stdout, out.stderr);
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    eprintln!("live send (whole command): {took:?}");

    // "delivered" means on disk: the inbox has it already, with the verified sender.
    let inbox = bob.inbox(&b.id).unwrap();
    assert_eq!(inbox.len(), 1, "{inbox:?}");
    let e = &inbox[0];
    assert_eq!(e["msg_id"], sent[0]);
    assert_eq!(e["sender"], alice.key.as_str());
    assert_eq!(e["petname"], "alice");
    assert_eq!(e["text"], "hello bob");
    assert_eq!(
        (&e["task_id"], &e["status"]),
        (&"t-1".into(), &"needs_input".into())
    );

    // And back, bootstrapping through Bob this time.
    let (out, _) = bob
        .send(b.loopback_addr().unwrap(), "alice", &["hello alice"], None)
        .unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    let back = outcomes(&out.stdout, "delivered");
    let inbox = alice.inbox(&a.id).unwrap();
    assert_eq!(ids(&inbox), back);
    assert_eq!(inbox[0]["sender"], bob.key.as_str());
    assert_eq!(inbox[0]["petname"], "bob");

    // `self` reaches the user's own running session, without pairing.
    let (out, _) = alice.send(&boot, "self", &["note to self"], None).unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(
        outcomes(&out.stdout, "delivered").len(),
        1,
        "{}",
        out.stdout
    );
    let inbox = alice.inbox(&a.id).unwrap();
    assert_eq!(texts(&inbox), ["hello alice", "note to self"]);
    assert_eq!(inbox[1]["own"], true);
}

#[test]
fn a_stopped_session_gets_fifty_queued_messages_in_order_when_it_resumes() {
    let (alice, bob) = pair("alice", "bob");
    let a = alice.start("e2e-sleep-a", None).unwrap();
    let boot = a.loopback_addr().unwrap().to_owned();
    let b = bob.start("e2e-sleep-b", Some(&boot)).unwrap();
    // Bob is on the overlay (one live message proves it) before he falls asleep.
    let (out, _) = alice.send(&boot, "bob", &["awake?"], None).unwrap();
    assert_eq!(
        outcomes(&out.stdout, "delivered").len(),
        1,
        "{}",
        out.stderr
    );

    b.process.signal("STOP").unwrap();
    let input: String = (0..50).map(|i| format!("while asleep {i:02}\n")).collect();
    let (out, took) = alice
        .send(&boot, "bob", &["--stdin"], Some(&input))
        .unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    let queued = outcomes(&out.stdout, "queued");
    assert_eq!(queued.len(), 50, "{}{}", out.stdout, out.stderr);
    // Only the first message pays the live timeout (about a second); the rest queue at
    // once. The command also waits briefly so the mailbox puts land.
    assert!(took < Duration::from_secs(8), "send took {took:?}");

    b.process.signal("CONT").unwrap();
    let resumed = Instant::now();
    let inbox = bob
        .wait_inbox(&b.id, resumed + DEADLINE, |e| e.len() >= 51)
        .unwrap();
    let drained = resumed.elapsed();
    eprintln!("50 queued messages: send took {took:?}, drained {drained:?} after SIGCONT");
    let expected: Vec<String> = (0..50).map(|i| format!("while asleep {i:02}")).collect();
    assert_eq!(texts(&inbox[1..]), expected, "in order, none missing");
    assert_eq!(ids(&inbox[1..]), queued);
    let unique: HashSet<&str> = ids(&inbox).into_iter().collect();
    assert_eq!(unique.len(), inbox.len(), "a message arrived twice");
}

#[test]
fn a_crashed_session_restarted_under_its_id_gets_its_mail_once() {
    let alice = User::new("alice", STEADY).unwrap();
    // Bob's sessions log when they fetched their mailbox (the line waited for below).
    let bob_env = [STEADY, &[("RUST_LOG", "warn,interlink_net=info")]].concat();
    let bob = User::new("bob", &bob_env).unwrap();
    alice.pair_with(&bob).unwrap();
    bob.pair_with(&alice).unwrap();
    let a = alice.start("e2e-crash-a", None).unwrap();
    let boot = a.loopback_addr().unwrap().to_owned();
    let mut b = bob.start("e2e-crash-b", Some(&boot)).unwrap();
    let session = b.id.clone();
    let (out, _) = alice
        .send(&boot, "bob", &["before the crash"], None)
        .unwrap();
    assert_eq!(
        outcomes(&out.stdout, "delivered").len(),
        1,
        "{}",
        out.stderr
    );

    // kill -9: no goodbye, so Bob stays on the roster and the send is queued.
    b.process.kill().unwrap();
    drop(b);
    let (out, took) = alice
        .send(&boot, "bob", &["after the crash"], None)
        .unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    let queued = outcomes(&out.stdout, "queued");
    assert_eq!(queued.len(), 1, "{}{}", out.stdout, out.stderr);
    eprintln!("queued to a killed session in {took:?}");

    let b = bob.start(&session, Some(&boot)).unwrap();
    let restarted = Instant::now();
    let inbox = bob
        .wait_inbox(&session, restarted + DEADLINE, |e| e.len() >= 2)
        .unwrap();
    eprintln!("delivered {:?} after the restart", restarted.elapsed());
    assert_eq!(texts(&inbox), ["before the crash", "after the crash"]);
    assert_eq!(inbox[1]["msg_id"], queued[0]);

    // Acked: another crash and restart shows it no second time.
    std::thread::sleep(Duration::from_secs(1));
    drop(b);
    let b = bob.start(&session, Some(&boot)).unwrap();
    // Its mailbox fetched again (what is new in it handed to delivery), nothing came
    // twice.
    let deadline = Instant::now() + DEADLINE;
    while !b.process.stderr().contains("own mailbox fetched") {
        assert!(
            Instant::now() < deadline,
            "never fetched: {}",
            b.process.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(bob.inbox(&session).unwrap().len(), 2);
}

#[test]
fn mail_queued_by_a_sender_that_left_reaches_the_recipient_through_a_holder() {
    let (alice, bob) = pair("alice", "bob");
    // Carol is not Bob's peer: she only holds mailboxes, as every node does. Alice has
    // her in her peers (a teammate's always-on session), so Carol's word that she keeps
    // the copy counts for Alice's `send`; a stranger's would not
    // (`node_delivery::a_session_without_an_outbox_never_says_queued_for_what_nothing_holds`).
    let carol = User::new("carol", STEADY).unwrap();
    alice.pair_with(&carol).unwrap();
    let c = carol.start("e2e-gone-c", None).unwrap();
    let boot = c.loopback_addr().unwrap().to_owned();
    let mut b = bob.start("e2e-gone-b", Some(&boot)).unwrap();
    let session = b.id.clone();
    b.process.kill().unwrap();
    drop(b);

    // Alice has no running session: `send` queues and its process exits.
    let (out, took) = alice
        .send(&boot, "bob", &["sent while you were gone"], None)
        .unwrap();
    eprintln!("queued by a departing sender in {took:?}");
    assert!(out.status.success(), "{}", out.stderr);
    let queued = outcomes(&out.stdout, "queued");
    assert_eq!(queued.len(), 1, "{}{}", out.stdout, out.stderr);

    // Bob comes back knowing only Carol; Alice is nowhere on the overlay.
    let _b = bob.start(&session, Some(&boot)).unwrap();
    let restarted = Instant::now();
    let inbox = bob
        .wait_inbox(&session, restarted + DEADLINE, |e| !e.is_empty())
        .unwrap();
    eprintln!("delivered {:?} after the restart", restarted.elapsed());
    assert_eq!(ids(&inbox), queued);
    assert_eq!(inbox[0]["sender"], alice.key.as_str());
    assert_eq!(inbox[0]["text"], "sent while you were gone");
}

#[test]
fn a_stranger_is_refused_until_the_recipient_adds_it() {
    let bob = User::new("bob", STEADY).unwrap();
    let mallory = User::new("mallory", STEADY).unwrap();
    // Mallory knows Bob's key; Bob never paired with her.
    mallory.pair_with(&bob).unwrap();
    let b = bob.start("e2e-stranger-b", None).unwrap();
    let boot = b.loopback_addr().unwrap().to_owned();

    let (out, _) = mallory.send(&boot, "bob", &["let me in"], None).unwrap();
    assert_eq!(out.status.code(), Some(1), "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("not a peer"), "{}", out.stderr);
    assert_eq!(out.stdout, "", "no outcome line for a refused message");
    assert!(bob.inbox(&b.id).unwrap().is_empty());

    // An unknown name is refused before joining anything, saying how to pair.
    let (out, _) = mallory.send(&boot, "nobody", &["hi"], None).unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stderr.contains("peer add"), "{}", out.stderr);

    // Bob adds her; his running session picks up peers.json without a restart.
    bob.pair_with(&mallory).unwrap();
    let deadline = Instant::now() + DEADLINE;
    let delivered = loop {
        let (out, _) = mallory.send(&boot, "bob", &["now?"], None).unwrap();
        if out.status.success() {
            break outcomes(&out.stdout, "delivered").join(",");
        }
        assert!(out.stderr.contains("not a peer"), "{}", out.stderr);
        assert!(Instant::now() < deadline, "the new peer was never let in");
        std::thread::sleep(Duration::from_millis(300));
    };
    let inbox = bob.inbox(&b.id).unwrap();
    assert_eq!(ids(&inbox), [delivered.as_str()]);
    assert_eq!(inbox[0]["petname"], "mallory");
}
