//! Real `interlink-p2p` processes on loopback: sessions joined by bootstrap addresses,
//! presence as the others see it after a kill and after a clean stop, `peers --watch`
//! and `probe`.
//!
//! Every process has its own temporary home and session id, listens on
//! 127.0.0.1 port 0 with mDNS off, and is killed by its guard if a test fails. The
//! test knobs shorten the presence windows (docs/CONFIG.md).
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::{Duration, Instant};

use interlink_e2e::process::{self, DEADLINE, Guard, Session, command, presences, run_to_end};
use serde_json::{Value, json};

const LOOPBACK: &[&str] = &["--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns"];

/// A live window long enough that a loaded machine never shows a running session as
/// away, with a heartbeat well inside it.
const STEADY: &[(&str, &str)] = &[
    ("INTERLINK_TEST_LIVE_WINDOW_MS", "10000"),
    ("INTERLINK_TEST_HEARTBEAT_MS", "1000"),
];

/// A 2 s live window, so a killed session turns away quickly.
const SHORT: &[(&str, &str)] = &[
    ("INTERLINK_TEST_LIVE_WINDOW_MS", "2000"),
    ("INTERLINK_TEST_HEARTBEAT_MS", "500"),
];

/// Starts `ids[0]`, then the others bootstrapping to its loopback address.
fn start_overlay(ids: &[&str], env: &[(&str, &str)]) -> Vec<Session> {
    let first = Session::start(ids[0], LOOPBACK, env).unwrap();
    let boot = first.loopback_addr().unwrap().to_owned();
    let mut all = vec![first];
    for id in &ids[1..] {
        let mut args = LOOPBACK.to_vec();
        args.extend(["--bootstrap", &boot]);
        all.push(Session::start(id, &args, env).unwrap());
    }
    all
}

fn all_live<'a>(
    ids: &'a [&'a str],
) -> impl Fn(&std::collections::BTreeMap<String, String>) -> bool + 'a {
    move |seen| {
        seen.len() == ids.len()
            && ids
                .iter()
                .all(|id| seen.get(*id).map(String::as_str) == Some("live"))
    }
}

#[test]
fn three_sessions_joined_by_bootstrap_see_each_other() {
    let ids = ["e2e-a1", "e2e-a2", "e2e-a3"];
    let sessions = start_overlay(&ids, STEADY);
    let boot = sessions[0].loopback_addr().unwrap();
    let report =
        process::poll_peers(boot, STEADY, Instant::now() + DEADLINE, all_live(&ids)).unwrap();

    // Three identities (one home each), each with its PeerId, addresses and a link;
    // their details are sealed for themselves, not for this observer's fresh home.
    let identities = report["identities"].as_array().unwrap();
    assert_eq!(identities.len(), 3);
    for ident in identities {
        let s = &ident["sessions"][0];
        assert_eq!(ident["fingerprint"].as_str().unwrap().len(), 14);
        assert!(s["peer_id"].as_str().unwrap().starts_with("12D3KooW"));
        assert!(!s["addrs"].as_array().unwrap().is_empty());
        assert_eq!(
            (&s["private"], &s["host"]),
            (&json!(true), &Value::Null),
            "{s}"
        );
    }
    // Read from the first session's home, its own session shows them.
    let own = process::peers_json_as(sessions[0].home(), boot, STEADY, &[]).unwrap();
    let mine = own["identities"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|i| i["sessions"].as_array().unwrap())
        .find(|s| s["session_id"] == "e2e-a1")
        .unwrap();
    assert_eq!(
        (&mine["host"], &mine["delivery"]),
        (&json!("other"), &json!("poll")),
        "{mine}"
    );
    let diag = &report["diagnostics"];
    assert!(!diag["connected_peers"].as_array().unwrap().is_empty());
    assert!(diag["topic_peers"].as_u64().unwrap() >= 1);
}

#[test]
fn a_killed_session_turns_away_not_gone() {
    let ids = ["e2e-b1", "e2e-b2", "e2e-b3"];
    let mut sessions = start_overlay(&ids, SHORT);
    let boot = sessions[0].loopback_addr().unwrap().to_owned();
    process::poll_peers(&boot, SHORT, Instant::now() + DEADLINE, all_live(&ids)).unwrap();

    // SIGKILL: no goodbye. Silence is not death: the others keep it, as away.
    sessions[2].process.kill().unwrap();
    let report = process::poll_peers(&boot, SHORT, Instant::now() + DEADLINE, |seen| {
        seen.get("e2e-b3").map(String::as_str) == Some("away")
    })
    .unwrap();
    let seen = presences(&report);
    assert!(
        seen.contains_key("e2e-b1") && seen.contains_key("e2e-b2"),
        "{seen:?}"
    );
    // Away only once its last announcement is older than the 2 s live window.
    let age = report["identities"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|i| i["sessions"].as_array().unwrap())
        .find(|s| s["session_id"] == "e2e-b3")
        .and_then(|s| s["age_ms"].as_u64())
        .unwrap();
    assert!(age >= 2000, "away at age {age} ms");
}

#[test]
fn a_session_stopped_with_sigterm_is_gone_at_once() {
    let ids = ["e2e-c1", "e2e-c2", "e2e-c3"];
    let mut sessions = start_overlay(&ids, STEADY);
    let boot = sessions[0].loopback_addr().unwrap().to_owned();
    process::poll_peers(&boot, STEADY, Instant::now() + DEADLINE, all_live(&ids)).unwrap();

    let leaving = &mut sessions[2].process;
    leaving.signal("TERM").unwrap();
    let status = leaving
        .wait(Instant::now() + Duration::from_secs(5))
        .unwrap();
    assert!(status.success(), "exit {status}: {}", leaving.stderr());
    // Nothing on stdout after `ready`.
    assert_eq!(leaving.remaining_lines(), Vec::<String>::new());
    let exited = Instant::now();

    // The goodbye removes it everywhere at once. The live window is 10 s and the away
    // retention 3 days, so an absence this early can only be the goodbye.
    let report = process::poll_peers(&boot, STEADY, exited + Duration::from_secs(5), |seen| {
        !seen.contains_key("e2e-c3")
    })
    .unwrap();
    let seen = presences(&report);
    assert_eq!(
        seen.get("e2e-c1").map(String::as_str),
        Some("live"),
        "{seen:?}"
    );
    assert_eq!(
        seen.get("e2e-c2").map(String::as_str),
        Some("live"),
        "{seen:?}"
    );
}

#[test]
fn probe_names_a_running_session_and_reports_a_closed_port() {
    let session = Session::start("e2e-probe", LOOPBACK, STEADY).unwrap();
    let addr = session.loopback_addr().unwrap();
    let deadline = || Instant::now() + DEADLINE;

    let mut id = command(session.home(), &[]).unwrap();
    id.args(["id", "--json"]);
    let (status, out, _) = run_to_end(id, deadline()).unwrap();
    assert!(status.success());
    let fingerprint = serde_json::from_str::<serde_json::Value>(&out).unwrap()["fingerprint"]
        .as_str()
        .unwrap()
        .to_owned();

    let home = tempfile::tempdir().unwrap();
    let mut probe = command(home.path(), &[]).unwrap();
    probe.args(["probe", addr, "--timeout", "10"]);
    let (status, out, err) = run_to_end(probe, deadline()).unwrap();
    assert_eq!(status.code(), Some(0), "{out}{err}");
    assert_eq!(
        out,
        format!(
            "interlink-p2p node {fingerprint} session e2e-probe version {}\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    // The probe did not join the roster.
    let report = process::peers_json(addr, STEADY, &[]).unwrap();
    assert_eq!(presences(&report).len(), 1);

    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut probe = command(home.path(), &[]).unwrap();
    probe.args([
        "probe",
        &format!("/ip4/127.0.0.1/tcp/{port}"),
        "--timeout",
        "5",
    ]);
    let (status, out, err) = run_to_end(probe, deadline()).unwrap();
    assert_eq!(status.code(), Some(2), "{out}{err}");
    assert!(out.starts_with("unreachable: "), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
}

#[test]
fn peers_watch_reprints_on_change_and_its_observer_has_no_session() {
    let first = Session::start("e2e-w1", LOOPBACK, STEADY).unwrap();
    let boot = first.loopback_addr().unwrap().to_owned();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = command(home.path(), STEADY).unwrap();
    cmd.args(["peers", "--json", "--watch", "--bootstrap", &boot])
        .args(LOOPBACK);
    let mut watcher = Guard::spawn(cmd, home.path().join("stderr.log")).unwrap();
    let deadline = Instant::now() + DEADLINE;
    let parse = |line: Option<String>| -> serde_json::Value {
        serde_json::from_str(&line.expect("watch output ended")).unwrap()
    };
    let report = parse(watcher.next_line(deadline).unwrap());
    assert_eq!(presences(&report).len(), 1, "{report}");

    let mut args = LOOPBACK.to_vec();
    args.extend(["--bootstrap", &boot]);
    let _second = Session::start("e2e-w2", &args, STEADY).unwrap();
    loop {
        let report = parse(watcher.next_line(deadline).unwrap());
        if presences(&report).contains_key("e2e-w2") {
            break;
        }
    }

    // The observer is an interlink node without a session.
    let diag = &report["diagnostics"];
    let observer = format!(
        "{}/p2p/{}",
        diag["listen_addrs"][0].as_str().unwrap(),
        diag["peer_id"].as_str().unwrap()
    );
    let mut probe = command(home.path(), &[]).unwrap();
    probe.args(["probe", &observer, "--timeout", "10"]);
    let (status, out, err) = run_to_end(probe, Instant::now() + DEADLINE).unwrap();
    assert_eq!(status.code(), Some(5), "{out}{err}");
    assert!(out.contains("without a session"), "{out}");

    watcher.signal("INT").unwrap();
    let status = watcher
        .wait(Instant::now() + Duration::from_secs(5))
        .unwrap();
    assert!(status.success(), "exit {status}: {}", watcher.stderr());
}

/// Two sessions that both listen on TCP and QUIC, the second given only the first's TCP
/// address (as users give each other addresses): once identify tells it the first
/// listens on QUIC, the second reaches it there and closes its TCP connection, so a
/// lossy link does not stall it behind TCP's retransmissions (`node::quic_upgrade`).
#[test]
fn sessions_that_meet_over_tcp_move_to_quic() {
    let both = [
        "--listen",
        "/ip4/127.0.0.1/tcp/0,/ip4/127.0.0.1/udp/0/quic-v1",
        "--no-mdns",
    ];
    let first = Session::start("e2e-q1", &both, STEADY).unwrap();
    let tcp = first
        .addrs
        .iter()
        .find(|a| a.starts_with("/ip4/127.0.0.1/tcp/"))
        .unwrap()
        .clone();
    let first_id = tcp.rsplit('/').next().unwrap().to_owned();
    let mut args = both.to_vec();
    args.extend(["--bootstrap", &tcp]);
    let second = Session::start("e2e-q2", &args, STEADY).unwrap();
    let until = Instant::now() + DEADLINE;
    loop {
        let mut cmd = command(second.home(), STEADY).unwrap();
        cmd.args(["peers", "--session", "e2e-q2", "--json"]);
        let (_, out, _) = run_to_end(cmd, Instant::now() + DEADLINE).unwrap();
        let view: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
        let peer = view["peers"]
            .as_array()
            .and_then(|p| p.iter().find(|p| p["peer_id"] == first_id.as_str()))
            .cloned();
        if let Some(p) = &peer
            && p["transports"] == serde_json::json!(["quic"])
            && view["tcp_moved_to_quic"].as_u64() >= Some(1)
        {
            assert_eq!(p["route"], "direct", "{p}");
            break;
        }
        assert!(
            Instant::now() < until,
            "the peer met over TCP is not reached over QUIC alone: {peer:?}\n{out}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
