//! The npm distribution in tests: the tarballs `dist/npm-pack.mjs` makes from the built
//! binary ([`pack`]), and a package registry on loopback that serves them ([`Registry`])
//! the way the public registry would once they are published — package documents at
//! `/<name>`, tarballs at `/-/<file>` — so an agent host's `npx -y interlink-p2p@<v>`
//! can run end to end with an empty npm cache and no outside network.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // test code: a panic is a failure report

use std::{
    collections::BTreeMap,
    io::{BufRead as _, BufReader, Write as _},
    net::TcpListener,
    path::{Path, PathBuf},
    process::Command,
    sync::{Arc, Mutex},
};

use serde_json::{Value, json};

use crate::{
    agent_cli::{Output, run},
    binary,
};

/// The workspace version, which every npm package carries.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
}

/// The directory holding `node` and `npm`, or `None` (after `SKIPPED`) outside CI.
pub fn node_dir() -> Option<PathBuf> {
    let found = Command::new("sh")
        .args(["-c", "command -v node && command -v npm"])
        .output();
    let found = match found {
        Ok(out) if out.status.success() => String::from_utf8(out.stdout).unwrap(),
        _ if in_ci() => panic!("node and npm are needed to test the npm packages under CI"),
        _ => {
            eprintln!("SKIPPED: node or npm is not on PATH (the npm packages need them)");
            return None;
        }
    };
    let node = std::fs::canonicalize(found.lines().next().unwrap().trim()).unwrap();
    Some(node.parent().unwrap().to_path_buf())
}

/// A `PATH` with node and npm and the system's tools but no Rust toolchain: `cargo`,
/// `rustc` and `rustup` are shadowed by commands that fail saying so (a distribution's
/// own toolchain may sit in `/usr/bin`, as the cross-check's does), checked.
pub fn path_without_rust(node_dir: &Path) -> String {
    let shims = std::env::temp_dir().join(format!("interlink-no-rust-{}", std::process::id()));
    std::fs::create_dir_all(&shims).unwrap();
    for tool in ["cargo", "rustc", "rustup"] {
        let shim = shims.join(tool);
        std::fs::write(
            &shim,
            format!("#!/bin/sh\necho \"{tool}: no Rust toolchain on this route\" >&2\nexit 127\n"),
        )
        .unwrap();
        std::fs::set_permissions(
            &shim,
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
        )
        .unwrap();
    }
    let path = format!("{}:{}:/usr/bin:/bin", shims.display(), node_dir.display());
    let which = Command::new("sh")
        .args(["-c", "cargo --version; rustc --version; true"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(
        which.stdout.is_empty(),
        "a Rust toolchain answers on {path}: {}",
        String::from_utf8_lossy(&which.stdout)
    );
    path
}

/// The npm tarballs for this machine.
#[derive(Debug, Clone)]
pub struct Tarballs {
    /// `@interlink-p2p/<platform>` with the built binary.
    pub platform: PathBuf,
    /// The launcher, `interlink-p2p`.
    pub launcher: PathBuf,
}

/// Packs the launcher and this machine's platform package (holding the built
/// `interlink-p2p`) into `out` with `dist/npm-pack.mjs`.
pub fn pack(out: &Path) -> Tarballs {
    let platform = run(Command::new("node").args(["-p", "process.platform + '-' + process.arch"]));
    let platform = platform.stdout.trim().to_owned();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // The dev build carries ~400 MB of debug info; without it packing, installing and
    // unpacking take seconds instead of a minute. The code is the same.
    let built = binary("interlink-p2p").unwrap();
    std::fs::create_dir_all(out).unwrap();
    let exe = out.join("interlink-p2p");
    let stripped = Command::new("objcopy")
        .arg("--strip-debug")
        .arg(&built)
        .arg(&exe)
        .status()
        .is_ok_and(|s| s.success());
    if !stripped {
        std::fs::copy(&built, &exe).unwrap();
    }
    let packed: Output = run(Command::new("node")
        .arg(root.join("dist/npm-pack.mjs"))
        .args(["--version", VERSION, "--out"])
        .arg(out)
        .arg("--binary")
        .arg(format!("{platform}={}", exe.display())));
    assert!(packed.status.success(), "npm-pack: {packed}");
    let files: Vec<PathBuf> = packed.stdout.lines().map(PathBuf::from).collect();
    let named = |name: String| {
        files
            .iter()
            .find(|f| f.file_name().unwrap().to_str() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("npm-pack made no {name}: {packed}"))
            .clone()
    };
    Tarballs {
        platform: named(format!("interlink-p2p-{platform}-{VERSION}.tgz")),
        launcher: named(format!("interlink-p2p-{VERSION}.tgz")),
    }
}

/// The `package.json` inside an npm tarball.
fn manifest_of(tarball: &Path) -> Value {
    let out = run(Command::new("tar")
        .args(["-xzOf"])
        .arg(tarball)
        .arg("package/package.json"));
    assert!(out.status.success(), "{out}");
    serde_json::from_str(&out.stdout).unwrap()
}

/// An npm registry on 127.0.0.1 serving the given tarballs; stops when dropped.
#[allow(missing_debug_implementations)]
pub struct Registry {
    /// `http://127.0.0.1:<port>/`, for `npm_config_registry`.
    pub url: String,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    port: u16,
}

impl Registry {
    pub fn serve(tarballs: &[&Path]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = format!("http://127.0.0.1:{port}/");
        // path -> (content type, body)
        let mut routes: BTreeMap<String, (&'static str, Vec<u8>)> = BTreeMap::new();
        for tarball in tarballs {
            let mut manifest = manifest_of(tarball);
            let name = manifest["name"].as_str().unwrap().to_owned();
            let version = manifest["version"].as_str().unwrap().to_owned();
            let file = tarball.file_name().unwrap().to_str().unwrap().to_owned();
            manifest["dist"] = json!({"tarball": format!("{url}-/{file}")});
            let document = json!({
                "name": name,
                "dist-tags": {"latest": version},
                "versions": {version: manifest},
            });
            // npm asks for a scoped name with its slash escaped.
            let path = format!("/{}", name.replace('/', "%2f"));
            routes.insert(
                path,
                ("application/json", document.to_string().into_bytes()),
            );
            routes.insert(
                format!("/-/{file}"),
                ("application/octet-stream", std::fs::read(tarball).unwrap()),
            );
        }
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (log, halt) = (requests.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if halt.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                let mut line = String::new();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                // Headers, to the blank line.
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    header.clear();
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let path = path.replace("%2F", "%2f");
                log.lock().unwrap().push(path.clone());
                let reply = match routes.get(&path) {
                    Some((kind, body)) => {
                        let mut r = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                            body.len()
                        )
                        .into_bytes();
                        r.extend_from_slice(body);
                        r
                    }
                    None => b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 21\r\nconnection: close\r\n\r\n{\"error\":\"not found\"}".to_vec(),
                };
                let _ = stream.write_all(&reply);
            }
        });
        Self {
            url,
            requests,
            stop,
            port,
        }
    }

    /// The paths requested so far.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        // Wake the accept loop so it sees the flag.
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
    }
}
