use super::*;

#[test]
fn only_the_user_system_and_administrators_may_hold_access() {
    let me = "S-1-5-21-1-2-3-1001";
    let ours = format!("D:P(A;;FA;;;{me})(A;;FA;;;SY)");
    assert_eq!(others_in_sddl(&ours, me), None);
    assert_eq!(
        others_in_sddl(
            &format!("D:AI(A;ID;FA;;;{me})(A;ID;FA;;;BA)(A;ID;0x1200a9;;;BU)"),
            me
        ),
        Some("BU".to_owned())
    );
    // Denials take nothing away from the owner's privacy.
    assert_eq!(
        others_in_sddl(&format!("D:(D;;FA;;;WD)(A;;FA;;;{me})"), me),
        None
    );
    assert_eq!(
        others_in_sddl("D:NO_ACCESS_CONTROL", me).as_deref(),
        Some("everyone (no access list)")
    );
    assert_eq!(
        others_in_sddl(&format!("D:(A;;FA;;;{me})(A;;FR;;;WD)(A;;FR;;;AU)"), me),
        Some("WD, AU".to_owned())
    );
}

#[cfg(windows)]
#[test]
fn a_restricted_file_lets_no_one_else_in() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secret");
    std::fs::write(&file, "x").unwrap();
    restrict(&file, false).unwrap();
    assert_eq!(others_with_access(&file).unwrap(), None);
    let sub = dir.path().join("private");
    std::fs::create_dir(&sub).unwrap();
    restrict(&sub, true).unwrap();
    assert_eq!(others_with_access(&sub).unwrap(), None);
}
