use super::*;

const KEY_A: &str = "d04ab232742bb4ab3a1368bd4615e4e6d0224ab71a016baf8520a332c9778737";

#[test]
fn missing_is_empty_and_malformed_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    assert!(load(&home).unwrap().is_empty());
    fs::write(path(&home), "{not json").unwrap();
    let err = load(&home).unwrap_err().to_string();
    assert!(
        err.contains("peers.json") && err.contains("not a valid"),
        "{err}"
    );
}

/// The kept copy is taken only while the file is the one read: an edit, a write
/// in place, a broken file and a removed one are each seen at the next load.
#[test]
fn every_change_of_the_file_is_seen_at_the_next_load() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    edit::<_, Box<dyn std::error::Error>>(&home, |p| Ok(p.add("alice", KEY_A.parse()?)?)).unwrap();
    assert!(load(&home).unwrap().get("alice").is_some());
    assert!(load(&home).unwrap().get("alice").is_some(), "kept");
    edit::<_, Box<dyn std::error::Error>>(&home, |p| Ok(p.rename("alice", "al")?)).unwrap();
    let again = load(&home).unwrap();
    assert!(again.get("alice").is_none() && again.get("al").is_some());
    let text = fs::read_to_string(path(&home))
        .unwrap()
        .replace("\"al\"", "\"bob\"");
    fs::write(path(&home), text).unwrap();
    assert!(
        load(&home).unwrap().get("bob").is_some(),
        "written in place"
    );
    fs::write(path(&home), "{not json").unwrap();
    assert!(
        load(&home).is_err(),
        "a broken file is an error, not the kept copy"
    );
    fs::remove_file(path(&home)).unwrap();
    assert!(load(&home).unwrap().is_empty());
}

#[test]
fn edits_are_private_and_seen_by_the_watcher() {
    let parent = tempfile::tempdir().unwrap();
    let home = Home::new(parent.path().join("home"));
    let mut watcher = Watcher::new(&home);
    assert!(watcher.poll().is_none());
    edit::<_, Box<dyn std::error::Error>>(&home, |p| Ok(p.add("alice", KEY_A.parse()?)?)).unwrap();
    let seen = watcher.poll().unwrap().unwrap();
    assert_eq!(seen.get("alice").map(|k| k.to_hex()), Some(KEY_A.into()));
    assert!(watcher.poll().is_none());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path(&home)), 0o600);
        assert_eq!(mode(home.path()), 0o700);
    }
    // A failed change writes nothing.
    let err = edit::<(), Box<dyn std::error::Error>>(&home, |p| {
        p.remove("alice");
        Err("changed my mind".into())
    });
    assert!(err.is_err());
    assert_eq!(load(&home).unwrap().len(), 1);
    assert!(watcher.poll().is_none());
    // No temporary files are left behind.
    let names: Vec<_> = fs::read_dir(home.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
}

#[test]
fn concurrent_editors_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let home = home.clone();
            std::thread::spawn(move || {
                let key = format!("{i:02x}{}", &KEY_A[2..]).parse().unwrap();
                edit::<_, Box<dyn std::error::Error>>(&home, |p| {
                    Ok(p.add(format!("peer{i}"), key)?)
                })
                .unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(load(&home).unwrap().len(), 8);
}
