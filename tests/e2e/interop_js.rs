//! A peer that is not rust-libp2p against a real session: `tests/js-probe`, written on
//! js-libp2p and other npm libraries from docs/PROTOCOL.md alone, re-derives every test
//! vector, then connects to an `interlink-p2p mcp` session over TCP loopback, verifies
//! its announcement, is admitted as a peer (`interlink-p2p peer add`, as a person
//! would), delivers a sealed message and verifies the signed receipt. The session's
//! agent host (an MCP client here) must then see the message under the probe's
//! verified identity.
//!
//! Needs `node` and the probe's pinned packages (`npm ci --prefix tests/js-probe`, which
//! `.ci/run` does): without them the tests print `SKIPPED` and pass, except under CI
//! (`CI` set), where they fail.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};

use interlink_e2e::{
    mcp_session::{self, deadline, loopback_addr, start_on_loopback},
    user::User,
};
use serde_json::{Value, json};

/// How long one run of the probe may take (it needs about a second).
const PROBE_DEADLINE: Duration = Duration::from_secs(60);

/// The overlay of this test: protocol ids and the identify version carry it, so the
/// probe must get them right for a name other than `default`.
const NETWORK: &str = "js-interop";

fn under_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
}

/// The probe's directory, once `node` runs and its packages are installed; `None`
/// (after printing `SKIPPED`) outside CI when either is missing.
fn probe_dir(test: &str) -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("js-probe");
    let missing = match std::process::Command::new("node").arg("--version").output() {
        Err(e) => Some(format!("`node` does not run: {e}")),
        Ok(out) if !out.status.success() => {
            Some(format!("`node --version` failed: {}", out.status))
        }
        Ok(_) if !dir.join("node_modules/libp2p/package.json").exists() => Some(format!(
            "{} is not installed: run `npm ci --prefix tests/js-probe`",
            dir.join("node_modules").display()
        )),
        Ok(_) => None,
    };
    match missing {
        None => Some(dir),
        Some(reason) if under_ci() => panic!("CI must run {test}: {reason}"),
        Some(reason) => {
            eprintln!("SKIPPED: {test}: {reason}");
            None
        }
    }
}

/// Runs `node probe.mjs ARGS` to the end; returns (stdout, stderr, how long it took),
/// failing with both streams unless it exited 0.
async fn probe(dir: &PathBuf, args: &[&str]) -> (String, String, Duration) {
    let (status, stdout, stderr, took) = run_probe(dir, args).await;
    assert!(
        status.success(),
        "js probe {args:?} failed ({status}):\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (stdout, stderr, took)
}

async fn run_probe(
    dir: &PathBuf,
    args: &[&str],
) -> (std::process::ExitStatus, String, String, Duration) {
    let started = Instant::now();
    let run = tokio::process::Command::new("node")
        .arg(dir.join("probe.mjs"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(PROBE_DEADLINE, run)
        .await
        .expect("the probe did not finish in time")
        .expect("node did not start");
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status, stdout, stderr, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_probe_rederives_every_protocol_vector() {
    let Some(dir) = probe_dir("js_probe_rederives_every_protocol_vector") else {
        return;
    };
    let (_, stderr, took) = probe(&dir, &["vectors"]).await;
    eprint!("{stderr}");
    eprintln!("vectors took {took:?}");
    assert!(stderr.contains("re-derived and verified"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_probe_is_paired_delivers_and_is_receipted() {
    let Some(dir) = probe_dir("js_probe_is_paired_delivers_and_is_receipted") else {
        return;
    };
    // The probe's identity, and the human admitting it as a peer.
    let (keys, _, _) = probe(&dir, &["keygen"]).await;
    let keys: Value = serde_json::from_str(keys.trim()).unwrap();
    let (seed, key) = (
        keys["seed"].as_str().unwrap(),
        keys["identity_key"].as_str().unwrap(),
    );
    let env = [("INTERLINK_NETWORK", NETWORK)];
    let sam = User::new("sam", &env).unwrap();
    let added = sam.cli(&["peer", "add", "jsprobe", key], None).unwrap();
    assert!(added.status.success(), "peer add: {}", added.stderr);

    let session = start_on_loopback(&sam, "interop-js", None, &env)
        .await
        .unwrap();
    let (_, who) = session.ok("whoami", json!({})).await.unwrap();
    assert_eq!(who["identity_key"], sam.key.as_str());
    let addr = loopback_addr(&session).await;
    assert!(addr.contains("/p2p/"), "no loopback address: {who}");

    let text = "hello from js-libp2p: ünïcödé and a\nsecond line";
    let (stdout, stderr, took) = probe(
        &dir,
        &[
            "live",
            "--seed",
            seed,
            "--addr",
            &addr,
            "--identity",
            &sam.key,
            "--session",
            "interop-js",
            "--network",
            NETWORK,
            "--text",
            text,
        ],
    )
    .await;
    eprint!("{stderr}");
    eprintln!("live probe took {took:?}");
    let msg_id = stdout
        .lines()
        .find_map(|l| l.strip_prefix("delivered "))
        .unwrap_or_else(|| panic!("no `delivered` line:\n{stdout}\n{stderr}"))
        .to_owned();

    // The agent host sees it, under the verified sender and its petname.
    let got = session
        .poll("receive_messages", json!({}), deadline(), |v| {
            v["messages"]
                .as_array()
                .is_some_and(|m| m.iter().any(|m| m["msg_id"] == msg_id.as_str()))
        })
        .await
        .unwrap();
    let m = got["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["msg_id"] == msg_id.as_str())
        .unwrap();
    // Only that one: the envelopes the probe spoilt on purpose were refused (§8.7).
    assert_eq!(got["messages"].as_array().unwrap().len(), 1, "{got}");
    assert_eq!(m["text"], text, "{m}");
    assert_eq!(m["from"], "jsprobe", "{m}");
    assert_eq!(m["sender_key"], key, "{m}");
    assert_eq!(m["sender_session"], "js-probe", "{m}");
    assert_eq!(
        (&m["task_id"], &m["status"]),
        (&json!("js-probe"), &json!("update")),
        "{m}"
    );

    // The announcement the probe served to the session's roster fetch was taken.
    let seen = mcp_session::sees(&session, "js-probe").await.unwrap();
    let probe_entry = seen["identities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["identity_key"] == key)
        .unwrap_or_else(|| panic!("the probe's identity is not on the roster: {seen}"));
    assert_eq!(probe_entry["petname"], "jsprobe", "{probe_entry}");

    // The probe is no rubber stamp: told to expect another identity, it fails, saying why.
    let (status, _, stderr, _) = run_probe(
        &dir,
        &[
            "live",
            "--seed",
            seed,
            "--addr",
            &addr,
            "--identity",
            key,
            "--session",
            "interop-js",
            "--network",
            NETWORK,
        ],
    )
    .await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("FAILED: the roster response has no announcement of"),
        "{stderr}"
    );

    assert_eq!(session.non_jsonrpc_stdout(), Vec::<String>::new());
    let (status, _) = session.close(deadline()).await.unwrap();
    assert!(status.success(), "{status}");
}
