use super::*;

#[test]
fn a_session_that_kept_nothing_is_removed_one_with_mail_is_kept() {
    let home = tempfile::tempdir().unwrap();
    let home = Home::new(home.path());
    let id = SessionId::new("health-check").unwrap();
    let dir = home.session(&id).unwrap();
    std::fs::create_dir_all(dir.path()).unwrap();
    let lock = dir.claim("mcp", 1).unwrap();
    std::fs::write(dir.path().join(INBOX_FILE), "").unwrap();
    std::fs::write(dir.client(), "{}").unwrap();
    std::fs::write(dir.path().join(NETWORK_FILE), "{}").unwrap();
    drop(crate::outbox::Outbox::open(dir.path()).unwrap());
    assert!(dir.remove_if_unused().unwrap());
    assert!(!dir.path().exists());
    drop(lock);

    std::fs::create_dir_all(dir.path()).unwrap();
    std::fs::write(dir.path().join(INBOX_FILE), "{\"a message\": 1}\n").unwrap();
    assert!(
        !dir.remove_if_unused().unwrap(),
        "an inbox with mail is kept"
    );
    std::fs::write(dir.path().join(INBOX_FILE), "").unwrap();
    std::fs::write(dir.path().join(SENT_FILE), "[]").unwrap();
    assert!(!dir.remove_if_unused().unwrap(), "any other state is kept");
    assert!(dir.path().join(INBOX_FILE).exists());
}

#[test]
fn resolution_order() {
    let env = |k: &str| match k {
        "INTERLINK_HOME" => Some("/a".to_string()),
        "XDG_CONFIG_HOME" => Some("/x".to_string()),
        "HOME" => Some("/h".to_string()),
        _ => None,
    };
    assert_eq!(
        resolve_home(Some("/f".into()), env),
        Some(PathBuf::from("/f"))
    );
    assert_eq!(resolve_home(None, env), Some(PathBuf::from("/a")));
    assert_eq!(Home::resolve(None, env), Some(Home::new("/a")));
    let env = |k: &str| (k == "HOME").then(|| "/h".to_string());
    assert_eq!(
        resolve_home(None, env),
        Some(PathBuf::from("/h/.config/interlink-p2p"))
    );
    assert_eq!(resolve_home(None, |_| None), None);
    assert_eq!(Home::resolve(None, |_| None), None);
}

#[test]
fn a_colon_never_reaches_a_windows_file_name() {
    assert_eq!(dir_name_on(true, "claude:1-2"), "claude+1-2");
    assert_eq!(id_of_dir_name_on(true, "claude+1-2"), "claude:1-2");
    assert_eq!(dir_name_on(false, "claude:1-2"), "claude:1-2");
    assert_eq!(id_of_dir_name_on(false, "a+b"), "a+b");
}

#[test]
fn windows_keeps_the_home_under_appdata() {
    let env = |k: &str| match k {
        "APPDATA" => Some(r"C:\Users\u\AppData\Roaming".to_string()),
        "HOME" => Some("/h".to_string()),
        _ => None,
    };
    assert_eq!(
        resolve_home_on(true, None, env),
        Some(Path::new(r"C:\Users\u\AppData\Roaming").join("interlink-p2p"))
    );
    assert_eq!(
        resolve_home_on(false, None, env),
        Some(PathBuf::from("/h/.config/interlink-p2p"))
    );
    let profile = |k: &str| (k == "USERPROFILE").then(|| r"C:\Users\u".to_string());
    assert_eq!(
        resolve_home_on(true, None, profile),
        Some(
            Path::new(r"C:\Users\u")
                .join("AppData")
                .join("Roaming")
                .join("interlink-p2p")
        )
    );
    // The variable still wins on Windows.
    let env = |k: &str| (k == "INTERLINK_HOME").then(|| "/a".to_string());
    assert_eq!(resolve_home_on(true, None, env), Some(PathBuf::from("/a")));
}

#[test]
fn home_files() {
    let home = Home::new("/h");
    assert_eq!(home.path(), Path::new("/h"));
    assert_eq!(home.identity(), PathBuf::from("/h/identity.key"));
    assert_eq!(home.peers(), PathBuf::from("/h/peers.json"));
    assert_eq!(home.peers_lock(), PathBuf::from("/h/peers.json.lock"));
    assert_eq!(home.pairing(), PathBuf::from("/h/pairing.json"));
    assert_eq!(home.pairing_lock(), PathBuf::from("/h/pairing.json.lock"));
    assert_eq!(home.pins(), PathBuf::from("/h/sealing_keys.json"));
    assert_eq!(home.sessions(), PathBuf::from("/h/sessions"));
}

#[test]
fn session_dirs() {
    let id = |s: &str| SessionId::new(s).unwrap();
    let home = Home::new("/h");
    let name = if cfg!(windows) { "a+b" } else { "a:b" };
    assert_eq!(
        home.session(&id("a:b")).unwrap().path(),
        Path::new("/h/sessions").join(name)
    );
    assert_eq!(session_of_dir_name(name), Some(id("a:b")));
    assert_eq!(session_of_dir_name("bad/name"), None);
    for refused in ["..", "."] {
        let err = home.session(&id(refused)).unwrap_err();
        assert_eq!(err.0, refused);
    }
    // Names that merely contain dots are ordinary file names.
    assert_eq!(
        home.session(&id("..a")).unwrap().path(),
        Path::new("/h/sessions/..a")
    );
}

#[test]
fn session_files() {
    let dir = Home::new("/h")
        .session(&SessionId::new("s").unwrap())
        .unwrap();
    let file = |f: &str| PathBuf::from(format!("/h/sessions/s/{f}"));
    assert_eq!(dir.inbox(), file("inbox.jsonl"));
    assert_eq!(dir.read_state(), file("read.json"));
    assert_eq!(dir.sent_log(), file("sent.json"));
    assert_eq!(dir.client(), file("client.json"));
    assert_eq!(dir.codex_failures(), file("codex_failed.json"));
    assert_eq!(dir.codex_position(), file("codex.json"));
    assert_eq!(dir.follow_position(), file("follow.json"));
    assert_eq!(dir.wait_lock(), file("wait.lock"));
    assert_eq!(dir.woken(), file("woken.json"));
    assert_eq!(
        SessionDir::at("/d").inbox(),
        PathBuf::from("/d/inbox.jsonl")
    );
}

#[test]
fn a_claimed_session_cannot_be_claimed_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Home::new(tmp.path())
        .session(&SessionId::new("s").unwrap())
        .unwrap();
    let held = dir.claim("run", 1).unwrap();
    assert!(dir.path().is_dir(), "claiming creates the directory");
    let err = dir.claim("mcp", 1).unwrap_err().to_string();
    assert!(err.contains("run"), "the refusal names the holder: {err}");
    drop(held);
    assert!(dir.claim("mcp", 1).is_ok());
}
