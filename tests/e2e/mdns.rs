//! Two `interlink-p2p run` processes with no bootstrap address find each other by mDNS.
//!
//! mDNS skips loopback interfaces, and multicast must never leave this machine, so the
//! test builds its own LAN: a network namespace holding a veth pair (two linked
//! interfaces, multicast on, private addresses), and runs every process inside it. Where
//! namespaces cannot be made (not root, no `ip`, a restricted sandbox) it prints why and
//! passes without running.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{process::Command, time::Instant};

use interlink_e2e::process::{self, DEADLINE, Session};

/// A network namespace with a veth pair, deleted on drop.
struct Lan {
    name: String,
}

impl Lan {
    fn create() -> Result<Self, String> {
        let name = format!("ilmdns{}", std::process::id());
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
        for (dev, addr) in [("v0", "10.213.7.1/24"), ("v1", "10.213.7.2/24")] {
            ip(&["-n", n, "addr", "add", addr, "dev", dev])?;
            ip(&["-n", n, "link", "set", dev, "multicast", "on"])?;
            ip(&["-n", n, "link", "set", dev, "up"])?;
        }
        ip(&["-n", n, "route", "add", "224.0.0.0/4", "dev", "v0"])?;
        Ok(lan)
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

#[test]
fn two_sessions_find_each_other_by_mdns() {
    let lan = match Lan::create() {
        Ok(lan) => lan,
        Err(reason) if std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false") => {
            panic!("CI must run this test: no private LAN (network namespaces): {reason}")
        }
        Err(reason) => {
            eprintln!("SKIPPED two_sessions_find_each_other_by_mdns: no private LAN: {reason}");
            return;
        }
    };
    process::use_netns(&lan.name);
    let env = [
        ("INTERLINK_NETWORK", "mdns-e2e"),
        ("INTERLINK_TEST_LIVE_WINDOW_MS", "10000"),
        ("INTERLINK_TEST_HEARTBEAT_MS", "1000"),
    ];
    let args = ["--listen", "/ip4/0.0.0.0/tcp/0"];
    let first = Session::start("e2e-mdns-1", &args, &env).unwrap();
    let _second = Session::start("e2e-mdns-2", &args, &env).unwrap();

    // The observer reaches only the first session (by its loopback address, mDNS off):
    // it can see the second only if the first found it, and that needed mDNS.
    let boot = first.loopback_addr().unwrap();
    let started = Instant::now();
    process::poll_peers(boot, &env, Instant::now() + DEADLINE, |seen| {
        seen.get("e2e-mdns-1").map(String::as_str) == Some("live")
            && seen.get("e2e-mdns-2").map(String::as_str) == Some("live")
    })
    .unwrap_or_else(|e| panic!("{e}\nfirst session's stderr:\n{}", first.process.stderr()));
    eprintln!("found each other within {:?}", started.elapsed());
}
