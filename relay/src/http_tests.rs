use std::net::SocketAddr;

use anyhow::Result;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    task::JoinHandle,
};

use super::*;
use crate::{metrics::Probe, store::RejectReason};

const TEST_TIMEOUT: Duration = Duration::from_secs(10);

struct Server {
    addr: SocketAddr,
    metrics: Metrics,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

async fn start() -> Result<Server> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let metrics = Metrics::new("12D3KooWRelay", "default");
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(run(listener, metrics.clone(), shutdown.clone()));
    Ok(Server {
        addr,
        metrics,
        shutdown,
        task,
    })
}

/// Sends `request` raw and reads the whole response (the server closes).
async fn exchange(addr: SocketAddr, request: &[u8]) -> Result<String> {
    let mut s = TcpStream::connect(addr).await?;
    s.write_all(request).await?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).await?;
    Ok(String::from_utf8(out)?)
}

fn split(response: &str) -> (&str, &str) {
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((response, ""));
    (head.lines().next().unwrap_or(""), body)
}

#[tokio::test]
async fn serves_metrics_probe_and_errors() -> Result<()> {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let srv = start().await?;
        srv.metrics.record_reject(RejectReason::NotOwner);
        srv.metrics
            .set_addrs(["/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWRelay".to_string()]);

        let r = exchange(srv.addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await?;
        // Header names in any case (hyper writes them in lower case).
        let lower = r.to_ascii_lowercase();
        assert!(lower.contains(&format!(
            "content-type: {}\r\n",
            crate::metrics::CONTENT_TYPE
        )));
        assert!(lower.contains("connection: close\r\n"), "{r}");
        let (status, body) = split(&r);
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(body.contains("interlink_relay_rejects_total{reason=\"not_owner\"} 1\n"));
        assert!(lower.contains(&format!("content-length: {}\r\n", body.len())));

        let r = exchange(srv.addr, b"GET /probe?x=1 HTTP/1.0\r\n\r\n").await?;
        let (status, body) = split(&r);
        assert!(status.ends_with(" 200 OK"), "{status}");
        let probe: Probe = serde_json::from_str(body)?;
        assert_eq!(probe, srv.metrics.probe());
        let json: serde_json::Value = serde_json::from_str(body)?;
        let keys: Vec<&str> = json
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(keys.len(), 5, "{body}");
        assert_eq!(json["server"], "interlink-relay");

        for (req, want) in [
            (&b"GET /nope HTTP/1.1\r\n\r\n"[..], "HTTP/1.1 404 Not Found"),
            (
                b"POST /metrics HTTP/1.1\r\n\r\n",
                "HTTP/1.1 405 Method Not Allowed",
            ),
            (b"hello there\r\n\r\n", "HTTP/1.1 400 Bad Request"),
            (b"GET metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 404 Not Found"),
            (b"GET /metrics HTTP/2\r\n\r\n", "HTTP/1.1 400 Bad Request"),
            (b"\xff\xfe\r\n\r\n", "HTTP/1.1 400 Bad Request"),
        ] {
            let r = exchange(srv.addr, req).await?;
            assert_eq!(split(&r).0, want, "{:?}", String::from_utf8_lossy(req));
        }

        let mut huge = b"GET /metrics HTTP/1.1\r\n".to_vec();
        huge.extend(std::iter::repeat_n(b'a', MAX_HEAD_BYTES + 10));
        let r = exchange(srv.addr, &huge).await?;
        assert_eq!(split(&r).0, "HTTP/1.1 431 Request Header Fields Too Large");

        srv.shutdown.cancel();
        srv.task.await?;
        assert!(TcpStream::connect(srv.addr).await.is_err());
        Ok(())
    })
    .await?
}

#[tokio::test]
async fn a_head_split_across_reads_is_assembled() -> Result<()> {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let srv = start().await?;
        let mut s = TcpStream::connect(srv.addr).await?;
        for part in [
            &b"GET /pro"[..],
            b"be HTTP/1.1\r\n",
            b"Host: x\r",
            b"\n\r\n",
        ] {
            s.write_all(part).await?;
            s.flush().await?;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut out = String::new();
        s.read_to_string(&mut out).await?;
        assert_eq!(split(&out).0, "HTTP/1.1 200 OK");
        srv.shutdown.cancel();
        srv.task.await?;
        Ok(())
    })
    .await?
}

#[tokio::test]
async fn idle_connections_do_not_block_others_and_shutdown_ends_them() -> Result<()> {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let srv = start().await?;
        // Silent clients hold their tasks until the head timeout; others are served
        // meanwhile, each on its own task.
        let mut idle = Vec::new();
        for _ in 0..4 {
            idle.push(TcpStream::connect(srv.addr).await?);
        }
        let r = exchange(srv.addr, b"GET /probe HTTP/1.1\r\n\r\n").await?;
        assert_eq!(split(&r).0, "HTTP/1.1 200 OK");
        srv.shutdown.cancel();
        srv.task.await?;
        for mut s in idle {
            let mut buf = Vec::new();
            // Aborted connection tasks drop their sockets: EOF (or a reset).
            let _ = s.read_to_end(&mut buf).await;
            assert!(buf.is_empty());
        }
        Ok(())
    })
    .await?
}
