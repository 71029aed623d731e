//! The HTTP/1.1 server of `GET /metrics` and `GET /probe`, on hyper: two fixed routes,
//! one request per connection (`Connection: close`), no bodies read. Everything is
//! bounded:
//! the request head ([`MAX_HEAD_BYTES`]), the time to send it ([`HEAD_TIMEOUT`]), and
//! the number of connections served at once ([`MAX_CONNECTIONS`]; past it the accept
//! loop waits for one to finish, so the kernel's backlog absorbs a burst).
//!
//! Responses:
//! - `GET /metrics` → 200, [`crate::metrics::CONTENT_TYPE`] (OpenMetrics text), the
//!   exposition of [`Metrics::render`];
//! - `GET /probe` → 200, `application/json`, the [`crate::metrics::Probe`];
//! - another path (a request target hyper reads as no path, `GET metrics`, too) → 404;
//!   another method → 405; what hyper cannot parse (another HTTP version, bytes that
//!   are no request line) → 400; a head over [`MAX_HEAD_BYTES`] → 431. A query string
//!   is ignored.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{
    Method, Request, Response, StatusCode,
    body::Incoming,
    header::{CONTENT_TYPE, HeaderValue},
    server::conn::http1,
    service::service_fn,
};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{
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

/// Serves one connection: one request (`Connection: close`), its head read within
/// [`HEAD_TIMEOUT`] and at most [`MAX_HEAD_BYTES`], the answer written within
/// [`WRITE_TIMEOUT`].
async fn serve(stream: TcpStream, metrics: &Metrics) -> Result<(), hyper::Error> {
    let metrics = metrics.clone();
    let service = service_fn(move |request: Request<Incoming>| {
        let response = route(request.method(), request.uri().path(), &metrics);
        async move { Ok::<_, std::convert::Infallible>(response) }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service);
    match tokio::time::timeout(HEAD_TIMEOUT + WRITE_TIMEOUT, connection).await {
        Ok(result) => result,
        // Too slow a reader: drop the connection.
        Err(_) => Ok(()),
    }
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    respond(status, "text/plain; charset=utf-8", format!("{body}\n"))
}

fn respond(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(CONTENT_TYPE, v);
    }
    response
}

/// The answer to `method path`.
fn route(method: &Method, path: &str, metrics: &Metrics) -> Response<Full<Bytes>> {
    if method != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET");
    }
    match path {
        "/metrics" => respond(
            StatusCode::OK,
            crate::metrics::CONTENT_TYPE,
            metrics.render(),
        ),
        "/probe" => match serde_json::to_string(&metrics.probe()) {
            Ok(json) => respond(StatusCode::OK, "application/json", json),
            Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "probe"),
        },
        _ => text(StatusCode::NOT_FOUND, "not found"),
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
