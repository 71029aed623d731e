//! Soak: 1,000 messages across three sessions while one of them is repeatedly stopped
//! (SIGSTOP) and killed (SIGKILL, then restarted under its id). Every message is
//! accounted for at the end: the test counts the lost and the duplicated, and both must
//! be zero.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use interlink_e2e::user::{User, outcomes};

const STEADY: &[(&str, &str)] = &[
    ("INTERLINK_TEST_LIVE_WINDOW_MS", "10000"),
    ("INTERLINK_TEST_HEARTBEAT_MS", "1000"),
];
/// Five rounds of 200 messages.
const ROUNDS: usize = 5;
/// Per round: Alice → Bob, Carol → Bob, Bob → Alice. What one sender queues for a
/// session that is down stays within the mailbox's per-sender quota (64). A round's
/// mail can still meet the last round's at a holder when Bob was stopped or killed
/// before his acks went out: the quota is then full of mail he already has, and the
/// holder keeps only part of the new round. `send` (no outbox) says `not-kept` for the
/// rest, and the test sends those again once Bob is back, as a user would.
const TO_BOB_FROM_ALICE: usize = 60;
const TO_BOB_FROM_CAROL: usize = 60;
const TO_ALICE_FROM_BOB: usize = 80;
/// How long Bob may take to drain a round's mail after he is back.
const ROUND_DRAIN: Duration = Duration::from_secs(30);
/// How long everything queued may take to drain at the end.
const DRAIN: Duration = Duration::from_secs(60);

fn lines(prefix: &str, round: usize, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("{prefix} r{round} m{i:03}"))
        .collect()
}

/// Counts, per expected text, how often it is in `inbox`: (lost, duplicated).
fn account(inbox: &[serde_json::Value], expected: &[String]) -> (usize, usize) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for e in inbox {
        if let Some(t) = e["text"].as_str() {
            *seen.entry(t).or_default() += 1;
        }
    }
    let lost = expected
        .iter()
        .filter(|t| !seen.contains_key(t.as_str()))
        .count();
    let duplicated = seen.values().filter(|n| **n > 1).map(|n| n - 1).sum();
    (lost, duplicated)
}

#[test]
fn a_thousand_messages_survive_stops_and_kills_with_none_lost_or_doubled() {
    let users: Vec<User> = ["alice", "bob", "carol"]
        .iter()
        .map(|n| User::new(n, STEADY).unwrap())
        .collect();
    for a in &users {
        for b in &users {
            if a.name != b.name {
                a.pair_with(b).unwrap();
            }
        }
    }
    let (alice, bob, carol) = (&users[0], &users[1], &users[2]);
    let a = alice.start("soak-a", None).unwrap();
    let boot = a.loopback_addr().unwrap().to_owned();
    let _c = carol.start("soak-c", Some(&boot)).unwrap();
    let mut b = Some(bob.start("soak-b", Some(&boot)).unwrap());

    let mut to_bob = Vec::new();
    let mut to_alice = Vec::new();
    let mut resent = 0usize;
    // Sends `texts`; returns those the command said were not kept (one outcome line
    // per message, in input order).
    let send = |from: &User, to: &str, texts: &[String]| -> Vec<String> {
        let input: String = texts.iter().map(|t| format!("{t}\n")).collect();
        let (out, _) = from
            .send(&boot, to, &["--stdin", "--wait", "15"], Some(&input))
            .unwrap();
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(lines.len(), texts.len(), "{}: {}", from.name, out.stderr);
        let mut not_kept = Vec::new();
        for (line, text) in lines.iter().zip(texts) {
            if line.starts_with("not-kept ") {
                not_kept.push(text.clone());
            } else {
                assert!(
                    !outcomes(line, "delivered").is_empty() || !outcomes(line, "queued").is_empty(),
                    "{} -> {to}: {line}",
                    from.name
                );
            }
        }
        assert_eq!(
            out.status.success(),
            not_kept.is_empty(),
            "{} -> {to}: {}",
            from.name,
            out.stderr
        );
        not_kept
    };
    let mut again: Vec<(usize, String)> = Vec::new();
    for round in 0..ROUNDS {
        // Bob is stopped in even rounds and killed in odd ones, while mail flows to him.
        let session = b.as_ref().unwrap();
        if round % 2 == 0 {
            session.process.signal("STOP").unwrap();
        } else {
            b.take().unwrap().process.kill().unwrap();
        }
        let texts = lines("alice", round, TO_BOB_FROM_ALICE);
        again.extend(send(alice, "bob", &texts).into_iter().map(|t| (0, t)));
        to_bob.extend(texts);
        let texts = lines("carol", round, TO_BOB_FROM_CAROL);
        again.extend(send(carol, "bob", &texts).into_iter().map(|t| (2, t)));
        to_bob.extend(texts);
        // Bob's identity still sends (from a shell) while his session is down.
        let texts = lines("bob", round, TO_ALICE_FROM_BOB);
        assert_eq!(send(bob, "alice", &texts), Vec::<String>::new());
        to_alice.extend(texts);
        match b.as_ref() {
            Some(session) => session.process.signal("CONT").unwrap(),
            None => b = Some(bob.start("soak-b", Some(&boot)).unwrap()),
        }
        // Bob is up again: his mail so far drains before the next disruption. What
        // was not kept goes again once the rest has arrived, unless it arrived anyway
        // (a holder may keep what it could not confirm).
        let kept: Vec<String> = to_bob
            .iter()
            .filter(|t| !again.iter().any(|(_, a)| a == *t))
            .cloned()
            .collect();
        let inbox = bob
            .wait_inbox("soak-b", Instant::now() + ROUND_DRAIN, |e| {
                account(e, &kept).0 == 0
            })
            .unwrap();
        let have: std::collections::HashSet<&str> =
            inbox.iter().filter_map(|e| e["text"].as_str()).collect();
        for (who, sender) in [(0, &users[0]), (2, &users[2])] {
            let missing: Vec<String> = again
                .iter()
                .filter(|(w, t)| *w == who && !have.contains(t.as_str()))
                .map(|(_, t)| t.clone())
                .collect();
            if !missing.is_empty() {
                resent += missing.len();
                let still = send(sender, "bob", &missing);
                assert!(still.is_empty(), "not kept with Bob up: {still:?}");
            }
        }
        again.clear();
        let so_far = to_bob.clone();
        bob.wait_inbox("soak-b", Instant::now() + ROUND_DRAIN, |e| {
            account(e, &so_far).0 == 0
        })
        .unwrap();
    }
    let total = to_bob.len() + to_alice.len();
    assert_eq!(total, 1000);

    let deadline = Instant::now() + DRAIN;
    let bob_inbox = bob
        .wait_inbox("soak-b", deadline, |e| account(e, &to_bob).0 == 0)
        .unwrap();
    let alice_inbox = alice
        .wait_inbox("soak-a", deadline, |e| account(e, &to_alice).0 == 0)
        .unwrap();
    let (lost_b, dup_b) = account(&bob_inbox, &to_bob);
    if std::env::var_os("SOAK_DEBUG").is_some() {
        let got: std::collections::HashSet<&str> = bob_inbox
            .iter()
            .filter_map(|e| e["text"].as_str())
            .collect();
        for round in 0..ROUNDS {
            for who in ["alice", "carol"] {
                let prefix = format!("{who} r{round} ");
                let n = got.iter().filter(|t| t.starts_with(&prefix)).count();
                eprintln!("round {round} from {who}: {n} received");
            }
        }
    }
    let (lost_a, dup_a) = account(&alice_inbox, &to_alice);
    eprintln!(
        "soak: {total} messages ({resent} sent again after not-kept); to bob: {} lost, {} \
         duplicated; to alice: {} lost, {} duplicated",
        lost_b, dup_b, lost_a, dup_a
    );
    assert_eq!((lost_b, dup_b, lost_a, dup_a), (0, 0, 0, 0));
}
