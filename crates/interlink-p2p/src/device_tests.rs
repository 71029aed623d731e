use interlink_net::config::WELL_KNOWN_PORT;

use super::*;

#[test]
fn host_addresses_are_the_ips_at_the_well_known_port() {
    let listen: Vec<Multiaddr> = [
        "/ip4/127.0.0.1/tcp/40001/p2p/12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf",
        "/ip4/10.0.1.2/tcp/40001",
        "/ip4/10.0.1.2/udp/40002/quic-v1",
        "/ip4/0.0.0.0/tcp/1",
    ]
    .iter()
    .map(|a| a.parse().unwrap())
    .collect();
    assert_eq!(
        host_addrs(&listen, WELL_KNOWN_PORT),
        vec![
            format!("/ip4/10.0.1.2/tcp/{WELL_KNOWN_PORT}"),
            format!("/ip4/10.0.1.2/udp/{WELL_KNOWN_PORT}/quic-v1"),
        ]
    );
    // Loopback only when nothing else: two homes on one host.
    let lo: Vec<Multiaddr> = vec!["/ip4/127.0.0.1/tcp/4".parse().unwrap()];
    assert_eq!(host_addrs(&lo, WELL_KNOWN_PORT).len(), 2);
    assert_eq!(host_addrs(&listen, 7400)[0], "/ip4/10.0.1.2/tcp/7400");
    assert!(
        host_addrs(&listen, 0).is_empty(),
        "no well-known port: nothing lasting"
    );
    assert_eq!(code_addrs(&listen).len(), 3);
    assert!(
        code_addrs(&listen)
            .iter()
            .all(|a| !a.to_string().contains("127.0.0.1"))
    );
    assert_eq!(code_addrs(&lo), lo);
}

#[test]
fn a_device_code_lasts_minutes() {
    assert_eq!(
        device_lifetime(None).unwrap(),
        Duration::from_millis(DEFAULT_CODE_LIFETIME_MS)
    );
    assert!(device_lifetime(Some(Duration::from_secs(3600))).is_err());
    assert!(device_lifetime(Some(Duration::from_secs(600))).is_ok());
}
