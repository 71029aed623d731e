use super::*;

#[test]
fn durations() {
    assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
    assert_eq!(parse_duration("30"), Ok(Duration::from_secs(1800)));
    assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
    assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
    assert!(parse_duration("0m").is_err());
    assert!(parse_duration("1w").is_err());
    assert!(parse_duration("soon").is_err());
}

#[test]
fn a_code_carries_routable_addresses_first_and_tcp_before_quic() {
    let a = |s: &str| s.parse::<Multiaddr>().unwrap();
    let addrs = [
        a("/ip4/127.0.0.1/tcp/1"),
        a("/ip4/192.168.1.5/udp/2/quic-v1"),
        a("/ip4/192.168.1.5/tcp/2"),
        a("/ip4/10.0.0.1/tcp/3/p2p-circuit"),
    ];
    assert_eq!(
        direct_addrs(&addrs, 7385, 3),
        vec![
            a("/ip4/192.168.1.5/tcp/2"),
            a("/ip4/192.168.1.5/udp/2/quic-v1")
        ]
    );
    assert_eq!(
        direct_addrs(&addrs[..1], 7385, 3),
        vec![a("/ip4/127.0.0.1/tcp/1")]
    );
    assert_eq!(direct_addrs(&addrs, 7385, 1).len(), 1);
    // The host's well-known port first, whatever the order of the addresses.
    let mut held = addrs.to_vec();
    held.push(a("/ip4/192.168.1.5/udp/7385/quic-v1"));
    held.push(a("/ip4/192.168.1.5/tcp/7385"));
    assert_eq!(
        direct_addrs(&held, 7385, 3),
        vec![
            a("/ip4/192.168.1.5/tcp/7385"),
            a("/ip4/192.168.1.5/udp/7385/quic-v1"),
            a("/ip4/192.168.1.5/tcp/2"),
        ]
    );
    assert_eq!(direct_addrs(&held, 0, 1), vec![a("/ip4/192.168.1.5/tcp/2")]);
}
