//! The `interlink-p2p` binary as a user runs it.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{os::unix::fs::PermissionsExt, process::Command};

use interlink_e2e::binary;

fn p2p() -> Command {
    let mut cmd = Command::new(binary("interlink-p2p").expect("binary"));
    cmd.env_remove("INTERLINK_HOME");
    cmd
}

#[test]
fn id_creates_a_private_key_once_and_is_stable() {
    let home = tempfile::tempdir().unwrap();
    let run = || {
        let out = p2p()
            .args(["id", "--json", "--home"])
            .arg(home.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let first = run();
    assert_eq!(first["created"], true);
    let second = run();
    assert_eq!(second["created"], false);
    assert_eq!(first["identity_key"], second["identity_key"]);
    assert_eq!(first["identity_key"].as_str().unwrap().len(), 64);
    let key = home.path().join("identity.key");
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn id_refuses_a_group_readable_key_and_says_how_to_fix_it() {
    let home = tempfile::tempdir().unwrap();
    let ok = p2p()
        .arg("id")
        .env("INTERLINK_HOME", home.path())
        .output()
        .unwrap();
    assert!(ok.status.success());
    let key = home.path().join("identity.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = p2p()
        .arg("id")
        .env("INTERLINK_HOME", home.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("chmod 600"), "{err}");
    assert!(out.stdout.is_empty());
}

/// The README's main job: the demo runs the real processes and narrates what they did.
#[test]
fn the_demo_runs_end_to_end() {
    let out = p2p().arg("demo").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("2. a relay"),
        "the relay is built next to it:\n{text}"
    );
    assert_eq!(text.matches(": delivered ").count(), 2, "{text}");
    assert!(text.contains("bob's node refuses her message"), "{text}");
    assert!(text.contains("is not a peer"), "{text}");
    assert!(text.contains("alice: queued "), "{text}");
    assert!(text.contains("is in his inbox"), "{text}");
    assert!(
        text.contains("'s inbox: ") && text.contains("as bob paired them"),
        "inbox lines name the sender as its recipient paired it: {text}"
    );
}

/// `whoami` (what people type first) is `id`.
#[test]
fn whoami_is_id() {
    let home = tempfile::tempdir().unwrap();
    let id = || {
        p2p()
            .env("INTERLINK_HOME", home.path())
            .arg("id")
            .output()
            .unwrap()
    };
    // The first `id` creates the key (and says so); then both print the same.
    id();
    let id = id();
    let who = p2p()
        .env("INTERLINK_HOME", home.path())
        .arg("whoami")
        .output()
        .unwrap();
    assert!(
        who.status.success(),
        "{}",
        String::from_utf8_lossy(&who.stderr)
    );
    assert_eq!(id.stdout, who.stdout);
}

#[test]
fn id_sets_the_name_offered_to_peers_and_peer_rename_keeps_the_key() {
    let home = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let run = |home: &std::path::Path, args: &[&str]| {
        let out = p2p().arg("--home").arg(home).args(args).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, out, err) = run(home.path(), &["id", "--json", "--name", "alice-laptop"]);
    assert!(ok, "{err}");
    let id: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(id["name"], "alice-laptop");
    let settings = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    assert!(settings.contains("name = \"alice-laptop\""), "{settings}");
    let (ok, _, err) = run(home.path(), &["id", "--name", "not a name"]);
    assert!(!ok && err.contains("invalid name"), "{err}");

    let (_, out, _) = run(other.path(), &["id", "--json"]);
    let bob: serde_json::Value = serde_json::from_str(&out).unwrap();
    let key = bob["identity_key"].as_str().unwrap();
    let (ok, _, err) = run(home.path(), &["peer", "add", "peer-1a2b", key]);
    assert!(ok, "{err}");
    let (ok, out, err) = run(home.path(), &["peer", "rename", "peer-1a2b", "bob"]);
    assert!(ok, "{err}");
    assert!(out.starts_with("renamed peer-1a2b to bob"), "{out}");
    let (_, out, _) = run(home.path(), &["peer", "list", "--json"]);
    assert!(
        out.contains("\"bob\"") && out.contains(key) && !out.contains("peer-1a2b"),
        "{out}"
    );
    let (ok, _, err) = run(home.path(), &["peer", "rename", "nobody", "x"]);
    assert!(!ok && err.contains("no peer is named \"nobody\""), "{err}");
}

/// Alone on the network (mDNS off, no bootstrap or relay): `peers` and `send` say why
/// nothing was found and what to set, and a normal start logs no warning.
#[test]
fn alone_on_the_network_commands_say_why_and_start_without_warnings() {
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = p2p()
            .env_remove("RUST_LOG")
            .env_remove("INTERLINK_BOOTSTRAP")
            .env_remove("INTERLINK_RELAY")
            .arg("--home")
            .arg(home.path())
            .args(args)
            .args(["--no-mdns", "--listen", "/ip4/127.0.0.1/tcp/0"])
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, err) = run(&["peers", "--wait", "1"]);
    assert!(ok, "{err}");
    assert!(
        err.contains("mDNS is off and no bootstrap peer or relay is set")
            && err.contains("--bootstrap"),
        "{err}"
    );
    assert!(
        !err.contains("WARN"),
        "a normal start logs no warning: {err}"
    );
    let (ok, err) = run(&["send", "--to", "self", "--wait", "1", "hello"]);
    assert!(!ok);
    assert!(
        err.contains("cannot route to self")
            && err.contains("no other session of yours is running, or none this command")
            && err.contains("mDNS is off"),
        "{err}"
    );
    // A peer with no session seen: the error names the way to queue for one anyway.
    let bob = tempfile::tempdir().unwrap();
    let out = p2p()
        .arg("--home")
        .arg(bob.path())
        .arg("id")
        .output()
        .unwrap();
    let bob_key = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find(|w| w.len() == 64)
        .unwrap()
        .to_owned();
    let added = p2p()
        .arg("--home")
        .arg(home.path())
        .args(["peer", "add", "bob", &bob_key])
        .output()
        .unwrap();
    assert!(added.status.success(), "{added:?}");
    let (ok, err) = run(&["send", "--to", "bob", "--wait", "1", "hello"]);
    assert!(!ok);
    assert!(
        err.contains("cannot route to bob") && err.contains("pass --session ID"),
        "{err}"
    );
    assert!(!err.contains("WARN"), "{err}");
    // `..` is no session anyone can have: refused, not queued for a week.
    let (ok, err) = run(&[
        "send",
        "--to",
        "self",
        "--session",
        "..",
        "--wait",
        "1",
        "x",
    ]);
    assert!(!ok && err.contains("\"..\" is never a session id"), "{err}");
}

/// A fixed listen port belongs to the session that took it: a second session given the
/// same TCP or QUIC port fails at once, names the process holding it and exits non-zero
/// (libp2p's TCP listener shares ports by `SO_REUSEPORT`; before, the second started
/// and the kernel split incoming connections between the two, and on QUIC the error
/// had no cause at all).
#[test]
fn a_second_session_on_a_taken_fixed_port_fails_naming_the_holder() {
    use interlink_e2e::{process::Session, relays::free_port};
    let (tcp, udp) = (free_port(), free_port());
    let tcp_addr = format!("/ip4/127.0.0.1/tcp/{tcp}");
    let quic_addr = format!("/ip4/127.0.0.1/udp/{udp}/quic-v1");
    let first = Session::start(
        "holder",
        &["--no-mdns", "--listen", &tcp_addr, "--listen", &quic_addr],
        &[],
    )
    .unwrap();
    let pid = first.process.pid();
    for (addr, what) in [
        (&tcp_addr, format!("port {tcp}/tcp")),
        (&quic_addr, format!("port {udp}/udp")),
    ] {
        let home = tempfile::tempdir().unwrap();
        let out = p2p()
            .arg("--home")
            .arg(home.path())
            .args(["run", "--session", "second", "--no-mdns", "--listen", addr])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "the second session must not start: {err}"
        );
        assert!(
            err.contains(&format!("{what} is already in use by pid {pid}")),
            "names the port and its holder: {err}"
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).trim().is_empty(),
            "no address, no ready"
        );
    }
    // A listen error that is not a taken port carries its cause.
    let home = tempfile::tempdir().unwrap();
    let out = p2p()
        .arg("--home")
        .arg(home.path())
        .args([
            "run",
            "--no-mdns",
            "--listen",
            "/ip4/192.0.2.1/udp/4000/quic-v1",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("Cannot assign requested address"), "{err}");
}
