//! A network lab of two sites and the internet between them, for a test: host A and
//! host B, each on a LAN of its own behind a router, and a public host (a relay's
//! machine) on the internet segment the routers share. Each host and router is a
//! network namespace; the segment is a bridge in the public host's namespace.
//!
//! ```text
//!   A 10.1.0.2 ── 10.1.0.1 router A 198.51.100.11 ─┐
//!                                                  ├─ bridge 198.51.100.1 (public)
//!   B 10.2.0.2 ── 10.2.0.1 router B 198.51.100.12 ─┘
//! ```
//!
//! The routers either route the sites to each other (a tailnet-like routed network: no
//! multicast crosses a router, so no mDNS between the sites) or NAT them as home
//! routers do (nftables masquerade: a site reaches the internet, nothing reaches into a
//! site unless a port is forwarded). A site can also be cut off and healed, a partition
//! neither host sees on its own interfaces. Deleted on drop.

use std::process::Command;

use crate::lab::{ip, or_skip, run_checked};

/// The public host's address on the internet segment.
pub const PUBLIC: &str = "198.51.100.1";

/// What the routers do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routers {
    /// Route each site to the other (no NAT).
    Routed,
    /// NAT each site behind its router's public address; router A forwards TCP port
    /// `forward` to host A if given.
    Nat { forward: Option<u16> },
}

/// Which side of the lab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Site {
    A,
    B,
}

/// The namespaces, deleted on drop.
#[derive(Debug)]
pub struct Sites {
    /// The public host (a relay's machine) and the internet segment.
    pub public: String,
    /// Host A, on site A's LAN.
    pub a: String,
    /// Host B, on site B's LAN.
    pub b: String,
    router_a: String,
    router_b: String,
}

impl Sites {
    /// Builds the lab, or says why it cannot be made (not root, no `ip` or `nft`).
    pub fn create(routers: Routers) -> Result<Self, String> {
        let pid = std::process::id();
        let sites = Self {
            public: format!("ilsp{pid}"),
            a: format!("ilsa{pid}"),
            b: format!("ilsb{pid}"),
            router_a: format!("ilsra{pid}"),
            router_b: format!("ilsrb{pid}"),
        };
        // Dropped from the first namespace on: a half-made lab is deleted too.
        for ns in sites.all() {
            ip(&["netns", "add", ns])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        let p = &sites.public;
        ip(&["-n", p, "link", "add", "inet", "type", "bridge"])?;
        ip(&[
            "-n",
            p,
            "addr",
            "add",
            &format!("{PUBLIC}/24"),
            "dev",
            "inet",
        ])?;
        ip(&["-n", p, "link", "set", "inet", "up"])?;
        for site in [Site::A, Site::B] {
            sites.build_site(site)?;
        }
        match routers {
            Routers::Routed => {
                // Each router knows the other site; the public host knows both.
                for (from, to) in [(Site::A, Site::B), (Site::B, Site::A)] {
                    let via = router_public(to);
                    ip(&[
                        "-n",
                        sites.router(from),
                        "route",
                        "add",
                        &lan(to),
                        "via",
                        &via,
                    ])?;
                    ip(&["-n", p, "route", "add", &lan(to), "via", &via])?;
                }
            }
            Routers::Nat { forward } => {
                for site in [Site::A, Site::B] {
                    let mut rules = String::from(
                        "table ip nat {\n\
                         chain post { type nat hook postrouting priority srcnat; \
                         oifname \"wan\" masquerade; }\n",
                    );
                    if let (Site::A, Some(port)) = (site, forward) {
                        rules += &format!(
                            "chain pre {{ type nat hook prerouting priority dstnat; \
                             iifname \"wan\" tcp dport {port} dnat to {}:{port}; }}\n",
                            host_addr(site)
                        );
                    }
                    rules += "}\n";
                    // A home router's firewall: nothing new from outside, but what a port
                    // forward lets in. The drop matters to hole punching too: a packet
                    // answered by the router (ICMP) would leave a conntrack entry that
                    // takes the mapping the host's own packet needs next.
                    rules += "table inet filter {\n\
                              chain input { type filter hook input priority 0; \
                              iifname \"wan\" ct state new drop; }\n\
                              chain forward { type filter hook forward priority 0; \
                              iifname \"wan\" ct state new ct status dnat accept; \
                              iifname \"wan\" ct state new drop; }\n\
                              }\n";
                    nft(sites.router(site), &rules)?;
                }
            }
        }
        Ok(sites)
    }

    /// The lab for test `test`: `None` after printing SKIPPED with the reason when it
    /// cannot be made — except under CI, where that is a failure.
    pub fn for_test(test: &str, routers: Routers) -> Option<Self> {
        or_skip(test, "two-site network lab", Self::create(routers))
    }

    /// The host's namespace on `site`.
    pub fn host(&self, site: Site) -> &str {
        match site {
            Site::A => &self.a,
            Site::B => &self.b,
        }
    }

    /// The host's address on its LAN.
    pub fn addr(&self, site: Site) -> String {
        host_addr(site)
    }

    /// The router's address on the internet segment (a NATed site's public address).
    pub fn public_addr(&self, site: Site) -> String {
        router_public(site)
    }

    /// Cuts `site` off: its router drops everything it would forward, both ways. The
    /// hosts' interfaces and addresses stay as they were, as when a link upstream
    /// fails.
    pub fn cut(&self, site: Site) -> Result<(), String> {
        nft(
            self.router(site),
            "table inet cut {\n chain cutoff { type filter hook forward priority 0; policy drop; }\n}\n",
        )
    }

    /// Undoes [`Sites::cut`].
    pub fn heal(&self, site: Site) -> Result<(), String> {
        nft(self.router(site), "delete table inet cut\n")
    }

    /// `site`'s router drops the UDP it would forward (QUIC), until
    /// [`Sites::pass_udp`]; TCP still passes.
    pub fn drop_udp(&self, site: Site) -> Result<(), String> {
        nft(
            self.router(site),
            "table inet noudp {\n chain hold { type filter hook forward priority 0; meta l4proto udp drop; }\n}\n",
        )
    }

    /// `site`'s router lets the first `n` UDP datagrams of each flow its host starts
    /// through and drops the rest, until [`Sites::pass_udp_flows`]: a QUIC client's
    /// first flight (its hello) reaches the other side, whose answer completes the
    /// handshake on the client's side, while the client's last handshake flight never
    /// does — the other side's handshake stays open.
    pub fn hold_udp_flows_after(&self, site: Site, n: u32) -> Result<(), String> {
        // The rule loads connection tracking into the namespace; its packet counts
        // are kept once accounting is on (before the flow starts).
        nft(
            self.router(site),
            &format!(
                "table inet holdudp {{\n chain hold {{ type filter hook forward priority 0; \
                 ip saddr {} meta l4proto udp ct original packets > {n} drop; }}\n}}\n",
                host_addr(site)
            ),
        )?;
        let mut acct = Command::new("ip");
        acct.args([
            "netns",
            "exec",
            self.router(site),
            "sh",
            "-c",
            "echo 1 > /proc/sys/net/netfilter/nf_conntrack_acct",
        ]);
        run_checked(acct, None, "nf_conntrack_acct=1 in the router's namespace")
    }

    /// Undoes [`Sites::hold_udp_flows_after`].
    pub fn pass_udp_flows(&self, site: Site) -> Result<(), String> {
        nft(self.router(site), "delete table inet holdudp\n")
    }

    /// Undoes [`Sites::drop_udp`].
    pub fn pass_udp(&self, site: Site) -> Result<(), String> {
        nft(self.router(site), "delete table inet noudp\n")
    }

    /// Starts counting the bytes the public host (the relay's machine) sends and
    /// receives on the internet segment: its own traffic only, not what the bridge
    /// forwards between the routers (a punched connection). Read with
    /// [`Sites::public_host_bytes`].
    pub fn count_public_host_bytes(&self) -> Result<(), String> {
        nft(
            &self.public,
            "table inet hostbytes {\n\
             counter received {}\n\
             counter sent {}\n\
             chain input { type filter hook input priority 0; iifname \"inet\" counter name \"received\"; }\n\
             chain output { type filter hook output priority 0; oifname \"inet\" counter name \"sent\"; }\n\
             }\n",
        )
    }

    /// The bytes (IP packets, headers included) the public host has received and sent
    /// on the internet segment since [`Sites::count_public_host_bytes`].
    pub fn public_host_bytes(&self) -> Result<(u64, u64), String> {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.public,
                "nft",
                "list",
                "table",
                "inet",
                "hostbytes",
            ])
            .output()
            .map_err(|e| format!("cannot run nft: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        // `counter received {\n\t\tpackets 12 bytes 3456\n\t}`
        let bytes = |name: &str| -> Result<u64, String> {
            text.split(&format!("counter {name} {{"))
                .nth(1)
                .and_then(|rest| rest.split("bytes ").nth(1))
                .and_then(|n| n.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("no counter {name} in {text:?}"))
        };
        Ok((bytes("received")?, bytes("sent")?))
    }

    fn router(&self, site: Site) -> &str {
        match site {
            Site::A => &self.router_a,
            Site::B => &self.router_b,
        }
    }

    fn all(&self) -> [&String; 5] {
        [
            &self.public,
            &self.router_a,
            &self.router_b,
            &self.a,
            &self.b,
        ]
    }

    /// The router's `wan` on the segment's bridge, its `lan` to the host's `eth0`, the
    /// host's default route through it, forwarding on.
    fn build_site(&self, site: Site) -> Result<(), String> {
        let (r, h, p) = (self.router(site), self.host(site), &self.public);
        let port = match site {
            Site::A => "inet-a",
            Site::B => "inet-b",
        };
        ip(&[
            "-n", p, "link", "add", port, "type", "veth", "peer", "name", "wan", "netns", r,
        ])?;
        ip(&["-n", p, "link", "set", port, "master", "inet"])?;
        ip(&["-n", p, "link", "set", port, "up"])?;
        ip(&[
            "-n",
            r,
            "addr",
            "add",
            &format!("{}/24", router_public(site)),
            "dev",
            "wan",
        ])?;
        ip(&["-n", r, "link", "set", "wan", "up"])?;
        ip(&[
            "-n", r, "link", "add", "lan", "type", "veth", "peer", "name", "eth0", "netns", h,
        ])?;
        let lan_net = site_net(site);
        ip(&[
            "-n",
            r,
            "addr",
            "add",
            &format!("{lan_net}.1/24"),
            "dev",
            "lan",
        ])?;
        ip(&["-n", r, "link", "set", "lan", "up"])?;
        ip(&[
            "-n",
            h,
            "addr",
            "add",
            &format!("{}/24", host_addr(site)),
            "dev",
            "eth0",
        ])?;
        ip(&["-n", h, "link", "set", "eth0", "up"])?;
        ip(&[
            "-n",
            h,
            "route",
            "add",
            "default",
            "via",
            &format!("{lan_net}.1"),
        ])?;
        let mut forwarding = Command::new("ip");
        forwarding.args(["netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1"]);
        run_checked(forwarding, None, "sysctl net.ipv4.ip_forward=1")
    }
}

impl Drop for Sites {
    fn drop(&mut self) {
        for ns in self.all() {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn site_net(site: Site) -> &'static str {
    match site {
        Site::A => "10.1.0",
        Site::B => "10.2.0",
    }
}

fn lan(site: Site) -> String {
    format!("{}.0/24", site_net(site))
}

fn host_addr(site: Site) -> String {
    format!("{}.2", site_net(site))
}

fn router_public(site: Site) -> String {
    match site {
        Site::A => "198.51.100.11".to_owned(),
        Site::B => "198.51.100.12".to_owned(),
    }
}

/// Loads nftables `rules` in namespace `ns` (`nft -f -`).
fn nft(ns: &str, rules: &str) -> Result<(), String> {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, "nft", "-f", "-"]);
    run_checked(
        cmd,
        Some(rules),
        &format!("nft (is nftables installed?) {rules:?}"),
    )
}
