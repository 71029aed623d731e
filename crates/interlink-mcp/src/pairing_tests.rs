use interlink_core::Identity;

use super::*;

fn knock(from: &Identity, id: u8, ts: u64, name: Option<&str>) -> HeldKnock {
    let key = from.public();
    HeldKnock {
        sender: key.to_hex(),
        sender_fingerprint: key.fingerprint().to_string(),
        sender_session: format!("s{id}"),
        name: name.map(str::to_owned),
        msg_id: format!("{id:032x}"),
        ts,
    }
}

fn via() -> SessionId {
    SessionId::new("here").unwrap()
}

#[test]
fn knocks_wait_then_accept_pins_and_forgets() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let (carol, dave) = (Identity::from_seed(&[3; 32]), Identity::from_seed(&[4; 32]));
    assert!(record_knock(&home, &knock(&carol, 1, 10, Some("carol")), &via()).unwrap());
    // The same knock again (a replayed inbox line) is not recorded twice.
    assert!(!record_knock(&home, &knock(&carol, 1, 10, Some("carol")), &via()).unwrap());
    // A newer knock from the same identity replaces the older one.
    assert!(record_knock(&home, &knock(&carol, 2, 20, Some("carol")), &via()).unwrap());
    assert!(record_knock(&home, &knock(&dave, 3, 30, Some("bad name!")), &via()).unwrap());
    let state = load(&home).unwrap();
    assert_eq!(state.incoming.len(), 2);
    assert_eq!(state.incoming[0].session, "s2");
    assert_eq!(state.incoming[1].name, None);

    let fp = carol.public().fingerprint().to_string();
    let accepted = accept(&home, &fp).unwrap();
    assert_eq!(accepted.petname, "carol");
    assert_eq!(accepted.request.session, "s2");
    assert_eq!(
        policy::load(&home).unwrap().get("carol"),
        Some(&carol.public())
    );
    // Decided: the old line does not come back.
    assert!(!record_knock(&home, &knock(&carol, 2, 20, Some("carol")), &via()).unwrap());
    assert!(matches!(
        accept(&home, &fp),
        Err(PairingError::NoRequest(_))
    ));
    // Dave's derived name; then rejecting.
    let dfp = dave.public().fingerprint().to_string().replace('-', "");
    let r = reject(&home, &dfp[..6]).unwrap();
    assert_eq!(r.identity_key, dave.public().to_hex());
    assert!(load(&home).unwrap().incoming.is_empty());
}

#[test]
fn outgoing_requests_are_taken_once() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let bob = Identity::from_seed(&[2; 32]).public();
    record_outgoing(&home, &bob, &via(), Some("bobby".into()), 5).unwrap();
    let taken = take_outgoing(&home, &bob).unwrap().unwrap();
    assert_eq!(taken.petname.as_deref(), Some("bobby"));
    assert!(take_outgoing(&home, &bob).unwrap().is_none());
}

#[test]
fn names() {
    let key = Identity::from_seed(&[5; 32]).public();
    let mut policy = PeerPolicy::new();
    assert_eq!(free_name(&policy, Some("erin"), &key), "erin");
    policy
        .add("erin", Identity::from_seed(&[6; 32]).public())
        .unwrap();
    let derived = free_name(&policy, Some("erin"), &key);
    assert!(
        derived.starts_with("erin-") && is_valid_name(&derived),
        "{derived}"
    );
    assert!(free_name(&policy, None, &key).starts_with("peer-"));
    let env = |k: &str| (k == "USER").then(|| "j doe".to_owned());
    assert_eq!(own_name(env), "j-doe");
    assert_eq!(own_name(|_| None), "peer");
    assert_eq!(
        own_name(|k: &str| (k == ENV_NAME).then(|| "laptop".to_owned())),
        "laptop"
    );
}
