use super::*;

#[test]
fn petnames_come_from_peers_json() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path());
    let mut sink = Vec::new();
    assert!(read_petnames(&home, &mut sink).is_empty());
    let key = "d04ab232742bb4ab3a1368bd4615e4e6d0224ab71a016baf8520a332c9778737";
    std::fs::write(
        home.peers(),
        format!(r#"{{"version":1,"peers":{{"alice":"{key}"}}}}"#),
    )
    .unwrap();
    let policy = read_petnames(&home, &mut sink);
    assert_eq!(policy.name_of(&key.parse().unwrap()), Some("alice"));
    assert!(sink.is_empty());
    std::fs::write(home.peers(), "{not json").unwrap();
    assert!(read_petnames(&home, &mut sink).is_empty());
    assert!(String::from_utf8(sink).unwrap().contains("ignoring"));
}
