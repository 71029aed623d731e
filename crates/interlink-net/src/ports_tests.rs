use super::*;

#[test]
fn only_fixed_ip_ports_are_checked() {
    let fixed = |s: &str| fixed_socket(&s.parse().unwrap());
    assert_eq!(
        fixed("/ip4/127.0.0.1/tcp/4001"),
        Some((Proto::Tcp, "127.0.0.1:4001".parse().unwrap()))
    );
    assert_eq!(
        fixed("/ip6/::1/udp/4001/quic-v1"),
        Some((Proto::Udp, "[::1]:4001".parse().unwrap()))
    );
    assert_eq!(fixed("/ip4/0.0.0.0/tcp/0"), None);
    assert_eq!(fixed("/memory/5"), None);
    assert_eq!(fixed("/dns4/example.org/tcp/4001"), None);
}

#[test]
fn a_taken_port_is_refused_naming_this_process_where_the_system_tells() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let addr: Multiaddr = format!("/ip4/127.0.0.1/tcp/{port}").parse().unwrap();
    let err = check_free(&addr).unwrap_err();
    assert!(
        err.contains(&format!("port {port}/tcp is already in use")),
        "{err}"
    );
    // Named where the system says who holds a port: Linux's /proc.
    if cfg!(target_os = "linux") {
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "the holder is named: {err}"
        );
    }
    drop(taken);
    assert_eq!(check_free(&addr), Ok(()));

    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = udp.local_addr().unwrap().port();
    let addr: Multiaddr = format!("/ip4/127.0.0.1/udp/{port}/quic-v1")
        .parse()
        .unwrap();
    let err = check_free(&addr).unwrap_err();
    assert!(err.contains(&format!("port {port}/udp")), "{err}");
}

#[test]
fn the_proc_tables_are_read_by_port_and_state() {
    let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:0FA1 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0\n   1: 0100007F:0FA1 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 999 1 0\n";
    assert_eq!(socket_inodes(table, Proto::Tcp, 4001), vec![12345]);
    assert_eq!(socket_inodes(table, Proto::Tcp, 4002), Vec::<u64>::new());
    assert_eq!(
        command_line(b"interlink-p2p\0mcp\0--session\0a\0"),
        "interlink-p2p mcp --session a"
    );
}
