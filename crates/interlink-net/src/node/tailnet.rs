//! Tailnet discovery, the shell around [`crate::tailnet::Probes`]: runs `tailscale
//! status --json` in a task of its own (a child process, never on the node task),
//! dials what the component asks for, and turns the swarm's connection events into
//! its inputs.
//!
//! A probe is a dial with no peer id at the well-known port: whatever interlink node
//! answers there is connected like a peer mDNS found, and identify and presence decide
//! the rest (a node of another overlay is disconnected; a stranger sees public
//! presence only, the peers policy deciding what it may send).

use std::{
    collections::HashMap,
    net::IpAddr,
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use libp2p::{
    Multiaddr, PeerId,
    core::ConnectedPoint,
    multiaddr::Protocol,
    swarm::{ConnectionId, dial_opts::DialOpts},
};
use tokio::{io::AsyncReadExt as _, sync::mpsc};
use tracing::{debug, info};

use super::Actor;
use crate::tailnet::{self, Input, MAX_STATUS_BYTES, Output, Probes};

/// How long `tailscale status --json` may run before it is killed (it answers from
/// the local daemon in milliseconds; a hung daemon must not hold a read forever).
const STATUS_TIMEOUT: Duration = Duration::from_secs(10);
/// The CLI's file name on `PATH`.
const CLI_NAME: &str = if cfg!(windows) {
    "tailscale.exe"
} else {
    "tailscale"
};

/// What a read of the status gave: the CLI's stdout, or why there is none.
type ReadResult = Result<Vec<u8>, String>;

/// The probes and what the shell keeps to map swarm events back to them.
#[derive(Debug)]
pub(super) struct Tailnet {
    probes: Probes,
    cli: Option<PathBuf>,
    /// Probes in flight, by their connection: at most one per tracked peer (the newest).
    dialing: HashMap<ConnectionId, IpAddr>,
    /// Peers connected at a tracked address: at most one per tracked peer.
    answered: HashMap<PeerId, IpAddr>,
    /// The read's result comes back here; one read runs at a time (the component asks
    /// for the next only once this one is handed back), so one slot is enough.
    reads_tx: mpsc::Sender<ReadResult>,
    reads: mpsc::Receiver<ReadResult>,
}

impl Tailnet {
    /// Tailnet discovery per `config`, if on.
    pub(super) fn new(config: Option<&crate::Tailnet>) -> Option<Self> {
        let config = config?;
        let (reads_tx, reads) = mpsc::channel(1);
        Some(Self {
            probes: Probes::new(config.probes.clone(), Instant::now()),
            cli: config.cli.clone(),
            dialing: HashMap::new(),
            answered: HashMap::new(),
            reads_tx,
            reads,
        })
    }
}

/// The next read of the status to come back; never, with tailnet discovery off.
pub(super) async fn next_read(tailnet: &mut Option<Tailnet>) -> ReadResult {
    match tailnet {
        Some(t) => match t.reads.recv().await {
            Some(read) => read,
            // Unreachable while `reads_tx` lives in the same struct.
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

impl Actor {
    /// Feeds the probes an input and carries out what they ask.
    fn tailnet_input(&mut self, input: Option<Input>) {
        let now = Instant::now();
        let Some(t) = self.tailnet.as_mut() else {
            return;
        };
        match input {
            Some(input) => t.probes.handle(input, now),
            None => t.probes.handle_timeout(now),
        }
        while let Some(output) = self.tailnet.as_mut().and_then(|t| t.probes.poll_output()) {
            match output {
                Output::ReadStatus => self.spawn_tailnet_read(),
                Output::Dial { ip, addr } => self.tailnet_dial(ip, addr),
            }
        }
    }

    /// The tick: the probes' timers (all of them seconds or longer).
    pub(super) fn tailnet_tick(&mut self) {
        self.tailnet_input(None);
    }

    /// The host's addresses changed.
    pub(super) fn tailnet_network_changed(&mut self) {
        self.tailnet_input(Some(Input::NetworkChanged));
    }

    /// A read of the status came back.
    pub(super) fn on_tailnet_read(&mut self, read: ReadResult) {
        let input =
            match read.and_then(|bytes| tailnet::parse_status(&bytes).map_err(|e| e.to_string())) {
                Ok(status) => {
                    debug!(
                        online = status.online.len(),
                        offline = status.offline,
                        "tailnet status read"
                    );
                    Input::Status(status)
                }
                Err(reason) => {
                    debug!(%reason, "no tailnet status");
                    Input::StatusFailed
                }
            };
        self.tailnet_input(Some(input));
        if let Some(t) = &self.tailnet {
            let over = t.probes.stats().over_cap;
            if over > 0 {
                debug!(over, "tailnet peers beyond the cap are not probed");
            }
        }
    }

    /// Runs the CLI in a task of its own; its result comes back through `reads`.
    fn spawn_tailnet_read(&mut self) {
        let Some(t) = &self.tailnet else {
            return;
        };
        let (cli, tx) = (t.cli.clone(), t.reads_tx.clone());
        tokio::spawn(async move {
            let read = read_status(cli, STATUS_TIMEOUT).await;
            // The node may have stopped meanwhile; then nobody wants the answer.
            let _ = tx.send(read).await;
        });
    }

    /// Probes `ip`, unless a peer there is connected already (then it counts as
    /// answered) or the node is at its dial limit (then as unanswered, tried again
    /// after the backoff).
    fn tailnet_dial(&mut self, ip: IpAddr, addr: Multiaddr) {
        let connected = self.peers.iter().find_map(|(peer, info)| {
            info.connections
                .values()
                .any(|c| remote_ip(c) == Some(ip))
                .then_some(*peer)
        });
        let Some(t) = self.tailnet.as_mut() else {
            return;
        };
        if let Some(peer) = connected {
            t.answered.insert(peer, ip);
            t.probes.handle(Input::Answered(ip), Instant::now());
            return;
        }
        if self.peers.len() >= self.config.max_dialed_peers {
            t.probes.handle(Input::NoAnswer(ip), Instant::now());
            return;
        }
        let opts = DialOpts::unknown_peer_id().address(addr.clone()).build();
        let id = opts.connection_id();
        match self.swarm.dial(opts) {
            Ok(()) => {
                debug!(%addr, "probing a tailnet peer");
                // An earlier probe of `ip` the component gave up on (after its probe
                // timeout) may still be dialling — the kernel retries a SYN for about
                // two minutes — and its late failure must not count against this one.
                // Forgotten here, a late success still counts: the connection's
                // address is a tracked one.
                t.dialing.retain(|_, probed| *probed != ip);
                t.dialing.insert(id, ip);
            }
            Err(e) => {
                debug!(%addr, %e, "tailnet probe not started");
                t.probes.handle(Input::NoAnswer(ip), Instant::now());
            }
        }
    }

    /// A connection was established: a probe answered, or a tracked peer connected
    /// some other way (it dialled us): either way it is not probed while connected.
    pub(super) fn tailnet_connected(
        &mut self,
        peer: PeerId,
        connection: ConnectionId,
        endpoint: &ConnectedPoint,
    ) {
        let Some(t) = self.tailnet.as_mut() else {
            return;
        };
        let ip = match t.dialing.remove(&connection) {
            Some(ip) => {
                info!(%peer, %ip, "a tailnet peer answered at the well-known port");
                ip
            }
            None => match remote_ip(endpoint) {
                Some(ip) if t.probes.tracks(ip) => ip,
                _ => return,
            },
        };
        t.answered.insert(peer, ip);
        self.tailnet_input(Some(Input::Answered(ip)));
    }

    /// A dial failed: if it was a probe, nobody answered.
    pub(super) fn tailnet_dial_failed(&mut self, connection: ConnectionId) {
        if let Some(ip) = self
            .tailnet
            .as_mut()
            .and_then(|t| t.dialing.remove(&connection))
        {
            debug!(%ip, "no answer from a tailnet peer");
            self.tailnet_input(Some(Input::NoAnswer(ip)));
        }
    }

    /// The last connection with `peer` closed.
    pub(super) fn tailnet_disconnected(&mut self, peer: &PeerId) {
        if let Some(ip) = self.tailnet.as_mut().and_then(|t| t.answered.remove(peer)) {
            self.tailnet_input(Some(Input::Disconnected(ip)));
        }
    }
}

/// The IP of a direct connection's remote end (`None` for a relayed one).
fn remote_ip(endpoint: &ConnectedPoint) -> Option<IpAddr> {
    let addr = endpoint.get_remote_address();
    if addr.iter().any(|p| p == Protocol::P2pCircuit) {
        return None;
    }
    tailnet::ip_of(addr)
}

/// Runs `tailscale status --json` (`cli`, else `tailscale` on `PATH`): its stdout, at
/// most [`MAX_STATUS_BYTES`] of it, within `timeout` ([`STATUS_TIMEOUT`]); the process
/// is killed if it takes longer or says more. Its stderr is discarded: this process's stdout may be
/// an MCP server's JSON-RPC stream, and nothing of the child's may reach it.
async fn read_status(cli: Option<PathBuf>, timeout: Duration) -> ReadResult {
    let program = match cli {
        Some(path) => path,
        None => find_on_path(CLI_NAME)
            .await
            .ok_or_else(|| format!("no `{CLI_NAME}` on PATH"))?,
    };
    let mut child = tokio::process::Command::new(&program)
        .args(["status", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("running {}: {e}", program.display()))?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| "no stdout pipe".to_owned())?;
    let work = async {
        let mut buf = Vec::new();
        let limit = u64::try_from(MAX_STATUS_BYTES).unwrap_or(u64::MAX) + 1;
        (&mut stdout)
            .take(limit)
            .read_to_end(&mut buf)
            .await
            .map_err(|e| format!("reading its output: {e}"))?;
        if buf.len() > MAX_STATUS_BYTES {
            return Err(format!(
                "its output is longer than {MAX_STATUS_BYTES} bytes"
            ));
        }
        let status = child
            .wait()
            .await
            .map_err(|e| format!("waiting for it: {e}"))?;
        if !status.success() {
            return Err(format!("it exited with {status}"));
        }
        Ok(buf)
    };
    let result = tokio::time::timeout(timeout, work).await;
    match result {
        Ok(read) => read,
        // Dropping `child` (kill_on_drop) kills it; tokio reaps it in the background.
        Err(_) => Err(format!("it did not finish within {timeout:?}; killed")),
    }
    .map_err(|e| format!("{}: {e}", program.display()))
}

/// The first executable file named `name` in a directory of `PATH`.
async fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path).take(MAX_PATH_DIRS) {
        let candidate = dir.join(name);
        if is_executable(&candidate).await {
            return Some(candidate);
        }
    }
    None
}

/// The most `PATH` entries looked at.
const MAX_PATH_DIRS: usize = 256;

async fn is_executable(path: &Path) -> bool {
    let Ok(meta) = tokio::fs::metadata(path).await else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        meta.is_file()
    }
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // test code

    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn script(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("tailscale");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[tokio::test]
    async fn the_cli_is_run_bounded_in_time_and_size() {
        let dir = tempfile::tempdir().unwrap();
        let ok = script(
            dir.path(),
            r#"[ "$1 $2" = "status --json" ] || exit 3; echo '{"Peer":null}'; echo noise >&2"#,
        );
        let read = |cli| read_status(Some(cli), Duration::from_millis(500));
        assert_eq!(read(ok).await.unwrap(), b"{\"Peer\":null}\n".to_vec());
        let failing = script(dir.path(), "exit 1");
        assert!(read(failing).await.unwrap_err().contains("exited"));
        let long = script(dir.path(), "head -c 5000000 /dev/zero");
        assert!(read(long).await.unwrap_err().contains("longer"));
        // A CLI that hangs is killed at the timeout.
        let hung = script(dir.path(), "echo $$ > \"$0.pid\"; exec sleep 600");
        let started = std::time::Instant::now();
        let err = read(hung.clone()).await.unwrap_err();
        assert!(err.contains("killed"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let pid = std::fs::read_to_string(hung.with_extension("pid")).unwrap();
        let mut gone = false;
        for _ in 0..50 {
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
            // Gone, or a zombie waiting for tokio's reaper.
            if stat.map_or(true, |s| s.contains(") Z ")) {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(gone, "the hung CLI (pid {pid}) was not killed");
        let missing = dir.path().join("nope");
        assert!(read(missing).await.is_err());
    }
}
