//! The durability point, tested with a real kill -9: a child process (this test binary,
//! re-run on one test) commits puts and reports each; the parent SIGKILLs it right
//! after and reopens the database.

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    time::Duration,
};

use super::*;
use interlink_testkit::{identity, message, msg_id, record, session};

/// Set in the child: the database path.
const CHILD_ENV: &str = "INTERLINK_RELAY_KILL_TEST_DB";
const CHILD_TEST: &str = "store::kill_tests::child_commits_until_killed";
const PUTS: u64 = 20;
const T0: u64 = 1_800_000_000_000;

fn put_number(n: u64) -> ([u8; 32], Vec<u8>) {
    let owner = identity(1);
    let s = session("inbox");
    let env = message(&identity(2), &owner, &s, msg_id(n), T0 + n, "survive");
    record(&owner.public(), &s, &[env], &[], T0 + n)
}

/// In the child: commit [`PUTS`] puts, printing a marker after each, then wait to be
/// killed. Outside the child this test does nothing.
#[test]
fn child_commits_until_killed() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let store = MailboxStore::open(std::path::Path::new(&path), Caps::default()).unwrap();
    for n in 0..PUTS {
        let (key, bytes) = put_number(n);
        store.put(key, &bytes, T0 + n).unwrap();
        println!("COMMITTED {n}");
    }
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn a_committed_put_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mailboxes.redb");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([CHILD_TEST, "--exact", "--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut last = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("COMMITTED ") {
            last = Some(n.parse::<u64>().unwrap());
            if last == Some(PUTS - 1) {
                break;
            }
        }
    }
    assert_eq!(last, Some(PUTS - 1), "the child did not commit");
    child.kill().unwrap(); // SIGKILL: no destructor, no clean close of the database
    child.wait().unwrap();

    let store = MailboxStore::open(&path, Caps::default()).unwrap();
    let (key, _) = put_number(0);
    let bytes = store.get(&key).unwrap().expect("the mailbox survived");
    let (mb, _) = Mailbox::decode(&bytes, T0 + PUTS, &mailbox::Config::default()).unwrap();
    assert_eq!(mb.len() as u64, PUTS, "every committed put survived");
    assert_eq!(store.stats().envelopes, PUTS);
}
