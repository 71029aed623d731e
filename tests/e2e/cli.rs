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

/// `interlink-p2p <args> --help`.
fn help_of(args: &[&str]) -> String {
    let out = p2p().args(args).arg("--help").output().unwrap();
    assert!(out.status.success(), "{args:?} --help failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The subcommands a help text lists (without `help`).
fn commands_in(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

/// The long flags a help text lists (`  -j, --json`, `      --session <ID>`).
fn flags_in(help: &str) -> std::collections::BTreeSet<String> {
    help.lines()
        .filter(|l| l.trim_start().starts_with('-'))
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("--")))
        .map(|w| w.trim_end_matches(',').to_owned())
        .filter(|f| f != "--help" && f != "--version")
        .collect()
}

/// The long flags written in `line` (`--session`, not the `--` of an em dash's
/// stand-in or of a word).
fn flags_written(line: &str) -> Vec<String> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(at) = line[i..].find("--") {
        let start = i + at;
        let before_ok =
            start == 0 || !(b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'-');
        let end = line[start + 2..]
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
            .map_or(line.len(), |e| start + 2 + e);
        if before_ok && end > start + 2 && b[start + 2].is_ascii_lowercase() {
            out.push(line[start..end].to_owned());
        }
        i = end.max(start + 2);
    }
    out
}

/// Help and docs agree, and stay so: every subcommand and flag the binary has is in
/// CLI.md (or, for the network flags, CONFIG.md), and every flag a synopsis or example
/// in CLI.md gives its command exists in the binary.
#[test]
fn the_binary_and_cli_md_name_the_same_commands_and_flags() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cli = std::fs::read_to_string(root.join("docs/CLI.md")).unwrap();
    let config = std::fs::read_to_string(root.join("docs/CONFIG.md")).unwrap();
    let mut known = std::collections::BTreeMap::new();
    let mut missing = Vec::new();
    for command in commands_in(&help_of(&[])) {
        let help = help_of(&[&command]);
        let mut flags = flags_in(&help);
        for sub in commands_in(&help) {
            flags.extend(flags_in(&help_of(&[&command, &sub])));
        }
        if !cli.contains(&format!("`{command}"))
            && !cli.contains(&format!("interlink-p2p {command}"))
        {
            missing.push(format!("command {command} is not in CLI.md"));
        }
        for flag in &flags {
            if !cli.contains(flag.as_str()) && !config.contains(flag.as_str()) {
                missing.push(format!(
                    "{command} {flag} is in neither CLI.md nor CONFIG.md"
                ));
            }
        }
        known.insert(command, flags);
    }
    assert!(known.len() >= 15, "{known:?}");
    // Synopses and examples: a code block's line that starts a command, and the
    // indented lines that continue it.
    let mut in_block = false;
    let mut current: Option<&std::collections::BTreeSet<String>> = None;
    for line in cli.lines() {
        if line.starts_with("```") {
            in_block = !in_block;
            current = None;
            continue;
        }
        if !in_block {
            continue;
        }
        if let Some(rest) = line.trim_start().strip_prefix("interlink-p2p ") {
            let word = rest.split_whitespace().next().unwrap_or_default();
            current = known.get(word);
            // An output line (`interlink-p2p node <fingerprint> …`, from `probe`) is not
            // a command; a synopsis or an example has flags or placeholders.
            if current.is_none() && (rest.contains(['[', '<']) || rest.contains(" --")) {
                missing.push(format!("CLI.md shows a command the binary lacks: {line}"));
            }
        } else if !line.starts_with(' ') {
            current = None;
        }
        if let Some(flags) = current {
            for flag in flags_written(line) {
                if !flags.contains(&flag) && flag != "--help" {
                    missing.push(format!(
                        "CLI.md gives a flag the binary lacks: {flag} in {line}"
                    ));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "help and CLI.md disagree:\n{}",
        missing.join("\n")
    );
}
