//! Real `interlink-p2p` processes: finding the binary, starting a session process in a
//! throw-away home, reading its `ready` line, stopping it, and sampling its cost from
//! `/proc`. Starting, reading and stopping are the kit's child-process harness
//! (`interlink_testkit::process`), polled from async code.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use interlink_testkit::{
    process::{self as harness, Child, Options, TryLine, WhenFull},
    scrub_env,
};
use tempfile::TempDir;

/// Name of the session binary.
pub const P2P_BIN: &str = "interlink-p2p";
/// Stdout lines buffered between the reader thread and the bench; later lines are
/// dropped rather than blocking the child on a full pipe.
const STDOUT_LINES: usize = 64;
/// How long a process gets to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(3);
/// How often async waits look at a child again. The instants the bench reports are
/// taken by the reader thread when a line arrives, not by this poll.
const POLL: Duration = Duration::from_millis(1);
/// Bound on helper invocations (`--help`, `id`).
const HELPER_TIMEOUT: Duration = Duration::from_secs(20);

/// Finds `interlink-p2p`: the explicit path, else next to the running bench binary
/// (`target/<profile>/`), so a release bench uses the release node. `Err` is the reason
/// process-level cases are skipped.
pub fn find_p2p_binary(explicit: Option<&Path>) -> Result<PathBuf, String> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()
            .map_err(|e| format!("cannot locate the bench binary: {e}"))?
            .parent()
            .ok_or("the bench binary has no parent directory")?
            .join(P2P_BIN),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{} not found (build it: cargo build --release -p interlink-p2p)",
            path.display()
        ))
    }
}

/// Runs `cmd` to the end on a blocking thread (the harness is std-only), with `input`
/// on its stdin, bounded by [`HELPER_TIMEOUT`].
async fn run_blocking(
    cmd: Command,
    input: Option<String>,
) -> Result<harness::Output, harness::Error> {
    let run = tokio::task::spawn_blocking(move || {
        harness::run_with_input(cmd, input.as_deref(), Instant::now() + HELPER_TIMEOUT)
    });
    match run.await {
        Ok(result) => result,
        Err(e) => Err(harness::Error::Io {
            what: "the helper thread".into(),
            source: std::io::Error::other(e),
        }),
    }
}

/// Whether the binary has the `run` command: `interlink-p2p run --help` exits 0.
/// Returns the help text, or the reason it is unusable.
pub async fn run_command_help(bin: &Path) -> Result<String, String> {
    let mut cmd = Command::new(bin);
    cmd.args(["run", "--help"]);
    let out = run_blocking(cmd, None).await.map_err(|e| match e {
        harness::Error::RunTimeout { .. } => format!("`{} run --help` timed out", bin.display()),
        e => format!("cannot execute {}: {e}", bin.display()),
    })?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!("{} has no `run` command", bin.display()))
    }
}

/// Runs `bin args...` to completion with `INTERLINK_HOME` = `home` (mDNS off), feeding
/// `input` on stdin; returns stdout, or an error with stderr if it failed. Bounded by
/// [`HELPER_TIMEOUT`].
pub async fn cli(
    bin: &Path,
    home: &Path,
    args: &[&str],
    input: Option<String>,
) -> anyhow::Result<String> {
    let mut cmd = Command::new(bin);
    scrub_env(&mut cmd)
        .args(args)
        .env(interlink_store::env::HOME, home)
        .env(interlink_store::env::MDNS, "0")
        // Many homes on one host: without this they would all meet through the port.
        .env(interlink_store::env::PORT, "0");
    let out = run_blocking(cmd, input).await.map_err(|e| match e {
        harness::Error::RunTimeout { .. } => anyhow::anyhow!("interlink-p2p {args:?} timed out"),
        e => anyhow::Error::new(e).context(format!("starting {}", bin.display())),
    })?;
    anyhow::ensure!(
        out.status.success(),
        "interlink-p2p {args:?} failed: {}",
        out.stderr.trim()
    );
    Ok(out.stdout)
}

/// Creates an identity in `home` with `interlink-p2p id --json`; returns its key (hex).
pub async fn create_identity(bin: &Path, home: &Path) -> anyhow::Result<String> {
    let out = cli(bin, home, &["id", "--json"], None).await?;
    let v: serde_json::Value =
        serde_json::from_str(&out).context("parsing `interlink-p2p id --json`")?;
    v["identity_key"]
        .as_str()
        .map(str::to_owned)
        .context("`id --json` has no identity_key")
}

/// A running `interlink-p2p` process with its own temporary home. Dropping it kills the
/// process (SIGKILL) and removes the home; [`Proc::stop`] stops it gracefully first.
#[derive(Debug)]
pub struct Proc {
    child: Child,
    /// When `spawn` was called: the start of every "process start → ..." timing.
    pub started: Instant,
    // Declared last so it is removed after the process was told to die.
    home: TempDir,
}

/// What a session process printed before `ready`.
#[derive(Debug)]
pub struct Ready {
    /// When the `ready` line arrived.
    pub at: Instant,
    /// The `/p2p/` multiaddrs it printed.
    pub addrs: Vec<String>,
}

impl Proc {
    /// Starts `bin args...` with `INTERLINK_HOME` = `home` and `env`, stdout piped (read
    /// by a thread), stderr to a file in the home.
    pub fn spawn(
        bin: &Path,
        args: &[String],
        env: &[(&str, &str)],
        home: TempDir,
    ) -> anyhow::Result<Self> {
        let mut cmd = Command::new(bin);
        scrub_env(&mut cmd)
            .args(args)
            .env(interlink_store::env::HOME, home.path())
            // Many homes on one host: no well-known port unless `env` sets one.
            .env(interlink_store::env::PORT, "0");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let options = Options::default()
            .with_stderr_file(home.path().join("stderr.log"))
            .with_stdout_lines(STDOUT_LINES)
            .with_when_full(WhenFull::Drop)
            .with_name(format!("starting {}", bin.display()));
        let child = Child::spawn_with(cmd, options)?;
        Ok(Self {
            started: child.started(),
            child,
            home,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// The process's home directory.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// Sends `signal` (a name `kill` understands, e.g. `STOP`).
    pub fn signal(&self, signal: &str) -> anyhow::Result<()> {
        Ok(self.child.signal(signal)?)
    }

    /// Waits for the `ready` line, collecting the `/p2p/` addresses printed before it.
    pub async fn wait_ready(&mut self, limit: Duration) -> anyhow::Result<Ready> {
        let deadline = Instant::now() + limit;
        let mut addrs = Vec::new();
        loop {
            match self.child.try_next_line() {
                TryLine::Line((at, line)) => {
                    let line = line.trim();
                    if line == "ready" {
                        return Ok(Ready { at, addrs });
                    }
                    if line.contains("/p2p/") {
                        addrs.push(line.to_owned());
                    }
                }
                TryLine::Ended => {
                    anyhow::bail!("process exited before `ready`: {}", self.stderr_tail())
                }
                TryLine::Empty if Instant::now() >= deadline => anyhow::bail!(
                    "no `ready` within {limit:?}; stderr: {}",
                    self.stderr_tail()
                ),
                TryLine::Empty => tokio::time::sleep(POLL).await,
            }
        }
    }

    /// Whether the process has exited.
    pub fn has_exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// The last few lines of the process's stderr, for failure reports.
    pub fn stderr_tail(&self) -> String {
        let text = self.child.stderr();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
        if tail.is_empty() {
            "(stderr empty)".into()
        } else {
            tail
        }
    }

    /// Stops the process: SIGTERM (so it can say goodbye), then SIGKILL after a grace
    /// period. The home is removed when `self` drops.
    pub async fn stop(mut self) {
        if self.child.signal("TERM").is_ok() && self.exited_within(STOP_GRACE).await {
            return;
        }
        let _ = self.child.kill();
    }

    async fn exited_within(&mut self, grace: Duration) -> bool {
        let deadline = Instant::now() + grace;
        loop {
            if self.has_exited() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// One reading of a process's cost from `/proc`.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Resident set size, KiB.
    pub rss_kib: u64,
    /// The anonymous part of it (heap, stacks), KiB.
    pub rss_anon_kib: u64,
    /// The file-backed part of it (mapped code and data, shared with every process
    /// of the same binary), KiB.
    pub rss_file_kib: u64,
    /// Peak resident set size so far, KiB.
    pub hwm_kib: u64,
    pub threads: u64,
    /// User + system CPU time, in clock ticks (`/proc/<pid>/stat`).
    pub cpu_ticks: u64,
    /// Time on CPU in nanoseconds, summed over the live threads
    /// (`/proc/<pid>/task/*/schedstat`); `None` where the kernel has no schedstat.
    /// Finer than the tick count, but misses threads that exited in between.
    pub cpu_ns: Option<u64>,
}

/// Elsewhere than Linux there is no `/proc` to read: the cases that measure memory
/// and CPU say so and stop.
#[cfg(not(target_os = "linux"))]
pub fn sample(pid: u32) -> anyhow::Result<Sample> {
    anyhow::bail!(
        "sampling process {pid} reads /proc, which only Linux has: \
         the memory and CPU figures are measured on Linux"
    )
}

/// Reads `/proc/<pid>/status` and `/proc/<pid>/stat`.
#[cfg(target_os = "linux")]
pub fn sample(pid: u32) -> anyhow::Result<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let field = |name: &str| -> anyhow::Result<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("no {name} in /proc/{pid}/status"))
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // The command name (field 2) is in parentheses and may contain spaces; fields are
    // counted after its closing parenthesis, where field 3 (state) is index 0, so
    // utime (14) and stime (15) are indexes 11 and 12.
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("malformed /proc/<pid>/stat")?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| -> anyhow::Result<u64> {
        fields
            .get(i)
            .and_then(|v| v.parse().ok())
            .context("malformed /proc/<pid>/stat")
    };
    Ok(Sample {
        rss_kib: field("VmRSS:")?,
        rss_anon_kib: field("RssAnon:")?,
        rss_file_kib: field("RssFile:")?,
        hwm_kib: field("VmHWM:")?,
        threads: field("Threads:")?,
        cpu_ticks: tick(11)? + tick(12)?,
        cpu_ns: thread_cpu_ns(pid),
    })
}

#[cfg(target_os = "linux")]
fn thread_cpu_ns(pid: u32) -> Option<u64> {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let text = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// Clock ticks per second for `/proc/<pid>/stat` (`getconf CLK_TCK`; 100 on Linux
/// unless it says otherwise).
pub async fn clock_ticks_per_second() -> u64 {
    let out = tokio::process::Command::new("getconf")
        .arg("CLK_TCK")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await;
    out.ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .filter(|t| *t > 0)
        .unwrap_or(100)
}

/// A non-loopback, up, multicast-capable interface of a *private* LAN, or why there is
/// none. mDNS multicast must never reach a real network from a benchmark, so the mDNS
/// cases run only inside a network namespace without a default route — a LAN the
/// operator built for the purpose (docs/BENCHMARKS.md shows how).
pub fn private_multicast_interface() -> Result<String, String> {
    if !cfg!(target_os = "linux") {
        return Err("the mDNS cases run in a Linux network namespace".into());
    }
    if has_default_route() {
        return Err("mDNS runs only inside a private network namespace \
                    (this one has a default route; see docs/BENCHMARKS.md)"
            .into());
    }
    multicast_interface().ok_or_else(|| "no multicast interface".into())
}

/// Whether this network namespace has a default IPv4 route (`/proc/net/route`).
fn has_default_route() -> bool {
    std::fs::read_to_string("/proc/net/route").is_ok_and(|t| {
        t.lines()
            .skip(1)
            .any(|l| l.split_whitespace().nth(1) == Some("00000000"))
    })
}

/// A non-loopback interface that is up and multicast-capable, from
/// `/sys/class/net/*/flags` (IFF_UP 0x1, IFF_LOOPBACK 0x8, IFF_MULTICAST 0x1000).
fn multicast_interface() -> Option<String> {
    const IFF_UP: u32 = 0x1;
    const IFF_LOOPBACK: u32 = 0x8;
    const IFF_MULTICAST: u32 = 0x1000;
    let dir = std::fs::read_dir("/sys/class/net").ok()?;
    dir.filter_map(Result::ok).find_map(|entry| {
        let flags = std::fs::read_to_string(entry.path().join("flags")).ok()?;
        let flags = u32::from_str_radix(flags.trim().trim_start_matches("0x"), 16).ok()?;
        (flags & IFF_UP != 0 && flags & IFF_LOOPBACK == 0 && flags & IFF_MULTICAST != 0)
            .then(|| entry.file_name().to_string_lossy().into_owned())
    })
}

#[cfg(test)]
#[path = "process_tests.rs"]
mod tests;
