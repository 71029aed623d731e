//! Running `interlink-p2p` processes in tests: every child sits in a guard that kills
//! it on drop, and every wait has a deadline, so no test can hang or leak a process.
//! The guard and the runs to the end are the kit's child-process harness
//! (`interlink_testkit::process`); this module adds what is particular to the CLI.

use std::{
    path::{Path, PathBuf},
    process::{Command, ExitStatus},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail, ensure};
pub use interlink_testkit::process::Child as Guard;
use interlink_testkit::{process as harness, scrub_env};

use crate::binary;

/// What every command of a test runs with unless the test sets `INTERLINK_PORT`
/// itself: no host's well-known port.
pub const NO_WELL_KNOWN_PORT: (&str, &str) = ("INTERLINK_PORT", "0");

/// What every command run outside a network namespace starts with unless the test
/// sets `INTERLINK_MDNS`: mDNS off.
pub const NO_MDNS: (&str, &str) = ("INTERLINK_MDNS", "0");

/// The default deadline for anything a test waits on.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The network namespace every later command of this test process runs in, if any.
static NETNS: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Runs every later `interlink-p2p` command of this test process inside the network
/// namespace `name` (`ip netns exec`). For tests that need a real multicast-capable
/// link without touching the host's interfaces; nextest runs each test in its own
/// process, so this never leaks into other tests.
pub fn use_netns(name: &str) {
    let _ = NETNS.set(name.to_owned());
}

/// The namespace set by [`use_netns`], if any.
pub fn netns() -> Option<&'static str> {
    NETNS.get().map(String::as_str)
}

/// An `interlink-p2p` command with a scrubbed environment
/// ([`interlink_testkit::SCRUBBED_ENV`]), `home` as its `INTERLINK_HOME`, and `env` added.
pub fn command(home: &Path, env: &[(&str, &str)]) -> anyhow::Result<Command> {
    command_in(netns(), home, env)
}

/// Like [`command`], run in the network namespace `netns` if given (tests with more
/// than one namespace, [`crate::lab`]).
pub fn command_in(
    netns: Option<&str>,
    home: &Path,
    env: &[(&str, &str)],
) -> anyhow::Result<Command> {
    let mut cmd = match netns {
        // `ip netns exec` execs the binary, so the child's pid is the binary's.
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(binary("interlink-p2p")?);
            c
        }
        None => Command::new(binary("interlink-p2p")?),
    };
    scrub_env(&mut cmd);
    cmd.env("INTERLINK_HOME", home);
    // No well-known port unless a test asks for one (`env` comes after): tests run
    // many sessions of unrelated homes on one host, in parallel, and through the port
    // they would all meet each other's.
    cmd.env(NO_WELL_KNOWN_PORT.0, NO_WELL_KNOWN_PORT.1);
    // No mDNS outside a namespace of the test's own: its multicast would leave the
    // machine through the real interface (tests/e2e/mdns.rs runs it on a lab LAN).
    if netns.is_none() {
        cmd.env(NO_MDNS.0, NO_MDNS.1);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    Ok(cmd)
}

/// Where a session keeps its home directory: its own temporary one, or one a test
/// shares between runs (to restart a session over its identity and inbox).
#[derive(Debug)]
enum HomeDir {
    Own(tempfile::TempDir),
    Shared(PathBuf),
}

impl HomeDir {
    fn path(&self) -> PathBuf {
        match self {
            Self::Own(dir) => dir.path().to_owned(),
            Self::Shared(path) => path.clone(),
        }
    }
}

/// A headless session (`interlink-p2p run`) with its home directory.
#[derive(Debug)]
pub struct Session {
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
        Self::start_with(HomeDir::Own(tempfile::tempdir()?), netns(), id, args, env)
    }

    /// Like [`Session::start`], in an existing home directory (which the caller keeps).
    pub fn start_in(
        home: &Path,
        id: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        Self::start_with(HomeDir::Shared(home.to_owned()), netns(), id, args, env)
    }

    /// Like [`Session::start_in`], in the network namespace `netns`.
    pub fn start_in_netns(
        netns: &str,
        home: &Path,
        id: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        Self::start_with(HomeDir::Shared(home.to_owned()), Some(netns), id, args, env)
    }

    /// Spawns `run --session <id> ARGS` and reads its stdout up to `ready`.
    fn start_with(
        home: HomeDir,
        netns: Option<&str>,
        id: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let mut cmd = command_in(netns, &home.path(), env)?;
        cmd.args(["run", "--session", id]).args(args);
        let home_path = home.path();
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
    cmd: Command,
    input: Option<&str>,
    deadline: Instant,
) -> anyhow::Result<(ExitStatus, String, String)> {
    let out = harness::run_with_input(cmd, input, deadline)?;
    Ok((out.status, out.stdout, out.stderr))
}

/// Runs `interlink-p2p peers --json` as an observer on loopback bootstrapped to
/// `bootstrap`, and returns the parsed report.
pub fn peers_json(
    bootstrap: &str,
    env: &[(&str, &str)],
    extra: &[&str],
) -> anyhow::Result<serde_json::Value> {
    let home = tempfile::tempdir()?;
    peers_json_as(home.path(), bootstrap, env, extra)
}

/// [`peers_json`] run from `home`: it reads as that home's identity, so it sees the
/// details of that identity's sessions and of its peers' (a fresh home sees none).
pub fn peers_json_as(
    home: &Path,
    bootstrap: &str,
    env: &[(&str, &str)],
    extra: &[&str],
) -> anyhow::Result<serde_json::Value> {
    let mut cmd = command(home, env)?;
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
