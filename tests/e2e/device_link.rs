//! One person's own machines share the identity by `invite --device` and `join`, the
//! way a user does it: the code printed on one machine, pasted on the other, the
//! comparison string read on both screens and confirmed by typing `yes`.
//!
//! - On loopback (two homes on one host, no root needed): the second home gets the
//!   identity (same key and fingerprint, key file 0600), each home remembers the
//!   other's addresses; a home with another identity is refused without spending the
//!   code, and replaced with `--replace-identity` (the old key kept as a backup); a
//!   second joiner while the code is in use is told it was used; a refused comparison
//!   writes nothing and both sides say so; an expired code is refused before anything
//!   is dialled.
//! - In the two-site lab (network namespaces, routed, no multicast across): after the
//!   link, an MCP session on each host, and a message to `self` from one reaches the
//!   other's session.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    path::Path,
    time::{Duration, Instant},
};

use interlink_e2e::{
    mcp_session::McpSession,
    process::{DEADLINE, Guard, command_in, run_with_input},
    sites::{Routers, Site, Sites},
};
use interlink_testkit::process::Options;
use serde_json::{Value, json};

/// Far longer than anything here takes on a quiet machine.
/// The well-known port both machines' settings name (the default; every test command
/// runs with it off unless asked): the link records each machine at it.
const PORT: (&str, &str) = ("INTERLINK_PORT", "7385");
const WITHIN: Duration = Duration::from_secs(90);
const LOOPBACK: &[&str] = &["--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns"];

/// `interlink-p2p id --json` in `home` (in `netns` if given): the identity key.
fn identity_of(netns: Option<&str>, home: &Path) -> String {
    let mut cmd = command_in(netns, home, &[]).unwrap();
    cmd.args(["id", "--json"]);
    let (status, out, err) = run_with_input(cmd, None, Instant::now() + DEADLINE).unwrap();
    assert!(status.success(), "id: {err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v["identity_key"].as_str().unwrap().to_owned()
}

/// Starts `invite --device ARGS` in `home` with its stdin open; returns it and its code.
fn invite_device(netns: Option<&str>, home: &Path, args: &[&str]) -> (Guard, String) {
    let mut cmd = command_in(netns, home, &[("RUST_LOG", "interlink_net=debug"), PORT]).unwrap();
    cmd.args(["invite", "--device"]).args(args);
    let process = Guard::spawn_with(
        cmd,
        Options::default()
            .with_stderr_file(home.join("invite.stderr.log"))
            .with_stdin(),
    )
    .unwrap();
    let code = process
        .next_line(Instant::now() + DEADLINE)
        .unwrap()
        .unwrap_or_else(|| panic!("no code: {}", process.stderr()));
    assert!(code.starts_with("interlink3"), "{code}");
    (process, code)
}

/// The comparison string a command printed to stderr, if it did yet.
fn comparison(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("comparison: "))
        .map(str::to_owned)
}

/// Waits for the inviter to show its comparison string.
fn inviter_comparison(inviting: &Guard) -> String {
    let until = Instant::now() + DEADLINE;
    loop {
        if let Some(c) = comparison(&inviting.stderr()) {
            return c;
        }
        assert!(
            Instant::now() < until,
            "the inviter showed no comparison: {}",
            inviting.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `join ARGS` in `home` to its end on a thread, with `input` on stdin.
fn join(
    netns: Option<&str>,
    home: &Path,
    args: &[&str],
    input: Option<&'static str>,
) -> std::thread::JoinHandle<(bool, String, String)> {
    let mut cmd = command_in(netns, home, &[PORT]).unwrap();
    cmd.arg("join").args(args);
    std::thread::spawn(move || {
        let (status, out, err) =
            run_with_input(cmd, input, Instant::now() + Duration::from_secs(60)).unwrap();
        (status.success(), out, err)
    })
}

fn device_addrs(home: &Path, key: &str) -> Vec<String> {
    let book: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("addresses.json")).unwrap())
            .unwrap();
    book["identities"][key]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["source"] == "device")
        .filter_map(|e| e["addr"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn a_second_home_takes_the_identity_by_device_code() {
    let (a, b, c, d) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let key = identity_of(None, a.path());
    let other = identity_of(None, c.path());
    let (mut inviting, code) = invite_device(None, a.path(), LOOPBACK);

    // A home with another identity is refused, says what to do, and spends nothing.
    let (ok, _, err) = join(None, c.path(), &[&code, "--no-mdns"], None)
        .join()
        .unwrap();
    assert!(!ok, "{err}");
    assert!(err.contains("--replace-identity"), "{err}");
    assert_eq!(identity_of(None, c.path()), other);

    // The fresh home joins; the test confirms here only after the inviter showed its
    // string, and compares both.
    let joining = join(None, b.path(), &[&code, "--no-mdns"], Some("yes\n"));
    let shown = inviter_comparison(&inviting);
    // The code is spent now: a second joiner is told so, and nothing is written there.
    let (ok, _, err) = join(None, d.path(), &[&code, "--no-mdns", "--yes"], None)
        .join()
        .unwrap();
    assert!(!ok, "{err}");
    assert!(err.contains("already used"), "{err}");
    assert!(!d.path().join("identity.key").exists());
    inviting.write_stdin("yes\n").unwrap();
    let (ok, out, err) = joining.join().unwrap();
    assert!(ok, "join: {err}\ninviter: {}", inviting.stderr());
    assert_eq!(comparison(&err).as_deref(), Some(shown.as_str()), "{err}");
    let line = inviting
        .next_line(Instant::now() + DEADLINE)
        .unwrap()
        .unwrap_or_default();
    assert!(line.starts_with("linked "), "{line}: {}", inviting.stderr());
    assert_eq!(out.trim(), line, "both print the same fingerprint");
    assert!(inviting.wait(Instant::now() + DEADLINE).unwrap().success());

    assert_eq!(identity_of(None, b.path()), key);
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(b.path().join("identity.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // Each home remembers the other machine (one host here: loopback).
    assert!(
        device_addrs(a.path(), &key).contains(&"/ip4/127.0.0.1/tcp/7385".to_owned()),
        "{:?}",
        device_addrs(a.path(), &key)
    );
    assert!(!device_addrs(b.path(), &key).is_empty());

    // Once used, the code is refused (its waiting node is gone with it).
    let (ok, _, err) = join(None, d.path(), &[&code, "--no-mdns", "--yes"], None)
        .join()
        .unwrap();
    assert!(!ok, "{err}");
    assert!(!d.path().join("identity.key").exists());
}

#[test]
fn replacing_an_identity_needs_the_flag_and_keeps_the_old_key() {
    let (a, c) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let key = identity_of(None, a.path());
    let old = identity_of(None, c.path());
    let (mut inviting, code) = invite_device(None, a.path(), LOOPBACK);
    let joining = join(
        None,
        c.path(),
        &[&code, "--no-mdns", "--yes", "--replace-identity"],
        None,
    );
    inviter_comparison(&inviting);
    inviting.write_stdin("yes\n").unwrap();
    let (ok, _, err) = joining.join().unwrap();
    assert!(ok, "{err}\ninviter: {}", inviting.stderr());
    assert_eq!(identity_of(None, c.path()), key);
    let backups: Vec<_> = std::fs::read_dir(c.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("identity.key.replaced-")
        })
        .collect();
    assert_eq!(backups.len(), 1, "{err}");
    let text = std::fs::read_to_string(backups[0].path()).unwrap();
    let restored = interlink_store::keyfile::parse(&text).unwrap();
    assert_eq!(restored.public().to_hex(), old);
}

#[test]
fn a_refused_comparison_writes_nothing_and_both_sides_say_so() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (mut inviting, code) = invite_device(None, a.path(), LOOPBACK);
    let joining = join(None, b.path(), &[&code, "--no-mdns", "--yes"], None);
    inviter_comparison(&inviting);
    // The user at the waiting machine sees a string they did not expect.
    inviting.write_stdin("no\n").unwrap();
    let (ok, out, err) = joining.join().unwrap();
    assert!(!ok, "{err}");
    assert!(err.contains("not confirmed"), "{err}");
    assert!(out.trim().is_empty(), "{out}");
    assert!(!b.path().join("identity.key").exists());
    assert!(!b.path().join("addresses.json").exists());
    assert!(!inviting.wait(Instant::now() + DEADLINE).unwrap().success());
    assert!(
        inviting.stderr().contains("not confirmed"),
        "{}",
        inviting.stderr()
    );
}

#[test]
fn an_expired_device_code_is_refused_before_anything_is_dialled() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (_inviting, code) =
        invite_device(None, a.path(), &[LOOPBACK, &["--expires", "1s"]].concat());
    std::thread::sleep(Duration::from_millis(1500));
    let (ok, _, err) = join(None, b.path(), &[&code, "--yes"], None)
        .join()
        .unwrap();
    assert!(!ok, "{err}");
    assert!(err.contains("expired"), "{err}");
    assert!(!err.contains("contacting"), "{err}");
    assert!(!b.path().join("identity.key").exists());
    // A lifetime past the bound is a usage error.
    let mut cmd = command_in(None, a.path(), &[]).unwrap();
    cmd.args(["invite", "--device", "--expires", "1h"]);
    let (status, _, err) = run_with_input(cmd, None, Instant::now() + DEADLINE).unwrap();
    assert!(
        !status.success() && err.contains("at most 15 minutes"),
        "{err}"
    );
}

/// `session`'s unread message texts once one contains `want` (or the time is up).
async fn received(session: &McpSession, want: &str) -> Vec<String> {
    let until = Instant::now() + WITHIN;
    session
        .unread_texts_until(until, |t| t.iter().any(|t| t == want))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn own_machines_on_two_sites_linked_by_code_reach_each_other_as_self() {
    let test = "own_machines_on_two_sites_linked_by_code_reach_each_other_as_self";
    let Some(sites) = Sites::for_test(test, Routers::Routed) else {
        return;
    };
    let (laptop, desktop) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (ns_a, ns_b) = (sites.host(Site::A), sites.host(Site::B));
    let key = identity_of(Some(ns_a), laptop.path());

    // The laptop (site A) prints the code; the desktop (site B) joins across the router.
    let (mut inviting, code) = invite_device(Some(ns_a), laptop.path(), &[]);
    assert!(
        code.len() < 600,
        "a code to paste, {} characters",
        code.len()
    );
    let joining = join(Some(ns_b), desktop.path(), &[&code, "--yes"], None);
    let shown = inviter_comparison(&inviting);
    inviting.write_stdin(&format!("{shown}\n")).unwrap();
    let (ok, _, err) = joining.join().unwrap();
    assert!(ok, "join: {err}\ninviter: {}", inviting.stderr());
    assert_eq!(comparison(&err).as_deref(), Some(shown.as_str()));
    assert!(inviting.wait(Instant::now() + DEADLINE).unwrap().success());
    assert_eq!(identity_of(Some(ns_b), desktop.path()), key);
    // Each remembers the other host's LAN address at the well-known port.
    let a_lan = format!("/ip4/{}/tcp/7385", sites.addr(Site::A));
    let b_lan = format!("/ip4/{}/tcp/7385", sites.addr(Site::B));
    assert!(
        device_addrs(desktop.path(), &key).contains(&a_lan),
        "{:?}",
        device_addrs(desktop.path(), &key)
    );
    assert!(
        device_addrs(laptop.path(), &key).contains(&b_lan),
        "{:?}",
        device_addrs(laptop.path(), &key)
    );

    // A session on each machine; a message to `self` crosses the router.
    // Each host is a namespace of its own: its session holds the default well-known
    // port (every test command runs with it off unless asked), and the desktop finds
    // the laptop through the address the link just wrote (`a_lan`), nothing typed.
    let env = [
        ("RUST_LOG", "interlink_net=debug"),
        ("INTERLINK_PORT", "7385"),
    ];
    let a = McpSession::start_in_netns(ns_a, laptop.path(), "laptop", &[], &env)
        .await
        .unwrap();
    let b = McpSession::start_in_netns(ns_b, desktop.path(), "desktop", &[], &env)
        .await
        .unwrap();
    a.poll("discover", json!({}), Instant::now() + WITHIN, |v| {
        v.to_string().contains("desktop")
    })
    .await
    .unwrap_or_else(|e| panic!("the laptop never saw the desktop: {e:#}\n{}", a.stderr()));
    let (_, sent) = b
        .ok(
            "send_message",
            json!({"to": "self", "session": "laptop", "text": "from the desktop"}),
        )
        .await
        .unwrap();
    assert_eq!(sent["status"], "delivered", "{sent}\n{}", b.stderr());
    let texts = received(&a, "from the desktop").await;
    assert!(
        texts.iter().any(|t| t == "from the desktop"),
        "{texts:?}\n{}",
        a.stderr()
    );
    let (_, sent) = a
        .ok(
            "send_message",
            json!({"to": "self", "session": "desktop", "text": "from the laptop"}),
        )
        .await
        .unwrap();
    assert_eq!(sent["status"], "delivered", "{sent}");
    let texts = received(&b, "from the laptop").await;
    assert!(texts.iter().any(|t| t == "from the laptop"), "{texts:?}");
    eprintln!(
        "linked across the router ({} → {}), then `self` both ways",
        sites.addr(Site::A),
        sites.addr(Site::B)
    );
}
