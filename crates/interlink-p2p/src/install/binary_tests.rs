use super::*;

fn locations(home: &Path) -> Locations {
    Locations::from_env(|k| (k == "HOME").then(|| home.to_string_lossy().into_owned())).unwrap()
}

#[test]
fn build_and_npm_directories_are_transient_others_are_not() {
    let t = tempfile::tempdir().unwrap();
    let target = t.path().join("somewhere/target");
    std::fs::create_dir_all(target.join("release")).unwrap();
    std::fs::write(
        target.join("CACHEDIR.TAG"),
        "Signature: 8a477f597d28d172789f06886806bc55",
    )
    .unwrap();
    assert_eq!(
        transient_place(&target.join("release/interlink-p2p")),
        Some("a Cargo build directory")
    );
    assert_eq!(
        transient_place(Path::new(
            "/home/u/.npm/_npx/1a2b/node_modules/@interlink-p2p/linux-x64/bin/interlink-p2p"
        )),
        Some("an npm package directory")
    );
    // A target directory that existed before cargo's first build has no CACHEDIR.TAG;
    // its profile directory is still cargo's.
    let made_first = t.path().join("made-first/debug");
    std::fs::create_dir_all(made_first.join(".fingerprint")).unwrap();
    std::fs::write(made_first.join(".cargo-lock"), "").unwrap();
    assert_eq!(
        transient_place(&made_first.join("interlink-p2p")),
        Some("a Cargo build directory")
    );
    assert_eq!(transient_place(&t.path().join("bin/interlink-p2p")), None);
    assert_eq!(
        transient_place(Path::new("/usr/local/bin/interlink-p2p")),
        None
    );
}

#[test]
fn a_transient_binary_is_copied_once_and_removed_when_unused() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let target = t.path().join("target");
    std::fs::create_dir_all(target.join("debug")).unwrap();
    std::fs::write(target.join("CACHEDIR.TAG"), "x").unwrap();
    let exe = target.join("debug/interlink-p2p");
    std::fs::write(&exe, b"binary v1").unwrap();
    let l = locations(&home);
    let mut out = Vec::new();

    let dry = stable_command(&exe, &l, true, &mut out).unwrap();
    assert!(!Path::new(&dry).exists(), "a dry run copies nothing");
    let command = stable_command(&exe, &l, false, &mut out).unwrap();
    assert_eq!(
        Path::new(&command),
        home.join(".local/share/interlink-p2p/bin").join(EXE)
    );
    assert_eq!(std::fs::read(&command).unwrap(), b"binary v1");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&command).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
    }
    out.clear();
    stable_command(&exe, &l, false, &mut out).unwrap();
    assert!(String::from_utf8_lossy(&out).contains("unchanged"));
    std::fs::write(&exe, b"binary v2").unwrap();
    stable_command(&exe, &l, false, &mut out).unwrap();
    assert_eq!(
        std::fs::read(&command).unwrap(),
        b"binary v2",
        "a rebuild refreshes the copy"
    );

    let other_host = format!("[mcp_servers.interlink]\ncommand = \"{command}\"\n");
    remove_unused_copy(&l, &[other_host], false, &mut out).unwrap();
    assert!(Path::new(&command).exists(), "still run by another host");
    remove_unused_copy(&l, &["{}".to_owned()], false, &mut out).unwrap();
    assert!(!Path::new(&command).exists());
    assert!(
        !home.join(".local").exists(),
        "the directories made for it go too"
    );
    assert!(home.exists());
}
