//! The `interlink-relay` binary, driven like an operator would: flags, stdout and
//! stderr contracts, the metrics endpoint, SIGTERM and exit codes.

#![cfg(unix)] // Sends SIGTERM and checks Unix file modes.
use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    os::unix::fs::PermissionsExt,
    path::Path,
    process::{Child, Command, ExitStatus, Stdio},
    sync::mpsc::{Receiver, sync_channel},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

const BIN: &str = env!("CARGO_BIN_EXE_interlink-relay");
const DEADLINE: Duration = Duration::from_secs(20);
/// Stderr lines buffered from the child before the reader thread waits.
const LOG_LINES: usize = 1024;

struct Relay {
    child: Child,
    logs: Receiver<String>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(dir: &Path, extra: &[&str]) -> Result<Relay> {
    let mut child = Command::new(BIN)
        .arg("--key")
        .arg(dir.join("relay.key"))
        .arg("--db")
        .arg(dir.join("mailboxes.redb"))
        .args([
            "--listen",
            "/ip4/127.0.0.1/tcp/0",
            "--metrics",
            "127.0.0.1:0",
        ])
        .args(extra)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let stderr = child.stderr.take().context("stderr")?;
    let (tx, logs) = sync_channel(LOG_LINES);
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Ok(Relay { child, logs })
}

/// Waits for a log line containing `needle`; returns it.
fn wait_for_log(relay: &Relay, needle: &str) -> Result<String> {
    let end = Instant::now() + DEADLINE;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        let line = relay.logs.recv_timeout(left)?;
        if line.contains(needle) {
            return Ok(line);
        }
    }
    bail!("no log line with {needle:?}")
}

fn get(addr: &str, path: &str) -> Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(DEADLINE))?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: relay\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

fn wait_exit(child: &mut Child) -> Result<ExitStatus> {
    let end = Instant::now() + DEADLINE;
    while Instant::now() < end {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        thread::sleep(Duration::from_millis(20));
    }
    bail!("the relay did not exit")
}

#[test]
fn serves_probe_and_stops_cleanly_on_sigterm() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut relay = spawn(dir.path(), &["--network", "lab"])?;
    let line = wait_for_log(&relay, "serving /metrics and /probe")?;
    let addr = line
        .split("bound=")
        .nth(1)
        .context("bound address in the log")?
        .trim()
        .to_owned();

    let probe = get(&addr, "/probe")?;
    assert!(probe.starts_with("HTTP/1.1 200 OK\r\n"), "{probe}");
    let body = probe.split_once("\r\n\r\n").context("body")?.1;
    let json: serde_json::Value = serde_json::from_str(body)?;
    assert_eq!(json["server"], "interlink-relay");
    assert_eq!(json["network"], "lab");
    let peer_id = json["peer_id"].as_str().context("peer_id")?.to_owned();
    assert!(get(&addr, "/metrics")?.contains("interlink_relay_build_info{version="));

    let mode = std::fs::metadata(dir.path().join("relay.key"))?
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    let kill = Command::new("kill")
        .args(["-TERM", &relay.child.id().to_string()])
        .status()?;
    assert!(kill.success());
    let status = wait_exit(&mut relay.child)?;
    assert_eq!(status.code(), Some(0));
    // Stdout holds only dialable addresses of this relay, one per line.
    let mut stdout = String::new();
    relay
        .child
        .stdout
        .take()
        .context("stdout")?
        .read_to_string(&mut stdout)?;
    for line in stdout.lines() {
        assert!(
            line.starts_with('/') && line.ends_with(&format!("/p2p/{peer_id}")),
            "{line}"
        );
    }
    Ok(())
}

#[test]
fn refuses_bad_flags_and_a_database_in_use() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut bad = spawn(dir.path(), &["--network", "Not Valid"])?;
    assert_eq!(wait_exit(&mut bad.child)?.code(), Some(2));

    let first = spawn(dir.path(), &[])?;
    wait_for_log(&first, "serving /metrics and /probe")?;
    let mut second = spawn(dir.path(), &[])?;
    assert_eq!(wait_exit(&mut second.child)?.code(), Some(1));
    wait_for_log(&second, "relay did not start")?;
    drop(first);
    Ok(())
}
