//! The `interlink-p2p` binary as a user runs it.

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
