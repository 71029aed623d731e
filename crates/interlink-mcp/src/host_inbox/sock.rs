//! The local endpoint the host's inbox and our reply address are, per platform.
//!
//! Unix: a Unix socket file; the peer's pid comes from the kernel
//! (`SO_PEERCRED`/`LOCAL_PEERPID`).
//!
//! Windows: a named pipe. Claude Code names its inbox `\\.\pipe\cc-msg-<32 hex>`
//! (optionally under `LOCAL\`) and sends receipts only to a `from` address of the same
//! shape in the same namespace (its `hua`/`u8l` checks in 2.1.332). The peer's pid
//! comes from `GetNamedPipeServerProcessId`/`GetNamedPipeClientProcessId`. A pipe has
//! no half-close: a post ends with `FlushFileBuffers`, which returns once the host has
//! read every byte — what libuv's own pipe shutdown waits for.

use std::{io, path::Path, time::Duration};

#[cfg(unix)]
mod imp {
    use std::{
        io,
        path::{Path, PathBuf},
        time::Duration,
    };

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// A connection we made to the host's socket.
    pub(crate) type Stream = tokio::net::UnixStream;
    /// A connection made to our reply socket.
    pub(crate) type Incoming = tokio::net::UnixStream;

    /// Our reply socket, owner-only.
    #[derive(Debug)]
    pub(crate) struct Listener(tokio::net::UnixListener);

    impl Listener {
        pub(crate) async fn accept(&mut self) -> io::Result<Incoming> {
            self.0.accept().await.map(|(s, _)| s)
        }
    }

    /// Whether `path` may be connected to: a socket, never through a symbolic link
    /// (the host's own senders refuse one too).
    pub(crate) fn check_address(path: &Path) -> io::Result<bool> {
        use std::os::unix::fs::FileTypeExt as _;
        Ok(std::fs::symlink_metadata(path)?.file_type().is_socket())
    }

    pub(crate) async fn connect(path: &Path) -> io::Result<Stream> {
        Stream::connect(path).await
    }

    /// The pid of the process listening at the other end, as the kernel names it.
    pub(crate) fn server_pid(stream: &Stream) -> Option<u32> {
        peer_pid(stream)
    }

    /// The pid of the process that connected, as the kernel names it.
    pub(crate) fn client_pid(stream: &Incoming) -> Option<u32> {
        peer_pid(stream)
    }

    fn peer_pid(stream: &tokio::net::UnixStream) -> Option<u32> {
        stream
            .peer_cred()
            .ok()
            .and_then(|c| c.pid())
            .and_then(|p| u32::try_from(p).ok())
    }

    /// After a frame: half-close, then wait (at most `wait`) for the host to close,
    /// which it does once it has read to the end.
    pub(crate) async fn finish(mut stream: Stream, wait: Duration) -> io::Result<bool> {
        stream.shutdown().await?;
        // The host writes nothing here; EOF (or a reset) is its close.
        let mut sink = [0u8; 256];
        let closed = tokio::time::timeout(wait, async {
            loop {
                match stream.read(&mut sink).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await;
        Ok(closed.is_ok())
    }

    /// Whether a socket at `path` accepts a connection now.
    pub(crate) fn accepts(path: &Path) -> bool {
        std::os::unix::net::UnixStream::connect(path).is_ok()
    }

    /// The names to try for our reply socket beside `host`, in order:
    /// `<pid>.sock`, then `<pid>-<8 hex>.sock`.
    pub(crate) fn reply_names(host: &Path) -> io::Result<Vec<PathBuf>> {
        let dir = host
            .parent()
            .ok_or_else(|| io::Error::other("the host's socket has no directory"))?;
        let pid = std::process::id();
        Ok(vec![
            dir.join(format!("{pid}.sock")),
            dir.join(format!("{pid}-{:08x}.sock", super::random_u32())),
        ])
    }

    /// Binds a listener at `path`, owner-only. A socket file there that accepts no
    /// connection (its process died) is replaced.
    pub(crate) fn bind(path: &Path) -> io::Result<Listener> {
        use std::os::unix::fs::PermissionsExt as _;
        if std::fs::symlink_metadata(path).is_ok() {
            if accepts(path) {
                return Err(io::ErrorKind::AddrInUse.into());
            }
            let _ = std::fs::remove_file(path);
        }
        let listener = tokio::net::UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        Ok(Listener(listener))
    }

    /// Undoes [`bind`]: the socket file stays behind its listener.
    pub(crate) fn unbind(path: &Path) {
        let _ = std::fs::remove_file(path);
    }

    /// The pid of the process that started this one.
    pub(crate) fn parent_pid() -> Option<u32> {
        Some(std::os::unix::process::parent_id())
    }
}

#[cfg(windows)]
#[allow(unsafe_code)] // Win32 calls on the pipe handles tokio owns; each says why it is sound
mod imp {
    use std::{
        io,
        os::windows::io::AsRawHandle as _,
        path::{Path, PathBuf},
        time::Duration,
    };

    use tokio::net::windows::named_pipe::{
        ClientOptions, NamedPipeClient, NamedPipeServer, ServerOptions,
    };
    use windows_sys::Win32::{
        Foundation::{ERROR_PIPE_BUSY, HANDLE},
        Storage::FileSystem::FlushFileBuffers,
        System::Pipes::{GetNamedPipeClientProcessId, GetNamedPipeServerProcessId},
    };

    /// A connection we made to the host's pipe.
    pub(crate) type Stream = NamedPipeClient;
    /// A connection made to our reply pipe.
    pub(crate) type Incoming = NamedPipeServer;

    /// Our reply pipe: one instance waits for the next client while the last one is
    /// read.
    #[derive(Debug)]
    pub(crate) struct Listener {
        path: PathBuf,
        waiting: NamedPipeServer,
    }

    impl Listener {
        pub(crate) async fn accept(&mut self) -> io::Result<Incoming> {
            // Cancel-safe: an instance that saw no client stays for the next call.
            if let Err(e) = self.waiting.connect().await {
                // A client that came and went before it was accepted leaves the
                // instance unusable: the next call waits on a fresh one.
                self.waiting = server_options().create(&self.path)?;
                return Err(e);
            }
            let next = server_options().create(&self.path)?;
            Ok(std::mem::replace(&mut self.waiting, next))
        }
    }

    fn server_options() -> ServerOptions {
        let mut options = ServerOptions::new();
        options.reject_remote_clients(true);
        options
    }

    /// The host's pipe is `\\.\pipe\<name>` or `\\?\pipe\<name>`, one name (under
    /// `LOCAL\` at most): anything else is not a local pipe address.
    pub(crate) fn check_address(path: &Path) -> io::Result<bool> {
        Ok(pipe_name(path).is_some())
    }

    /// The name after the `\\.\pipe\` prefix, if `path` is a local pipe.
    fn pipe_name(path: &Path) -> Option<&str> {
        let s = path.to_str()?;
        let b = s.as_bytes();
        let sep = |c: u8| c == b'\\' || c == b'/';
        if b.len() < 9 || !sep(b[0]) || !sep(b[1]) || !matches!(b[2], b'.' | b'?') || !sep(b[3]) {
            return None;
        }
        let rest = &s[4..];
        let name = rest
            .get(..5)
            .filter(|p| p.eq_ignore_ascii_case("pipe\\") || p.eq_ignore_ascii_case("pipe/"))
            .map(|_| &rest[5..])?;
        let name = match name.get(..6) {
            Some(p) if p.eq_ignore_ascii_case("LOCAL\\") => &name[6..],
            _ => name,
        };
        let ok = !name.is_empty()
            && !name.contains(['\\', '/'])
            && name != "."
            && name != ".."
            && !name.ends_with(['.', ' ']);
        ok.then_some(name)
    }

    pub(crate) async fn connect(path: &Path) -> io::Result<Stream> {
        loop {
            match ClientOptions::new().open(path) {
                // Every instance is taken: the host makes a new one as it accepts.
                Err(e) if e.raw_os_error() == Some(ERROR_PIPE_BUSY as i32) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                other => return other,
            }
        }
    }

    pub(crate) fn server_pid(stream: &Stream) -> Option<u32> {
        let mut pid = 0u32;
        // SAFETY: the handle is the live pipe `stream` owns; `pid` outlives the call.
        let ok = unsafe { GetNamedPipeServerProcessId(stream.as_raw_handle() as HANDLE, &mut pid) };
        (ok != 0 && pid != 0).then_some(pid)
    }

    pub(crate) fn client_pid(stream: &Incoming) -> Option<u32> {
        let mut pid = 0u32;
        // SAFETY: as in `server_pid`.
        let ok = unsafe { GetNamedPipeClientProcessId(stream.as_raw_handle() as HANDLE, &mut pid) };
        (ok != 0 && pid != 0).then_some(pid)
    }

    /// After a frame: wait (at most `wait`) until the host has read every byte. The
    /// flush blocks a thread of the blocking pool; one the host never reads ends when
    /// the pipe breaks.
    pub(crate) async fn finish(stream: Stream, wait: Duration) -> io::Result<bool> {
        let flush = tokio::task::spawn_blocking(move || {
            // SAFETY: the closure owns `stream`, so the handle stays open for the call.
            let ok = unsafe { FlushFileBuffers(stream.as_raw_handle() as HANDLE) };
            if ok == 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        });
        match tokio::time::timeout(wait, flush).await {
            Err(_) => Ok(false),
            Ok(Err(join)) => Err(io::Error::other(join)),
            // A broken pipe: the host closed after reading, as on Unix.
            Ok(Ok(Err(e))) if e.kind() == io::ErrorKind::BrokenPipe => Ok(true),
            Ok(Ok(r)) => r.map(|()| true),
        }
    }

    /// Whether a pipe at `path` exists now (all its instances busy counts).
    pub(crate) fn accepts(path: &Path) -> bool {
        match std::fs::OpenOptions::new().read(true).open(path) {
            Ok(_) => true,
            Err(e) => e.raw_os_error() == Some(ERROR_PIPE_BUSY as i32),
        }
    }

    /// The names to try for our reply pipe beside `host`: `cc-msg-<32 hex>` in the
    /// host's namespace, the only shape the host sends receipts to.
    pub(crate) fn reply_names(host: &Path) -> io::Result<Vec<PathBuf>> {
        pipe_name(host).ok_or_else(|| io::Error::other("the host's inbox is not a pipe"))?;
        let s = host.to_str().unwrap_or_default();
        let cut = s.rfind(['\\', '/']).map_or(0, |i| i + 1);
        let names = (0..2)
            .map(|_| {
                let hex: String = (0..4)
                    .map(|_| format!("{:08x}", super::random_u32()))
                    .collect();
                PathBuf::from(format!("{}cc-msg-{hex}", &s[..cut]))
            })
            .collect();
        Ok(names)
    }

    /// Creates the pipe at `path`; fails if it exists, so no other process's pipe is
    /// ever joined: the system refuses a second first instance
    /// (`FILE_FLAG_FIRST_PIPE_INSTANCE`), and — where that flag is not enforced (Wine)
    /// — a pipe that answers is refused before.
    pub(crate) fn bind(path: &Path) -> io::Result<Listener> {
        if accepts(path) {
            return Err(io::ErrorKind::AddrInUse.into());
        }
        let waiting = server_options().first_pipe_instance(true).create(path)?;
        Ok(Listener {
            path: path.to_owned(),
            waiting,
        })
    }

    /// A pipe goes with its last handle.
    pub(crate) fn unbind(_: &Path) {}

    /// The pid of the process that started this one, from a process snapshot.
    pub(crate) fn parent_pid() -> Option<u32> {
        use windows_sys::Win32::{
            Foundation::{CloseHandle, INVALID_HANDLE_VALUE},
            System::Diagnostics::ToolHelp::{
                CreateToolhelp32Snapshot, PROCESSENTRY32W, Process32FirstW, Process32NextW,
                TH32CS_SNAPPROCESS,
            },
        };
        let me = std::process::id();
        // SAFETY: plain Win32 calls; the entry is sized as the API asks and the
        // snapshot handle is closed on every path.
        unsafe {
            let snap = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
            if snap == INVALID_HANDLE_VALUE {
                return None;
            }
            let mut entry: PROCESSENTRY32W = std::mem::zeroed();
            entry.dwSize = size_of::<PROCESSENTRY32W>() as u32;
            let mut found = None;
            let mut more = Process32FirstW(snap, &mut entry) != 0;
            while more {
                if entry.th32ProcessID == me {
                    found = Some(entry.th32ParentProcessID);
                    break;
                }
                more = Process32NextW(snap, &mut entry) != 0;
            }
            CloseHandle(snap);
            found
        }
    }
}

#[cfg(not(any(unix, windows)))]
mod imp {
    compile_error!("the host's inbox endpoint is built for Unix and Windows only");
}

pub(crate) use imp::{
    Incoming, Listener, Stream, accepts, bind, check_address, client_pid, parent_pid, reply_names,
    server_pid, unbind,
};

/// Connects to the endpoint at `path`, at most `wait`.
pub(crate) async fn connect(path: &Path, wait: Duration) -> Option<io::Result<Stream>> {
    tokio::time::timeout(wait, imp::connect(path)).await.ok()
}

/// Ends a post: returns whether the host took the whole frame within `wait` (false:
/// it did not say so in time, which is not a lost frame).
pub(crate) async fn finish(stream: Stream, wait: Duration) -> io::Result<bool> {
    imp::finish(stream, wait).await
}

pub(crate) fn random_u32() -> u32 {
    let mut r = [0u8; 4];
    if getrandom::fill(&mut r).is_err() {
        // No OS randomness: the name only has to differ from a live one.
        return interlink_net::Clock::system().now_ms() as u32 ^ std::process::id();
    }
    u32::from_be_bytes(r)
}
