use super::*;

fn group(home: &Home, action: Action) -> anyhow::Result<String> {
    let mut out = Vec::new();
    run(home, action, &mut out, &mut Vec::new())?;
    Ok(String::from_utf8(out)?)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn create_add_remove_list_delete() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path());
    let key = |n: u8| {
        interlink_core::Identity::from_seed(&[n; 32])
            .public()
            .to_hex()
    };
    interlink_mcp::cli::peers::add(&home, "bob", &key(2)).unwrap();
    interlink_mcp::cli::peers::add(&home, "carol", &key(3)).unwrap();
    let create = Action::Create {
        name: "team".into(),
        members: strings(&["bob", "carol/c-1"]),
    };
    assert_eq!(
        group(&home, create).unwrap(),
        "created team: bob, carol/c-1\n"
    );
    let add = Action::Add {
        name: "team".into(),
        members: strings(&["carol/c-2"]),
    };
    assert_eq!(
        group(&home, add).unwrap(),
        "updated team: bob, carol/c-1, carol/c-2\n"
    );
    let stranger = Action::Add {
        name: "team".into(),
        members: vec![key(9)],
    };
    let e = format!("{:#}", group(&home, stranger).unwrap_err());
    assert!(e.contains("only peers"), "{e}");
    let remove = Action::Remove {
        name: "team".into(),
        members: strings(&["bob"]),
    };
    assert_eq!(
        group(&home, remove).unwrap(),
        "updated team: carol/c-1, carol/c-2\n"
    );
    assert_eq!(
        group(&home, Action::List { json: false }).unwrap(),
        "team: carol/c-1, carol/c-2\n"
    );
    let json: serde_json::Value =
        serde_json::from_str(&group(&home, Action::List { json: true }).unwrap()).unwrap();
    assert_eq!(
        json["groups"][0]["members"][0]["sessions"],
        serde_json::json!(["c-1", "c-2"])
    );
    assert_eq!(
        group(
            &home,
            Action::Delete {
                name: "team".into()
            }
        )
        .unwrap(),
        "deleted team\n"
    );
    assert_eq!(group(&home, Action::List { json: false }).unwrap(), "");
}
