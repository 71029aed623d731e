//! The plugin's launcher (`plugins/interlink-p2p/scripts/launch.cjs`) run by node as
//! the hosts run it: which interlink-p2p it picks (an explicit one, the copy `install`
//! keeps, `PATH`, then npx), the version rule, exit statuses, and what it says — to
//! the host's `initialize`, within a few seconds — when nothing can run.
//!
//! The binaries it finds are small scripts that answer `--version` with a chosen
//! version and otherwise record which of them ran; the npm registry is a closed port,
//! or a port that accepts and never answers.
#![cfg(unix)] // The stand-in binaries are shell scripts.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use interlink_e2e::npm::{VERSION, node_dir};
use serde_json::{Value, json};

fn launcher() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/interlink-p2p/scripts/launch.cjs")
}

/// A machine: a home, a data directory, a `PATH` directory, an npm that reaches `registry`.
struct Machine {
    dir: tempfile::TempDir,
    node_dir: PathBuf,
    registry: String,
}

impl Machine {
    fn new(node_dir: PathBuf) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let registry = format!("http://{}/", listener.local_addr().unwrap());
        drop(listener);
        let dir = tempfile::tempdir().unwrap();
        for sub in ["bin", "data", "ran"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        Self {
            dir,
            node_dir,
            registry,
        }
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// The copy `interlink-p2p install` keeps, under `XDG_DATA_HOME`.
    fn installed_copy(&self) -> PathBuf {
        self.path("data/interlink-p2p/bin/interlink-p2p")
    }

    /// A stand-in interlink-p2p at `file`: `--version` prints `version`; any other
    /// run records `name` and its arguments, then exits with `status`.
    fn stand_in(&self, file: &Path, name: &str, version: &str, status: u8) {
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let ran = self.path("ran");
        std::fs::write(
            file,
            format!(
                "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'interlink-p2p {version}'; \
                 exit 0; fi\necho \"$@\" > '{}/{name}'\nexit {status}\n",
                ran.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// Which stand-ins ran.
    fn ran(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path("ran"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn launch(&self, args: &[&str]) -> Command {
        let mut c = Command::new(self.node_dir.join("node"));
        c.arg(launcher())
            .args(args)
            .env_clear()
            .env("HOME", self.dir.path())
            .env("XDG_DATA_HOME", self.path("data"))
            .env(
                "PATH",
                format!("{}:{}", self.path("bin").display(), self.node_dir.display()),
            )
            .env("npm_config_registry", &self.registry)
            .env("npm_config_cache", self.path("npm-cache"))
            .env("npm_config_update_notifier", "false")
            .stdin(Stdio::null());
        c
    }
}

fn machine() -> Option<Machine> {
    node_dir().map(Machine::new)
}

#[test]
fn the_launcher_runs_the_first_compatible_binary_with_its_arguments_and_exit_status() {
    let Some(m) = machine() else { return };
    // On PATH and installed, both compatible: the installed copy wins.
    m.stand_in(&m.path("bin/interlink-p2p"), "path", VERSION, 0);
    m.stand_in(&m.installed_copy(), "copy", VERSION, 7);
    let out = m.launch(&["peers", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    assert_eq!(m.ran(), ["copy"]);
    let args = std::fs::read_to_string(m.path("ran/copy")).unwrap();
    assert_eq!(args.trim(), "peers --json");

    // An installed copy of another minor version is passed over for PATH's.
    std::fs::remove_file(m.path("ran/copy")).unwrap();
    m.stand_in(&m.installed_copy(), "copy", "0.0.9", 7);
    let out = m.launch(&["id"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(m.ran(), ["path"]);

    // INTERLINK_P2P_BINARY comes first.
    std::fs::remove_file(m.path("ran/path")).unwrap();
    let explicit = m.path("explicit/interlink-p2p");
    m.stand_in(&explicit, "explicit", VERSION, 0);
    let out = m
        .launch(&["id"])
        .env("INTERLINK_P2P_BINARY", &explicit)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(m.ran(), ["explicit"]);
}

/// The caret rule against the plugin's version (`VERSION`, 0.1.0 here): a later patch
/// is taken; an earlier release, or another minor or major version, is not.
#[test]
fn the_launcher_takes_only_versions_the_plugin_is_compatible_with() {
    let Some(m) = machine() else { return };
    let parts: Vec<u64> = VERSION.split('.').map(|p| p.parse().unwrap()).collect();
    let (major, minor, patch) = (parts[0], parts[1], parts[2]);
    let later_patch = format!("{major}.{minor}.{}", patch + 3);
    let next_minor = format!("{major}.{}.0", minor + 1);
    let next_major = format!("{}.0.0", major + 1);
    let mut cases = vec![(later_patch.as_str(), true), (next_major.as_str(), false)];
    if major == 0 {
        cases.push((next_minor.as_str(), false));
    }
    let earlier = (minor > 0).then(|| format!("{major}.{}.0", minor - 1));
    if let Some(e) = &earlier {
        cases.push((e.as_str(), false));
    }
    for (version, taken) in cases {
        let _ = std::fs::remove_file(m.path("ran/path"));
        m.stand_in(&m.path("bin/interlink-p2p"), "path", version, 0);
        let out = m.launch(&["wait"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            m.ran() == ["path"],
            taken,
            "{version} against {VERSION}: {stderr}"
        );
        if !taken {
            assert!(
                stderr.contains(&format!("version {version}, the plugin needs ^{VERSION}")),
                "{stderr}"
            );
        }
    }
}

/// Sends `initialize` to a launcher with nothing to run; returns the answer and how
/// long it took.
fn initialize_answer(mut launch: Command) -> (Value, Duration, String) {
    let started = Instant::now();
    let mut child = launch
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let took = started.elapsed();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "exits once the host closes stdin"
    );
    let answer = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    (
        answer,
        took,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_says_what_to_run(answer: &Value, stderr: &str) {
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    for needed in [
        "cargo install --locked --path crates/interlink-p2p",
        &format!("npm install -g interlink-p2p@{VERSION}"),
        "PATH: no interlink-p2p",
        "npx interlink-p2p@",
    ] {
        assert!(message.contains(needed), "no `{needed}` in: {message}");
    }
    assert!(stderr.contains(message), "stderr: {stderr}");
}

#[test]
fn with_nothing_to_run_the_launcher_answers_initialize_with_what_to_run() {
    let Some(m) = machine() else { return };
    // npm's registry refuses connections (offline, or not published).
    let (answer, took, stderr) = initialize_answer(m.launch(&["mcp"]));
    assert_says_what_to_run(&answer, &stderr);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ECONNREFUSED")
    );
    eprintln!("answered in {took:?} (registry refusing)");

    // A binary that is there but cannot say its version is named with why.
    m.stand_in(&m.installed_copy(), "copy", "not-a-version", 0);
    let (answer, _, _) = initialize_answer(m.launch(&["mcp"]));
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "{}: version not-a-version",
            m.installed_copy().display()
        )),
        "{message}"
    );
    assert!(m.ran().is_empty());

    // A hook (`wait`) says it on stderr and does not fail the host's turn.
    let out = m.launch(&["wait"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cargo install"));
}

/// A registry that accepts connections and never answers (a captive network, a dead
/// proxy): npx would wait minutes; the launcher answers within its budget, well inside
/// the 30 s a host waits for a server.
#[test]
fn a_registry_that_never_answers_costs_the_launcher_its_budget_not_the_hosts_timeout() {
    let Some(mut m) = machine() else { return };
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    m.registry = format!("http://{}/", silent.local_addr().unwrap());
    let held = std::thread::spawn(move || {
        let mut open = Vec::new();
        for stream in silent.incoming().take(16) {
            open.push(stream);
        }
    });
    let (answer, took, stderr) = initialize_answer(m.launch(&["mcp"]));
    assert_says_what_to_run(&answer, &stderr);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no answer within"),
        "{answer}"
    );
    assert!(took < Duration::from_secs(30), "{took:?}");
    eprintln!("answered in {took:?} (registry silent)");
    drop(held);
}
