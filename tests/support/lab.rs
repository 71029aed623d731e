//! A network lab for a test: two hosts, each a network namespace of its own, joined by
//! a link (`a0` in host A, `b0` in host B) on 10.214.N.0/24 — traffic between them
//! crosses it and never leaves this machine. The link is a veth pair ([`Lab::create`]),
//! or a wide-area one with delay, loss and a rate ([`Lab::create_wan`]: two TAP devices
//! joined by `impair.py`, since this kernel has no netem). A host's address can be
//! changed as a laptop's does when it moves. Deleted on drop.

use std::{
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use interlink_testkit::process::Child;

/// The two hosts, deleted on drop.
#[derive(Debug)]
pub struct Lab {
    /// Host A's namespace (`ip netns exec <name>`).
    pub a: String,
    /// Host B's namespace.
    pub b: String,
    /// The /24 both hosts are on: `10.214.<subnet>.0`.
    subnet: u8,
    /// A wide-area link's forwarder (killed on drop).
    wan: Option<Child>,
}

/// A wide-area link: each direction delayed, lossy and paced.
#[derive(Clone, Copy, Debug)]
pub struct Wan {
    /// One-way delay (the round trip is twice this).
    pub delay_ms: u32,
    /// Frames lost, in percent, each direction.
    pub loss_percent: f64,
    /// The rate, each direction.
    pub rate_kbit: u32,
    /// The queue in front of the link (frames that do not fit are dropped).
    pub queue_bytes: u32,
}

/// Runs `ip ARGS`, or says why it failed.
pub(crate) fn ip(args: &[&str]) -> Result<(), String> {
    let mut cmd = Command::new("ip");
    cmd.args(args);
    run_checked(cmd, None, &format!("ip {}", args.join(" ")))
}

/// Runs `cmd` (with `input` on its stdin), or says why it failed: it could not start,
/// or exited unsuccessfully with what it wrote to stderr. `what` names it.
pub(crate) fn run_checked(mut cmd: Command, input: Option<&str>, what: &str) -> Result<(), String> {
    use std::{io::Write as _, process::Stdio};
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run `{what}`: {e}"))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin
            .write_all(text.as_bytes())
            .map_err(|e| format!("cannot write to `{what}`: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("`{what}` failed: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{what}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Lab {
    /// Creates the two hosts (A at `.1`, B at `.2`), or says why they cannot be made
    /// (not root, no `ip`, a restricted sandbox).
    pub fn create() -> Result<Self, String> {
        let lab = Self::hosts()?;
        ip(&[
            "-n", &lab.a, "link", "add", "a0", "type", "veth", "peer", "name", "b0", "netns",
            &lab.b,
        ])?;
        lab.addresses()?;
        Ok(lab)
    }

    /// The two hosts joined by a wide-area link ([`Wan`]); the forwarder's randomness
    /// is seeded by `seed`.
    pub fn create_wan(wan: Wan, seed: u64) -> Result<Self, String> {
        let mut lab = Self::hosts()?;
        let pid = std::process::id();
        let (ta, tb) = (format!("ilta{pid}"), format!("iltb{pid}"));
        ip(&["tuntap", "add", "dev", &ta, "mode", "tap"])?;
        if let Err(e) = ip(&["tuntap", "add", "dev", &tb, "mode", "tap"]) {
            let _ = ip(&["link", "del", &ta]);
            return Err(e);
        }
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("support/impair.py");
        let mut cmd = Command::new("python3");
        cmd.arg(script).args([
            ta.clone(),
            tb.clone(),
            wan.delay_ms.to_string(),
            wan.loss_percent.to_string(),
            wan.rate_kbit.to_string(),
            wan.queue_bytes.to_string(),
            seed.to_string(),
        ]);
        let started = Child::spawn(cmd, std::env::temp_dir().join(format!("impair{pid}.log")))
            .map_err(|e| format!("cannot start impair.py: {e}"));
        let forwarder = match started {
            Ok(f) => f,
            Err(e) => {
                let _ = ip(&["link", "del", &ta]);
                let _ = ip(&["link", "del", &tb]);
                return Err(e);
            }
        };
        let ready = forwarder.next_line(Instant::now() + Duration::from_secs(10));
        lab.wan = Some(forwarder);
        match ready {
            Ok(Some(line)) if line == "ready" => {}
            other => return Err(format!("impair.py did not start: {other:?}")),
        }
        // The open descriptors keep working once the devices move into the hosts.
        ip(&["link", "set", &ta, "netns", &lab.a, "name", "a0"])?;
        ip(&["link", "set", &tb, "netns", &lab.b, "name", "b0"])?;
        lab.addresses()?;
        Ok(lab)
    }

    /// The forwarder's counts per direction (`in`, `lost`, `queue_full`, `out`), for a
    /// test to check the impairment is what it asked for.
    pub fn wan_stats(&self) -> Option<Vec<String>> {
        let wan = self.wan.as_ref()?;
        wan.signal("USR1").ok()?;
        let deadline = Instant::now() + Duration::from_secs(5);
        let lines = (0..2)
            .filter_map(|_| wan.next_line(deadline).ok().flatten())
            .collect();
        Some(lines)
    }

    /// Makes the two namespaces (no link yet).
    fn hosts() -> Result<Self, String> {
        let pid = std::process::id();
        // One subnet per test process, so labs of tests running at once do not meet
        // (they are in different namespaces anyway; this keeps logs unambiguous).
        let subnet = u8::try_from(pid % 200).unwrap_or(0) + 20;
        let lab = Self {
            a: format!("ilaba{pid}"),
            b: format!("ilabb{pid}"),
            subnet,
            wan: None,
        };
        ip(&["netns", "add", &lab.a])?;
        // Dropped from here on: a half-made lab is deleted too.
        ip(&["netns", "add", &lab.b])?;
        for ns in [&lab.a, &lab.b] {
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(lab)
    }

    /// A at `.1` on `a0`, B at `.2` on `b0`, both up.
    fn addresses(&self) -> Result<(), String> {
        for (ns, dev, host) in [(&self.a, "a0", 1), (&self.b, "b0", 2)] {
            ip(&["-n", ns, "addr", "add", &self.cidr(host), "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(())
    }

    /// The lab for test `test`: `None` after printing SKIPPED with the reason when it
    /// cannot be made — except under CI, where that is a failure.
    pub fn for_test(test: &str) -> Option<Self> {
        or_skip(test, "network lab", Self::create())
    }

    /// Like [`Lab::for_test`], with a wide-area link.
    pub fn wan_for_test(test: &str, wan: Wan, seed: u64) -> Option<Self> {
        or_skip(test, "network lab", Self::create_wan(wan, seed))
    }

    /// Host `host`'s address (`1` is A, `2` is B at first).
    pub fn addr(&self, host: u8) -> String {
        format!("10.214.{}.{host}", self.subnet)
    }

    fn cidr(&self, host: u8) -> String {
        format!("{}/24", self.addr(host))
    }

    /// Moves host B from `.from` to `.to`, as a laptop that changed networks: the old
    /// address removed (its connections now lead nowhere), then the new one added.
    /// (Added first, the new one would be a secondary address, removed with the
    /// primary.)
    pub fn move_b(&self, from: u8, to: u8) -> Result<(), String> {
        ip(&["-n", &self.b, "addr", "del", &self.cidr(from), "dev", "b0"])?;
        ip(&["-n", &self.b, "addr", "add", &self.cidr(to), "dev", "b0"])
    }
}

/// `made`, or `None` after printing SKIPPED with the reason `test` has no `what` —
/// except under CI, where that is a failure.
pub(crate) fn or_skip<T>(test: &str, what: &str, made: Result<T, String>) -> Option<T> {
    match made {
        Ok(made) => Some(made),
        Err(reason) if std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false") => {
            panic!("CI must run {test}: no {what} (network namespaces): {reason}")
        }
        Err(reason) => {
            eprintln!("SKIPPED {test}: no {what}: {reason}");
            None
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // The TAP devices go with their namespaces (or with the forwarder, before).
        if let Some(mut wan) = self.wan.take() {
            let _ = wan.kill();
        }
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}
