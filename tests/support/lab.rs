//! A network lab for a test: two hosts, each a network namespace of its own, joined by
//! a veth pair (`a0` in host A, `b0` in host B) on 10.214.N.0/24 — traffic between them
//! crosses a real link and never leaves this machine. A host's address can be changed
//! as a laptop's does when it moves. Deleted on drop.

use std::process::Command;

/// The two hosts, deleted on drop.
#[derive(Debug)]
pub struct Lab {
    /// Host A's namespace (`ip netns exec <name>`).
    pub a: String,
    /// Host B's namespace.
    pub b: String,
    /// The /24 both hosts are on: `10.214.<subnet>.0`.
    subnet: u8,
}

/// Runs `ip ARGS`, or says why it failed.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip`: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Lab {
    /// Creates the two hosts (A at `.1`, B at `.2`), or says why they cannot be made
    /// (not root, no `ip`, a restricted sandbox).
    pub fn create() -> Result<Self, String> {
        let pid = std::process::id();
        // One subnet per test process, so labs of tests running at once do not meet
        // (they are in different namespaces anyway; this keeps logs unambiguous).
        let subnet = u8::try_from(pid % 200).unwrap_or(0) + 20;
        let lab = Self {
            a: format!("ilaba{pid}"),
            b: format!("ilabb{pid}"),
            subnet,
        };
        ip(&["netns", "add", &lab.a])?;
        // Dropped from here on: a half-made lab is deleted too.
        ip(&["netns", "add", &lab.b])?;
        for ns in [&lab.a, &lab.b] {
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        ip(&[
            "-n", &lab.a, "link", "add", "a0", "type", "veth", "peer", "name", "b0", "netns",
            &lab.b,
        ])?;
        for (ns, dev, host) in [(&lab.a, "a0", 1), (&lab.b, "b0", 2)] {
            ip(&["-n", ns, "addr", "add", &lab.cidr(host), "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(lab)
    }

    /// The lab for test `test`: `None` after printing SKIPPED with the reason when it
    /// cannot be made — except under CI, where that is a failure.
    pub fn for_test(test: &str) -> Option<Self> {
        match Self::create() {
            Ok(lab) => Some(lab),
            Err(reason)
                if std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false") =>
            {
                panic!("CI must run {test}: no network lab (network namespaces): {reason}")
            }
            Err(reason) => {
                eprintln!("SKIPPED {test}: no network lab: {reason}");
                None
            }
        }
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

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}
