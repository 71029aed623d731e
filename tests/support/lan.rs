//! A private LAN for a test: a network namespace holding a veth pair (two linked
//! interfaces, multicast on, addresses 10.213.7.1 and .2), so multicast and non-loopback
//! traffic never leave this machine. Deleted on drop.

use std::process::Command;

use crate::lab::{ip, or_skip};

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
        or_skip(test, "private LAN", Self::create())
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}
