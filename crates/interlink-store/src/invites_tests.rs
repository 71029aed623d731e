use super::*;

#[test]
fn an_invite_is_redeemed_once_and_never_after_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let mut rng = rand_core::UnwrapErr(getrandom::SysRng);
    let s = SessionId::new("inv-1").unwrap();
    let (secret, expires) = issue(&home, &s, 1000, 5000, &mut rng).unwrap();
    assert_eq!(expires, 6000);
    let hex = hex_encode(&secret);
    assert_eq!(redeem(&home, &"0".repeat(32), 5500).unwrap(), None);
    assert_eq!(redeem(&home, &hex, 5500).unwrap().unwrap().session, "inv-1");
    assert_eq!(redeem(&home, &hex, 5500).unwrap(), None, "used");
    let (late, _) = issue(&home, &s, 1000, 5000, &mut rng).unwrap();
    assert_eq!(
        redeem(&home, &hex_encode(&late), 6000).unwrap(),
        None,
        "expired"
    );
    assert!(list(&home, 6000).unwrap().is_empty());
}

#[test]
fn the_file_is_bounded_and_revocable() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let mut rng = rand_core::UnwrapErr(getrandom::SysRng);
    let a = SessionId::new("inv-a").unwrap();
    let b = SessionId::new("inv-b").unwrap();
    let (first, _) = issue(&home, &a, DEFAULT_TTL_MS, 0, &mut rng).unwrap();
    for _ in 0..MAX_INVITES {
        issue(&home, &b, DEFAULT_TTL_MS, 0, &mut rng).unwrap();
    }
    assert_eq!(list(&home, 1).unwrap().len(), MAX_INVITES);
    assert_eq!(
        redeem(&home, &hex_encode(&first), 1).unwrap(),
        None,
        "dropped"
    );
    assert_eq!(revoke(&home, &b, 1).unwrap(), MAX_INVITES);
    assert!(list(&home, 1).unwrap().is_empty());
    let (long, expires) = issue(&home, &a, u64::MAX, 0, &mut rng).unwrap();
    assert_eq!(expires, MAX_TTL_MS);
    assert!(redeem(&home, &hex_encode(&long), 1).unwrap().is_some());
}
