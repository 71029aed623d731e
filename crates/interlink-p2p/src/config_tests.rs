use std::collections::HashMap;

use super::*;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |k| map.get(k).cloned()
}

#[test]
fn relays_need_their_peer_id_and_allow_listening_nowhere() {
    let relay = "/ip4/10.0.0.9/tcp/4001/p2p/12D3KooWGzhDPTTsdwrqJBu5Mmw4RkqNsvn8BxMSsqjfCz8qGc7N";
    let c = build(
        &Flags::default(),
        env(&[(ENV_RELAY, relay), (ENV_LISTEN, "none")]),
    )
    .unwrap();
    assert_eq!(c.relays.len(), 1);
    assert!(c.listen.is_empty());
    let err = build(
        &Flags::default(),
        env(&[(ENV_RELAY, "/ip4/10.0.0.9/tcp/4001")]),
    )
    .unwrap_err();
    assert!(err.to_string().contains("/p2p/<relay peer id>"), "{err}");
    let err = build(&Flags::default(), env(&[(ENV_LISTEN, "none")])).unwrap_err();
    assert!(err.to_string().contains(ENV_RELAY), "{err}");
}

#[test]
fn defaults_without_flags_or_environment() {
    let c = build(&Flags::default(), env(&[])).unwrap();
    assert_eq!(c.network.as_str(), "default");
    assert_eq!(c.listen, interlink_net::config::default_listen());
    assert!(c.bootstrap.is_empty());
    assert!(c.mdns);
    let tailnet = c.tailnet.expect("tailnet discovery is on by default");
    assert_eq!(tailnet.cli, None, "the CLI is looked for on PATH");
    assert_eq!(
        (c.well_known_port, c.hold_well_known_port),
        (interlink_net::config::WELL_KNOWN_PORT, true)
    );
    assert_eq!(c.presence.live_window_ms, LIVE_WINDOW_MS);
    assert_eq!(c.presence.away_retention_ms, AWAY_RETENTION_MS);
    assert_eq!(c.heartbeat, Duration::from_millis(HEARTBEAT_MS));
}

#[test]
fn environment_is_read() {
    let c = build(
            &Flags::default(),
            env(&[
                (ENV_NETWORK, "team-a"),
                (ENV_LISTEN, "/ip4/127.0.0.1/tcp/0, /ip4/127.0.0.1/udp/0/quic-v1"),
                (
                    ENV_BOOTSTRAP,
                    "/ip4/10.0.0.1/tcp/4001,/dns4/relay.example/tcp/4001/p2p/12D3KooWLEGyHBEPWFBvEgjw6ptnCEpg3XdGsVyao7XT6dD5M58R",
                ),
                (ENV_MDNS, "0"),
                (ENV_PORT, "0"),
            ]),
        )
        .unwrap();
    assert_eq!(c.well_known_port, 0);
    assert_eq!(c.network.as_str(), "team-a");
    assert_eq!(c.listen.len(), 2);
    assert_eq!(c.bootstrap.len(), 2);
    assert!(!c.mdns);
}

#[test]
fn tailnet_discovery_is_turned_off_or_given_a_cli() {
    let c = build(&Flags::default(), env(&[(ENV_TAILNET, "off")])).unwrap();
    assert!(c.tailnet.is_none());
    let c = build(
        &Flags::default(),
        env(&[(ENV_TAILNET, "1"), (ENV_TAILSCALE, "/opt/ts/tailscale")]),
    )
    .unwrap();
    assert_eq!(
        c.tailnet.unwrap().cli,
        Some(std::path::PathBuf::from("/opt/ts/tailscale"))
    );
    let err = build(&Flags::default(), env(&[(ENV_TAILNET, "maybe")])).unwrap_err();
    assert!(
        err.to_string().starts_with("INTERLINK_TAILNET=\"maybe\""),
        "{err}"
    );
}

#[test]
fn flags_override_environment() {
    let flags = Flags {
        network: Some("flagnet".into()),
        listen: vec!["/ip4/127.0.0.1/tcp/0".into()],
        bootstrap: vec![
            "/ip4/127.0.0.1/tcp/1".into(),
            "/ip4/127.0.0.1/tcp/2,/ip4/127.0.0.1/tcp/3".into(),
        ],
        relay: Vec::new(),
        no_mdns: true,
    };
    let c = build(
        &flags,
        env(&[
            (ENV_NETWORK, "envnet"),
            (ENV_LISTEN, "/ip4/0.0.0.0/tcp/9"),
            (ENV_BOOTSTRAP, "/ip4/10.0.0.1/tcp/4001"),
            (ENV_MDNS, "1"),
        ]),
    )
    .unwrap();
    assert_eq!(c.network.as_str(), "flagnet");
    assert_eq!(c.listen, vec!["/ip4/127.0.0.1/tcp/0".parse().unwrap()]);
    assert_eq!(c.bootstrap.len(), 3);
    assert!(!c.mdns);
}

#[test]
fn empty_variables_count_as_unset() {
    let c = build(
        &Flags::default(),
        env(&[(ENV_NETWORK, " "), (ENV_LISTEN, ""), (ENV_MDNS, "")]),
    )
    .unwrap();
    assert_eq!(c.network.as_str(), "default");
    assert!(c.mdns);
    assert!(!c.listen.is_empty());
}

#[test]
fn errors_name_the_variable_and_the_value() {
    // (environment, words the error must contain)
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: &[Case<'_>] = &[
        (&[(ENV_NETWORK, "Bad Name")], &[ENV_NETWORK, "Bad Name"]),
        (
            &[(ENV_LISTEN, "/ip4/127.0.0.1/tcp/0,tcp:4001")],
            &[ENV_LISTEN, "tcp:4001"],
        ),
        (
            &[(ENV_BOOTSTRAP, "/ip4/1.2.3.4/tcp/x")],
            // A value that does not parse shows the form expected.
            &[ENV_BOOTSTRAP, "/ip4/1.2.3.4/tcp/x", "/ip4/ADDRESS/tcp/PORT"],
        ),
        (
            &[(
                ENV_BOOTSTRAP,
                "/p2p/12D3KooWLEGyHBEPWFBvEgjw6ptnCEpg3XdGsVyao7XT6dD5M58R",
            )],
            &[ENV_BOOTSTRAP, "transport address"],
        ),
        (&[(ENV_MDNS, "maybe")], &[ENV_MDNS, "maybe"]),
        (&[(ENV_PORT, "65536")], &[ENV_PORT, "65536", "port number"]),
        (&[(ENV_LISTEN, " , ")], &[ENV_LISTEN, "no listen address"]),
        (
            &[(ENV_TEST_LIVE_WINDOW_MS, "soon")],
            &[ENV_TEST_LIVE_WINDOW_MS, "soon"],
        ),
        (
            &[(ENV_TEST_HEARTBEAT_MS, "0")],
            &[ENV_TEST_HEARTBEAT_MS, "positive"],
        ),
        (
            &[(ENV_TEST_LIVE_WINDOW_MS, "2000")],
            &[ENV_TEST_LIVE_WINDOW_MS, ENV_TEST_HEARTBEAT_MS],
        ),
        (
            &[
                (ENV_TEST_LIVE_WINDOW_MS, "2000"),
                (ENV_TEST_HEARTBEAT_MS, "500"),
                (ENV_TEST_AWAY_RETENTION_MS, "1000"),
            ],
            &[ENV_TEST_AWAY_RETENTION_MS, "1000"],
        ),
    ];
    for (vars, needles) in cases {
        let err = build(&Flags::default(), env(vars)).unwrap_err().to_string();
        for needle in *needles {
            assert!(err.contains(needle), "{err:?} should mention {needle:?}");
        }
    }
    let flags = Flags {
        network: Some("UPPER".into()),
        ..Flags::default()
    };
    let err = build(&flags, env(&[])).unwrap_err().to_string();
    assert!(err.contains("--network") && err.contains("UPPER"), "{err}");
}

#[test]
fn test_knobs_shorten_the_windows() {
    let c = build(
        &Flags::default(),
        env(&[
            (ENV_TEST_LIVE_WINDOW_MS, "2000"),
            (ENV_TEST_AWAY_RETENTION_MS, "60000"),
            (ENV_TEST_HEARTBEAT_MS, "500"),
        ]),
    )
    .unwrap();
    assert_eq!(c.presence.live_window_ms, 2000);
    assert_eq!(c.presence.away_retention_ms, 60_000);
    assert_eq!(c.heartbeat, Duration::from_millis(500));
}
