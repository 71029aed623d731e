use super::*;

#[test]
fn a_second_holder_is_refused_with_the_first_ones_name_until_it_lets_go() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("s-1");
    let first = SessionLock::acquire(&session, "mcp", 1).unwrap();
    let err = SessionLock::acquire(&session, "run", 2).unwrap_err();
    match &err {
        SessionLockError::Held {
            session,
            pid,
            command,
            ..
        } => {
            assert_eq!(session, "s-1");
            assert_eq!(*pid, std::process::id());
            assert_eq!(command, "mcp");
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("already running"), "{err}");
    drop(first);
    let again = SessionLock::acquire(&session, "run", 3).unwrap();
    assert!(again.path().ends_with(LOCK_FILE));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(again.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
