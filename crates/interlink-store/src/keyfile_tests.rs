use super::*;
#[cfg(any(unix, windows))]
use rand_chacha::{ChaCha20Rng, rand_core::SeedableRng};
#[cfg(unix)]
use std::os::unix::fs::PermissionsExt;

#[cfg(unix)]
#[test]
fn create_then_load_same_identity_with_0600() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub").join("identity.key");
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let (a, created) = load_or_create(&path, &mut rng).unwrap();
    assert!(created);
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let (b, created) = load_or_create(&path, &mut rng).unwrap();
    assert!(!created);
    assert_eq!(a.public(), b.public());
}

#[cfg(unix)]
#[test]
fn store_never_overwrites_unless_told_and_writes_0600() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("home").join("identity.key");
    let a = Identity::from_seed(&[1; 32]);
    let b = Identity::from_seed(&[2; 32]);
    store(&path, &a, false).unwrap();
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let refused = store(&path, &b, false).unwrap_err();
    assert!(
        matches!(&refused, KeyFileError::Io { source, .. } if source.kind() == io::ErrorKind::AlreadyExists),
        "{refused}"
    );
    assert_eq!(load(&path).unwrap().public(), a.public());
    store(&path, &b, true).unwrap();
    assert_eq!(load(&path).unwrap().public(), b.public());
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // No temporary file is left behind.
    assert_eq!(fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);
}

#[cfg(unix)]
#[test]
fn refuses_group_readable_key_with_fix() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("identity.key");
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    load_or_create(&path, &mut rng).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    let err = load(&path).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(
        err,
        KeyFileError::InsecurePermissions { mode: 0o644, .. }
    ));
    assert!(msg.contains("chmod 600"), "{msg}");
}

#[cfg(windows)]
#[test]
fn a_new_key_lets_no_other_account_in_and_an_open_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("home").join("identity.key");
    let (id, created) = load_or_create(&path, &mut ChaCha20Rng::seed_from_u64(7)).unwrap();
    assert!(created);
    assert_eq!(crate::owner_only::others_with_access(&path).unwrap(), None);
    assert_eq!(
        crate::owner_only::others_with_access(path.parent().unwrap()).unwrap(),
        None
    );
    assert_eq!(load(&path).unwrap().public(), id.public());
    // Readable by everyone: refused, with the command that fixes it. (Everyone:
    // Wine keeps only what a Unix mode can say, so local users would not show.)
    let me = crate::owner_only::current_user_sid().unwrap();
    crate::owner_only::set_dacl(&path, &format!("D:P(A;;FA;;;{me})(A;;FR;;;WD)")).unwrap();
    let err = load(&path).unwrap_err();
    assert!(
        matches!(err, KeyFileError::InsecureAccessList { ref who, .. } if who == "WD"),
        "{err}"
    );
    assert!(err.to_string().contains("icacls"), "{err}");
}

#[test]
fn malformed_files_are_refused() {
    for text in [
        "",
        "# only a comment\n",
        "wrong-label 00\n",
        "interlink-p2p-ed25519-v1 zz\n",
    ] {
        assert!(parse(text).is_err(), "{text:?}");
    }
    let id = Identity::from_seed(&[9; 32]);
    assert_eq!(parse(&render(&id)).unwrap().public(), id.public());
}
