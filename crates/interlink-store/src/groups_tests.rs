use std::fs;

use interlink_core::Identity;

use super::*;

fn key(n: u8) -> IdentityKey {
    Identity::from_seed(&[n; 32]).public()
}

/// A home whose peers are `bob` (2), `carol` (3) and `dave` (4), plus `peerN` for
/// every `n` in `more`.
fn home_with_peers(more: std::ops::Range<u8>) -> (tempfile::TempDir, Home) {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    policy::edit::<_, Box<dyn std::error::Error>>(&home, |p| {
        p.add("bob", key(2))?;
        p.add("carol", key(3))?;
        p.add("dave", key(4))?;
        for n in more {
            p.add(format!("peer{n}"), key(n))?;
        }
        Ok(())
    })
    .unwrap();
    (dir, home)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

fn sessions(m: &Member) -> Vec<&str> {
    m.sessions.iter().map(SessionId::as_str).collect()
}

#[test]
fn create_list_update_delete() {
    let (_dir, home) = home_with_peers(0..0);
    assert!(load(&home).unwrap().is_empty(), "no file: no groups");
    let fp = key(3).fingerprint().to_string();
    let g = create(&home, "team", &strings(&["bob", &format!("{fp}/c-1")])).unwrap();
    assert_eq!(g.members.len(), 2);
    assert_eq!(
        (g.members[0].key, sessions(&g.members[0])),
        (key(2), vec![])
    );
    assert_eq!(
        (g.members[1].key, sessions(&g.members[1])),
        (key(3), vec!["c-1"])
    );
    assert_eq!(g.size(), 2);

    // Narrow carol further, add dave; re-adding bob as he is changes nothing.
    let g = update(&home, "team", &strings(&["carol/c-2", "dave", "bob"]), &[]).unwrap();
    assert_eq!(sessions(&g.members[1]), ["c-1", "c-2"]);
    assert_eq!(g.size(), 4);
    // Taking carol's sessions one by one: she goes with the last.
    let g = update(&home, "team", &[], &strings(&["carol/c-1"])).unwrap();
    assert_eq!(sessions(&g.members[1]), ["c-2"]);
    let g = update(&home, "team", &[], &strings(&["carol/c-2", "dave"])).unwrap();
    assert_eq!(
        g.members.iter().map(|m| m.key).collect::<Vec<_>>(),
        [key(2)]
    );

    // What was written is what is read, by every reader.
    let groups = load(&home).unwrap();
    assert_eq!(groups.get("team"), Some(&g));
    let policy = policy::load(&home).unwrap();
    assert_eq!(group_line(&policy, &g), "team: bob");

    assert_eq!(delete(&home, "team").unwrap().name, "team");
    assert!(load(&home).unwrap().is_empty());
    assert!(matches!(
        delete(&home, "team"),
        Err(EditError::NoSuchGroup(_))
    ));
}

#[test]
fn edits_are_refused_with_reasons_and_change_nothing() {
    let (_dir, home) = home_with_peers(0..0);
    create(&home, "team", &strings(&["bob", "carol/c-1"])).unwrap();
    let before = std::fs::read(home.groups()).unwrap();
    let err = |r: Result<Group, EditError>| r.unwrap_err().to_string();

    // Only peers: a stranger's key, a name nobody has.
    let stranger = key(9).to_hex();
    let e = err(update(&home, "team", std::slice::from_ref(&stranger), &[]));
    assert!(e.contains("only peers"), "{e}");
    let e = err(create(&home, "other", &strings(&["zed"])));
    assert!(e.contains("nothing matches \"zed\""), "{e}");
    // Names like petnames; no duplicate groups; no empty group.
    for bad in ["", "with space", "x/y", &"n".repeat(33)] {
        let e = err(create(&home, bad, &strings(&["bob"])));
        assert!(e.contains("invalid group name"), "{bad:?}: {e}");
    }
    let e = err(create(&home, "team", &strings(&["dave"])));
    assert!(e.contains("exists already"), "{e}");
    let e = err(create(&home, "none", &[]));
    assert!(e.contains("no members"), "{e}");
    let e = err(update(&home, "team", &[], &strings(&["bob", "carol"])));
    assert!(e.contains("no members"), "{e}");
    // Routed and narrowed do not turn into each other silently.
    let e = err(update(&home, "team", &strings(&["bob/b-1"]), &[]));
    assert!(e.contains("remove bob first"), "{e}");
    let e = err(update(&home, "team", &strings(&["carol"]), &[]));
    assert!(e.contains("remove carol first"), "{e}");
    // Removing what is not there, an unknown group, a bad session id.
    let e = err(update(&home, "team", &[], &strings(&["dave"])));
    assert!(e.contains("not in group"), "{e}");
    let e = err(update(&home, "team", &[], &strings(&["carol/c-9"])));
    assert!(e.contains("not in group"), "{e}");
    let e = err(update(&home, "nope", &strings(&["dave"]), &[]));
    assert!(e.contains("no group is named"), "{e}");
    let e = err(update(&home, "team", &strings(&["dave/bad id"]), &[]));
    assert!(e.contains("session \"bad id\""), "{e}");

    assert_eq!(std::fs::read(home.groups()).unwrap(), before, "unchanged");
}

#[test]
fn bounds_are_named_and_held() {
    // Enough peers to overfill a group.
    let (_dir, home) = home_with_peers(10..50);
    let many: Vec<String> = (10..10 + MAX_GROUP_RECIPIENTS as u8)
        .map(|n| format!("peer{n}"))
        .collect();
    create(&home, "full", &many).unwrap();
    let e = update(&home, "full", &strings(&["bob"]), &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("at most {MAX_GROUP_RECIPIENTS}")),
        "{e}"
    );
    // Narrowed sessions count: one member at most MAX_MEMBER_SESSIONS.
    let narrowed: Vec<String> = (0..=MAX_MEMBER_SESSIONS)
        .map(|i| format!("bob/b-{i}"))
        .collect();
    let e = create(&home, "wide", &narrowed).unwrap_err().to_string();
    assert!(e.contains("narrowed to"), "{e}");
    // At most MAX_GROUPS groups.
    for i in 1..MAX_GROUPS {
        create(&home, &format!("g{i}"), &strings(&["bob"])).unwrap();
    }
    assert_eq!(load(&home).unwrap().len(), MAX_GROUPS);
    let e = create(&home, "one-more", &strings(&["bob"]))
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("{MAX_GROUPS} groups")), "{e}");
}

#[test]
fn the_file_is_private_atomic_and_validated_when_read() {
    let (_dir, home) = home_with_peers(0..0);
    create(&home, "team", &strings(&["bob/b-1", "carol"])).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&home.groups()), 0o600);
        assert_eq!(mode(&home.groups_lock()), 0o600);
    }
    // Written whole through a temporary file that is gone afterwards.
    let names: Vec<String> = fs::read_dir(home.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    let text = fs::read_to_string(home.groups()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(
        v["groups"]["team"]["members"][0],
        serde_json::json!({"identity_key": key(2).to_hex(), "sessions": ["b-1"]})
    );
    assert_eq!(
        v["groups"]["team"]["members"][1],
        serde_json::json!({"identity_key": key(3).to_hex()})
    );

    // A file edited by hand is held to the same rules when read.
    let write = |json: serde_json::Value| fs::write(home.groups(), json.to_string()).unwrap();
    let member = |n: u8| serde_json::json!({"identity_key": key(n).to_hex()});
    for bad in [
        serde_json::json!({"version": 2, "groups": {}}),
        serde_json::json!({"version": 1, "groups": {"bad name": {"members": [member(2)]}}}),
        serde_json::json!({"version": 1, "groups": {"g": {"members": []}}}),
        serde_json::json!({"version": 1, "groups": {"g": {"members": [member(2), member(2)]}}}),
        serde_json::json!({"version": 1, "groups": {"g": {"members": [{"identity_key": "abcd"}]}}}),
        serde_json::json!({"version": 1, "groups": {"g": {"members": [member(2)], "extra": 1}}}),
    ] {
        write(bad.clone());
        let e = load(&home).unwrap_err().to_string();
        assert!(e.contains("not a valid groups file"), "{bad}: {e}");
    }
    // A member that is not a peer (any more) is kept; it is skipped when sending.
    write(serde_json::json!({"version": 1, "groups": {"g": {"members": [member(9)]}}}));
    let groups = load(&home).unwrap();
    let g = groups.get("g").unwrap();
    let policy = policy::load(&home).unwrap();
    assert!(member_label(&policy, &g.members[0]).contains("not a peer any more"));
    // …and can be removed by its fingerprint.
    create(&home, "g2", &strings(&["bob"])).unwrap();
    let fp = key(9).fingerprint().to_string();
    let e = update(&home, "g", &[], std::slice::from_ref(&fp))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no members"), "the last member: {e}");
    update(&home, "g", &strings(&["dave"]), &[fp]).unwrap();
}

#[test]
fn concurrent_editors_lose_nothing() {
    let (_dir, home) = home_with_peers(0..0);
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let home = home.clone();
            std::thread::spawn(move || {
                create(&home, &format!("g{i}"), &strings(&["bob"])).unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(load(&home).unwrap().len(), 8);
}

#[test]
fn member_texts() {
    let spec: MemberSpec = " bob / b-1 ".parse().unwrap();
    assert_eq!(
        (
            spec.peer.as_str(),
            spec.session.as_ref().map(SessionId::as_str)
        ),
        ("bob", Some("b-1"))
    );
    assert!("/b-1".parse::<MemberSpec>().is_err());
    assert!("bob/".parse::<MemberSpec>().is_err());
}
