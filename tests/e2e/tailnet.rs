//! Tailnet discovery (issue 49 item 4): one person's two machines on a routed network
//! (`support/sites.rs`, `Routers::Routed`: no multicast crosses the routers, so mDNS
//! finds nothing), the same identity on both (`identity.key` copied between the homes:
//! the manual route), an MCP session on each, no relay and no bootstrap anywhere.
//! Host A has a `tailscale` on its PATH — a stand-in script, since there is no
//! tailscale on this machine — printing the documented `tailscale status --json`
//! shape (`ipnstate.Status`): host B online, one device offline, and one online device
//! that runs no session (its router's LAN address: nothing listens at the well-known
//! port there). A's session must find B's by probing the well-known port, and
//! `send_message` to `self` must reach the other machine's session both ways.
#![cfg(unix)] // Network namespaces and a shell script as the stand-in CLI.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    os::unix::fs::PermissionsExt as _,
    time::{Duration, Instant},
};

use interlink_e2e::{
    mcp_session::{McpSession, STEADY},
    sites::{Routers, Site, Sites},
    user::User,
};
use interlink_net::config::WELL_KNOWN_PORT;
use serde_json::json;

/// Far longer than anything here takes on a quiet machine: a failure, not a figure.
/// Every test command runs with the well-known port off (tests/support/process.rs); here
/// each host is a namespace of its own, so its sessions hold the default port as on a
/// real machine (`WELL_KNOWN_PORT`, checked where the probes are).
const WELL_KNOWN: (&str, &str) = ("INTERLINK_PORT", "7385");
const WITHIN: Duration = Duration::from_secs(90);

/// The device listed offline: never probed.
const OFFLINE: &str = "10.2.0.99";
/// Site B's router on its LAN: online in the stand-in's list, but no session there.
const SILENT: &str = "10.2.0.1";

/// The stand-in's output: `tailscale status --json` as Tailscale documents it
/// (ipnstate.Status), with the fields this reads and a few it ignores.
fn status_json(self_ip: &str, b_ip: &str) -> String {
    json!({
        "Version": "1.78.1-stand-in",
        "BackendState": "Running",
        "TailscaleIPs": [self_ip],
        "Self": {
            "ID": "nA", "PublicKey": "nodekey:aaaa", "HostName": "host-a",
            "DNSName": "host-a.tail1234.ts.net.", "OS": "linux",
            "TailscaleIPs": [self_ip], "Online": true
        },
        "MagicDNSSuffix": "tail1234.ts.net",
        "Peer": {
            "nodekey:bbbb": {
                "ID": "nB", "PublicKey": "nodekey:bbbb", "HostName": "host-b",
                "DNSName": "host-b.tail1234.ts.net.", "OS": "linux",
                // The IPv6 address is not routed in the lab: IPv4 is the one probed.
                "TailscaleIPs": [b_ip, "fd7a:115c:a1e0::b"],
                "Online": true, "Active": true, "ExitNode": false
            },
            "nodekey:cccc": {
                "ID": "nC", "PublicKey": "nodekey:cccc", "HostName": "old-laptop",
                "DNSName": "old-laptop.tail1234.ts.net.", "OS": "windows",
                "TailscaleIPs": [OFFLINE], "Online": false,
                "LastSeen": "2026-11-30T10:00:00Z"
            },
            "nodekey:dddd": {
                "ID": "nD", "PublicKey": "nodekey:dddd", "HostName": "printer",
                "DNSName": "printer.tail1234.ts.net.", "OS": "linux",
                "TailscaleIPs": [SILENT], "Online": true
            }
        },
        "User": {"1": {"ID": 1, "LoginName": "me@example.com", "DisplayName": "Me"}}
    })
    .to_string()
}

/// Writes the stand-in `tailscale` into `dir`: it records its arguments in
/// `dir/calls` and prints [`status_json`] for `status --json`.
fn stand_in(dir: &std::path::Path, status: &str) {
    let json_path = dir.join("status.json");
    std::fs::write(&json_path, status).unwrap();
    let script = format!(
        "#!/bin/sh\necho \"$*\" >> '{calls}'\n[ \"$1 $2\" = 'status --json' ] || exit 2\n\
         cat '{json}'\n",
        calls = dir.join("calls").display(),
        json = json_path.display(),
    );
    let path = dir.join("tailscale");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The texts of `session`'s unread messages once at least one is there, or the time
/// is up.
async fn receive(session: &McpSession) -> Vec<String> {
    let until = Instant::now() + WITHIN;
    session
        .unread_texts_until(until, |t| !t.is_empty())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_persons_two_machines_on_a_tailnet_find_each_other_with_nothing_typed() {
    let test = "a_persons_two_machines_on_a_tailnet_find_each_other_with_nothing_typed";
    let Some(sites) = Sites::for_test(test, Routers::Routed) else {
        return;
    };
    let bin = tempfile::tempdir().unwrap();
    stand_in(
        bin.path(),
        &status_json(&sites.addr(Site::A), &sites.addr(Site::B)),
    );
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut env_a: Vec<(&str, &str)> = STEADY.to_vec();
    env_a.extend([
        ("RUST_LOG", "interlink_net=debug"),
        ("PATH", path.as_str()),
        WELL_KNOWN,
    ]);
    let mut env_b: Vec<(&str, &str)> = STEADY.to_vec();
    env_b.extend([("RUST_LOG", "interlink_net=debug"), WELL_KNOWN]);

    // One person, two machines: the identity copied from A's home to B's.
    let mut me_a = User::new("me", &env_a).unwrap();
    let mut me_b = User::new("me", &env_b).unwrap();
    let key = interlink_store::paths::IDENTITY_FILE;
    std::fs::copy(me_a.home().join(key), me_b.home().join(key)).unwrap();
    me_a.set_netns(sites.host(Site::A));
    me_b.set_netns(sites.host(Site::B));
    for home in [me_a.home(), me_b.home()] {
        assert!(
            !home.join("config.toml").exists(),
            "no settings file: nothing configured"
        );
    }

    // B's session holds its host's well-known port by itself (each host is a namespace
    // of its own, so the port is the default one, as on a real machine).
    let b = McpSession::start_in_netns(sites.host(Site::B), me_b.home(), "machine-b", &[], &env_b)
        .await
        .unwrap();
    let started = Instant::now();
    let a = McpSession::start_in_netns(sites.host(Site::A), me_a.home(), "machine-a", &[], &env_a)
        .await
        .unwrap();

    // A's session probes the tailnet and finds B's; B sees A over that connection.
    for (viewer, other) in [(&a, "machine-b"), (&b, "machine-a")] {
        viewer
            .poll("discover", json!({}), Instant::now() + WITHIN, |v| {
                v.to_string().contains(other)
            })
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{} never saw {other}: {e:#}\nA: {}\nB: {}",
                    viewer.session,
                    a.stderr(),
                    b.stderr()
                )
            });
    }
    eprintln!("found each other {:?} after A started", started.elapsed());

    // `self` spans the two machines, both ways.
    for (from, to, text) in [(&a, &b, "from A over the tailnet"), (&b, &a, "from B back")] {
        let (_, sent) = from
            .ok("send_message", json!({"to": "self", "text": text}))
            .await
            .unwrap_or_else(|e| panic!("{}: send_message: {e:#}", from.session));
        assert_eq!(sent["status"], "delivered", "{sent}");
        assert_eq!(sent["session_id"], to.session.as_str(), "{sent}");
        let got = receive(to).await;
        assert_eq!(got, vec![text.to_owned()], "{}", to.stderr());
    }

    // The stand-in was run as documented; the offline device was never probed, and
    // the online one with no session did not answer.
    let calls = std::fs::read_to_string(bin.path().join("calls")).unwrap();
    assert!(calls.lines().all(|l| l == "status --json"), "{calls}");
    let log = a.stderr();
    assert_eq!(WELL_KNOWN.1, WELL_KNOWN_PORT.to_string());
    let probed = |ip: &str| log.contains(&format!("/ip4/{ip}/tcp/{WELL_KNOWN_PORT}"));
    assert!(probed(&sites.addr(Site::B)), "{log}");
    assert!(probed(SILENT), "{log}");
    assert!(!probed(OFFLINE), "the offline device was probed:\n{log}");
    assert!(log.contains("a tailnet peer answered"), "{log}");
    assert!(log.contains("no answer from a tailnet peer"), "{log}");
    // Nothing but JSON-RPC on the MCP server's stdout (the child's output included).
    assert_eq!(a.non_jsonrpc_stdout(), Vec::<String>::new());
    let _ = (
        a.close(Instant::now() + WITHIN).await,
        b.close(Instant::now() + WITHIN).await,
    );
}

/// Runs `nft ARGS` in namespace `ns`; its stdout.
fn nft(ns: &str, args: &[&str], input: Option<&str>) -> String {
    use std::io::Write as _;
    let mut child = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "nft"])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(text) = input {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "nft {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The packets and bytes of the counter named `name` in `table`'s listing.
fn counter(listing: &str, name: &str) -> (u64, u64) {
    let line = listing
        .lines()
        .find(|l| l.contains(&format!("comment \"{name}\"")))
        .unwrap_or_else(|| panic!("no counter {name} in {listing}"));
    let word = |w: &str| -> u64 {
        let mut it = line.split_whitespace();
        it.find(|x| *x == w);
        it.next().unwrap().parse().unwrap()
    };
    (word("packets"), word("bytes"))
}

/// The cost of the probes, for docs/BENCHMARKS.md: host A's stand-in lists 20 online
/// devices: host B (a session at the well-known port), site B's router (nothing
/// listens there: it answers a probe with a TCP reset), 9 addresses nobody holds on
/// site B's LAN (the router answers with ICMP host unreachable after its ARP fails) and
/// 9 that silently drop everything (A's own firewall drops the packets after counting
/// them, as a device behind a dropping ACL would). nftables counters in A's namespace
/// count what crosses its interface, per kind of peer, every minute for 3 minutes;
/// the probes are counted from A's log. Run with
/// `cargo test -p interlink-e2e --test tailnet -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "benchmark"]
async fn bench_probe_cost_in_the_lab() {
    let test = "bench_probe_cost_in_the_lab";
    let Some(sites) = Sites::for_test(test, Routers::Routed) else {
        return;
    };
    let b_ip = sites.addr(Site::B);
    let unreachable: Vec<String> = (10..19).map(|i| format!("10.2.0.{i}")).collect();
    let dropping: Vec<String> = (30..39).map(|i| format!("10.2.0.{i}")).collect();
    let mut peers = serde_json::Map::new();
    let listed = std::iter::once(b_ip.clone())
        .chain([SILENT.to_owned()])
        .chain(unreachable.iter().cloned())
        .chain(dropping.iter().cloned());
    for (i, ip) in listed.enumerate() {
        peers.insert(
            format!("nodekey:{i:04}"),
            json!({"HostName": format!("h{i}"), "TailscaleIPs": [ip], "Online": true}),
        );
    }
    let status = json!({
        "BackendState": "Running",
        "Self": {"HostName": "host-a", "TailscaleIPs": [sites.addr(Site::A)], "Online": true},
        "Peer": peers,
    })
    .to_string();
    let bin = tempfile::tempdir().unwrap();
    stand_in(bin.path(), &status);
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The default presence timers, as a real session runs.
    let env_a = [
        ("RUST_LOG", "interlink_net=debug"),
        ("PATH", path.as_str()),
        WELL_KNOWN,
    ];
    let env_b = [("RUST_LOG", "interlink_net=debug"), WELL_KNOWN];
    let mut me_a = User::new("me", &env_a).unwrap();
    let mut me_b = User::new("me", &env_b).unwrap();
    let key = interlink_store::paths::IDENTITY_FILE;
    std::fs::copy(me_a.home().join(key), me_b.home().join(key)).unwrap();
    me_a.set_netns(sites.host(Site::A));
    me_b.set_netns(sites.host(Site::B));

    let ns = sites.host(Site::A);
    let others = "10.2.0.0/24";
    nft(
        ns,
        &["-f", "-"],
        Some(&format!(
            "table inet cost {{\n\
             chain out {{ type filter hook output priority 0;\n\
               ip daddr {b_ip} counter comment \"b_out\"\n\
               ip daddr != {b_ip} ip daddr {others} tcp flags & (syn | ack) == syn counter comment \"syn_out\"\n\
               ip daddr != {b_ip} ip daddr {others} counter comment \"others_out\"\n\
               ip daddr {{ {drop} }} drop\n\
             }}\n\
             chain in {{ type filter hook input priority 0;\n\
               ip saddr {b_ip} counter comment \"b_in\"\n\
               ip saddr != {b_ip} ip saddr {others} counter comment \"others_in\"\n\
             }}\n}}\n",
            drop = dropping.join(", ")
        )),
    );

    let b = McpSession::start_in_netns(sites.host(Site::B), me_b.home(), "machine-b", &[], &env_b)
        .await
        .unwrap();
    let a = McpSession::start_in_netns(ns, me_a.home(), "machine-a", &[], &env_a)
        .await
        .unwrap();
    let mut before = ((0, 0), (0, 0), (0, 0), (0, 0), (0, 0), 0);
    println!(
        "minute | probes | SYNs to non-answering | bytes to / from non-answering | bytes to / from B"
    );
    for minute in 1..=3 {
        tokio::time::sleep(Duration::from_secs(60)).await;
        let listing = nft(ns, &["list", "table", "inet", "cost"], None);
        let probes = a.stderr().matches("probing a tailnet peer").count();
        let now = (
            counter(&listing, "syn_out"),
            counter(&listing, "others_out"),
            counter(&listing, "others_in"),
            counter(&listing, "b_out"),
            counter(&listing, "b_in"),
            probes,
        );
        println!(
            "{minute} | {} | {} | {} / {} | {} / {}",
            now.5 - before.5,
            now.0.0 - before.0.0,
            now.1.1 - before.1.1,
            now.2.1 - before.2.1,
            now.3.1 - before.3.1,
            now.4.1 - before.4.1,
        );
        if minute == 1 {
            // Every listed peer probed once in the first minute (20 < the burst), and
            // B found.
            assert_eq!(probes, 20, "{}", a.stderr());
            assert!(a.stderr().contains("a tailnet peer answered"));
        }
        before = now;
    }
    let _ = (
        a.close(Instant::now() + WITHIN).await,
        b.close(Instant::now() + WITHIN).await,
    );
}
