//! Building the node configuration from flags and the environment.
//!
//! Every setting has an environment variable; a flag, when given, overrides it.
//! docs/CONFIG.md documents each one. The `INTERLINK_TEST_*` knobs exist only so
//! process-level tests can shorten the presence windows; they are not for production.

use std::time::Duration;

use clap::parser::ValueSource;
use interlink_core::{
    limits::{AWAY_RETENTION_MS, HEARTBEAT_MS, LIVE_WINDOW_MS},
    names::{self, Network},
};
use libp2p::{Multiaddr, multiaddr::Protocol};

/// The overlay name.
pub const ENV_NETWORK: &str = interlink_store::env::NETWORK;
/// Comma-separated listen multiaddrs.
pub const ENV_LISTEN: &str = interlink_store::env::LISTEN;
/// Comma-separated bootstrap multiaddrs (`/p2p/<id>` suffix optional).
pub const ENV_BOOTSTRAP: &str = interlink_store::env::BOOTSTRAP;
/// Comma-separated relay multiaddrs, each ending in `/p2p/<relay id>`.
pub const ENV_RELAY: &str = "INTERLINK_RELAY";
/// The listen value that means "no direct listener: reachable through relays only".
pub const LISTEN_NONE: &str = "none";
/// `0` (or `false`, `off`, `no`) turns mDNS off.
pub const ENV_MDNS: &str = interlink_store::env::MDNS;
/// `0` (or `false`, `off`, `no`) turns tailnet discovery off.
pub const ENV_TAILNET: &str = interlink_store::env::TAILNET;
/// The Tailscale CLI tailnet discovery runs (default: `tailscale` on `PATH`).
pub const ENV_TAILSCALE: &str = interlink_store::env::TAILSCALE;
/// The host's well-known port ([`interlink_net::config::WELL_KNOWN_PORT`] by default);
/// `0` turns it off.
pub const ENV_PORT: &str = interlink_store::env::PORT;
/// Test only: the live window in milliseconds (default 90 s).
pub const ENV_TEST_LIVE_WINDOW_MS: &str = interlink_store::env::TEST_LIVE_WINDOW_MS;
/// Test only: how long a silent session stays away, in milliseconds (default 3 days).
pub const ENV_TEST_AWAY_RETENTION_MS: &str = interlink_store::env::TEST_AWAY_RETENTION_MS;
/// Test only: moves this process's clock by this many milliseconds (may be negative).
pub const ENV_TEST_CLOCK_OFFSET_MS: &str = interlink_store::env::TEST_CLOCK_OFFSET_MS;
/// Test only: the re-announcement interval in milliseconds (default 30 s).
pub const ENV_TEST_HEARTBEAT_MS: &str = interlink_store::env::TEST_HEARTBEAT_MS;

/// Network settings given as flags; `None`/empty means "not given, use the environment".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    #[allow(missing_docs)]
    pub network: Option<String>,
    /// `--listen`, repeatable, each possibly comma-separated.
    pub listen: Vec<String>,
    /// `--bootstrap`, repeatable, each possibly comma-separated.
    pub bootstrap: Vec<String>,
    /// `--relay`, repeatable, each possibly comma-separated.
    pub relay: Vec<String>,
    /// `--no-mdns`.
    pub no_mdns: bool,
}

/// A setting was refused; the message names the flag or variable and the value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The overlay name is invalid.
    #[error("{source_name}: {error}")]
    Network {
        /// Flag or variable it came from.
        source_name: String,
        /// The rule the name breaks.
        error: names::BadNetworkName,
    },
    /// A multiaddr did not parse or has the wrong shape.
    #[error("{source_name}: {value:?} is not a usable multiaddr: {reason}")]
    Multiaddr {
        /// Flag or variable it came from.
        source_name: String,
        /// The offending item.
        value: String,
        /// What the value breaks, and what is expected instead.
        reason: String,
    },
    /// A variable has a value outside its allowed set or range.
    #[error("{var}={value:?}: {reason}")]
    Value {
        /// The variable.
        var: String,
        #[allow(missing_docs)]
        value: String,
        /// What was expected.
        reason: String,
    },
}

/// Why a node with `config` that has no connection reached no other node, and what to
/// do: for the "nothing seen" messages of `peers` and `send`.
pub fn alone_hint(config: &interlink_net::Config) -> String {
    let fix = "set a bootstrap peer or a relay: `interlink-p2p install claude|codex \
               --bootstrap MULTIADDR` (or --relay) writes it to config.toml; \
               INTERLINK_BOOTSTRAP or --bootstrap for one command";
    let dialled: Vec<String> = config
        .bootstrap
        .iter()
        .chain(&config.relays)
        .map(ToString::to_string)
        .collect();
    match (dialled.is_empty(), config.mdns) {
        (true, false) => format!(
            "this node reached no other node: mDNS is off and no bootstrap peer or relay is \
             set; {fix}"
        ),
        (true, true) => format!(
            "this node reached no other node: nothing answered by mDNS on this LAN (none \
             crosses a tailnet or a router) and no bootstrap peer or relay is set; {fix}"
        ),
        (false, _) => format!(
            "this node reached no other node: nothing answered at {} (is a session or relay \
             running there? `interlink-p2p probe MULTIADDR` checks one address)",
            dialled.join(", ")
        ),
    }
}

/// Builds the node configuration from `flags` and `env` (a variable lookup, so tests
/// can pass a map).
pub fn build(
    flags: &Flags,
    env: impl Fn(&str) -> Option<String>,
) -> Result<interlink_net::Config, ConfigError> {
    let env = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    let mut config = interlink_net::Config {
        network: network(flags, env)?,
        ..interlink_net::Config::default()
    };
    config.relays =
        addr_list(&flags.relay, "--relay", ENV_RELAY, env, check_relay)?.unwrap_or_default();
    let listen_none = match flags.listen.as_slice() {
        [one] => one.trim() == LISTEN_NONE,
        [] => env(ENV_LISTEN).is_some_and(|v| v.trim() == LISTEN_NONE),
        _ => false,
    };
    if listen_none {
        if config.relays.is_empty() {
            return Err(ConfigError::Value {
                var: ENV_LISTEN.into(),
                value: LISTEN_NONE.into(),
                reason: format!(
                    "a session that listens nowhere is reachable only through a relay; set \
                     {ENV_RELAY} too"
                ),
            });
        }
        config.listen = Vec::new();
    } else if let Some(listen) =
        addr_list(&flags.listen, "--listen", ENV_LISTEN, env, check_listen)?
    {
        config.listen = listen;
    }
    if config.listen.is_empty() && !listen_none {
        let (var, value) = if flags.listen.is_empty() {
            (ENV_LISTEN, env(ENV_LISTEN).unwrap_or_default())
        } else {
            ("--listen", flags.listen.join(","))
        };
        return Err(ConfigError::Value {
            var: var.into(),
            value,
            reason: "no listen address given".into(),
        });
    }
    config.bootstrap = addr_list(
        &flags.bootstrap,
        "--bootstrap",
        ENV_BOOTSTRAP,
        env,
        check_bootstrap,
    )?
    .unwrap_or_default();
    config.mdns = !flags.no_mdns && switch_on(ENV_MDNS, env(ENV_MDNS))?;
    // On by default: with no `tailscale` on PATH it costs a look at PATH every few
    // minutes and nothing else.
    config.tailnet = switch_on(ENV_TAILNET, env(ENV_TAILNET))?.then(|| interlink_net::Tailnet {
        cli: env(ENV_TAILSCALE).map(|p| std::path::PathBuf::from(p.trim())),
        ..interlink_net::Tailnet::default()
    });
    config.well_known_port = well_known_port(env(ENV_PORT))?;
    // Held by agent sessions; the commands whose sessions last seconds (`send`, `join`,
    // `pair accept`) turn it off for theirs, and observers never hold it.
    config.hold_well_known_port = !listen_none;
    apply_test_knobs(&mut config, env)?;
    Ok(config)
}

/// The overlay from `--network`, else [`ENV_NETWORK`], else `default`.
pub fn network(
    flags: &Flags,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Network, ConfigError> {
    let (value, source_name) = match (&flags.network, env(ENV_NETWORK)) {
        (Some(v), _) => (v.clone(), "--network"),
        (None, Some(v)) => (v.trim().to_owned(), ENV_NETWORK),
        (None, None) => (names::DEFAULT_NETWORK.to_owned(), "default"),
    };
    Network::new(&value).map_err(|error| ConfigError::Network {
        source_name: source_name.into(),
        error,
    })
}

/// Parses a multiaddr list from the flags if any were given, else from the variable.
/// `None` when neither is set.
fn addr_list(
    flag_values: &[String],
    flag: &str,
    var: &str,
    env: impl Fn(&str) -> Option<String>,
    check: fn(&Multiaddr) -> Result<(), &'static str>,
) -> Result<Option<Vec<Multiaddr>>, ConfigError> {
    let (values, source_name) = if flag_values.is_empty() {
        match env(var) {
            Some(v) => (vec![v], var),
            None => return Ok(None),
        }
    } else {
        (flag_values.to_vec(), flag)
    };
    let mut out = Vec::new();
    for item in values.iter().flat_map(|v| v.split(',')) {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let refuse = |reason: String| ConfigError::Multiaddr {
            source_name: source_name.into(),
            value: item.into(),
            reason,
        };
        let addr = item.parse::<Multiaddr>().map_err(|e| {
            refuse(format!(
                "{e}; the form is /ip4/ADDRESS/tcp/PORT (or /ip6/…, /dns4/NAME/…, \
                     …/udp/PORT/quic-v1), ending in /p2p/PEER_ID to name the node, e.g. \
                     /ip4/192.0.2.1/tcp/4001/p2p/12D3KooW…"
            ))
        })?;
        check(&addr).map_err(|e| refuse(e.to_owned()))?;
        out.push(addr);
    }
    Ok(Some(out))
}

/// A bootstrap address needs something to dial before its optional `/p2p/` suffix.
fn check_bootstrap(addr: &Multiaddr) -> Result<(), &'static str> {
    match addr.iter().next() {
        Some(Protocol::P2p(_)) | None => {
            Err("expected a transport address, optionally ending in /p2p/<peer id>")
        }
        Some(_) => Ok(()),
    }
}

/// A relay address is dialled and named: a transport address ending in `/p2p/<id>`.
fn check_relay(addr: &Multiaddr) -> Result<(), &'static str> {
    check_bootstrap(addr)?;
    match addr.iter().last() {
        Some(Protocol::P2p(_)) => Ok(()),
        _ => Err("a relay address must end in /p2p/<relay peer id>"),
    }
}

/// A listen address names a local transport; it has no `/p2p/` part.
fn check_listen(addr: &Multiaddr) -> Result<(), &'static str> {
    let relayed = addr.iter().any(|p| p == Protocol::P2pCircuit);
    if addr.is_empty() || !relayed && addr.iter().any(|p| matches!(p, Protocol::P2p(_))) {
        return Err("a listen address is a local transport address without /p2p/<peer id>");
    }
    Ok(())
}

/// An on/off variable `var` that is on unless set otherwise (clap's boolish values).
fn switch_on(var: &str, value: Option<String>) -> Result<bool, ConfigError> {
    let Some(value) = value else {
        return Ok(true);
    };
    let parser = clap::builder::BoolishValueParser::new();
    clap::builder::TypedValueParser::parse_ref(
        &parser,
        &clap::Command::new("interlink-p2p"),
        None,
        value.trim().as_ref(),
    )
    .map_err(|_| ConfigError::Value {
        var: var.into(),
        value,
        reason: "expected 0 or 1 (also false/true, off/on, no/yes)".into(),
    })
}

fn well_known_port(value: Option<String>) -> Result<u16, ConfigError> {
    let Some(value) = value else {
        return Ok(interlink_net::config::WELL_KNOWN_PORT);
    };
    value.trim().parse::<u16>().map_err(|_| ConfigError::Value {
        var: ENV_PORT.into(),
        value,
        reason: "expected a port number, 0 to 65535 (0: no well-known port)".into(),
    })
}

fn millis(var: &str, env: impl Fn(&str) -> Option<String>) -> Result<Option<u64>, ConfigError> {
    let Some(value) = env(var) else {
        return Ok(None);
    };
    match value.trim().parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Some(ms)),
        _ => Err(ConfigError::Value {
            var: var.into(),
            value,
            reason: "expected a positive number of milliseconds".into(),
        }),
    }
}

/// The process's clock: the system's, moved by [`ENV_TEST_CLOCK_OFFSET_MS`] if set.
/// A command that runs no node takes it from here, one that does from its
/// configuration (built with the same).
pub fn clock(env: impl Fn(&str) -> Option<String>) -> Result<interlink_net::Clock, ConfigError> {
    let Some(v) = env(ENV_TEST_CLOCK_OFFSET_MS) else {
        return Ok(interlink_net::Clock::system());
    };
    let ms = v.trim().parse::<i64>().map_err(|e| ConfigError::Value {
        var: ENV_TEST_CLOCK_OFFSET_MS.into(),
        value: v.clone(),
        reason: format!("expected a whole number of milliseconds: {e}"),
    })?;
    Ok(interlink_net::Clock::offset_by(ms))
}

/// Applies the `INTERLINK_TEST_*` knobs, keeping heartbeat < live window ≤ retention
/// (otherwise live sessions would flicker to away between announcements).
fn apply_test_knobs(
    config: &mut interlink_net::Config,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    config.clock = clock(&env)?;
    let live = millis(ENV_TEST_LIVE_WINDOW_MS, &env)?;
    let away = millis(ENV_TEST_AWAY_RETENTION_MS, &env)?;
    let heartbeat = millis(ENV_TEST_HEARTBEAT_MS, &env)?;
    let live_ms = live.unwrap_or(LIVE_WINDOW_MS);
    let away_ms = away.unwrap_or(AWAY_RETENTION_MS);
    let heartbeat_ms = heartbeat.unwrap_or(HEARTBEAT_MS);
    let refuse = |var: &str, value: u64, reason: String| ConfigError::Value {
        var: var.into(),
        value: value.to_string(),
        reason,
    };
    if away_ms < live_ms {
        let var = if away.is_some() {
            ENV_TEST_AWAY_RETENTION_MS
        } else {
            ENV_TEST_LIVE_WINDOW_MS
        };
        let value = if away.is_some() { away_ms } else { live_ms };
        return Err(refuse(
            var,
            value,
            format!(
                "the away retention ({away_ms} ms) must not be below the live window ({live_ms} ms)"
            ),
        ));
    }
    if heartbeat_ms >= live_ms {
        let var = if heartbeat.is_some() {
            ENV_TEST_HEARTBEAT_MS
        } else {
            ENV_TEST_LIVE_WINDOW_MS
        };
        let value = if heartbeat.is_some() {
            heartbeat_ms
        } else {
            live_ms
        };
        return Err(refuse(
            var,
            value,
            format!(
                "the heartbeat ({heartbeat_ms} ms) must be below the live window ({live_ms} ms); \
                 set {ENV_TEST_HEARTBEAT_MS} too"
            ),
        ));
    }
    config.presence.live_window_ms = live_ms;
    config.presence.away_retention_ms = away_ms;
    config.heartbeat = Duration::from_millis(heartbeat_ms);
    Ok(())
}

/// Network settings shared by the commands that run a node (see docs/CONFIG.md).
///
/// clap reads each setting's variable too (and shows it in `--help`); only what was
/// typed becomes a flag ([`Typed`]). The configuration reads the variables itself, below
/// the flags and above the settings file, naming them in its errors, and `install`
/// writes only what was typed.
#[derive(Debug, clap::Args)]
pub struct NetArgs {
    /// Overlay name [default: default]
    #[arg(long, value_name = "NAME", global = true, env = ENV_NETWORK, value_parser = Sourced::text())]
    network: Option<Typed<String>>,
    /// Listen multiaddr; repeatable or comma-separated [default: all interfaces, TCP
    /// and QUIC, port 0]
    #[arg(long, value_name = "MULTIADDR", global = true, env = ENV_LISTEN, value_parser = Sourced::text())]
    listen: Vec<Typed<String>>,
    /// Bootstrap peer multiaddr (`/p2p/<id>` suffix optional); repeatable or
    /// comma-separated
    #[arg(long, value_name = "MULTIADDR", global = true, env = ENV_BOOTSTRAP, value_parser = Sourced::text())]
    bootstrap: Vec<Typed<String>>,
    /// Relay multiaddr ending in `/p2p/<id>`: bootstrap, circuit reservation, durable
    /// mailbox copies; repeatable or comma-separated
    #[arg(long, value_name = "MULTIADDR", global = true, env = ENV_RELAY, value_parser = Sourced::text())]
    relay: Vec<Typed<String>>,
    /// Turn mDNS discovery off (the variable: 0 or 1)
    #[arg(
        long = "no-mdns",
        global = true,
        env = ENV_MDNS,
        action = clap::ArgAction::SetFalse,
        value_parser = Sourced::switch(),
    )]
    mdns: Typed<bool>,
}

/// A value clap parsed, and whether it was typed (else it came from the variable or is
/// the default).
#[derive(Clone, Debug)]
pub struct Typed<T> {
    value: T,
    typed: bool,
}

impl<T: Clone> Typed<T> {
    /// The value if it was typed on the command line.
    pub fn typed(&self) -> Option<T> {
        self.typed.then(|| self.value.clone())
    }
}

/// Parses with clap's `P`, keeping whether the value was typed; a bad value from a
/// variable is refused naming the variable and what it `expects`.
#[derive(Clone, Debug)]
pub struct Sourced<P> {
    parser: P,
    expects: &'static str,
}

impl Sourced<clap::builder::StringValueParser> {
    /// Text.
    pub fn text() -> Self {
        Self {
            parser: clap::builder::StringValueParser::new(),
            expects: "UTF-8 text",
        }
    }
}

impl Sourced<clap::builder::BoolishValueParser> {
    /// An on/off switch.
    pub fn switch() -> Self {
        Self {
            parser: clap::builder::BoolishValueParser::new(),
            expects: "0 or 1 (also false/true, off/on, no/yes)",
        }
    }
}

impl<P: clap::builder::TypedValueParser> clap::builder::TypedValueParser for Sourced<P> {
    type Value = Typed<P::Value>;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Self::Value, clap::Error> {
        self.parse_ref_(cmd, arg, value, ValueSource::CommandLine)
    }

    fn parse_ref_(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
        source: ValueSource,
    ) -> Result<Self::Value, clap::Error> {
        let parsed = self.parser.parse_ref(cmd, arg, value);
        match (parsed, arg.and_then(clap::Arg::get_env)) {
            (Ok(value), _) => Ok(Typed {
                value,
                typed: source == ValueSource::CommandLine,
            }),
            (Err(_), Some(var)) if source == ValueSource::EnvVariable => Err(cmd.clone().error(
                clap::error::ErrorKind::InvalidValue,
                format!("{} expects {}", var.to_string_lossy(), self.expects),
            )),
            (Err(e), _) => Err(e),
        }
    }
}

impl NetArgs {
    /// What was typed.
    fn flags(&self) -> Flags {
        let typed = |v: &[Typed<String>]| v.iter().filter_map(Typed::typed).collect();
        Flags {
            network: self.network.as_ref().and_then(Typed::typed),
            listen: typed(&self.listen),
            bootstrap: typed(&self.bootstrap),
            relay: typed(&self.relay),
            no_mdns: self.mdns.typed,
        }
    }

    /// The settings-file keys these flags set (a flag not given leaves its key alone).
    pub fn settings_changes(
        &self,
        name: Option<&str>,
    ) -> Vec<(&'static str, Option<toml_edit::Item>)> {
        let flags = self.flags();
        let list = |v: &[String]| {
            let items = v
                .iter()
                .flat_map(|s| s.split(','))
                .map(str::trim)
                .filter(|s| !s.is_empty());
            toml_edit::value(toml_edit::Array::from_iter(items))
        };
        let mut changes = Vec::new();
        if let Some(n) = &flags.network {
            changes.push(("network", Some(toml_edit::value(n.as_str()))));
        }
        for (key, values) in [
            ("listen", &flags.listen),
            ("bootstrap", &flags.bootstrap),
            ("relay", &flags.relay),
        ] {
            if !values.is_empty() {
                changes.push((key, Some(list(values))));
            }
        }
        if flags.no_mdns {
            changes.push(("mdns", Some(toml_edit::value(false))));
        }
        if let Some(n) = name {
            changes.push(("name", Some(toml_edit::value(n))));
        }
        changes
    }

    /// The node configuration: these flags, then the environment, then `settings`.
    pub fn config(
        &self,
        settings: &crate::settings::Settings,
    ) -> anyhow::Result<interlink_net::Config> {
        let env = settings.layered(|k| std::env::var(k).ok());
        build(&self.flags(), env).map_err(|e| settings.explain(e.into()))
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
