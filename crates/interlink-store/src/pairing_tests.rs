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
        invite: None,
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
    let env = |k: &str| match k {
        "USER" => Some("j doe".to_owned()),
        "HOSTNAME" => Some("Jays-MacBook.local".to_owned()),
        _ => None,
    };
    assert_eq!(own_name(env), "j-doe-Jays-MacBook");
    let long = |k: &str| match k {
        "USER" => Some("a".repeat(20)),
        "HOSTNAME" => Some("b".repeat(20)),
        _ => None,
    };
    assert_eq!(own_name(long).len(), 32);
    // No USER: Windows' USERNAME, else the host name alone (never a bare `peer` on a
    // machine that has a name).
    let windows = |k: &str| match k {
        "USERNAME" => Some("jay".to_owned()),
        "HOSTNAME" => Some("DESKTOP-7".to_owned()),
        _ => None,
    };
    assert_eq!(own_name(windows), "jay-DESKTOP-7");
    assert_eq!(
        own_name(|k: &str| (k == "HOSTNAME").then(|| "build-box".to_owned())),
        "build-box"
    );
    assert_eq!(
        own_name(|k: &str| (k == crate::env::NAME).then(|| "laptop".to_owned())),
        "laptop"
    );
}

#[test]
fn a_knock_with_an_invite_of_ours_pairs_once_and_a_copy_goes_to_the_operator() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let (bob, eve) = (Identity::from_seed(&[2; 32]), Identity::from_seed(&[9; 32]));
    let (secret, _) = crate::invites::issue(
        &home,
        &SessionId::new("inv-1").unwrap(),
        60_000,
        1000,
        &mut rand_core::UnwrapErr(getrandom::SysRng),
    )
    .unwrap();
    let hex = interlink_core::identity::hex_encode(&secret);
    // No invite, or one that is not ours: for the operator.
    assert_eq!(
        auto_admit(&home, &knock(&bob, 1, 10, Some("bob")), 2000).unwrap(),
        None
    );
    let mut forged = knock(&bob, 2, 11, Some("bob"));
    forged.invite = Some("ab".repeat(16));
    assert_eq!(auto_admit(&home, &forged, 2000).unwrap(), None);
    let mut joins = knock(&bob, 3, 12, Some("bob"));
    joins.invite = Some(hex.clone());
    let (accepted, why) = auto_admit(&home, &joins, 2000).unwrap().unwrap();
    assert!(matches!(why, AutoAdmit::Invite(_)));
    assert_eq!(accepted.petname, "bob");
    assert_eq!(policy::load(&home).unwrap().get("bob"), Some(&bob.public()));
    // The same knock again is decided; another identity with the used secret is not
    // admitted (a leaked code admits one key once).
    assert_eq!(auto_admit(&home, &joins, 2000).unwrap(), None);
    let mut late = knock(&eve, 4, 13, Some("eve"));
    late.invite = Some(hex);
    assert_eq!(auto_admit(&home, &late, 2000).unwrap(), None);
    assert!(!policy::load(&home).unwrap().contains(&eve.public()));
}

#[test]
fn mutual_knocks_pair_and_stale_requests_clear_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let (bob, carol) = (Identity::from_seed(&[2; 32]), Identity::from_seed(&[3; 32]));
    record_outgoing(&home, &bob.public(), &via(), Some("bobby".into()), 5).unwrap();
    let (accepted, why) = auto_admit(&home, &knock(&bob, 1, 10, Some("bob")), 20)
        .unwrap()
        .unwrap();
    assert!(matches!(why, AutoAdmit::Mutual(_)));
    assert_eq!(accepted.petname, "bobby", "the name this user chose wins");
    assert!(load(&home).unwrap().outgoing.is_empty());

    // A request from someone who became a peer another way, and a week-old one, go.
    assert!(record_knock(&home, &knock(&carol, 2, 30, Some("carol")), &via()).unwrap());
    record_outgoing(&home, &carol.public(), &via(), None, 30).unwrap();
    let policy = policy::load(&home).unwrap();
    prune(&home, &policy, 40).unwrap();
    assert_eq!(load(&home).unwrap().incoming.len(), 1);
    prune(&home, &policy, 30 + REQUEST_LIFETIME_MS + 1).unwrap();
    let state = load(&home).unwrap();
    assert!(state.incoming.is_empty() && state.outgoing.is_empty());
}
