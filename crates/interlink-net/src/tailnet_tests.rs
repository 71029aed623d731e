#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use super::*;

/// The shape `tailscale status --json` prints (ipnstate.Status), trimmed to what
/// matters plus a few fields this ignores.
fn status_json(peers: &[(&str, &[&str], bool)]) -> String {
    let peers: Vec<String> = peers
        .iter()
        .enumerate()
        .map(|(i, (name, ips, online))| {
            let ips: Vec<String> = ips.iter().map(|ip| format!("\"{ip}\"")).collect();
            format!(
                "\"nodekey:{i:04}\": {{\"ID\": \"n{i}\", \"HostName\": \"{name}\", \
                 \"DNSName\": \"{name}.tail1234.ts.net.\", \"OS\": \"linux\", \
                 \"TailscaleIPs\": [{}], \"Online\": {online}, \"Active\": false, \
                 \"RxBytes\": 0, \"TxBytes\": 0}}",
                ips.join(", ")
            )
        })
        .collect();
    format!(
        "{{\"Version\": \"1.78.1\", \"BackendState\": \"Running\", \
         \"TailscaleIPs\": [\"100.64.0.1\", \"fd7a:115c:a1e0::1\"], \
         \"Self\": {{\"ID\": \"self\", \"HostName\": \"me\", \
         \"TailscaleIPs\": [\"100.64.0.1\", \"fd7a:115c:a1e0::1\"], \"Online\": true}}, \
         \"MagicDNSSuffix\": \"tail1234.ts.net\", \"Peer\": {{{}}}, \"User\": {{}}}}",
        peers.join(", ")
    )
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn online_peers_are_kept_offline_ones_counted() {
    let json = status_json(&[
        ("desk", &["100.64.0.2", "fd7a:115c:a1e0::2"], true),
        ("old-laptop", &["100.64.0.3"], false),
        ("phone", &["100.64.0.4"], true),
    ]);
    let s = parse_status(json.as_bytes()).unwrap();
    assert_eq!(s.self_ips, vec![ip("100.64.0.1"), ip("fd7a:115c:a1e0::1")]);
    assert_eq!(s.offline, 1);
    assert_eq!(
        s.online,
        vec![
            Peer {
                host_name: "desk".into(),
                ips: vec![ip("100.64.0.2"), ip("fd7a:115c:a1e0::2")]
            },
            Peer {
                host_name: "phone".into(),
                ips: vec![ip("100.64.0.4")]
            },
        ]
    );
}

#[test]
fn no_peers_null_peers_and_missing_fields_parse() {
    let s = parse_status(
        br#"{"BackendState":"Running","Self":{"TailscaleIPs":["100.64.0.1"]},"Peer":null}"#,
    )
    .unwrap();
    assert!(s.online.is_empty());
    let s = parse_status(br#"{}"#).unwrap();
    assert_eq!(s, Status::default());
    // A peer with no Online field, null IPs, or only unusable addresses is not probed.
    let s = parse_status(
        br#"{"Peer":{"a":{"TailscaleIPs":["100.64.0.9"]},"b":{"Online":true,"TailscaleIPs":null},
             "c":{"Online":true,"TailscaleIPs":["not-an-ip","127.0.0.1","0.0.0.0","224.0.0.1"]}}}"#,
    )
    .unwrap();
    assert!(s.online.is_empty(), "{s:?}");
    assert_eq!(s.offline, 1);
}

#[test]
fn malformed_oversized_and_stopped_statuses_are_refused() {
    for bad in [
        &b""[..],
        b"not json",
        b"[1,2]",
        br#"{"Peer": [1]}"#,
        br#"{"Peer": {"a": {"Online": "yes"}}}"#,
        br#"{"Peer": {"a": {"Online": true, "TailscaleIPs": [1]}}}"#,
        br#"{"Peer": {"a": {"Online": true, "TailscaleIPs": ["100.64.0.2"]"#,
    ] {
        assert!(
            matches!(parse_status(bad), Err(ParseError::Json(_))),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    let long = vec![b' '; MAX_STATUS_BYTES + 1];
    assert_eq!(parse_status(&long), Err(ParseError::TooLong));
    assert_eq!(
        parse_status(br#"{"BackendState":"Stopped","Peer":{"a":{"Online":true,"TailscaleIPs":["100.64.0.2"]}}}"#),
        Err(ParseError::NotRunning("Stopped".into()))
    );
}

#[test]
fn a_large_tailnet_is_bounded_by_the_parse() {
    let names: Vec<String> = (0..MAX_LISTED_PEERS + 10)
        .map(|i| format!("h{i}"))
        .collect();
    let ips: Vec<String> = (0..MAX_LISTED_PEERS + 10)
        .map(|i| format!("100.{}.{}.{}", 64 + i / 65536, (i / 256) % 256, i % 256))
        .collect();
    let ip_refs: Vec<[&str; 1]> = ips.iter().map(|s| [s.as_str()]).collect();
    let peers: Vec<(&str, &[&str], bool)> = names
        .iter()
        .zip(&ip_refs)
        .map(|(n, i)| (n.as_str(), &i[..], true))
        .collect();
    let s = parse_status(status_json(&peers).as_bytes()).unwrap();
    assert_eq!(s.online.len(), MAX_LISTED_PEERS);
}

fn config() -> Config {
    Config {
        probes_per_minute: 4,
        ..Config::default()
    }
}

fn online(ips: &[&str]) -> Status {
    Status {
        self_ips: vec![ip("100.64.0.1")],
        online: ips
            .iter()
            .map(|s| Peer {
                host_name: String::new(),
                ips: s.split(',').map(ip).collect(),
            })
            .collect(),
        offline: 0,
    }
}

fn drain(p: &mut Probes) -> Vec<Output> {
    std::iter::from_fn(|| p.poll_output()).collect()
}

fn dials(outputs: &[Output]) -> Vec<String> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Dial { addr, .. } => Some(addr.to_string()),
            Output::ReadStatus => None,
        })
        .collect()
}

#[test]
fn reads_the_status_at_start_and_probes_each_online_peer_once() {
    let t0 = Instant::now();
    let mut p = Probes::new(config(), t0);
    p.handle_timeout(t0);
    assert_eq!(drain(&mut p), vec![Output::ReadStatus]);
    p.handle(
        Input::Status(online(&[
            "100.64.0.2,fd7a:115c:a1e0::2",
            "fd7a:115c:a1e0::3",
        ])),
        t0,
    );
    // IPv4 preferred; an IPv6-only peer is probed over IPv6; one probe per peer.
    assert_eq!(
        dials(&drain(&mut p)),
        vec![
            "/ip4/100.64.0.2/tcp/7385".to_owned(),
            "/ip6/fd7a:115c:a1e0::3/tcp/7385".to_owned()
        ]
    );
    // Answered: never probed again while connected, even after a refresh.
    p.handle(Input::Answered(ip("100.64.0.2")), t0);
    p.handle(Input::Answered(ip("fd7a:115c:a1e0::3")), t0);
    let t1 = t0 + Duration::from_secs(3600);
    p.handle_timeout(t1);
    assert_eq!(drain(&mut p), vec![Output::ReadStatus]);
    p.handle(
        Input::Status(online(&["100.64.0.2", "fd7a:115c:a1e0::3"])),
        t1,
    );
    assert!(drain(&mut p).is_empty());
    assert_eq!(p.stats().answered, 2);
}

#[test]
fn self_is_never_probed() {
    let t0 = Instant::now();
    let mut p = Probes::new(config(), t0);
    p.handle(Input::Status(online(&["100.64.0.1", "100.64.0.2"])), t0);
    assert_eq!(
        dials(&drain(&mut p)),
        vec!["/ip4/100.64.0.2/tcp/7385".to_owned()]
    );
}

#[test]
fn a_peer_that_does_not_answer_is_backed_off_doubling() {
    let t0 = Instant::now();
    let mut p = Probes::new(
        Config {
            probes_per_minute: 1000,
            ..Config::default()
        },
        t0,
    );
    p.handle(Input::Status(online(&["100.64.0.2"])), t0);
    let mut at = t0;
    let mut gaps = Vec::new();
    let mut last = t0;
    // Six hours, stepping through the timeouts as the shell does.
    while at < t0 + Duration::from_secs(6 * 3600) {
        for o in drain(&mut p) {
            match o {
                Output::Dial { ip, .. } => {
                    gaps.push(at.duration_since(last).as_secs());
                    last = at;
                    p.handle(Input::NoAnswer(ip), at);
                }
                Output::ReadStatus => p.handle(Input::Status(online(&["100.64.0.2"])), at),
            }
        }
        at = p.poll_timeout().unwrap().max(at + Duration::from_millis(1));
        p.handle_timeout(at);
    }
    assert_eq!(&gaps[..7], &[0, 60, 120, 240, 480, 960, 1800]);
    assert!(gaps[7..].iter().all(|g| *g == 1800), "{gaps:?}");
}

#[test]
fn a_probe_that_never_ends_counts_as_unanswered() {
    let t0 = Instant::now();
    let mut p = Probes::new(config(), t0);
    p.handle(Input::Status(online(&["100.64.0.2"])), t0);
    assert_eq!(dials(&drain(&mut p)).len(), 1);
    let timeout = t0 + Config::default().probe_timeout;
    assert_eq!(p.poll_timeout(), Some(timeout));
    p.handle_timeout(timeout);
    assert_eq!(p.stats().unanswered, 1);
    // Probed again after the first backoff.
    p.handle_timeout(timeout + Config::default().min_backoff);
    assert_eq!(dials(&drain(&mut p)).len(), 1);
}

#[test]
fn the_count_is_capped_and_the_rate_budgeted() {
    let t0 = Instant::now();
    let mut p = Probes::new(
        Config {
            max_peers: 10,
            probes_per_minute: 4,
            ..Config::default()
        },
        t0,
    );
    let ips: Vec<String> = (2..30).map(|i| format!("100.64.0.{i}")).collect();
    let refs: Vec<&str> = ips.iter().map(String::as_str).collect();
    p.handle(Input::Status(online(&refs)), t0);
    assert_eq!(p.stats().over_cap, 18);
    // The burst: four at once.
    let mut probed = dials(&drain(&mut p));
    assert_eq!(probed.len(), 4);
    // Then one every 15 s: within the first minute four more.
    let mut at = loop {
        let next = p.poll_timeout().unwrap();
        if next > t0 + Duration::from_secs(60) {
            break next;
        }
        p.handle_timeout(next);
        probed.extend(dials(&drain(&mut p)));
    };
    assert_eq!(probed.len(), 8, "in the first minute: {probed:?}");
    // Unanswered, they are probed again; but never any beyond the first ten.
    while at < t0 + Duration::from_secs(3600) {
        p.handle_timeout(at);
        probed.extend(dials(&drain(&mut p)));
        at = p.poll_timeout().unwrap().max(at + Duration::from_millis(1));
    }
    probed.sort();
    probed.dedup();
    assert_eq!(probed.len(), 10, "never more than the cap");
}

#[test]
fn a_disconnected_peer_is_probed_again_and_a_network_change_reads_and_probes_at_once() {
    let t0 = Instant::now();
    let mut p = Probes::new(config(), t0);
    p.handle_timeout(t0);
    drain(&mut p);
    p.handle(Input::Status(online(&["100.64.0.2", "100.64.0.3"])), t0);
    drain(&mut p);
    p.handle(Input::Answered(ip("100.64.0.2")), t0);
    p.handle(Input::NoAnswer(ip("100.64.0.3")), t0);
    let t1 = t0 + Duration::from_secs(5);
    p.handle(Input::Disconnected(ip("100.64.0.2")), t1);
    assert!(drain(&mut p).is_empty(), "not before the first backoff");
    p.handle_timeout(t1 + Duration::from_secs(10));
    assert!(drain(&mut p).is_empty(), "not before the first backoff");
    // A change of network: the status is read again (not sooner than min_refresh
    // after the last read) and the backed-off peer is probed now.
    let t2 = t0 + Duration::from_secs(20);
    p.handle(Input::NetworkChanged, t2);
    let out = drain(&mut p);
    assert!(out.contains(&Output::ReadStatus), "{out:?}");
    assert_eq!(
        dials(&out),
        vec!["/ip4/100.64.0.2/tcp/7385", "/ip4/100.64.0.3/tcp/7385"]
    );
    // A second change right away does not read again.
    p.handle(Input::Status(online(&["100.64.0.2", "100.64.0.3"])), t2);
    p.handle(Input::NetworkChanged, t2 + Duration::from_secs(1));
    assert!(!drain(&mut p).contains(&Output::ReadStatus));
}

#[test]
fn a_peer_gone_offline_is_forgotten_and_a_failed_read_waits_for_the_refresh() {
    let t0 = Instant::now();
    let mut p = Probes::new(config(), t0);
    p.handle_timeout(t0);
    drain(&mut p);
    p.handle(Input::StatusFailed, t0);
    assert_eq!(p.poll_timeout(), Some(t0 + Config::default().refresh));
    p.handle(Input::Status(online(&["100.64.0.2"])), t0);
    drain(&mut p);
    p.handle(Input::NoAnswer(ip("100.64.0.2")), t0);
    p.handle(Input::Status(online(&[])), t0);
    assert_eq!(p.poll_timeout(), Some(t0 + Config::default().refresh));
    // An answer for a peer no longer tracked changes nothing.
    p.handle(Input::Answered(ip("100.64.0.2")), t0);
    assert_eq!(p.stats().answered, 0);
}

#[test]
fn a_peer_that_drops_every_connection_at_once_backs_off_one_that_lasted_does_not() {
    let t0 = Instant::now();
    let mut p = Probes::new(
        Config {
            probes_per_minute: 1000,
            // No status read in between.
            refresh: Duration::from_secs(86400),
            ..Config::default()
        },
        t0,
    );
    p.handle(Input::Status(online(&["100.64.0.2"])), t0);
    let mut at = t0;
    let mut waits = Vec::new();
    for _ in 0..4 {
        assert_eq!(dials(&drain(&mut p)).len(), 1);
        p.handle(Input::Answered(ip("100.64.0.2")), at);
        p.handle(Input::Disconnected(ip("100.64.0.2")), at);
        let next = p.poll_timeout().unwrap();
        waits.push(next.duration_since(at).as_secs());
        at = next;
        p.handle_timeout(at);
    }
    assert_eq!(waits, vec![60, 120, 240, 480]);
    // A connection that lasted an hour: the next probe comes after the first backoff.
    assert_eq!(dials(&drain(&mut p)).len(), 1);
    p.handle(Input::Answered(ip("100.64.0.2")), at);
    let later = at + Duration::from_secs(3600);
    p.handle(Input::Disconnected(ip("100.64.0.2")), later);
    assert_eq!(p.poll_timeout(), Some(later + Duration::from_secs(60)));
}

/// The cost of the probes, for docs/BENCHMARKS.md: `n` tailnet peers online of which
/// `m` run a session at the well-known port, over `minutes`; probes started per
/// minute, in the first minutes and in steady state. Run with
/// `cargo test -p interlink-net --lib tailnet::tests::probe_cost -- --nocapture`.
#[test]
fn probe_cost() {
    for (n, m) in [(5, 2), (20, 3), (64, 4), (200, 4)] {
        let t0 = Instant::now();
        let mut p = Probes::new(Config::default(), t0);
        let ips: Vec<String> = (0..n)
            .map(|i| format!("100.64.{}.{}", i / 250, 2 + i % 250))
            .collect();
        let refs: Vec<&str> = ips.iter().map(String::as_str).collect();
        let answers = |ip: IpAddr| ips[..m].iter().any(|s| s.parse::<IpAddr>().unwrap() == ip);
        let mut per_minute = vec![0u64; 121];
        let mut at = t0;
        p.handle_timeout(at);
        while at < t0 + Duration::from_secs(120 * 60) {
            for o in drain(&mut p) {
                match o {
                    Output::ReadStatus => p.handle(Input::Status(online(&refs)), at),
                    Output::Dial { ip, .. } => {
                        per_minute[(at.duration_since(t0).as_secs() / 60) as usize] += 1;
                        let reply = if answers(ip) {
                            Input::Answered(ip)
                        } else {
                            Input::NoAnswer(ip)
                        };
                        p.handle(reply, at);
                    }
                }
            }
            at = p.poll_timeout().unwrap().max(at + Duration::from_millis(1));
            p.handle_timeout(at);
        }
        let first_hour: u64 = per_minute[..60].iter().sum();
        let second_hour: u64 = per_minute[60..120].iter().sum();
        eprintln!(
            "N={n} M={m}: minute 1: {}, minute 2: {}, minute 3: {}, first hour: {first_hour}, \
             second hour: {second_hour} ({:.2}/min), statuses read: {}",
            per_minute[0],
            per_minute[1],
            per_minute[2],
            second_hour as f64 / 60.0,
            p.stats().statuses
        );
        let tracked = n.min(MAX_PEERS) as u64;
        // Every tracked peer is probed in the first two minutes, never more than the
        // burst plus a minute's refill in a minute, and in steady state each unanswered
        // peer about every 30 min.
        assert!(
            per_minute
                .iter()
                .all(|c| *c <= 2 * u64::from(PROBES_PER_MINUTE))
        );
        assert!(per_minute[0] + per_minute[1] >= tracked);
        let unanswered = tracked - m as u64;
        assert!(
            second_hour <= 2 * unanswered + unanswered / 2 + 1,
            "{second_hour}"
        );
    }
}
