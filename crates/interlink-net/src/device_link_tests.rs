use interlink_core::wire::{VERSION, link_step};
use serde_bytes::ByteArray;

use super::*;

fn hello() -> LinkRequest {
    LinkRequest {
        v: VERSION,
        step: link_step::HELLO,
        commit: Some(ByteArray::new([0; 32])),
        eph: None,
        addrs: None,
        mac: ByteArray::new([0; 32]),
    }
}

/// A client that sends one request to `server` and then keeps its connection up.
fn client(server: PeerId, addrs: Vec<Multiaddr>) -> PeerId {
    let mut node = LinkNode::new(&Network::default(), false).unwrap();
    let id = node.peer_id();
    tokio::spawn(async move {
        let _ = node
            .request(server, &addrs, hello(), Duration::from_secs(30))
            .await;
        node.while_running(std::future::pending::<()>()).await;
    });
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_holding_connections_cannot_push_the_joiner_out() {
    let mut server = LinkNode::new(&Network::default(), true).unwrap();
    let addrs = server
        .listen(
            &["/ip4/127.0.0.1/tcp/0".parse().unwrap()],
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    let sid = server.peer_id();
    let joiner = client(sid, addrs.clone());
    let first = tokio::time::timeout(Duration::from_secs(10), server.next_request())
        .await
        .unwrap();
    assert_eq!(first.peer, joiner);
    server.protect(joiner);
    // Twice as many strangers as there is room, each keeping its connection.
    for _ in 0..MAX_CONNECTIONS * 2 {
        client(sid, addrs.clone());
    }
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    let mut seen = 0;
    while let Ok(_incoming) = tokio::time::timeout_at(until, server.next_request()).await {
        seen += 1;
    }
    assert!(seen > 0, "no stranger got through");
    assert!(
        server.swarm.is_connected(&joiner),
        "the joiner was pushed out"
    );
    assert!(
        server.open.len() <= MAX_CONNECTIONS,
        "{}",
        server.open.len()
    );
    assert!(server.swarm.network_info().num_peers() <= MAX_CONNECTIONS);
    drop(first);
}
