//! Machines that meet with nothing configured (issue 49): the address book and the
//! host's well-known port.
//!
//! - On one host: the well-known port is held by one session of a home at a time; a
//!   second session starts fine beside it and meets the first through it; when the
//!   holder exits, the other takes the port within seconds.
//! - Two people on two sites with a router between them and no multicast across it
//!   (a tailnet, `support/sites.rs`), no relay and no bootstrap or listen address in
//!   any settings file: `invite`/`join`, MCP sessions talk both ways, then every
//!   session is stopped and started again (random ports but the well-known one) and
//!   the first message after both are up is delivered live within 5 s.
//!
//! The helpers ([`Person`], [`invite_code`], [`Person::session`], [`send_status`],
//! [`listen_addrs`]) are meant for more cases of the same kind (a person's own
//! machines, tailnet discovery).
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    net::{TcpListener, UdpSocket},
    time::{Duration, Instant},
};

use interlink_e2e::{
    mcp_session::{LOOPBACK, McpSession, STEADY, deadline, sees},
    process::{DEADLINE, Guard, command_in},
    sites::{Routers, Site, Sites},
    user::User,
};
use serde_json::{Value, json};

/// The well-known port in the lab: each host is a network namespace of its own, so
/// the default port is free there whatever runs on this machine.
const LAB_PORT: &str = "7385";

/// How soon after both sessions are up the first message must be delivered live.
const LIVE_WITHIN: Duration = Duration::from_secs(5);

/// How soon a session takes the well-known port over from one that exited: the
/// retry pause is 1–2 s, so this allows one missed try on a loaded machine.
const TAKEOVER_WITHIN: Duration = Duration::from_secs(5);

/// A person on a host of the lab (or on this host): a home, the namespace its
/// commands run in, and the environment of all of them.
struct Person {
    user: User,
    /// The host's network namespace (`None`: this test process's).
    netns: Option<String>,
    /// The environment every command and session of this person runs with.
    vars: Vec<(String, String)>,
}

impl Person {
    /// `name` on `site` of `sites`, its well-known port on: a home with an identity
    /// and nothing in its settings file.
    fn on_site(sites: &Sites, site: Site, name: &str) -> Self {
        let vars = vec![
            ("INTERLINK_NAME".to_owned(), name.to_owned()),
            ("INTERLINK_PORT".to_owned(), LAB_PORT.to_owned()),
            (
                "RUST_LOG".to_owned(),
                "interlink_net=debug,interlink_p2p=debug".to_owned(),
            ),
        ];
        let mut user = User::new(name, &refs(&vars)).unwrap();
        user.set_netns(sites.host(site));
        assert!(
            !user.home().join("config.toml").exists(),
            "nothing configured"
        );
        Self {
            user,
            netns: Some(sites.host(site).to_owned()),
            vars,
        }
    }

    /// `name` on this host with `vars` added.
    fn here(name: &str, vars: &[(&str, &str)]) -> Self {
        let mut all = vec![("INTERLINK_NAME".to_owned(), name.to_owned())];
        all.extend(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        Self {
            user: User::new(name, &refs(&all)).unwrap(),
            netns: None,
            vars: all,
        }
    }

    /// Its MCP session `id`, started as an agent host starts it (`mcp --session ID
    /// ARGS`), in its namespace.
    async fn session(&self, id: &str, args: &[&str]) -> McpSession {
        let vars = refs(&self.vars);
        let started = match &self.netns {
            Some(ns) => McpSession::start_in_netns(ns, self.user.home(), id, args, &vars).await,
            None => McpSession::start(self.user.home(), id, args, &vars).await,
        };
        started.unwrap_or_else(|e| panic!("{}: {id}: {e:#}", self.user.name))
    }
}

fn refs(vars: &[(String, String)]) -> Vec<(&str, &str)> {
    vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// Starts `interlink-p2p invite ARGS` for `person`; returns it and the code it printed.
fn invite_code(person: &Person, args: &[&str]) -> (Guard, String) {
    let mut cmd = command_in(
        person.netns.as_deref(),
        person.user.home(),
        &refs(&person.vars),
    )
    .unwrap();
    cmd.arg("invite").args(args);
    let process = Guard::spawn(cmd, person.user.home().join("invite.stderr.log")).unwrap();
    let code = process
        .next_line(Instant::now() + DEADLINE)
        .unwrap()
        .unwrap_or_else(|| panic!("no code: {}", process.stderr()));
    (process, code)
}

/// Pairs `inviter` and `joiner` as two people would: `invite` on one side, `join
/// <code>` on the other; returns the code.
fn pair_by_invite(inviter: &Person, joiner: &Person) -> String {
    let (mut inviting, code) = invite_code(inviter, &[]);
    let joined = joiner.user.cli(&["join", &code], None).unwrap();
    assert!(
        joined.status.success(),
        "join: {}\ninvite: {}",
        joined.stderr,
        inviting.stderr()
    );
    let line = inviting
        .next_line(Instant::now() + DEADLINE)
        .unwrap()
        .unwrap_or_else(|| panic!("invite: {}", inviting.stderr()));
    assert!(line.starts_with("paired "), "{line}");
    assert!(inviting.wait(Instant::now() + DEADLINE).unwrap().success());
    code
}

/// `from`'s `send_message` of `text` to `to` (a peer's name): the status.
async fn send_status(from: &McpSession, to: &str, text: &str) -> String {
    let (_, sent) = from
        .ok("send_message", json!({"to": to, "text": text}))
        .await
        .unwrap_or_else(|e| panic!("{}: send_message: {e:#}\n{}", from.session, from.stderr()));
    sent["status"].as_str().unwrap_or_default().to_owned()
}

/// `session`'s listen addresses (from `whoami`).
async fn listen_addrs(session: &McpSession) -> Vec<String> {
    let Ok((_, who)) = session.ok("whoami", json!({})).await else {
        return Vec::new();
    };
    who["listen_addrs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// Whether `session` listens on TCP port `port`.
async fn holds(session: &McpSession, port: u16) -> bool {
    let tcp = format!("/tcp/{port}/");
    listen_addrs(session)
        .await
        .iter()
        .any(|a| a.contains(&tcp) || a.ends_with(&format!("/tcp/{port}")))
}

/// A port free for both TCP and UDP on loopback.
fn free_tcp_and_udp_port() -> u16 {
    loop {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_session_of_a_host_holds_the_well_known_port_and_another_takes_it_over() {
    // A port of this test's own: other tests and other people's runs share the host.
    let port = free_tcp_and_udp_port();
    let port_text = port.to_string();
    let mut vars = STEADY.to_vec();
    vars.push(("INTERLINK_PORT", &port_text));
    vars.push(("RUST_LOG", "interlink_net=debug"));
    let me = Person::here("me", &vars);

    let first = me.session("first", LOOPBACK).await;
    let until = Instant::now() + DEADLINE;
    while !holds(&first, port).await {
        assert!(
            Instant::now() < until,
            "the first session never held port {port}: {:?}\n{}",
            listen_addrs(&first).await,
            first.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A second session of the home starts fine beside it, on random ports only, and
    // meets the first through the port (no bootstrap address, no mDNS).
    let second = me.session("second", LOOPBACK).await;
    assert!(
        !holds(&second, port).await,
        "{:?}",
        listen_addrs(&second).await
    );
    sees(&second, "first")
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n{}", second.stderr()));
    sees(&first, "second").await.unwrap();

    // The holder exits: the second takes the port over within seconds.
    first.close(deadline()).await.unwrap();
    let gone = Instant::now();
    while !holds(&second, port).await {
        assert!(
            gone.elapsed() < TAKEOVER_WITHIN,
            "not taken over within {TAKEOVER_WITHIN:?}: {:?}\n{}",
            listen_addrs(&second).await,
            second.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "well-known port taken over {:?} after the holder exited",
        gone.elapsed()
    );
    // A third session starts beside the new holder and meets it through the port.
    let third = me.session("third", LOOPBACK).await;
    assert!(!holds(&third, port).await);
    sees(&third, "second")
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n{}", third.stderr()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_people_on_a_routed_network_meet_again_with_nothing_configured() {
    let test = "two_people_on_a_routed_network_meet_again_with_nothing_configured";
    let Some(sites) = Sites::for_test(test, Routers::Routed) else {
        return;
    };
    let alice = Person::on_site(&sites, Site::A, "alice");
    let bob = Person::on_site(&sites, Site::B, "bob");
    pair_by_invite(&alice, &bob);
    for p in [&alice, &bob] {
        assert!(
            !p.user.home().join("config.toml").exists(),
            "{}: pairing without a relay wrote no settings",
            p.user.name
        );
        assert!(
            p.user.home().join("addresses.json").exists(),
            "{}: the other's addresses are kept",
            p.user.name
        );
    }

    // Their agents' sessions find each other through the address book alone.
    let a = alice.session("alice-main", &[]).await;
    let b = bob.session("bob-main", &[]).await;
    sees(&b, "alice-main")
        .await
        .unwrap_or_else(|e| panic!("{e:#}\nA: {}\nB: {}", a.stderr(), b.stderr()));
    sees(&a, "bob-main").await.unwrap();
    assert_eq!(
        send_status(&b, "alice", "hello from bob").await,
        "delivered"
    );
    assert_eq!(
        send_status(&a, "bob", "hello from alice").await,
        "delivered"
    );

    // Every session stops; both start again (random ports, but the well-known one).
    a.close(deadline()).await.unwrap();
    b.close(deadline()).await.unwrap();
    let a = alice.session("alice-main", &[]).await;
    let b = bob.session("bob-main", &[]).await;
    let up = Instant::now();
    // The first message once Bob's session sees Alice's (before that it could only be
    // queued): delivered live, within the bound from both being up.
    sees(&b, "alice-main")
        .await
        .unwrap_or_else(|e| panic!("{e:#}\nA: {}\nB: {}", a.stderr(), b.stderr()));
    let status = send_status(&b, "alice", "back again").await;
    let took = up.elapsed();
    eprintln!("both sessions up to the first live delivery: {took:?}");
    assert_eq!(status, "delivered", "A: {}\nB: {}", a.stderr(), b.stderr());
    assert!(took <= LIVE_WITHIN, "{took:?}");
    assert_eq!(send_status(&a, "bob", "and back").await, "delivered");
}
