use std::time::Duration;

use anyhow::Result;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};
use tokio_util::sync::CancellationToken;

use interlink_testkit as testkit;

use crate::{Config, StartError, metrics::Probe, start};

const TEST_TIMEOUT: Duration = Duration::from_secs(20);

async fn get(addr: std::net::SocketAddr, path: &str) -> Result<String> {
    let mut s = TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes())
        .await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    Ok(out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default())
}

fn config(dir: &std::path::Path) -> Config {
    Config::new(dir.join("relay.key"), dir.join("mailboxes.redb"))
        .with_listen(vec!["/ip4/127.0.0.1/tcp/0".parse().expect("addr")])
        .with_metrics("127.0.0.1:0".parse().expect("addr"))
}

#[tokio::test]
async fn starts_serves_probe_and_metrics_and_stops_on_cancel() -> Result<()> {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let dir = tempfile::tempdir()?;
        let shutdown = CancellationToken::new();
        let relay = start(config(dir.path()), shutdown.clone()).await?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.path().join("relay.key"))?
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let peer_id = relay.peer_id();

        // Something in the store shows in the metrics.
        let owner = testkit::identity(1);
        let session = testkit::session("s");
        let env = testkit::message(
            &testkit::identity(2),
            &owner,
            &session,
            testkit::msg_id(1),
            interlink_net::Clock::system().now_ms(),
            "hi",
        );
        let (key, bytes) = testkit::record(
            &owner.public(),
            &session,
            &[env],
            &[],
            interlink_net::Clock::system().now_ms(),
        );
        relay
            .store()
            .put(key, &bytes, interlink_net::Clock::system().now_ms())?;
        relay.metrics().set_store(relay.store().stats());

        let addr = relay.metrics_addr().expect("metrics are served");
        let probe: Probe = serde_json::from_str(&get(addr, "/probe").await?)?;
        assert_eq!(probe.peer_id, peer_id.to_string());
        assert_eq!(probe.server, "interlink-relay");
        assert_eq!(probe.network, "default");
        let metrics = get(addr, "/metrics").await?;
        assert!(
            metrics.contains("interlink_relay_messages_held 1\n"),
            "{metrics}"
        );

        shutdown.cancel();
        relay.wait().await?;
        assert!(TcpStream::connect(addr).await.is_err());

        // Same key, same PeerId; the store kept the message.
        let again = start(config(dir.path()), CancellationToken::new()).await?;
        assert_eq!(again.peer_id(), peer_id);
        assert_eq!(again.store().stats().envelopes, 1);
        // One process owns a database: a second relay on it does not start.
        let second = start(config(dir.path()), CancellationToken::new()).await;
        assert!(matches!(second, Err(StartError::Store(_))), "{second:?}");
        drop(again);
        Ok(())
    })
    .await?
}

#[tokio::test]
async fn the_sweeper_runs_at_start() -> Result<()> {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let dir = tempfile::tempdir()?;
        let shutdown = CancellationToken::new();
        let relay = start(config(dir.path()), shutdown.clone()).await?;
        let addr = relay.metrics_addr().expect("metrics are served");
        loop {
            if get(addr, "/metrics")
                .await?
                .contains("interlink_relay_sweeps_total 1\n")
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        shutdown.cancel();
        relay.wait().await?;
        Ok(())
    })
    .await?
}
