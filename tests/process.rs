//! Running `interlink-p2p` processes in tests: every child sits in a guard that kills
//! it on drop, and every wait has a deadline, so no test can hang or leak a process.

use std::{
    fs::File,
    io::{BufRead as _, BufReader, Read as _},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    sync::mpsc::{Receiver, RecvTimeoutError, sync_channel},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail, ensure};

use crate::binary;

/// The default deadline for anything a test waits on.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// Environment variables a developer's shell might set that would change what the
/// processes do; every test process starts without them.
const SCRUBBED_ENV: &[&str] = &[
    "INTERLINK_HOME",
    "INTERLINK_SESSION",
    "CLAUDE_CODE_SESSION_ID",
    "INTERLINK_NETWORK",
    "INTERLINK_LISTEN",
    "INTERLINK_BOOTSTRAP",
    "INTERLINK_MDNS",
    "INTERLINK_TEST_LIVE_WINDOW_MS",
    "INTERLINK_TEST_AWAY_RETENTION_MS",
    "INTERLINK_TEST_HEARTBEAT_MS",
];

/// The network namespace every later command of this test process runs in, if any.
static NETNS: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Runs every later `interlink-p2p` command of this test process inside the network
/// namespace `name` (`ip netns exec`). For tests that need a real multicast-capable
/// link without touching the host's interfaces; nextest runs each test in its own
/// process, so this never leaks into other tests.
pub fn use_netns(name: &str) {
    let _ = NETNS.set(name.to_owned());
}

/// An `interlink-p2p` command with a scrubbed environment, `home` as its
/// `INTERLINK_HOME`, and `env` added.
pub fn command(home: &Path, env: &[(&str, &str)]) -> anyhow::Result<Command> {
    let mut cmd = match NETNS.get() {
        // `ip netns exec` execs the binary, so the child's pid is the binary's.
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(binary("interlink-p2p")?);
            c
        }
        None => Command::new(binary("interlink-p2p")?),
    };
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    cmd.env("INTERLINK_HOME", home);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Ok(cmd)
}

/// A running child process, killed (SIGKILL) and reaped when dropped.
#[derive(Debug)]
pub struct Guard {
    child: Child,
    stdout: Receiver<String>,
    stderr_path: PathBuf,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Guard {
    /// Spawns `cmd` with stdout read line by line and stderr written to `stderr_path`.
    pub fn spawn(mut cmd: Command, stderr_path: PathBuf) -> anyhow::Result<Self> {
        let stderr = File::create(&stderr_path)?;
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .context("spawning interlink-p2p")?;
        let out = child.stdout.take().context("no stdout pipe")?;
        let (tx, rx) = sync_channel(256);
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            child,
            stdout: rx,
            stderr_path,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next stdout line, waiting until `deadline`. `None` at end of output.
    pub fn next_line(&self, deadline: Instant) -> anyhow::Result<Option<String>> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.stdout.recv_timeout(left) {
            Ok(line) => Ok(Some(line)),
            Err(RecvTimeoutError::Disconnected) => Ok(None),
            Err(RecvTimeoutError::Timeout) => {
                bail!("no stdout line in time; stderr:\n{}", self.stderr())
            }
        }
    }

    /// Whatever the process wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Sends `signal` (a name `kill` understands, e.g. `TERM`, `INT`).
    pub fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .context("running kill")?;
        ensure!(status.success(), "kill -{signal} {} failed", self.pid());
        Ok(())
    }

    /// Kills the process with SIGKILL (no goodbye) and reaps it.
    pub fn kill(&mut self) -> anyhow::Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }

    /// Waits for the process to exit, killing it at `deadline`.
    pub fn wait(&mut self, deadline: Instant) -> anyhow::Result<ExitStatus> {
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                bail!("process did not exit in time; stderr:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stdout lines still unread (after the process exited: everything it wrote).
    pub fn remaining_lines(&self) -> Vec<String> {
        self.stdout.try_iter().collect()
    }
}

/// Where a session keeps its home directory: its own temporary one, or one a test
/// shares between runs (to restart a session over its identity and inbox).
#[derive(Debug)]
enum HomeDir {
    Own(tempfile::TempDir),
    Shared(PathBuf),
}

/// A headless session (`interlink-p2p run`) with its home directory.
#[derive(Debug)]
pub struct Session {
    /// The process.
    pub process: Guard,
    /// The session id.
    pub id: String,
    /// The addresses it printed, each ending in `/p2p/<peer id>`.
    pub addrs: Vec<String>,
    home: HomeDir,
}

impl Session {
    /// Starts `interlink-p2p run --session <id>` with `args` and `env` in a new home
    /// directory, and reads its stdout up to `ready`, checking every line before it is
    /// a full multiaddr.
    pub fn start(id: &str, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<Self> {
        Self::start_with(HomeDir::Own(tempfile::tempdir()?), id, args, env)
    }

    /// Like [`Session::start`], in an existing home directory (which the caller keeps).
    pub fn start_in(
        home: &Path,
        id: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        Self::start_with(HomeDir::Shared(home.to_owned()), id, args, env)
    }

    fn start_with(
        home: HomeDir,
        id: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let home_path = match &home {
            HomeDir::Own(dir) => dir.path().to_owned(),
            HomeDir::Shared(path) => path.clone(),
        };
        let mut cmd = command(&home_path, env)?;
        cmd.args(["run", "--session", id]).args(args);
        // One log per start, so a restarted session keeps its predecessor's log.
        let log = home_path.join(format!("{id}.{}.stderr.log", unique_suffix()));
        let process = Guard::spawn(cmd, log)?;
        let deadline = Instant::now() + DEADLINE;
        let mut addrs = Vec::new();
        loop {
            let line = process.next_line(deadline)?.with_context(|| {
                format!("{id}: stdout ended before ready: {}", process.stderr())
            })?;
            if line == "ready" {
                break;
            }
            ensure!(
                line.starts_with('/') && line.contains("/p2p/12D3KooW"),
                "{id}: unexpected stdout line {line:?}"
            );
            addrs.push(line);
        }
        ensure!(!addrs.is_empty(), "{id}: no listen address before ready");
        Ok(Self {
            process,
            id: id.to_owned(),
            addrs,
            home,
        })
    }

    /// Its home directory.
    pub fn home(&self) -> &Path {
        match &self.home {
            HomeDir::Own(dir) => dir.path(),
            HomeDir::Shared(path) => path,
        }
    }

    /// Its first loopback address.
    pub fn loopback_addr(&self) -> anyhow::Result<&str> {
        self.addrs
            .iter()
            .find(|a| a.starts_with("/ip4/127.0.0.1/"))
            .map(String::as_str)
            .with_context(|| format!("{}: no loopback address in {:?}", self.id, self.addrs))
    }
}

/// Nanoseconds of the wall clock: distinct enough for log file names.
fn unique_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Runs a short-lived command to completion, killing it at `deadline`. Returns exit
/// status, stdout and stderr.
pub fn run_to_end(cmd: Command, deadline: Instant) -> anyhow::Result<(ExitStatus, String, String)> {
    run_with_input(cmd, None, deadline)
}

/// Like [`run_to_end`], writing `input` (if any) to the command's stdin and then
/// closing it.
pub fn run_with_input(
    mut cmd: Command,
    input: Option<&str>,
    deadline: Instant,
) -> anyhow::Result<(ExitStatus, String, String)> {
    let stdin = if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    let mut child = cmd
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let (Some(input), Some(mut pipe)) = (input, child.stdin.take()) {
        let input = input.to_owned();
        // A thread, so a child that stops reading cannot block the test past its
        // deadline; dropping the pipe closes the child's stdin.
        std::thread::spawn(move || {
            use std::io::Write as _;
            let _ = pipe.write_all(input.as_bytes());
        });
    }
    let reader = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            text
        })
    };
    let out = reader(child.stdout.take().map(|p| Box::new(p) as _));
    let err = reader(child.stderr.take().map(|p| Box::new(p) as _));
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("command did not finish in time: {cmd:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    Ok((status, out, err))
}

/// Runs `interlink-p2p peers --json` as an observer on loopback bootstrapped to
/// `bootstrap`, and returns the parsed report.
pub fn peers_json(
    bootstrap: &str,
    env: &[(&str, &str)],
    extra: &[&str],
) -> anyhow::Result<serde_json::Value> {
    let home = tempfile::tempdir()?;
    let mut cmd = command(home.path(), env)?;
    cmd.args([
        "peers",
        "--json",
        "--wait",
        "3",
        "--listen",
        "/ip4/127.0.0.1/tcp/0",
        "--no-mdns",
        "--bootstrap",
        bootstrap,
    ])
    .args(extra);
    let (status, out, err) = run_to_end(cmd, Instant::now() + DEADLINE)?;
    ensure!(status.success(), "peers failed ({status}): {err}");
    let mut lines = out.lines();
    let first = lines.next().context("peers printed nothing")?;
    ensure!(
        lines.next().is_none(),
        "peers printed more than one line: {out}"
    );
    serde_json::from_str(first).with_context(|| format!("peers output is not JSON: {first}"))
}

/// `session id → presence` from a peers report.
pub fn presences(report: &serde_json::Value) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    for ident in report["identities"].as_array().into_iter().flatten() {
        for s in ident["sessions"].as_array().into_iter().flatten() {
            out.insert(
                s["session_id"].as_str().unwrap_or_default().to_owned(),
                s["presence"].as_str().unwrap_or_default().to_owned(),
            );
        }
    }
    out
}

/// Polls `peers` until `check` accepts the presences or `deadline` passes; returns the
/// last report.
pub fn poll_peers(
    bootstrap: &str,
    env: &[(&str, &str)],
    deadline: Instant,
    check: impl Fn(&std::collections::BTreeMap<String, String>) -> bool,
) -> anyhow::Result<serde_json::Value> {
    loop {
        let report = peers_json(bootstrap, env, &[])?;
        let seen = presences(&report);
        if check(&seen) {
            return Ok(report);
        }
        if Instant::now() >= deadline {
            bail!("peers never showed the expected state; last seen {seen:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
