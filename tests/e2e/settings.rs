//! The settings file (`config.toml` in the home) as a user meets it: written by
//! `install … --listen/--bootstrap/--no-mdns/--name`, then read by every command and
//! session with no flags and no `INTERLINK_*` variables: a session listens where the
//! file says, a `send` from a shell finds it through the file's bootstrap and delivers,
//! and a bad file or a bad value in it is refused with the file and key named.

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
