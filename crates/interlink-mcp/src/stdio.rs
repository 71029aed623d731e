//! The MCP server's stdin and stdout, on the runtime's own reactor when they are a pipe
//! or a socket — which is how agent hosts start servers (Node's `spawn` gives the child
//! Unix socket pairs; Rust's `Command` gives pipes).
//!
//! `tokio::io::stdin()` reads on a thread of the blocking pool and every write to
//! `tokio::io::stdout()` is a blocking task, so each JSON-RPC message crossed threads
//! twice: on a session's one-thread runtime that was a third of its futex calls. A pipe
//! or a socket is put in non-blocking mode and polled like any socket instead. Anything
//! else (a terminal, a file) keeps tokio's stdio.
//!
//! Non-blocking mode belongs to the open file, which the host created for this process
//! alone; a wrapper that `exec`s the server hands over its own, and nothing else reads
//! or writes it afterwards.

use std::{
    fs::File,
    io,
    os::{
        fd::{AsFd, OwnedFd},
        unix::fs::FileTypeExt as _,
    },
    pin::Pin,
    task::{Context, Poll},
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{UnixStream, unix::pipe},
};
use tracing::debug;

/// The server's input.
#[derive(Debug)]
pub(crate) enum Input {
    /// A pipe, non-blocking.
    Pipe(pipe::Receiver),
    /// A Unix socket, non-blocking.
    Socket(UnixStream),
    /// Anything else, through tokio's blocking-pool stdin.
    Std(tokio::io::Stdin),
}

/// The server's output.
#[derive(Debug)]
pub(crate) enum Output {
    /// A pipe, non-blocking.
    Pipe(pipe::Sender),
    /// A Unix socket, non-blocking.
    Socket(UnixStream),
    /// Anything else, through tokio's blocking-pool stdout.
    Std(tokio::io::Stdout),
}

/// What a standard stream is.
enum Kind {
    Fifo(File),
    Socket(OwnedFd),
    Other,
}

fn kind(fd: std::os::fd::BorrowedFd<'_>) -> Kind {
    let Ok(owned) = fd.try_clone_to_owned() else {
        return Kind::Other;
    };
    let file = File::from(owned);
    match file.metadata().map(|m| m.file_type()) {
        Ok(t) if t.is_fifo() => Kind::Fifo(file),
        Ok(t) if t.is_socket() => Kind::Socket(file.into()),
        _ => Kind::Other,
    }
}

fn socket(fd: OwnedFd) -> io::Result<UnixStream> {
    let std = std::os::unix::net::UnixStream::from(fd);
    std.set_nonblocking(true)?;
    UnixStream::from_std(std)
}

/// stdin and stdout for the MCP transport. Must be called inside the runtime.
pub(crate) fn stdio() -> (Input, Output) {
    let input = match kind(io::stdin().as_fd()) {
        Kind::Fifo(f) => pipe::Receiver::from_file(f).map(Input::Pipe),
        Kind::Socket(fd) => socket(fd).map(Input::Socket),
        Kind::Other => Ok(Input::Std(tokio::io::stdin())),
    }
    .unwrap_or_else(|e| {
        debug!("stdin stays on the blocking pool: {e}");
        Input::Std(tokio::io::stdin())
    });
    let output = match kind(io::stdout().as_fd()) {
        Kind::Fifo(f) => pipe::Sender::from_file(f).map(Output::Pipe),
        Kind::Socket(fd) => socket(fd).map(Output::Socket),
        Kind::Other => Ok(Output::Std(tokio::io::stdout())),
    }
    .unwrap_or_else(|e| {
        debug!("stdout stays on the blocking pool: {e}");
        Output::Std(tokio::io::stdout())
    });
    (input, output)
}

impl AsyncRead for Input {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Input::Pipe(r) => Pin::new(r).poll_read(cx, buf),
            Input::Socket(s) => Pin::new(s).poll_read(cx, buf),
            Input::Std(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Output {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Output::Pipe(w) => Pin::new(w).poll_write(cx, buf),
            Output::Socket(s) => Pin::new(s).poll_write(cx, buf),
            Output::Std(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Output::Pipe(w) => Pin::new(w).poll_flush(cx),
            Output::Socket(s) => Pin::new(s).poll_flush(cx),
            Output::Std(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Output::Pipe(w) => Pin::new(w).poll_shutdown(cx),
            // The write half only: the socket may be stdin's too.
            Output::Socket(s) => Pin::new(s).poll_shutdown(cx),
            Output::Std(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
