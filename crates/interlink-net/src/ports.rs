//! A fixed listen port belongs to one session.
//!
//! libp2p's TCP listener sets `SO_REUSEPORT` (so that dials could leave from the
//! listening port, for hole punching; this node dials from fresh ports and punches
//! holes over QUIC). With it, a second session told to listen on the same fixed port
//! starts without a word and the kernel splits the incoming connections between two
//! unrelated sessions. So before a fixed port is handed to libp2p it is bound once
//! without `SO_REUSEPORT`: a port some other socket listens on — with or without the
//! option — refuses that bind, and the session fails at once, naming the process that
//! holds the port where the system says (Linux's `/proc`). Two sessions starting in
//! the same millisecond can still both pass; the check is for the common mistake, a
//! second session started with the settings of the first.

use std::{
    io,
    net::{IpAddr, SocketAddr, TcpListener, UdpSocket},
};

use libp2p::{Multiaddr, multiaddr::Protocol};

/// The transport a listen address binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proto {
    Tcp,
    Udp,
}

impl Proto {
    fn name(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Udp => "udp",
        }
    }
}

/// The socket a listen address binds, when it names a fixed port (`/tcp/0` and
/// addresses that are not IP — memory, relayed — have nothing to check).
fn fixed_socket(addr: &Multiaddr) -> Option<(Proto, SocketAddr)> {
    let mut ip = None;
    for p in addr.iter() {
        match p {
            Protocol::Ip4(a) => ip = Some(IpAddr::V4(a)),
            Protocol::Ip6(a) => ip = Some(IpAddr::V6(a)),
            Protocol::Tcp(port) if port != 0 => return Some((Proto::Tcp, (ip?, port).into())),
            Protocol::Udp(port) if port != 0 => return Some((Proto::Udp, (ip?, port).into())),
            Protocol::P2pCircuit => return None,
            _ => {}
        }
    }
    None
}

/// `Err` with what to tell the user when `addr`'s fixed port is taken.
pub(crate) fn check_free(addr: &Multiaddr) -> Result<(), String> {
    let Some((proto, socket)) = fixed_socket(addr) else {
        return Ok(());
    };
    let bound = match proto {
        Proto::Tcp => TcpListener::bind(socket).map(drop),
        Proto::Udp => UdpSocket::bind(socket).map(drop),
    };
    match bound {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
            let holder = holder(proto, socket.port())
                .map_or_else(|| "another process".to_owned(), |h| h.to_string());
            Err(format!(
                "port {}/{} is already in use by {holder}; stop it, or give this session \
                 another port (or port 0 for any)",
                socket.port(),
                proto.name()
            ))
        }
        // Not ours to judge (an address not on this host, no permission): libp2p's own
        // listen reports it with its cause.
        Err(_) => Ok(()),
    }
}

/// A process holding a port.
#[derive(Debug, PartialEq, Eq)]
struct Holder {
    pid: u32,
    command: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} ({})", self.pid, self.command)
    }
}

/// The process whose socket is bound to `port` (TCP: listening), from `/proc`. `None`
/// where there is no `/proc`, or the socket belongs to a process this user cannot see.
fn holder(proto: Proto, port: u16) -> Option<Holder> {
    let tables: &[&str] = match proto {
        Proto::Tcp => &["/proc/net/tcp", "/proc/net/tcp6"],
        Proto::Udp => &["/proc/net/udp", "/proc/net/udp6"],
    };
    let inodes: Vec<u64> = tables
        .iter()
        .filter_map(|t| std::fs::read_to_string(t).ok())
        .flat_map(|table| socket_inodes(&table, proto, port))
        .collect();
    if inodes.is_empty() {
        return None;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    for proc_entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = proc_entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(proc_entry.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| wanted.iter().any(|w| target.as_os_str() == w.as_str()))
        });
        if holds {
            let command = std::fs::read(proc_entry.path().join("cmdline"))
                .map(|c| command_line(&c))
                .unwrap_or_default();
            return Some(Holder { pid, command });
        }
    }
    None
}

/// The inodes of the sockets in a `/proc/net/{tcp,udp}[6]` table bound to `port`
/// (for TCP, listening).
fn socket_inodes(table: &str, proto: Proto, port: u16) -> Vec<u64> {
    const TCP_LISTEN: &str = "0A";
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let local_port = cols.get(1)?.rsplit_once(':')?.1;
            let state = *cols.get(3)?;
            let inode: u64 = cols.get(9)?.parse().ok()?;
            (u16::from_str_radix(local_port, 16).ok()? == port
                && (proto == Proto::Udp || state == TCP_LISTEN)
                && inode != 0)
                .then_some(inode)
        })
        .collect()
}

/// A process's command line as one line, at most 120 characters.
fn command_line(raw: &[u8]) -> String {
    let line = String::from_utf8_lossy(raw)
        .split('\0')
        .filter(|a| !a.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    match line.char_indices().nth(120) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

#[cfg(test)]
#[path = "ports_tests.rs"]
mod tests;
