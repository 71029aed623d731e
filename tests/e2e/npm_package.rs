//! The npm distribution, installed the way a user without Rust gets it: the tarballs
//! `dist/npm-pack.mjs` makes (the launcher `interlink-p2p` and this machine's platform
//! package, holding the built binary) go into a clean prefix with an empty npm cache,
//! offline, with no Rust toolchain on `PATH`; then `npx interlink-p2p --version` and an
//! MCP `initialize` through the launcher must work, the launcher must pass termination
//! on to the binary, and without its platform package it must say what is missing.
//!
//! Needs `node` and `npm`: without them the tests print `SKIPPED`, except under CI
//! (`CI` set), where they fail.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc::sync_channel,
    time::Duration,
};

use interlink_e2e::{
    agent_cli::run,
    npm::{Tarballs, VERSION, node_dir, pack, path_without_rust},
};
use serde_json::{Value, json};

const STEP: Duration = Duration::from_secs(60);

/// A user with node and npm but no Rust: `PATH` has no cargo, npm's cache is empty and
/// npm may not use the network.
struct NpmUser {
    dir: tempfile::TempDir,
    path: String,
}

impl NpmUser {
    fn new(node_dir: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        for d in ["home", "cache", "prefix", "interlink"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        let path = path_without_rust(node_dir);
        Self { dir, path }
    }

    fn at(&self, d: &str) -> PathBuf {
        self.dir.path().join(d)
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("PATH", &self.path)
            .env("HOME", self.at("home"))
            .env("npm_config_cache", self.at("cache"))
            .env("npm_config_offline", "true")
            .env("npm_config_update_notifier", "false")
            .env("npm_config_fund", "false")
            .env("npm_config_audit", "false")
            .env("INTERLINK_HOME", self.at("interlink"))
            .env("INTERLINK_LISTEN", "/ip4/127.0.0.1/tcp/0")
            .env("INTERLINK_MDNS", "0")
            .current_dir(self.at("prefix"))
            .stdin(Stdio::null());
        c
    }

    /// `npm install` of `tarballs` into the prefix (extra npm flags in `flags`).
    fn install(&self, tarballs: &[&Path], flags: &[&str]) {
        let out = run(self
            .command("npm")
            .args(["install", "--prefix"])
            .arg(self.at("prefix"))
            .args(flags)
            .args(tarballs));
        assert!(out.status.success(), "npm install: {out}");
    }

    fn pack(&self) -> Tarballs {
        pack(&self.at("tarballs"))
    }
}

/// Reads stdout lines of a child on a thread, so a test can wait with a deadline.
fn lines_of(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = sync_channel(64);
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Starts `cmd` as an MCP host would (piped stdin and stdout) and sends `initialize`;
/// returns the child, its stdin (closing it ends the server), its stdout lines and the
/// first line it wrote.
fn start_mcp(
    cmd: &mut Command,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::sync::mpsc::Receiver<String>,
    String,
) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", initialize()).unwrap();
    let lines = lines_of(child.stdout.take().unwrap());
    let first = lines
        .recv_timeout(STEP)
        .unwrap_or_else(|e| panic!("no answer to initialize from {cmd:?}: {e}"));
    (child, stdin, lines, first)
}

fn initialize() -> String {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "npm-test", "version": "0"}
        }
    })
    .to_string()
}

#[test]
fn npm_packages_install_offline_and_serve_mcp_without_rust() {
    let Some(node_dir) = node_dir() else { return };
    let user = NpmUser::new(&node_dir);
    let Tarballs { platform, launcher } = user.pack();
    user.install(&[&platform, &launcher], &[]);

    let out = run(user.command("npx").args(["interlink-p2p", "--version"]));
    assert!(out.status.success(), "npx interlink-p2p --version: {out}");
    assert_eq!(
        out.stdout.trim(),
        format!("interlink-p2p {VERSION}"),
        "{out}"
    );

    // An agent host's start: `npx interlink-p2p mcp`, JSON-RPC on its stdio.
    let (mut child, stdin, lines, first) =
        start_mcp(
            user.command("npx")
                .args(["interlink-p2p", "mcp", "--session", "npm-test"]),
        );
    let answer: Value = serde_json::from_str(&first)
        .unwrap_or_else(|e| panic!("stdout is not JSON-RPC ({e}): {first}"));
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(
        answer["result"]["serverInfo"]["version"], VERSION,
        "{answer}"
    );
    // The host closes stdin: the server ends, and so does the launcher.
    drop(stdin);
    let deadline = std::time::Instant::now() + STEP;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "npx did not exit after stdin closed"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let rest: Vec<String> = lines.try_iter().collect();
    assert!(
        status.success(),
        "exit {status}; stdout after initialize: {rest:?}"
    );
    for line in rest {
        assert!(
            serde_json::from_str::<Value>(&line).is_ok(),
            "non-JSON-RPC line on stdout: {line}"
        );
    }
}

#[test]
fn the_launcher_passes_sigterm_to_the_binary() {
    let Some(node_dir) = node_dir() else { return };
    let user = NpmUser::new(&node_dir);
    let Tarballs { platform, launcher } = user.pack();
    user.install(&[&platform, &launcher], &[]);
    let script = user.at("prefix/node_modules/interlink-p2p/bin/interlink-p2p.js");
    let (mut child, stdin, lines, _) =
        start_mcp(
            user.command("node")
                .arg(&script)
                .args(["mcp", "--session", "npm-sigterm"]),
        );
    let term = run(Command::new("kill").args(["-TERM", &child.id().to_string()]));
    assert!(term.status.success(), "{term}");
    // The binary shares the stdout pipe: its end (EOF) means it has exited too, while
    // stdin is still open, so it was the forwarded signal that stopped it.
    let deadline = std::time::Instant::now() + STEP;
    loop {
        match lines.recv_timeout(Duration::from_millis(100)) {
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            _ => assert!(
                std::time::Instant::now() < deadline,
                "the binary still runs after the launcher got SIGTERM"
            ),
        }
    }
    let status = child.wait().unwrap();
    drop(stdin);
    assert!(
        status.success() || std::os::unix::process::ExitStatusExt::signal(&status) == Some(15),
        "launcher ended with {status}"
    );
}

#[test]
fn without_its_platform_package_the_launcher_says_what_is_missing() {
    let Some(node_dir) = node_dir() else { return };
    let user = NpmUser::new(&node_dir);
    let Tarballs { launcher, .. } = user.pack();
    user.install(&[&launcher], &["--omit=optional"]);
    let out = run(user.command("npx").args(["interlink-p2p", "--version"]));
    assert_eq!(out.status.code(), Some(1), "{out}");
    assert!(out.stdout.is_empty(), "stdout is the MCP server's: {out}");
    assert!(
        out.stderr.contains("is not installed") && out.stderr.contains("--omit=optional"),
        "{out}"
    );
}
