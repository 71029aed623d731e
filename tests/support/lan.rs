//! A private LAN for a test: a network namespace holding a veth pair (two linked
//! interfaces, multicast on, addresses 10.213.7.1 and .2), so multicast and non-loopback
//! traffic never leave this machine. Deleted on drop.

use std::process::Command;

/// The namespace, deleted on drop.
#[derive(Debug)]
pub struct Lan {
    /// Its name (`ip netns exec <name>`).
    pub name: String,
}

/// The two addresses on the LAN.
pub const ADDRS: [&str; 2] = ["10.213.7.1", "10.213.7.2"];

impl Lan {
    /// Creates the LAN, or says why it cannot be made (not root, no `ip`, a
    /// restricted sandbox).
    pub fn create() -> Result<Self, String> {
        let name = format!("illan{}", std::process::id());
        let ip = |args: &[&str]| -> Result<(), String> {
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
        };
        ip(&["netns", "add", &name])?;
        let lan = Self { name };
        let n = lan.name.as_str();
        ip(&["-n", n, "link", "set", "lo", "up"])?;
        ip(&[
            "-n", n, "link", "add", "v0", "type", "veth", "peer", "name", "v1",
        ])?;
        for (dev, addr) in [("v0", ADDRS[0]), ("v1", ADDRS[1])] {
            ip(&["-n", n, "addr", "add", &format!("{addr}/24"), "dev", dev])?;
            ip(&["-n", n, "link", "set", dev, "multicast", "on"])?;
            ip(&["-n", n, "link", "set", dev, "up"])?;
        }
        ip(&["-n", n, "route", "add", "224.0.0.0/4", "dev", "v0"])?;
        Ok(lan)
    }

    /// The LAN for test `test`: `None` after printing SKIPPED with the reason when it
    /// cannot be made — except under CI, where that is a failure.
    pub fn for_test(test: &str) -> Option<Self> {
        match Self::create() {
            Ok(lan) => Some(lan),
            Err(reason)
                if std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false") =>
            {
                panic!("CI must run {test}: no private LAN (network namespaces): {reason}")
            }
            Err(reason) => {
                eprintln!("SKIPPED {test}: no private LAN: {reason}");
                None
            }
        }
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}
