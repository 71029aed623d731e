//! The local socket the host's inbox and our reply address are, per platform.
//!
//! Unix: a Unix socket, the peer's pid from the kernel (`SO_PEERCRED`/`LOCAL_PEERPID`).
//! Elsewhere (Windows) Claude Code's inbox is a named pipe (`\\.\pipe\cc-msg-…`,
//! found in Claude Code 2.1.332's build); talking to it is not built yet, so there
//! every call fails with `Unsupported` and messages reach the agent through the Stop
//! hook, as when a host has no inbox.

#[cfg(unix)]
mod imp {
    use std::{io, path::Path};

    pub(crate) use tokio::net::{UnixListener as Listener, UnixStream as Stream};

    /// Whether `meta` is a socket's.
    pub(crate) fn is_socket(meta: &std::fs::Metadata) -> bool {
        use std::os::unix::fs::FileTypeExt as _;
        meta.file_type().is_socket()
    }

    /// The pid of the process at the other end, as the kernel names it.
    pub(crate) fn peer_pid(stream: &Stream) -> Option<u32> {
        stream
            .peer_cred()
            .ok()
            .and_then(|c| c.pid())
            .and_then(|p| u32::try_from(p).ok())
    }

    /// Whether a socket at `path` accepts a connection now.
    pub(crate) fn accepts(path: &Path) -> bool {
        std::os::unix::net::UnixStream::connect(path).is_ok()
    }

    /// Binds a listener at `path`, owner-only.
    pub(crate) fn bind(path: &Path) -> io::Result<Listener> {
        use std::os::unix::fs::PermissionsExt as _;
        let listener = Listener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        Ok(listener)
    }

    /// The pid of the process that started this one.
    pub(crate) fn parent_pid() -> Option<u32> {
        Some(std::os::unix::process::parent_id())
    }
}

#[cfg(not(unix))]
mod imp {
    use std::{io, path::Path};

    fn unsupported() -> io::Error {
        io::Error::new(
            io::ErrorKind::Unsupported,
            "the host's inbox is a named pipe here, which this build does not speak yet",
        )
    }

    /// Never made: every connect fails.
    pub(crate) type Stream = tokio::io::DuplexStream;

    /// Never made: every bind fails.
    #[derive(Debug)]
    pub(crate) enum Listener {}

    impl Listener {
        pub(crate) async fn accept(&self) -> io::Result<(Stream, ())> {
            match *self {}
        }
    }

    pub(crate) struct Connect;

    impl Connect {
        pub(crate) async fn connect(_: &Path) -> io::Result<Stream> {
            Err(unsupported())
        }
    }

    pub(crate) fn is_socket(_: &std::fs::Metadata) -> bool {
        false
    }

    pub(crate) fn peer_pid(_: &Stream) -> Option<u32> {
        None
    }

    pub(crate) fn accepts(_: &Path) -> bool {
        false
    }

    pub(crate) fn bind(_: &Path) -> io::Result<Listener> {
        Err(unsupported())
    }

    pub(crate) fn parent_pid() -> Option<u32> {
        None
    }
}

pub(crate) use imp::*;

/// Connects to the socket at `path`.
pub(crate) async fn connect(path: &std::path::Path) -> std::io::Result<Stream> {
    #[cfg(unix)]
    {
        Stream::connect(path).await
    }
    #[cfg(not(unix))]
    {
        Connect::connect(path).await
    }
}
