//! A user of `interlink-p2p` in tests: a home directory with an identity, driven only
//! through the command line — `id`, `peer add`, `run`, `send`, `inbox` — as a person
//! at a shell would.

use std::{
    path::Path,
    process::ExitStatus,
    time::{Duration, Instant},
};

use anyhow::{Context as _, ensure};

use crate::process::{DEADLINE, Session, command_in, run_with_input};

/// Flags that keep every node on loopback without mDNS.
pub const LOOPBACK: &[&str] = &["--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns"];

/// What a short-lived command did.
#[derive(Debug)]
pub struct Output {
    /// Its exit status.
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// A user: a home directory holding an identity, with environment variables added to
/// every command it runs.
#[derive(Debug)]
pub struct User {
    /// Its petname in the others' peers files.
    pub name: String,
    /// Its identity key, 64 hex digits.
    pub key: String,
    env: Vec<(String, String)>,
    home: tempfile::TempDir,
    /// The network namespace its commands run in ([`crate::lab`]), if any; else the
    /// test process's (`process::use_netns`).
    netns: Option<String>,
}

impl User {
    /// Creates the home and the identity (`interlink-p2p id --json`).
    pub fn new(name: &str, env: &[(&str, &str)]) -> anyhow::Result<Self> {
        let mut user = Self {
            name: name.to_owned(),
            key: String::new(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            home: tempfile::tempdir()?,
            netns: None,
        };
        let out = user.cli(&["id", "--json"], None)?;
        ensure!(out.status.success(), "{name}: id failed: {}", out.stderr);
        let id: serde_json::Value = serde_json::from_str(&out.stdout)?;
        user.key = id["identity_key"]
            .as_str()
            .context("no identity_key")?
            .to_owned();
        Ok(user)
    }

    /// The home directory.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// Runs this user's later commands in the network namespace `netns`.
    pub fn set_netns(&mut self, netns: &str) {
        self.netns = Some(netns.to_owned());
    }

    fn env(&self) -> Vec<(&str, &str)> {
        self.env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// Starts `interlink-p2p run --session <session> ARGS` in this home (and its
    /// namespace).
    pub fn start_with_args(&self, session: &str, args: &[&str]) -> anyhow::Result<Session> {
        match &self.netns {
            Some(ns) => Session::start_in_netns(ns, self.home(), session, args, &self.env()),
            None => Session::start_in(self.home(), session, args, &self.env()),
        }
    }

    /// Runs `interlink-p2p ARGS` in this home to completion, with `input` on stdin.
    pub fn cli(&self, args: &[&str], input: Option<&str>) -> anyhow::Result<Output> {
        let mut cmd = command_in(
            self.netns.as_deref().or(crate::process::netns()),
            self.home(),
            &self.env(),
        )?;
        cmd.args(args);
        let (status, stdout, stderr) = run_with_input(cmd, input, Instant::now() + DEADLINE)?;
        Ok(Output {
            status,
            stdout,
            stderr,
        })
    }

    /// Lets `other` message this user: `peer add <other.name> <other.key>`.
    pub fn pair_with(&self, other: &User) -> anyhow::Result<()> {
        let out = self.cli(&["peer", "add", &other.name, &other.key], None)?;
        ensure!(
            out.status.success(),
            "{}: peer add {} failed: {}",
            self.name,
            other.name,
            out.stderr
        );
        Ok(())
    }

    /// Starts `interlink-p2p run --session <session>` on loopback in this home,
    /// bootstrapping to `bootstrap` if given.
    pub fn start(&self, session: &str, bootstrap: Option<&str>) -> anyhow::Result<Session> {
        let mut args = LOOPBACK.to_vec();
        if let Some(b) = bootstrap {
            args.extend(["--bootstrap", b]);
        }
        self.start_with_args(session, &args)
    }

    /// `interlink-p2p send --to <to> ARGS` on loopback, bootstrapping to `bootstrap`.
    /// Also returns how long it ran.
    pub fn send(
        &self,
        bootstrap: &str,
        to: &str,
        args: &[&str],
        input: Option<&str>,
    ) -> anyhow::Result<(Output, Duration)> {
        let mut all = vec!["send", "--to", to, "--bootstrap", bootstrap];
        all.extend(LOOPBACK);
        all.extend(args);
        let start = Instant::now();
        let out = self.cli(&all, input)?;
        Ok((out, start.elapsed()))
    }

    /// The entries of a session's inbox (`interlink-p2p inbox --json`).
    pub fn inbox(&self, session: &str) -> anyhow::Result<Vec<serde_json::Value>> {
        let out = self.cli(&["inbox", "--session", session, "--json"], None)?;
        ensure!(out.status.success(), "inbox failed: {}", out.stderr);
        out.stdout
            .lines()
            .map(|l| serde_json::from_str(l).with_context(|| format!("not JSON: {l}")))
            .collect()
    }

    /// Polls the inbox of `session` until `done` accepts it or `deadline` passes;
    /// returns the last entries read.
    pub fn wait_inbox(
        &self,
        session: &str,
        deadline: Instant,
        done: impl Fn(&[serde_json::Value]) -> bool,
    ) -> anyhow::Result<Vec<serde_json::Value>> {
        loop {
            let entries = self.inbox(session)?;
            if done(&entries) || Instant::now() >= deadline {
                return Ok(entries);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The `msg_id`s of the lines `send` printed with `outcome` (`delivered` or `queued`).
pub fn outcomes<'a>(stdout: &'a str, outcome: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(outcome)?.strip_prefix(' '))
        .collect()
}
