use super::*;

fn key(seed: u8) -> String {
    interlink_core::Identity::from_seed(&[seed; 32])
        .public()
        .to_hex()
}

fn peer(home: &Home, action: Action) -> anyhow::Result<String> {
    let mut out = Vec::new();
    run(home, action, &mut out, &mut Vec::new())?;
    Ok(String::from_utf8(out)?)
}

fn add(name: &str, key: &str) -> Action {
    Action::Add {
        name: name.into(),
        key: key.into(),
    }
}

use interlink_core::IdentityKey;

#[test]
fn add_list_remove_and_their_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path());
    let h = &home;
    let (key_a, other) = (key(1), key(2));
    let fp = key_a.parse::<IdentityKey>().unwrap().fingerprint();
    assert_eq!(
        peer(h, add("alice", &key_a)).unwrap(),
        format!("added alice {fp}\n")
    );
    assert_eq!(
        peer(h, add("alice", &key_a)).unwrap(),
        format!("already a peer: alice {fp}\n")
    );
    let err = |a| format!("{:#}", peer(h, a).unwrap_err());
    let e = err(add("bob", &key_a));
    assert!(e.contains("already a peer, named \"alice\""), "{e}");
    let e = err(add("alice", &other));
    assert!(e.contains("already used"), "{e}");
    let e = err(add("bad name", &other));
    assert!(e.contains("invalid petname"), "{e}");
    let e = err(add("carol", "abcd"));
    assert!(e.contains("64 hex digits"), "{e}");
    let e = err(Action::Remove { name: "zed".into() });
    assert!(e.contains("no peer is named \"zed\""), "{e}");

    let listed = peer(h, Action::List { json: false }).unwrap();
    assert!(
        listed.contains("alice") && listed.contains(&key_a),
        "{listed}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&peer(h, Action::List { json: true }).unwrap()).unwrap();
    assert_eq!(json["peers"][0]["identity_key"], key_a.as_str());
    assert_eq!(
        peer(
            h,
            Action::Remove {
                name: "alice".into()
            }
        )
        .unwrap(),
        format!("removed alice {fp}\n")
    );
    assert_eq!(peer(h, Action::List { json: false }).unwrap(), "");
}

#[test]
fn own_key_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path());
    let (me, _) = crate::load_identity(&home).unwrap();
    let e = format!(
        "{:#}",
        peer(&home, add("me", &me.public().to_hex())).unwrap_err()
    );
    assert!(e.contains("own identity"), "{e}");
}
