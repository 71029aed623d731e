//! The request-response codec of every overlay protocol: one raw CBOR item each way,
//! as libp2p's `request_response::cbor` codec writes it, read up to the item's end
//! rather than to the end of the stream.
//!
//! The writer closes its half of the stream after the item, and the close (a yamux
//! frame of its own) often leaves in a later packet than the item's last byte. Reading
//! to the end of the stream made the responder wait for it before it could look at a
//! request, and the requester again before it could take the answer: two waits of
//! tens of microseconds on every live delivery. Bytes after the item are not read, as
//! libp2p's decoder did not look at them either.

use std::{io, marker::PhantomData};

use futures::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use interlink_core::wire::{ItemError, item_len};
use libp2p::{StreamProtocol, request_response};
use serde::{Serialize, de::DeserializeOwned};

/// A request-response behaviour speaking [`Codec`].
pub type Behaviour<Req, Resp> = request_response::Behaviour<Codec<Req, Resp>>;

/// The first read's buffer; later ones grow it by what it holds, up to the limit.
const FIRST_READ: usize = 8 * 1024;

/// CBOR requests and responses, each held to its limit.
#[derive(Debug)]
pub struct Codec<Req, Resp> {
    request_limit: usize,
    response_limit: usize,
    types: PhantomData<fn() -> (Req, Resp)>,
}

impl<Req, Resp> Codec<Req, Resp> {
    /// A codec reading requests of at most `request_limit` bytes and responses of at
    /// most `response_limit`.
    pub fn new(request_limit: usize, response_limit: usize) -> Self {
        Self {
            request_limit,
            response_limit,
            types: PhantomData,
        }
    }
}

impl<Req, Resp> Clone for Codec<Req, Resp> {
    fn clone(&self) -> Self {
        Self::new(self.request_limit, self.response_limit)
    }
}

impl<Req, Resp> request_response::Codec for Codec<Req, Resp>
where
    Req: Send + Serialize + DeserializeOwned,
    Resp: Send + Serialize + DeserializeOwned,
{
    type Protocol = StreamProtocol;
    type Request = Req;
    type Response = Resp;

    async fn read_request<T>(&mut self, _: &StreamProtocol, io: &mut T) -> io::Result<Req>
    where
        T: AsyncRead + Unpin + Send,
    {
        read_item(io, self.request_limit).await
    }

    async fn read_response<T>(&mut self, _: &StreamProtocol, io: &mut T) -> io::Result<Resp>
    where
        T: AsyncRead + Unpin + Send,
    {
        read_item(io, self.response_limit).await
    }

    async fn write_request<T>(&mut self, _: &StreamProtocol, io: &mut T, req: Req) -> io::Result<()>
    where
        T: AsyncWrite + Unpin + Send,
    {
        write_item(io, req).await
    }

    async fn write_response<T>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
        resp: Resp,
    ) -> io::Result<()>
    where
        T: AsyncWrite + Unpin + Send,
    {
        write_item(io, resp).await
    }
}

/// Reads until `io` holds one whole CBOR item of at most `limit` bytes, and decodes it.
pub(crate) async fn read_item<T, R>(io: &mut R, limit: usize) -> io::Result<T>
where
    T: DeserializeOwned,
    R: AsyncRead + Unpin,
{
    ItemReader::default().next(io, limit).await
}

/// Reads CBOR items one after another from a stream, keeping what a read brought past
/// the end of one item for the next.
#[derive(Debug, Default)]
pub(crate) struct ItemReader {
    /// `buf[..filled]` has been read; the rest of `buf` is room for the next read,
    /// zeroed once when the buffer grows (doubling, up to the limit).
    buf: Vec<u8>,
    filled: usize,
}

impl ItemReader {
    /// The next item, of at most `limit` bytes.
    pub(crate) async fn next<T, R>(&mut self, io: &mut R, limit: usize) -> io::Result<T>
    where
        T: DeserializeOwned,
        R: AsyncRead + Unpin,
    {
        loop {
            if self.filled > 0 {
                match item_len(&self.buf[..self.filled]) {
                    Ok(None) => {}
                    Ok(Some(len)) if len > limit => return Err(too_large(limit)),
                    Ok(Some(len)) => {
                        let item = decode(&self.buf[..len]);
                        self.buf.copy_within(len..self.filled, 0);
                        self.filled -= len;
                        return item;
                    }
                    Err(e @ (ItemError::Malformed(_) | ItemError::TooDeep)) => {
                        return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                    }
                }
            }
            if self.filled == self.buf.len() {
                if self.filled >= limit {
                    return Err(too_large(limit));
                }
                let grow = self.filled.max(FIRST_READ).min(limit - self.filled);
                self.buf.resize(self.filled + grow, 0);
            }
            let read = io.read(&mut self.buf[self.filled..]).await?;
            if read == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    if self.filled == 0 {
                        "the stream ended with no message".to_owned()
                    } else {
                        format!("the stream ended {} bytes into a message", self.filled)
                    },
                ));
            }
            self.filled += read;
        }
    }
}

impl ItemReader {
    /// The next item, of at most `limit` bytes, however long the stream stays quiet
    /// before it begins, and within `within` once it has.
    pub(crate) async fn next_within<T, R>(
        &mut self,
        io: &mut R,
        limit: usize,
        within: std::time::Duration,
    ) -> io::Result<T>
    where
        T: DeserializeOwned,
        R: AsyncRead + Unpin,
    {
        if self.filled == 0 {
            if self.buf.is_empty() {
                self.buf.resize(FIRST_READ.min(limit.max(1)), 0);
            }
            let read = io.read(&mut self.buf).await?;
            if read == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the stream ended with no message",
                ));
            }
            self.filled = read;
        }
        tokio::time::timeout(within, self.next(io, limit))
            .await
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("a message not complete within {within:?}"),
                )
            })?
    }
}

fn too_large(limit: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("message larger than {limit} bytes"),
    )
}

fn decode<T: DeserializeOwned>(item: &[u8]) -> io::Result<T> {
    cbor4ii::serde::from_slice(item).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Writes `value` as one CBOR item.
pub(crate) async fn write_item<T: Serialize, W: AsyncWrite + Unpin>(
    io: &mut W,
    value: T,
) -> io::Result<()> {
    let bytes = cbor4ii::serde::to_vec(Vec::new(), &value).map_err(io::Error::other)?;
    io.write_all(&bytes).await
}

#[cfg(test)]
#[path = "cbor_tests.rs"]
mod tests;
