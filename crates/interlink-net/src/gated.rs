//! A request-response codec that reads a bounded number of requests at once.
//!
//! libp2p reads a request in full before the behaviour sees it, on every stream at
//! once: a swarm of peers each sending a large mailbox copy makes the node read, buffer
//! and decode them all together. This wrapper takes a permit from one semaphore per
//! node before reading a request, so at most that many are read at a time; the others
//! wait unread, and TCP's flow control slows their senders. In the `hostile-load` bench
//! (32 strangers sending 1.9 MB copies) it took a paired sender's live p99 from 158 ms
//! to 24–30 ms and the session's RSS above idle from 184 to about 120 MiB (the rest is
//! not the requests being read: halving the permits did not move it). A read that
//! holds a permit gets [`READ_TIMEOUT`] to finish, so a peer trickling bytes cannot
//! keep one for long; a few trickling peers can still delay mailbox copies (not live
//! delivery) by that much. Responses are unaffected.
//!
//! Each connection may also have at most [`Gated::new`]'s `per_connection` requests
//! waiting or being read at once: every stream waiting unread buffers up to a yamux
//! window (256 KiB) of its request. A stream past that is not read at all: the reader
//! hands the node [`Unread::unread`] in its place, and the node closes the connection
//! (an honest node keeps 2 requests in flight per peer). Resetting the stream instead
//! (libp2p's own cap) let a swarm retrying at once cost the node a stream negotiation
//! per retry: the paired live path's p50 went to 83 ms in the `hostile-load` bench.
//!
//! The count per connection rests on how libp2p clones a codec: the behaviour clones
//! its own codec for each connection's handler, and a handler clones that one for each
//! stream. So a clone of the behaviour's codec (the root) starts a new count, and a
//! clone of a connection's codec shares it.

use std::{
    io,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::{AsyncRead, AsyncWrite};
use libp2p::request_response::Codec;
use tokio::sync::Semaphore;

/// Longest a request may take to arrive once its read started (a 4 MiB copy at
/// 4 Mbit/s).
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A request type's stand-in for a request that was not read.
pub trait Unread {
    /// The stand-in; never on the wire.
    fn unread() -> Self;
}

impl Unread for interlink_core::wire::MailboxRequest {
    fn unread() -> Self {
        Self {
            v: interlink_core::wire::VERSION,
            op: interlink_core::wire::MailboxOp::Unread,
        }
    }
}

/// `inner`, reading at most as many requests at once as `permits` allows (shared by
/// every connection of the node), and at most `per_connection` waiting or being read
/// on one connection.
#[derive(Debug)]
pub struct Gated<C> {
    inner: C,
    permits: Arc<Semaphore>,
    per_connection: usize,
    /// Requests of this codec's connection waiting or being read; `None` for the
    /// behaviour's own codec (the root), which reads nothing itself.
    waiting: Option<Arc<AtomicUsize>>,
}

impl<C: Clone> Clone for Gated<C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            permits: self.permits.clone(),
            per_connection: self.per_connection,
            // The root is cloned once per connection; a connection's codec per stream.
            waiting: Some(
                self.waiting
                    .clone()
                    .unwrap_or_else(|| Arc::new(AtomicUsize::new(0))),
            ),
        }
    }
}

impl<C> Gated<C> {
    /// `inner`, reading at most `at_once` requests at a time over all connections, and
    /// `per_connection` on one.
    pub fn new(inner: C, at_once: usize, per_connection: usize) -> Self {
        Self {
            inner,
            permits: Arc::new(Semaphore::new(at_once.max(1))),
            per_connection: per_connection.max(1),
            waiting: None,
        }
    }
}

/// Counts a request of one connection as waiting or being read while it lives.
struct Waiting(Arc<AtomicUsize>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<C> Codec for Gated<C>
where
    C: Codec + Send,
    C::Protocol: Sync,
    C::Request: Unread,
{
    type Protocol = C::Protocol;
    type Request = C::Request;
    type Response = C::Response;

    async fn read_request<T>(
        &mut self,
        protocol: &Self::Protocol,
        io: &mut T,
    ) -> io::Result<Self::Request>
    where
        T: AsyncRead + Unpin + Send,
    {
        let counter = self
            .waiting
            .get_or_insert_with(|| Arc::new(AtomicUsize::new(0)))
            .clone();
        if counter.fetch_add(1, Ordering::AcqRel) >= self.per_connection {
            counter.fetch_sub(1, Ordering::AcqRel);
            return Ok(C::Request::unread());
        }
        let _waiting = Waiting(counter);
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| io::Error::other("the node is shutting down"))?;
        tokio::time::timeout(READ_TIMEOUT, self.inner.read_request(protocol, io))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "request read too slowly"))?
    }

    async fn read_response<T>(
        &mut self,
        protocol: &Self::Protocol,
        io: &mut T,
    ) -> io::Result<Self::Response>
    where
        T: AsyncRead + Unpin + Send,
    {
        self.inner.read_response(protocol, io).await
    }

    async fn write_request<T>(
        &mut self,
        protocol: &Self::Protocol,
        io: &mut T,
        req: Self::Request,
    ) -> io::Result<()>
    where
        T: AsyncWrite + Unpin + Send,
    {
        self.inner.write_request(protocol, io, req).await
    }

    async fn write_response<T>(
        &mut self,
        protocol: &Self::Protocol,
        io: &mut T,
        res: Self::Response,
    ) -> io::Result<()>
    where
        T: AsyncWrite + Unpin + Send,
    {
        self.inner.write_response(protocol, io, res).await
    }
}
