use std::collections::BTreeMap;

use super::*;

type State = BTreeMap<String, u32>;

#[derive(Debug)]
struct Refused;

fn paths(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let home = dir.join("home");
    (
        home.clone(),
        home.join("state.lock"),
        home.join("state.json"),
    )
}

#[test]
fn a_missing_file_is_the_default_and_a_malformed_one_names_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, path) = paths(dir.path());
    assert_eq!(load_json::<State>(&path).unwrap(), State::new());
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, b"{\"a\": ").unwrap();
    match load_json::<State>(&path) {
        Err(JsonFileError::Invalid { path: p, .. }) => assert_eq!(p, path),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_edit_writes_a_private_file_and_a_refused_change_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (home, lock, path) = paths(dir.path());
    edit_json::<State, _, Refused>(&home, &lock, &path, |s| {
        s.insert("a".into(), 1);
        Ok(())
    })
    .unwrap()
    .unwrap();
    let before = fs::read(&path).unwrap();
    assert!(before.ends_with(b"\n"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for p in [&path, &lock] {
            let mode = fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", p.display());
        }
    }
    let refused = edit_json::<State, (), _>(&home, &lock, &path, |s| {
        s.insert("b".into(), 2);
        Err(Refused)
    });
    assert!(matches!(refused, Ok(Err(Refused))));
    assert_eq!(fs::read(&path).unwrap(), before);
    assert_eq!(load_json::<State>(&path).unwrap().len(), 1);
}

#[test]
fn an_edit_of_a_malformed_file_fails_and_leaves_it_for_the_user() {
    let dir = tempfile::tempdir().unwrap();
    let (home, lock, path) = paths(dir.path());
    fs::create_dir_all(&home).unwrap();
    fs::write(&path, b"not json").unwrap();
    let out = edit_json::<State, (), Refused>(&home, &lock, &path, |_| Ok(()));
    assert!(matches!(out, Err(JsonFileError::Invalid { .. })));
    assert_eq!(fs::read(&path).unwrap(), b"not json");
}
