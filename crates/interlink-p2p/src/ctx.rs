//! What every command gets besides its own arguments ([`Ctx`]: the home and its
//! settings file), and the runtimes and argument checks the commands share.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context as _;

use crate::{paths::Home, settings::Settings};

/// The home (`--home`, else the environment's) and its settings file.
#[derive(Debug)]
pub struct Ctx {
    home: Option<Home>,
    /// `config.toml` in the home; empty without a home.
    pub settings: Settings,
}

impl Ctx {
    /// Resolves the home and reads its settings file (a bad file is an error for
    /// every command: it is never half-applied).
    pub fn new(home: Option<PathBuf>) -> anyhow::Result<Self> {
        let home = Home::resolve(home, |k| std::env::var(k).ok());
        let settings = match &home {
            Some(h) => Settings::load(h.path())?,
            None => Settings::default(),
        };
        Ok(Self { home, settings })
    }

    /// The home, which the command needs.
    pub fn home(&self) -> anyhow::Result<Home> {
        self.home
            .clone()
            .context("no home directory: set INTERLINK_HOME or HOME, or pass --home")
    }

    /// The home, if there is one (`peers` runs without).
    pub fn home_if_any(&self) -> Option<&Home> {
        self.home.as_ref()
    }

    /// A variable lookup: the environment, then the settings file.
    pub fn env(&self) -> impl Fn(&str) -> Option<String> + '_ {
        self.settings.layered(|k| std::env::var(k).ok())
    }

    /// The name this user offers peers when pairing.
    pub fn own_name(&self) -> String {
        interlink_store::pairing::own_name(self.env())
    }
}

/// The runtime of an MCP session: one thread. A session is mostly waiting — for its
/// agent host, the network and its disk — and on a multi-threaded runtime every
/// message hopped between worker threads; one thread cut the MCP send → notification
/// p50 from 1.5 to 1.2 ms and raised sequential sends from 640 to 790/s
/// (docs/BENCHMARKS.md).
pub fn session_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// The runtime of the other commands that run a node.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// A number of seconds given as `flag`.
pub fn seconds(flag: &str, value: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        crate::UsageError(format!(
            "{flag} {value}: expected a non-negative number of seconds"
        ))
        .into()
    })
}

/// The exit status of a command that waits for another side (`invite`, `join`): it
/// finished, or it ended without the other side's answer.
pub fn finished(done: bool) -> ExitCode {
    if done {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
