use super::*;

#[test]
fn git_label_is_the_repository_root_name() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("eden");
    let deep = repo.join("src").join("deep");
    std::fs::create_dir_all(&deep).unwrap();
    assert_eq!(git_label(&deep), None);
    std::fs::create_dir(repo.join(".git")).unwrap();
    assert_eq!(git_label(&deep).as_deref(), Some("eden"));
    assert_eq!(git_label(&repo).as_deref(), Some("eden"));
    // A worktree or submodule has a `.git` file instead.
    let sub = deep.join("vendored");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join(".git"), "gitdir: ../x").unwrap();
    assert_eq!(git_label(&sub).as_deref(), Some("vendored"));
}

#[test]
fn listen_shapes() {
    let p = |s: &str| s.parse::<Multiaddr>().unwrap();
    assert!(same_shape(
        &p("/ip4/0.0.0.0/tcp/0"),
        &p("/ip4/127.0.0.1/tcp/4711")
    ));
    assert!(same_shape(
        &p("/ip4/0.0.0.0/udp/0/quic-v1"),
        &p("/ip4/10.1.2.3/udp/5/quic-v1")
    ));
    assert!(!same_shape(
        &p("/ip4/0.0.0.0/tcp/0"),
        &p("/ip4/10.1.2.3/udp/5/quic-v1")
    ));
    assert!(!same_shape(&p("/ip4/0.0.0.0/tcp/0"), &p("/ip6/::1/tcp/5")));
}

#[test]
fn summaries() {
    assert!(check_summary("installing deps").is_ok());
    assert!(check_summary("two\nlines").is_err());
    assert!(check_summary(&"x".repeat(MAX_SUMMARY_BYTES + 1)).is_err());
}
