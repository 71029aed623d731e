//! Writes to a TCP connection gathered into one send per burst.
//!
//! yamux flushes after every frame it writes, and noise turns every flush into a frame
//! and a `send` of its own. A live delivery wrote seven TCP segments: the stream's
//! protocol proposal, the request and the stream's close one way; the multistream
//! header, the protocol confirmation, the response and the close the other. Each is a
//! system call, and each wakes the peer's connection task to read a few bytes.
//!
//! [`Corked`] holds a flush back once: the first flush after new data wakes its own task
//! and answers `Pending` (yamux goes on to its next frame and flushes again), and the
//! flush that finds no new data since — the task's next poll, after the burst — sends
//! everything in one `send`. Data is never held longer than [`HOLD`] from its first byte,
//! so a connection that has a new frame on every poll still sends at that pace, and a
//! full buffer ([`BUFFER`]) or a close sends at once.

use std::{
    io,
    pin::Pin,
    task::{Context, Poll, ready},
    time::{Duration, Instant},
};

use futures::{AsyncRead, AsyncWrite};

/// Longest a byte waits in the buffer for more to go with it.
pub(crate) const HOLD: Duration = Duration::from_micros(100);

/// The buffer's size: a write that fills it is sent at once, and one at least this large
/// finding the buffer empty goes straight through.
pub(crate) const BUFFER: usize = 64 * 1024;

/// `inner` with its writes gathered (module docs).
#[derive(Debug)]
pub(crate) struct Corked<S> {
    inner: S,
    buf: Vec<u8>,
    /// When the oldest byte of `buf` was written.
    since: Option<Instant>,
    /// Data was written since the last flush.
    fresh: bool,
}

impl<S> Corked<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            since: None,
            fresh: false,
        }
    }
}

impl<S: AsyncWrite + Unpin> Corked<S> {
    /// Writes the whole buffer to `inner`.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut sent = 0;
        let result = loop {
            if sent == self.buf.len() {
                break Poll::Ready(Ok(()));
            }
            match Pin::new(&mut self.inner).poll_write(cx, &self.buf[sent..]) {
                Poll::Ready(Ok(0)) => break Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => sent += n,
                Poll::Ready(Err(e)) => break Poll::Ready(Err(e)),
                Poll::Pending => break Poll::Pending,
            }
        };
        self.buf.drain(..sent);
        if self.buf.is_empty() {
            self.since = None;
        }
        result
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Corked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.buf.len() + data.len() > BUFFER {
            ready!(this.poll_drain(cx))?;
        }
        if data.len() >= BUFFER {
            return Pin::new(&mut this.inner).poll_write(cx, data);
        }
        this.since.get_or_insert_with(Instant::now);
        this.buf.extend_from_slice(data);
        this.fresh = true;
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.buf.is_empty() {
            let young = this.since.is_some_and(|t| t.elapsed() < HOLD);
            if std::mem::take(&mut this.fresh) && young {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            ready!(this.poll_drain(cx))?;
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_close(cx)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Corked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            Arc,
            atomic::{AtomicUsize, Ordering},
        },
        task::Wake,
    };

    use super::*;

    /// Records each write that reaches it.
    #[derive(Default)]
    struct Sink {
        writes: Vec<Vec<u8>>,
        /// Accept at most this many bytes per write (`usize::MAX`: all).
        take: usize,
    }

    impl AsyncWrite for Sink {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            data: &[u8],
        ) -> Poll<io::Result<usize>> {
            let n = data.len().min(self.take);
            self.writes.push(data[..n].to_vec());
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn corked() -> Corked<Sink> {
        Corked::new(Sink {
            writes: Vec::new(),
            take: usize::MAX,
        })
    }

    fn write(c: &mut Corked<Sink>, cx: &mut Context<'_>, data: &[u8]) {
        assert!(matches!(
            Pin::new(&mut *c).poll_write(cx, data),
            Poll::Ready(Ok(n)) if n == data.len()
        ));
    }

    #[test]
    fn frames_flushed_in_one_poll_leave_in_one_write_on_the_next() {
        let wakes = Arc::new(Wakes::default());
        let waker = wakes.clone().into();
        let mut cx = Context::from_waker(&waker);
        let mut c = corked();
        // One poll of the connection: three frames, each flushed.
        for frame in [&b"proposal"[..], b"request", b"close"] {
            write(&mut c, &mut cx, frame);
            assert!(Pin::new(&mut c).poll_flush(&mut cx).is_pending());
        }
        assert!(c.inner.writes.is_empty());
        assert_eq!(
            wakes.0.load(Ordering::SeqCst),
            3,
            "the task is polled again"
        );
        // Its next poll flushes with nothing new: one write.
        assert!(Pin::new(&mut c).poll_flush(&mut cx).is_ready());
        assert_eq!(c.inner.writes, vec![b"proposalrequestclose".to_vec()]);
        // Nothing left: a flush goes straight through.
        assert!(Pin::new(&mut c).poll_flush(&mut cx).is_ready());
        assert_eq!(c.inner.writes.len(), 1);
    }

    #[test]
    fn data_older_than_the_hold_is_sent_even_with_more_coming() {
        let wakes = Arc::new(Wakes::default());
        let waker = wakes.into();
        let mut cx = Context::from_waker(&waker);
        let mut c = corked();
        write(&mut c, &mut cx, b"a");
        assert!(Pin::new(&mut c).poll_flush(&mut cx).is_pending());
        std::thread::sleep(HOLD * 2);
        write(&mut c, &mut cx, b"b");
        assert!(Pin::new(&mut c).poll_flush(&mut cx).is_ready());
        assert_eq!(c.inner.writes, vec![b"ab".to_vec()]);
    }

    #[test]
    fn a_close_or_a_full_buffer_sends_at_once() {
        let waker = Arc::new(Wakes::default()).into();
        let mut cx = Context::from_waker(&waker);
        let mut c = corked();
        write(&mut c, &mut cx, b"bye");
        assert!(Pin::new(&mut c).poll_close(&mut cx).is_ready());
        assert_eq!(c.inner.writes, vec![b"bye".to_vec()]);

        let mut c = corked();
        let half = vec![1u8; BUFFER / 2 + 1];
        write(&mut c, &mut cx, &half);
        assert!(c.inner.writes.is_empty());
        write(&mut c, &mut cx, &half);
        assert_eq!(
            c.inner.writes,
            vec![half.clone()],
            "the first half was sent"
        );
        let big = vec![2u8; BUFFER];
        let mut c = corked();
        write(&mut c, &mut cx, &big);
        assert_eq!(
            c.inner.writes,
            vec![big],
            "a large write goes straight through"
        );
    }

    #[test]
    fn a_short_write_keeps_the_rest_in_order() {
        let waker = Arc::new(Wakes::default()).into();
        let mut cx = Context::from_waker(&waker);
        let mut c = Corked::new(Sink {
            writes: Vec::new(),
            take: 3,
        });
        write(&mut c, &mut cx, b"abcdefgh");
        assert!(Pin::new(&mut c).poll_flush(&mut cx).is_pending());
        assert!(Pin::new(&mut c).poll_flush(&mut cx).is_ready());
        assert_eq!(
            c.inner.writes,
            vec![b"abc".to_vec(), b"def".to_vec(), b"gh".to_vec()]
        );
    }
}
