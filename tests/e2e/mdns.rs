//! Two `interlink-p2p run` processes with no bootstrap address find each other by mDNS.
//! They belong to two people who never paired: each sees the other's session (a knock
//! needs it) and none of its details (PROTOCOL §4.1, "Details"), its own in full.
//!
//! mDNS skips loopback interfaces, and multicast must never leave this machine, so the
//! test builds its own LAN: a network namespace holding a veth pair (two linked
//! interfaces, multicast on, private addresses), and runs every process inside it. Where
//! namespaces cannot be made (not root, no `ip`, a restricted sandbox) it prints why and
//! passes without running.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::Instant;

use interlink_e2e::{
    lan::Lan,
    process::{self, DEADLINE, Session},
};

#[test]
fn two_sessions_find_each_other_by_mdns() {
    let Some(lan) = Lan::for_test("two_sessions_find_each_other_by_mdns") else {
        return;
    };
    process::use_netns(&lan.name);
    let env = [
        ("INTERLINK_NETWORK", "mdns-e2e"),
        ("INTERLINK_TEST_LIVE_WINDOW_MS", "10000"),
        ("INTERLINK_TEST_HEARTBEAT_MS", "1000"),
    ];
    let args = ["--listen", "/ip4/0.0.0.0/tcp/0"];
    let first = Session::start("e2e-mdns-1", &args, &env).unwrap();
    let second = Session::start("e2e-mdns-2", &args, &env).unwrap();

    // The observer reaches only the first session (by its loopback address, mDNS off):
    // it can see the second only if the first found it, and that needed mDNS.
    let boot = first.loopback_addr().unwrap();
    let started = Instant::now();
    process::poll_peers(boot, &env, Instant::now() + DEADLINE, |seen| {
        seen.get("e2e-mdns-1").map(String::as_str) == Some("live")
            && seen.get("e2e-mdns-2").map(String::as_str) == Some("live")
    })
    .unwrap_or_else(|e| panic!("{e}\nfirst session's stderr:\n{}", first.process.stderr()));
    eprintln!("found each other within {:?}", started.elapsed());

    // What a stranger found by mDNS reads: the session, not its work. The peers view,
    // run from the second session's home, reads as that person.
    let out = process::command(second.home(), &env)
        .unwrap()
        .args(["peers", "--json", "--no-mdns", "--bootstrap"])
        .arg(second.loopback_addr().unwrap())
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{printed}");
    let report: serde_json::Value = serde_json::from_str(&printed).unwrap();
    let session = |id: &str| {
        report["identities"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|i| i["sessions"].as_array().unwrap())
            .find(|s| s["session_id"] == id)
            .unwrap_or_else(|| panic!("{id} is not in {printed}"))
            .clone()
    };
    let stranger = session("e2e-mdns-1");
    assert_eq!(stranger["private"], true, "{stranger}");
    for field in ["cwd", "summary", "git_label", "host", "delivery"] {
        assert_eq!(
            stranger[field],
            serde_json::Value::Null,
            "{field}: {stranger}"
        );
    }
    let own = session("e2e-mdns-2");
    assert_eq!(own["private"], false, "{own}");
    assert!(own["cwd"].is_string(), "{own}");
}
