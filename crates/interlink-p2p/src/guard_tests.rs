use super::*;
// The tests that run git (which the Windows test run, under Wine, does not have).
#[cfg(unix)]
use crate::claims::tests::{alice_key, board, git, held, repo};

/// An existing hook is kept, runs first, and comes back on uninstall; installing twice
/// keeps one copy.
#[test]
fn an_existing_hook_is_kept_and_put_back() {
    let tmp = tempfile::tempdir().unwrap();
    let hooks = tmp.path().join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\necho lint\n").unwrap();
    let note = install(
        &hooks,
        Path::new("/opt/it's/interlink-p2p"),
        Path::new("/h"),
    )
    .unwrap();
    assert!(note.contains(CHAINED), "{note}");
    let ours = std::fs::read_to_string(hooks.join("pre-commit")).unwrap();
    assert!(ours.contains(MARK) && ours.contains(CHAINED), "{ours}");
    assert!(
        ours.contains(r"exec '/opt/it'\''s/interlink-p2p' --home '/h' guard check"),
        "{ours}"
    );
    // Again: ours is replaced, the kept hook stays kept.
    install(&hooks, Path::new("/opt/x/interlink-p2p"), Path::new("/h")).unwrap();
    assert_eq!(
        std::fs::read_to_string(hooks.join(CHAINED)).unwrap(),
        "#!/bin/sh\necho lint\n"
    );
    assert!(uninstall(&hooks).unwrap().contains("is back"));
    assert_eq!(
        std::fs::read_to_string(hooks.join("pre-commit")).unwrap(),
        "#!/bin/sh\necho lint\n"
    );
    assert_eq!(uninstall(&hooks).unwrap(), "no guard installed here");
}

/// A staged file another session holds is refused, naming it; a free one is not.
#[cfg(unix)]
#[test]
fn a_staged_held_file_is_refused_naming_its_holder() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(repo) = repo(tmp.path()) else { return };
    let home = interlink_store::paths::Home::new(tmp.path().join("home"));
    std::fs::create_dir_all(home.path()).unwrap();
    let now = 10_000_000;
    board(
        &home,
        &repo,
        vec![held(&alice_key(), "cl-a", "src/api/**")],
        now,
    );
    std::fs::write(repo.join("README.md"), "changed\n").unwrap();
    git(&repo, &["add", "README.md"]);
    assert_eq!(check(&home, &repo, now).unwrap(), None);
    std::fs::write(repo.join("src/api/auth.rs"), "fn login2() {}\n").unwrap();
    git(&repo, &["add", "src/api/auth.rs"]);
    let refusal = check(&home, &repo.join("src"), now).unwrap().unwrap();
    assert!(
        refusal.contains("src/api/auth.rs: alice's session cl-a holds src/api/**"),
        "{refusal}"
    );
    assert!(refusal.contains("INTERLINK_GUARD=off"), "{refusal}");
}

/// The hook goes where git looks for it: `core.hooksPath` when set.
#[cfg(unix)]
#[test]
fn the_hook_goes_where_core_hooks_path_says() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(repo) = repo(tmp.path()) else { return };
    assert_eq!(
        hooks_dir(&repo).unwrap().canonicalize().unwrap(),
        repo.join(".git/hooks")
            .canonicalize()
            .unwrap_or(repo.join(".git/hooks"))
    );
    git(&repo, &["config", "core.hooksPath", ".githooks"]);
    assert_eq!(
        hooks_dir(&repo.join("src")).unwrap(),
        repo.join(".githooks")
    );
}
