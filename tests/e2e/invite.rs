//! Two people on one machine pair by invite and talk, with mDNS off and nothing but a
//! relay in their settings files — the way a person would: `install … --relay` to set
//! up, `invite` on one side, `join <code>` on the other, then their agents' MCP calls.
//! Also a rename on one side, and a typo in a session id that is answered with the
//! closest session. Every process is a real binary on loopback; the relay is the only
//! way the two homes know of each other.
//!
//! A code printed with `--no-wait` is admitted by the inviter's running MCP session.
//!
//! And what an invite must refuse: a code used a second time admits nobody new, an
//! expired or damaged code is refused with a reason before anything changes, and a
//! user's own code is refused.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::{Duration, Instant};

use interlink_e2e::{
    lan::{ADDRS, Lan},
    mcp_session::{Human, McpSession, STEADY, deadline, sees},
    process::{DEADLINE, Guard, command},
    relays::{free_port, start_relay},
    user::User,
};
use serde_json::json;

struct Person {
    user: User,
    _host_home: tempfile::TempDir,
}

/// A person who set up with `install claude --relay R --no-mdns --name NAME` (loopback
/// listening keeps the test off the machine's other interfaces).
fn person(name: &str, relay: &str) -> Person {
    person_with(
        name,
        &["--relay", relay, "--listen", "/ip4/127.0.0.1/tcp/0"],
    )
}

/// A person who set up with `install claude ARGS --no-mdns --name NAME`.
fn person_with(name: &str, args: &[&str]) -> Person {
    let host_home = tempfile::tempdir().unwrap();
    let user = User::new(name, &[("HOME", host_home.path().to_str().unwrap())]).unwrap();
    let out = user
        .cli(
            &[
                &["install", "claude", "--command", "/opt/interlink-p2p"],
                args,
                &["--no-mdns", "--name", name],
            ]
            .concat(),
            None,
        )
        .unwrap();
    assert!(out.status.success(), "install: {}", out.stderr);
    let settings = std::fs::read_to_string(user.home().join("config.toml")).unwrap();
    assert!(!settings.contains("bootstrap"), "{settings}");
    Person {
        user,
        _host_home: host_home,
    }
}

/// Starts `interlink-p2p invite ARGS` in `user`'s home; returns it and the code it
/// printed.
fn invite(user: &User, args: &[&str]) -> (Guard, String) {
    let mut cmd = command(user.home(), &[]).unwrap();
    cmd.arg("invite").args(args);
    let log = user.home().join("invite.stderr.log");
    let process = Guard::spawn(cmd, log).unwrap();
    let code = process
        .next_line(Instant::now() + DEADLINE)
        .unwrap()
        .unwrap_or_else(|| panic!("no code: {}", process.stderr()));
    assert!(code.starts_with("interlink2"), "{code}");
    (process, code)
}

async fn session(user: &User, id: &str) -> McpSession {
    McpSession::spawn_with(
        user.home(),
        id,
        &["--session", id],
        STEADY,
        None,
        Human::Approves,
        false,
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_people_pair_by_invite_over_a_relay_and_talk() {
    let dir = tempfile::tempdir().unwrap();
    let relay = start_relay(dir.path(), free_port(), free_port()).unwrap();
    let alice = person("alice", &relay.addr);
    let bob = person("bob", &relay.addr);
    let (alice, bob) = (&alice.user, &bob.user);

    // Alice invites; Bob joins with the code she sent him.
    let (mut inviting, code) = invite(alice, &[]);
    let started = Instant::now();
    let joined = bob.cli(&["join", &code], None).unwrap();
    eprintln!("join through the relay took {:?}", started.elapsed());
    assert!(joined.status.success(), "join: {}", joined.stderr);
    // Sentences, not a string continuation's indentation or debug text.
    assert!(
        !joined.stderr.contains("   ") && !joined.stderr.contains(" {"),
        "{}",
        joined.stderr
    );
    assert!(
        joined.stdout.starts_with("paired alice "),
        "{}",
        joined.stdout
    );
    let line = inviting
        .next_line(Instant::now() + DEADLINE)
        .unwrap()
        .unwrap_or_else(|| panic!("invite: {}", inviting.stderr()));
    assert!(line.starts_with("paired bob "), "{line}");
    assert!(inviting.wait(Instant::now() + DEADLINE).unwrap().success());
    // Both sides are peers, each under the name the other suggested.
    let peers = |u: &User| u.cli(&["peer", "list"], None).unwrap().stdout;
    assert!(peers(alice).contains(&bob.key), "{}", peers(alice));
    assert!(peers(bob).contains(&alice.key), "{}", peers(bob));

    // Their agents talk, both ways, with no network settings but the files.
    let a = session(alice, "alice-main").await;
    let b = session(bob, "bob-main").await;
    sees(&b, "alice-main").await.unwrap();
    let (_, sent) = b
        .ok(
            "send_message",
            json!({"to": "alice", "text": "hello from bob"}),
        )
        .await
        .unwrap();
    assert_eq!(sent["status"], "delivered", "{sent}");
    let got = a
        .poll("receive_messages", json!({}), deadline(), |v| {
            v.to_string().contains("hello from bob")
        })
        .await
        .unwrap();
    assert_eq!(got["messages"][0]["from"], "bob", "{got}");
    let (_, back) = a
        .ok("send_message", json!({"to": "bob", "text": "hello back"}))
        .await
        .unwrap();
    assert_eq!(back["status"], "delivered", "{back}");
    b.poll("receive_messages", json!({}), deadline(), |v| {
        v.to_string().contains("hello back")
    })
    .await
    .unwrap();

    // Bob renames her; his agent writes to the new name.
    let out = bob
        .cli(&["peer", "rename", "alice", "alice-laptop"], None)
        .unwrap();
    assert!(out.status.success(), "rename: {}", out.stderr);
    let renamed = b
        .poll(
            "send_message",
            json!({"to": "alice-laptop", "session": "alice-main", "text": "renamed"}),
            deadline(),
            |v| v["status"] == "delivered",
        )
        .await
        .unwrap();
    assert_eq!(renamed["session_id"], "alice-main");

    // A typo in the session id: still queued (a session may come back under that id),
    // and the answer names her sessions and the closest one.
    let (text, typo) = b
        .ok(
            "send_message",
            json!({"to": "alice-laptop", "session": "alice-mian", "text": "typo"}),
        )
        .await
        .unwrap();
    assert_eq!(typo["status"], "queued", "{typo}");
    assert!(text.contains("did you mean alice-main"), "{text}");

    a.close(deadline()).await.unwrap();
    b.close(deadline()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invite_admits_one_key_once_and_bad_codes_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let relay = start_relay(dir.path(), free_port(), free_port()).unwrap();
    let alice = person("alice", &relay.addr);
    let bob = person("bob", &relay.addr);
    let eve = person("eve", &relay.addr);
    let (alice, bob, eve) = (&alice.user, &bob.user, &eve.user);

    // A user's own code, a damaged one and a foreign string are refused up front.
    let (mut inviting, code) = invite(alice, &["--expires", "10m"]);
    let own = alice.cli(&["join", &code], None).unwrap();
    assert!(!own.status.success());
    assert!(own.stderr.contains("your own invite"), "{}", own.stderr);
    let damaged = bob.cli(&["join", &code[..code.len() - 9]], None).unwrap();
    assert!(damaged.stderr.contains("damaged"), "{}", damaged.stderr);
    let foreign = bob.cli(&["join", "hello"], None).unwrap();
    assert!(
        foreign.stderr.contains("not an interlink-p2p invite"),
        "{}",
        foreign.stderr
    );
    assert!(!bob.home().join("peers.json").exists());
    bad_codes_change_nothing(alice, bob, &code);

    // Bob joins; Eve, who saw the code too, gets nowhere with it afterwards.
    let joined = bob.cli(&["join", &code], None).unwrap();
    assert!(joined.status.success(), "join: {}", joined.stderr);
    assert!(inviting.wait(Instant::now() + DEADLINE).unwrap().success());
    // Alice's agent is online: her sessions admit her unexpired invites too.
    let a = session(alice, "alice-main").await;
    let late = eve.cli(&["join", &code, "--wait", "4"], None).unwrap();
    assert!(!late.status.success(), "{}", late.stdout);
    assert!(late.stderr.contains("no confirmation"), "{}", late.stderr);
    // Nothing is pinned on her side until Alice confirms; her request waits.
    let eve_peers = eve.cli(&["peer", "list"], None).unwrap().stdout;
    assert!(!eve_peers.contains(&alice.key), "{eve_peers}");
    let alice_peers = alice.cli(&["peer", "list"], None).unwrap().stdout;
    assert!(!alice_peers.contains(&eve.key), "{alice_peers}");
    // Her knock waits for Alice, like any stranger's.
    let waiting = a
        .poll("list_pair_requests", json!({}), deadline(), |v| {
            v.to_string().contains(&eve.key)
        })
        .await
        .unwrap();
    assert_eq!(
        waiting["incoming"].as_array().unwrap().len(),
        1,
        "{waiting}"
    );

    // An invite printed with --no-wait is admitted by Alice's running session.
    let carol = person("carol", &relay.addr);
    let carol = &carol.user;
    let (mut quick, code) = invite(alice, &["--no-wait"]);
    assert!(quick.wait(Instant::now() + DEADLINE).unwrap().success());
    let joined = carol.cli(&["join", &code], None).unwrap();
    assert!(joined.status.success(), "join: {}", joined.stderr);
    assert!(
        joined.stdout.starts_with("paired alice "),
        "{}",
        joined.stdout
    );
    assert!(
        alice
            .cli(&["peer", "list"], None)
            .unwrap()
            .stdout
            .contains(&carol.key),
        "alice's session admitted carol"
    );

    // A code that expired is refused before anything changes.
    let (mut short, expiring) = invite(alice, &["--expires", "1s", "--no-wait"]);
    assert!(short.wait(Instant::now() + DEADLINE).unwrap().success());
    std::thread::sleep(Duration::from_millis(1100));
    let expired = eve.cli(&["join", &expiring], None).unwrap();
    assert!(expired.stderr.contains("expired"), "{}", expired.stderr);
    a.close(deadline()).await.unwrap();
}

/// What `join` must refuse before it changes anything or starts a node, each with a
/// sentence (issue 48): a typo, a code altered after signing (its relay swapped for an
/// attacker's, or its key for one off the curve — the check recomputed, as anyone can),
/// and codes the real inviter signed against the rules (an address of random bytes, a
/// relay without its peer id).
fn bad_codes_change_nothing(alice: &User, bob: &User, code: &str) {
    use interlink_testkit::invite::{altered, resigned, typo};
    let alice_identity =
        interlink_store::keyfile::load(&alice.home().join("identity.key")).unwrap();
    let decoded = interlink_core::wire::Invite::decode(code).unwrap();
    let relay = decoded.relays[0].clone();
    let attacker_relay = {
        let peer = interlink_testkit::identity(0xee)
            .transport_keypair(&interlink_core::SessionId::new("relay").unwrap())
            .unwrap()
            .public()
            .to_peer_id();
        let a: libp2p::Multiaddr = format!("/ip4/127.0.0.1/tcp/1/p2p/{peer}").parse().unwrap();
        serde_bytes::ByteBuf::from(a.to_vec())
    };
    let bare_relay = {
        let mut a = libp2p::Multiaddr::try_from(relay.to_vec()).unwrap();
        a.pop();
        serde_bytes::ByteBuf::from(a.to_vec())
    };
    // Inside the key: the code's bytes from about the 4th onwards are the body's.
    let key_at = "interlink2".len() + 20;
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "a character of the key changed",
            typo(code, key_at),
            "damaged",
        ),
        (
            "the relay swapped for an attacker's",
            altered(code, |i| i.relays = vec![attacker_relay.clone()]),
            "altered",
        ),
        (
            "a key that is not an Ed25519 point",
            altered(code, |i| {
                let mut k = [0u8; 32];
                k[0] = 2;
                i.key = interlink_core::IdentityKey::from_bytes(k);
            }),
            "altered",
        ),
        (
            "an address of 40 random bytes",
            resigned(code, &alice_identity, |i| {
                i.addrs = vec![serde_bytes::ByteBuf::from(
                    (0u8..40).map(|b| b.wrapping_mul(73)).collect::<Vec<_>>(),
                )];
            }),
            "not a multiaddr",
        ),
        (
            "a relay without /p2p/<id>",
            resigned(code, &alice_identity, |i| {
                i.relays = vec![bare_relay.clone()]
            }),
            "does not end in /p2p/",
        ),
    ];
    let snapshot = |u: &User| {
        ["peers.json", "config.toml", "pairing.json"].map(|f| std::fs::read(u.home().join(f)).ok())
    };
    let before = snapshot(bob);
    for (case, bad, says) in cases {
        let started = Instant::now();
        let out = bob.cli(&["join", &bad], None).unwrap();
        assert!(!out.status.success(), "{case}: joined: {}", out.stdout);
        assert!(out.stderr.contains(says), "{case}: {}", out.stderr);
        // Refused before any node started: no search on the overlay, no debug text.
        assert!(
            !out.stderr.contains("looking for"),
            "{case}: {}",
            out.stderr
        );
        assert!(!out.stderr.contains(" {"), "{case}: {}", out.stderr);
        assert_eq!(snapshot(bob), before, "{case}: bob's home changed");
        eprintln!("{case}: refused in {:?}", started.elapsed());
    }
}

/// On a LAN, with mDNS off and no relay or bootstrap in either settings file, the code
/// alone joins: it carries the inviter's routable addresses (not loopback), and `join`
/// dials them. The two people run in a network namespace of the test's own.
#[test]
fn on_a_lan_without_mdns_or_a_relay_the_code_is_enough() {
    let Some(lan) = Lan::for_test("on_a_lan_without_mdns_or_a_relay_the_code_is_enough") else {
        return;
    };
    interlink_e2e::process::use_netns(&lan.name);
    let alice = person_with("alice", &["--listen", "/ip4/0.0.0.0/tcp/0"]);
    let bob = person_with("bob", &["--listen", "/ip4/0.0.0.0/tcp/0"]);
    let (alice, bob) = (&alice.user, &bob.user);

    let (mut inviting, code) = invite(alice, &[]);
    let decoded = interlink_core::wire::Invite::decode(&code).unwrap();
    assert!(decoded.relays.is_empty());
    let addrs: Vec<String> = decoded
        .addrs
        .iter()
        .map(|a| libp2p::Multiaddr::try_from(a.to_vec()).unwrap().to_string())
        .collect();
    assert!(
        !addrs.is_empty() && addrs.iter().all(|a| ADDRS.iter().any(|ip| a.contains(ip))),
        "the code carries the LAN addresses, not loopback: {addrs:?}"
    );
    let joined = bob.cli(&["join", &code], None).unwrap();
    assert!(joined.status.success(), "join: {}", joined.stderr);
    assert!(
        joined.stdout.starts_with("paired alice "),
        "{}",
        joined.stdout
    );
    let line = inviting
        .next_line(Instant::now() + DEADLINE)
        .unwrap()
        .unwrap_or_else(|| panic!("invite: {}", inviting.stderr()));
    assert!(line.starts_with("paired bob "), "{line}");
    assert!(inviting.wait(Instant::now() + DEADLINE).unwrap().success());
    // Bob's settings gained nothing to keep: there was no relay to keep.
    let settings = std::fs::read_to_string(bob.home().join("config.toml")).unwrap();
    assert!(!settings.contains("relay"), "{settings}");
}

/// Starts `interlink-p2p pair ARGS` in `user`'s home, to read its lines as they come.
fn pair(user: &User, args: &[&str], log: &str) -> Guard {
    let mut cmd = command(user.home(), &[]).unwrap();
    cmd.arg("pair").args(args);
    Guard::spawn(cmd, user.home().join(log)).unwrap()
}

fn line(process: &Guard) -> String {
    process
        .next_line(Instant::now() + DEADLINE)
        .unwrap()
        .unwrap_or_else(|| panic!("no line: {}", process.stderr()))
}

/// Pairing by knock from the shell, with only a relay in the settings: `pair request`
/// knocks and waits, the other operator's `pair accept` answers it; two people who
/// knock each other are paired without either accepting, and an answer that comes
/// after `pair request` stopped waiting is collected by the next run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pair_request_from_the_shell_and_mutual_knocks() {
    let dir = tempfile::tempdir().unwrap();
    let relay = start_relay(dir.path(), free_port(), free_port()).unwrap();
    let alice = person("alice", &relay.addr);
    let bob = person("bob", &relay.addr);
    let carol = person("carol", &relay.addr);
    let (alice, bob, carol) = (&alice.user, &bob.user, &carol.user);
    let b = session(bob, "bob-main").await;

    // Alice asks Bob; Bob's operator accepts at his shell; Alice's command sees it.
    let mut asking = pair(
        alice,
        &["request", &bob.key[..12], "--wait", "60"],
        "ask-bob.log",
    );
    let first = line(&asking);
    assert!(
        first.starts_with("requested ") && first.ends_with(" delivered"),
        "{first}"
    );
    let accepted = bob
        .cli(&["pair", "accept", &alice.key[..12]], None)
        .unwrap();
    assert!(accepted.status.success(), "{}", accepted.stderr);
    assert!(
        accepted.stdout.contains("paired alice"),
        "{}",
        accepted.stdout
    );
    assert!(line(&asking).starts_with("paired bob "));
    assert!(asking.wait(Instant::now() + DEADLINE).unwrap().success());
    // Bob's session admits her now (it follows peers.json).
    b.poll("list_peers", json!({}), deadline(), |v| {
        v.to_string().contains(&alice.key)
    })
    .await
    .unwrap();

    // Alice knocks Carol and stops waiting; Carol knocks back: both asked, so they are
    // paired at once; Alice's next run collects the confirmation that waited.
    let c = session(carol, "carol-main").await;
    let mut first_knock = pair(
        alice,
        &["request", &carol.key[..12], "--wait", "2"],
        "ask-carol.log",
    );
    assert!(line(&first_knock).starts_with("requested "));
    assert!(
        first_knock
            .wait(Instant::now() + DEADLINE)
            .unwrap()
            .success()
    );
    c.poll("list_pair_requests", json!({}), deadline(), |v| {
        v.to_string().contains(&alice.key)
    })
    .await
    .unwrap();
    let back = carol
        .cli(&["pair", "request", &alice.key[..12], "--wait", "10"], None)
        .unwrap();
    assert!(back.status.success(), "{}", back.stderr);
    assert!(back.stdout.starts_with("paired alice "), "{}", back.stdout);
    let again = alice
        .cli(&["pair", "request", &carol.key[..12], "--wait", "20"], None)
        .unwrap();
    assert!(
        again.stdout.contains("paired carol "),
        "{} {}",
        again.stdout,
        again.stderr
    );
    let peers = alice.cli(&["peer", "list"], None).unwrap().stdout;
    assert!(
        peers.contains(&carol.key) && peers.contains(&bob.key),
        "{peers}"
    );
    b.close(deadline()).await.unwrap();
    c.close(deadline()).await.unwrap();
}
