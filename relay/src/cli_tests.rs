use super::*;

#[test]
fn durations_parse() {
    assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
    assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
    assert!(parse_duration("1w").is_err());
    assert!(parse_duration("h").is_err());
    assert!(parse_duration("99999999999999999d").is_err());
}

#[test]
fn flags_make_a_config() {
    let args = Args::try_parse_from([
        "interlink-relay",
        "--key",
        "/k",
        "--db",
        "/d.redb",
        "--listen",
        "/ip4/127.0.0.1/tcp/0",
        "--external",
        "/ip4/100.64.0.1/tcp/4001",
        "--metrics",
        "127.0.0.1:9464",
        "--network",
        "lab",
        "--retention",
        "2d",
    ])
    .unwrap();
    let c = args.into_config().unwrap();
    assert_eq!(c.listen.len(), 1);
    assert_eq!(c.external.len(), 1);
    assert_eq!(c.network.as_str(), "lab");
    assert_eq!(c.caps.mailbox.retention_ms, 2 * DAY_MS);
    assert!(c.metrics_addr.is_some());
    let defaults = Args::try_parse_from(["interlink-relay"])
        .unwrap()
        .into_config()
        .unwrap();
    assert_eq!(defaults.listen, default_listen());
    assert!(
        Args::try_parse_from(["interlink-relay", "--network", "Bad!"])
            .unwrap()
            .into_config()
            .is_err()
    );
}
