use super::*;

fn parse(text: &str) -> Result<Settings, SettingsError> {
    Settings::parse(text, Path::new("/h/config.toml"))
}

#[test]
fn keys_become_the_variables_they_stand_for() {
    let s = parse(
        "network = \"team\"\nbootstrap = [\"/ip4/1.2.3.4/tcp/1\", \"/ip4/5.6.7.8/tcp/2\"]\n\
             relay = \"/ip4/9.9.9.9/tcp/3/p2p/x\"\nmdns = false\nname = \"alice\"\n\
             tailnet = false\nport = 0\n",
    )
    .unwrap();
    assert_eq!(s.get(env::TAILNET), Some("0"));
    assert_eq!(s.get(env::NETWORK), Some("team"));
    assert_eq!(
        s.get(env::BOOTSTRAP),
        Some("/ip4/1.2.3.4/tcp/1,/ip4/5.6.7.8/tcp/2")
    );
    assert_eq!(
        s.get(crate::config::ENV_RELAY),
        Some("/ip4/9.9.9.9/tcp/3/p2p/x")
    );
    assert_eq!(s.get(env::MDNS), Some("0"));
    assert_eq!(s.get(env::NAME), Some("alice"));
    assert_eq!(s.get(env::PORT), Some("0"));
    assert_eq!(s.get(env::LISTEN), None);
}

#[test]
fn the_environment_overrides_the_file_and_an_empty_variable_does_not() {
    let s = parse("network = \"team\"\nname = \"alice\"\n").unwrap();
    let env = |k: &str| match k {
        "INTERLINK_NETWORK" => Some("other".to_owned()),
        "INTERLINK_NAME" => Some(" ".to_owned()),
        _ => None,
    };
    let lookup = s.layered(env);
    assert_eq!(lookup(env::NETWORK).as_deref(), Some("other"));
    assert_eq!(lookup(env::NAME).as_deref(), Some("alice"));
    assert_eq!(lookup(crate::config::ENV_RELAY), None);
}

#[test]
fn bad_files_are_refused_with_the_key_and_the_reason() {
    let e = parse("netwrk = \"team\"\n").unwrap_err().to_string();
    assert!(
        e.contains("netwrk: unknown key") && e.contains("network"),
        "{e}"
    );
    let e = parse("port = 70000\n").unwrap_err().to_string();
    assert!(e.contains("port: expected a port number"), "{e}");
    let e = parse("port = \"7385\"\n").unwrap_err().to_string();
    assert!(e.contains("port: expected a port number"), "{e}");
    let e = parse("mdns = \"no\"\n").unwrap_err().to_string();
    assert!(e.contains("mdns: expected true or false"), "{e}");
    let e = parse("bootstrap = [1]\n").unwrap_err().to_string();
    assert!(e.contains("bootstrap: expected an array of strings"), "{e}");
    let e = parse("network = \n").unwrap_err().to_string();
    assert!(e.contains("/h/config.toml is not valid TOML"), "{e}");
    let e = parse("[relay]\nx = 1\n").unwrap_err().to_string();
    assert!(e.contains("relay: expected a value"), "{e}");
}

#[test]
fn write_keeps_comments_and_other_keys_and_reports_changes() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join(SETTINGS_FILE);
    std::fs::write(&path, "# mine\nname = \"alice\"\n").unwrap();
    let relay = toml_edit::value(toml_edit::Array::from_iter(["/ip4/1.2.3.4/tcp/1/p2p/x"]));
    let notes = write(home.path(), &[("relay", Some(relay.clone()))], false).unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("# mine\nname = \"alice\"\n"), "{text}");
    assert_eq!(
        Settings::load(home.path())
            .unwrap()
            .get(crate::config::ENV_RELAY),
        Some("/ip4/1.2.3.4/tcp/1/p2p/x")
    );
    assert!(
        write(home.path(), &[("relay", Some(relay))], false)
            .unwrap()
            .is_empty()
    );
    std::fs::write(&path, "bogus = 1\n").unwrap();
    assert!(
        write(home.path(), &[("mdns", None)], false).is_err(),
        "a bad file is not rewritten"
    );
}
