//! The settings file (`config.toml` in the home) as a user meets it: written by
//! `install … --listen/--bootstrap/--no-mdns/--name`, then read by every command and
//! session with no flags and no `INTERLINK_*` variables: a session listens where the
//! file says, a `send` from a shell finds it through the file's bootstrap and delivers,
//! and a bad file or a bad value in it is refused with the file and key named.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use interlink_e2e::{process::Session, user::User};

#[test]
fn commands_and_sessions_read_the_settings_file() {
    // No INTERLINK_* variables: `User` runs commands with a scrubbed environment; HOME,
    // where Claude Code's own files go, is a throwaway one.
    let claude_home = tempfile::tempdir().unwrap();
    let alice = User::new("alice", &[("HOME", claude_home.path().to_str().unwrap())]).unwrap();
    let home = alice.home().to_str().unwrap().to_owned();
    let install = |args: &[&str]| {
        let mut all = vec!["install", "claude", "--command", "/opt/interlink-p2p"];
        all.extend(args);
        let out = alice.cli(&all, None).unwrap();
        assert!(out.status.success(), "install: {}", out.stderr);
        out.stdout
    };
    let out = install(&[
        "--listen",
        "/ip4/127.0.0.1/tcp/0",
        "--no-mdns",
        "--name",
        "alice-laptop",
    ]);
    assert!(out.contains("config.toml: set listen"), "{out}");
    assert!(out.contains("config.toml: set mdns = false"), "{out}");
    let settings = std::fs::read_to_string(alice.home().join("config.toml")).unwrap();
    assert!(settings.contains("name = \"alice-laptop\""), "{settings}");

    // A session with no network flags listens on loopback only, as the file says.
    let a = Session::start_in(alice.home(), "a", &[], &[]).unwrap();
    assert!(
        a.addrs
            .iter()
            .all(|addr| addr.starts_with("/ip4/127.0.0.1/")),
        "listens where config.toml says: {:?}",
        a.addrs
    );
    let boot = a.loopback_addr().unwrap().to_owned();
    let out = install(&["--bootstrap", &boot]);
    assert!(out.contains("config.toml: set bootstrap"), "{out}");
    let again = install(&["--bootstrap", &boot]);
    assert!(
        !again.contains("config.toml"),
        "nothing changed, nothing said: {again}"
    );

    // A shell send with no flags reaches it through the file's bootstrap.
    let send_self = |args: &[&str]| {
        let mut all = vec!["send", "--to", "self"];
        all.extend(args);
        alice.cli(&all, None).unwrap()
    };
    let out = send_self(&["--session", "a", "from the settings"]);
    assert!(out.status.success(), "send: {}", out.stderr);
    assert!(out.stdout.contains("delivered"), "{}", out.stdout);
    let inbox = alice.inbox("a").unwrap();
    assert!(
        inbox.iter().any(|m| m["text"] == "from the settings"),
        "{inbox:?}"
    );
    // A typo in the session id: the answer names the sessions there are and the closest.
    let out = send_self(&["--session", "b", "--wait", "2", "typo"]);
    assert!(
        out.stderr
            .contains("its sessions now: a (live); did you mean a?"),
        "{}",
        out.stderr
    );
    drop(a);

    // Bad settings are refused, naming the file and the key.
    std::fs::write(
        alice.home().join("config.toml"),
        "bootstrap = [\"not an address\"]\n",
    )
    .unwrap();
    let out = alice.cli(&["send", "--to", "self", "x"], None).unwrap();
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("INTERLINK_BOOTSTRAP is `bootstrap` in") && out.stderr.contains(&home),
        "{}",
        out.stderr
    );
    std::fs::write(alice.home().join("config.toml"), "bootstrp = []\n").unwrap();
    let out = alice.cli(&["peers"], None).unwrap();
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("bootstrp: unknown key"),
        "{}",
        out.stderr
    );
}

#[test]
fn network_variables_are_read_named_in_errors_and_never_written_by_install() {
    let claude_home = tempfile::tempdir().unwrap();
    let relay = "/ip4/127.0.0.1/tcp/9/p2p/12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA";
    let alice = User::new(
        "alice",
        &[
            ("HOME", claude_home.path().to_str().unwrap()),
            ("INTERLINK_RELAY", relay),
        ],
    )
    .unwrap();
    // --help shows each setting's variable, and its value when set (the harness sets
    // INTERLINK_MDNS=0 outside a lab namespace: tests/support/process.rs).
    let out = alice.cli(&["peers", "--help"], None).unwrap();
    for var in [
        "[env: INTERLINK_NETWORK=]",
        "[env: INTERLINK_LISTEN=]",
        "[env: INTERLINK_BOOTSTRAP=]",
        "[env: INTERLINK_MDNS=0]",
    ] {
        assert!(out.stdout.contains(var), "{var} in {}", out.stdout);
    }
    assert!(
        out.stdout
            .contains(&format!("[env: INTERLINK_RELAY={relay}]")),
        "{}",
        out.stdout
    );
    // install writes what was typed, not what the environment says.
    let out = alice
        .cli(
            &[
                "install",
                "claude",
                "--command",
                "/opt/interlink-p2p",
                "--listen",
                "/ip4/127.0.0.1/tcp/0",
            ],
            None,
        )
        .unwrap();
    assert!(out.status.success(), "install: {}", out.stderr);
    let settings = std::fs::read_to_string(alice.home().join("config.toml")).unwrap();
    assert!(settings.contains("listen"), "{settings}");
    assert!(!settings.contains("relay"), "{settings}");

    // A bad value names where it came from: the variable, or the flag.
    let bad = User::new("bad", &[("INTERLINK_NETWORK", "Bad Name")]).unwrap();
    let out = bad.cli(&["peers", "--wait", "0.1"], None).unwrap();
    assert!(!out.status.success());
    assert!(
        out.stderr
            .contains("INTERLINK_NETWORK: network name \"Bad Name\""),
        "{}",
        out.stderr
    );
    let out = bad
        .cli(&["peers", "--wait", "0.1", "--network", "Also Bad"], None)
        .unwrap();
    assert!(
        out.stderr.contains("--network: network name \"Also Bad\""),
        "{}",
        out.stderr
    );
    let out = bad
        .cli(&["probe", "/ip4/127.0.0.1/tcp/9", "--timeout", "0.1"], None)
        .unwrap();
    assert!(
        out.stderr.contains("INTERLINK_NETWORK: network name"),
        "{}",
        out.stderr
    );
    let mdns = User::new("mdns", &[("INTERLINK_MDNS", "maybe")]).unwrap();
    let out = mdns.cli(&["peers", "--wait", "0.1"], None).unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", out.stderr);
    assert!(
        out.stderr.contains("INTERLINK_MDNS expects 0 or 1"),
        "{}",
        out.stderr
    );
}
