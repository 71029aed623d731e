//! The sessionless probe against real nodes and non-nodes on loopback TCP.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{io::Write as _, net::TcpListener, sync::Arc, time::Duration};

use interlink_core::{
    Identity, SessionId,
    names::Network,
    wire::{DeliveryMode, HostKind},
};
use interlink_net::{Config, Node, Role, SessionSpec, probe};
use libp2p::{Multiaddr, multiaddr::Protocol};

const LIMIT: Duration = Duration::from_secs(10);

fn loopback_config(network: &str) -> Config {
    Config {
        max_process_memory: interlink_testkit::IN_PROCESS_MEMORY,
        network: Network::new(network).unwrap(),
        listen: vec!["/ip4/127.0.0.1/tcp/0".parse().unwrap()],
        mdns: false,
        ..Config::default()
    }
}

/// Starts a node on loopback TCP; returns it and its dialable address with `/p2p/`.
async fn start(network: &str, role: Role) -> (Node, Multiaddr) {
    let node = interlink_testkit::node::spawn(loopback_config(network), role);
    let handle = node.handle();
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        let d = handle.diagnostics().await.unwrap();
        if let Some(addr) = d.listen_addrs.first() {
            return (node, addr.clone().with(Protocol::P2p(handle.peer_id())));
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "node never listened"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn session(seed: u8, id: &str) -> (Role, Arc<Identity>) {
    let identity = Arc::new(Identity::from_seed(&[seed; 32]));
    let role = Role::Session(Box::new(SessionSpec {
        identity: identity.clone(),
        session: SessionId::new(id).unwrap(),
        cwd: "/work/probe".into(),
        git_label: None,
        project: None,
        summary: "probe target".into(),
        host: HostKind::Other,
        delivery: DeliveryMode::Poll,
        visibility: interlink_net::Visibility::Announced,
    }));
    (role, identity)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finds_the_session_of_a_running_node() {
    let (role, identity) = session(7, "probe-me");
    let (node, addr) = start("default", role).await;
    let found = probe::probe(addr.clone(), &Network::default(), LIMIT)
        .await
        .unwrap();
    assert_eq!(found.session.as_str(), "probe-me");
    assert_eq!(found.fingerprint, identity.public().fingerprint());
    assert_eq!(found.peer_id, node.handle().peer_id());
    assert!(
        found.version.starts_with("interlink-p2p/"),
        "{}",
        found.version
    );

    // Without the /p2p/ suffix too.
    let bare: Multiaddr = addr
        .iter()
        .filter(|p| !matches!(p, Protocol::P2p(_)))
        .collect();
    let found = probe::probe(bare, &Network::default(), LIMIT)
        .await
        .unwrap();
    assert_eq!(found.session.as_str(), "probe-me");

    // The probe joined no roster.
    let roster = node.handle().roster().await.unwrap();
    assert_eq!(roster.iter().map(|i| i.sessions.len()).sum::<usize>(), 1);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_has_no_session() {
    let (node, addr) = start("default", Role::Observer).await;
    let err = probe::probe(addr, &Network::default(), LIMIT)
        .await
        .unwrap_err();
    assert!(matches!(err, probe::Error::NoSession { .. }), "{err}");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_of_another_network_is_named_as_such() {
    let (role, _) = session(8, "elsewhere");
    let (node, addr) = start("other-net", role).await;
    for _ in 0..5 {
        let err = probe::probe(addr.clone(), &Network::default(), LIMIT)
            .await
            .unwrap_err();
        match err {
            probe::Error::OtherNetwork { theirs, ours } => {
                assert_eq!(theirs, "interlink-p2p/1/other-net");
                assert_eq!(ours, "interlink-p2p/1/default");
            }
            other => panic!("expected OtherNetwork, got {other}"),
        }
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_port_is_unreachable() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr: Multiaddr = format!("/ip4/127.0.0.1/tcp/{port}").parse().unwrap();
    let err = probe::probe(addr, &Network::default(), LIMIT)
        .await
        .unwrap_err();
    assert!(matches!(err, probe::Error::Unreachable(_)), "{err}");
}

/// What a one-shot server does with its connection.
type Serve = Box<dyn FnOnce(std::net::TcpStream) + Send>;

/// Serves one connection with `serve`, on a thread; returns its address.
fn one_shot_server(
    serve: impl FnOnce(std::net::TcpStream) + Send + 'static,
) -> (Multiaddr, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let thread = std::thread::spawn(move || {
        if let Ok((stream, _)) = listener.accept() {
            serve(stream);
        }
    });
    let addr = format!("/ip4/127.0.0.1/tcp/{port}").parse().unwrap();
    (addr, thread)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_speaking_something_else_is_not_interlink() {
    use std::io::Read as _;
    let servers: Vec<(&str, Serve)> = vec![
        (
            "answers without reading",
            Box::new(|mut s| {
                let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
                std::thread::sleep(Duration::from_millis(200));
            }),
        ),
        (
            "reads, answers, closes",
            Box::new(|mut s| {
                let mut buf = [0u8; 256];
                let _ = s.read(&mut buf);
                let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
                let _ = s.shutdown(std::net::Shutdown::Both);
            }),
        ),
        ("closes at once", Box::new(drop)),
    ];
    for (what, serve) in servers {
        let (addr, server) = one_shot_server(serve);
        let err = probe::probe(addr, &Network::default(), LIMIT)
            .await
            .unwrap_err();
        assert!(
            matches!(err, probe::Error::NotInterlink(_)),
            "server that {what}: {err}"
        );
        server.join().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_times_out() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let addr: Multiaddr = format!("/ip4/127.0.0.1/tcp/{port}").parse().unwrap();
    let err = probe::probe(addr, &Network::default(), Duration::from_millis(800))
        .await
        .unwrap_err();
    assert!(matches!(err, probe::Error::Timeout(_)), "{err}");
    drop(listener);
}
