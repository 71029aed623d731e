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

use std::{io, sync::Arc, time::Duration};

use futures::{AsyncRead, AsyncWrite};
use libp2p::request_response::Codec;
use tokio::sync::Semaphore;

/// Longest a request may take to arrive once its read started (a 4 MiB copy at
/// 4 Mbit/s).
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// `inner`, reading at most as many requests at once as `permits` allows (shared by
/// every connection of the node: the codec is cloned per stream).
#[derive(Debug)]
pub struct Gated<C> {
    inner: C,
    permits: Arc<Semaphore>,
}

impl<C: Clone> Clone for Gated<C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            permits: self.permits.clone(),
        }
    }
}

impl<C> Gated<C> {
    /// `inner`, reading at most `at_once` requests at a time.
    pub fn new(inner: C, at_once: usize) -> Self {
        Self {
            inner,
            permits: Arc::new(Semaphore::new(at_once.max(1))),
        }
    }
}

impl<C> Codec for Gated<C>
where
    C: Codec + Send,
    C::Protocol: Sync,
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
