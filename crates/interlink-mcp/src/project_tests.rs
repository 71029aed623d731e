// They run git, which the Windows test run (Wine) does not have.
#![cfg(unix)]

use interlink_testkit::git::{available, git};

use super::*;

/// Two clones of one history at different paths, one with another remote URL form and
/// a worktree, are one project; a subdirectory is its repository's; an unrelated
/// repository, a submodule-like nested repository and a plain directory are not.
#[test]
fn one_project_across_clones_and_worktrees() {
    if !available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let origin = tmp.path().join("origin");
    std::fs::create_dir_all(origin.join("src")).unwrap();
    git(&origin, &["init", "-q"]);
    std::fs::write(origin.join("src/a.rs"), "fn a() {}").unwrap();
    git(&origin, &["add", "."]);
    git(&origin, &["commit", "-q", "-m", "first"]);
    std::fs::write(origin.join("b.rs"), "").unwrap();
    git(&origin, &["add", "."]);
    git(&origin, &["commit", "-q", "-m", "second"]);

    let clone = tmp.path().join("elsewhere/clone");
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            origin.to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    git(
        &clone,
        &["remote", "set-url", "origin", "git@example.com:o/r.git"],
    );
    let worktree = tmp.path().join("wt");
    git(
        &origin,
        &["worktree", "add", "-q", worktree.to_str().unwrap()],
    );

    let a = detect(&origin.join("src")).expect("a project");
    assert_eq!(a.basis, Basis::RootCommit);
    assert_eq!(
        a.root.canonicalize().unwrap(),
        origin.canonicalize().unwrap()
    );
    assert_eq!(detect(&clone).unwrap().id, a.id);
    assert_eq!(detect(&worktree).unwrap().id, a.id);

    let other = tmp.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    git(&other, &["init", "-q"]);
    std::fs::write(other.join("x"), "").unwrap();
    git(&other, &["add", "."]);
    git(&other, &["commit", "-q", "-m", "unrelated"]);
    assert_ne!(detect(&other).unwrap().id, a.id);

    // Before the first commit, with a remote: the remote decides.
    let fresh = tmp.path().join("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    git(&fresh, &["init", "-q"]);
    git(
        &fresh,
        &["remote", "add", "origin", "https://example.com/o/r"],
    );
    let fresh_project = detect(&fresh).unwrap();
    assert_eq!(fresh_project.basis, Basis::Origin);

    let plain = tempfile::tempdir().unwrap();
    assert_eq!(detect(plain.path()), None);
}
