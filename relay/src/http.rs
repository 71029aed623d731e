//! A tiny HTTP/1.1 server for `GET /metrics` and `GET /probe`.
//!
//! Hand-written on tokio rather than pulling in an HTTP stack: two fixed routes, one
//! request per connection (`Connection: close`), no bodies read. Everything is bounded:
//! the request head ([`MAX_HEAD_BYTES`]), the time to send it ([`HEAD_TIMEOUT`]), and
//! the number of connections served at once ([`MAX_CONNECTIONS`]; past it the accept
//! loop waits for one to finish, so the kernel's backlog absorbs a burst).
//!
//! Responses:
//! - `GET /metrics` → 200, [`crate::metrics::CONTENT_TYPE`] (OpenMetrics text), the
//!   exposition of [`Metrics::render`];
//! - `GET /probe` → 200, `application/json`, the [`crate::metrics::Probe`];
//! - another path → 404; another method → 405; an unparsable request line → 400; a
//!   head over [`MAX_HEAD_BYTES`] → 431. A query string is ignored.

use std::{io, time::Duration};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    task::JoinSet,
};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::metrics::Metrics;

/// Most connections served at once.
pub const MAX_CONNECTIONS: usize = 64;
/// Largest request head (request line and headers) read.
pub const MAX_HEAD_BYTES: usize = 8 * 1024;
/// How long a client has to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// How long writing a response may take.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause after a failed accept (e.g. out of file descriptors) before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves metrics and the probe on `listener` until `shutdown` is cancelled; then
/// stops accepting and aborts connections still open. Bind port 0 in tests.
pub async fn run(listener: TcpListener, metrics: Metrics, shutdown: CancellationToken) {
    let mut tasks: JoinSet<()> = JoinSet::new();
    loop {
        // Reap finished connections so the set only holds live ones.
        while tasks.try_join_next().is_some() {}
        if tasks.len() >= MAX_CONNECTIONS {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                _ = tasks.join_next() => continue,
            }
        }
        tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let metrics = metrics.clone();
                    tasks.spawn(async move {
                        if let Err(e) = serve(stream, &metrics).await {
                            debug!(%peer, "metrics connection: {e}");
                        }
                    });
                }
                Err(e) => {
                    warn!("metrics listener: accept failed: {e}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
        }
    }
    tasks.shutdown().await;
}

/// A response: status line and content.
#[derive(Debug, PartialEq, Eq)]
struct Response {
    status: &'static str,
    content_type: &'static str,
    body: String,
}

impl Response {
    fn text(status: &'static str, body: &str) -> Self {
        Self {
            status,
            content_type: "text/plain; charset=utf-8",
            body: format!("{body}\n"),
        }
    }
}

async fn serve(mut stream: TcpStream, metrics: &Metrics) -> io::Result<()> {
    let response = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream)).await {
        Err(_) => return Ok(()), // too slow: drop the connection
        Ok(Err(e)) => return Err(e),
        Ok(Ok(Head::TooLarge)) => {
            Response::text("431 Request Header Fields Too Large", "too large")
        }
        Ok(Ok(Head::Closed)) => return Ok(()),
        Ok(Ok(Head::Complete(head))) => route(&head, metrics),
    };
    let bytes = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        response.status,
        response.content_type,
        response.body.len(),
        response.body
    );
    tokio::time::timeout(WRITE_TIMEOUT, async {
        stream.write_all(bytes.as_bytes()).await?;
        stream.shutdown().await
    })
    .await
    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "write timed out"))?
}

enum Head {
    Complete(Vec<u8>),
    TooLarge,
    Closed,
}

/// Reads until the blank line ending the head, at most [`MAX_HEAD_BYTES`].
async fn read_head(stream: &mut TcpStream) -> io::Result<Head> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(Head::Closed);
        }
        let scan_from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_blank_line(&buf[scan_from..]) {
            buf.truncate(scan_from + end);
            return Ok(Head::Complete(buf));
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Ok(Head::TooLarge);
        }
    }
}

fn find_blank_line(b: &[u8]) -> Option<usize> {
    b.windows(4).position(|w| w == b"\r\n\r\n")
}

/// Answers a complete request head.
fn route(head: &[u8], metrics: &Metrics) -> Response {
    let Some((method, path)) = parse_request_line(head) else {
        return Response::text("400 Bad Request", "bad request");
    };
    if method != "GET" {
        return Response::text("405 Method Not Allowed", "only GET");
    }
    match path.split('?').next().unwrap_or(path) {
        "/metrics" => Response {
            status: "200 OK",
            content_type: crate::metrics::CONTENT_TYPE,
            body: metrics.render(),
        },
        "/probe" => match serde_json::to_string(&metrics.probe()) {
            Ok(json) => Response {
                status: "200 OK",
                content_type: "application/json",
                body: json,
            },
            Err(_) => Response::text("500 Internal Server Error", "probe"),
        },
        _ => Response::text("404 Not Found", "not found"),
    }
}

/// `METHOD SP origin-form SP HTTP/1.x`, or `None`.
fn parse_request_line(head: &[u8]) -> Option<(&str, &str)> {
    let line_end = head
        .windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or(head.len());
    let line = std::str::from_utf8(&head[..line_end]).ok()?;
    let mut parts = line.split(' ');
    let (method, path, version) = (parts.next()?, parts.next()?, parts.next()?);
    let valid = parts.next().is_none()
        && !method.is_empty()
        && method.bytes().all(|b| b.is_ascii_uppercase())
        && path.starts_with('/')
        && matches!(version, "HTTP/1.0" | "HTTP/1.1");
    valid.then_some((method, path))
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
