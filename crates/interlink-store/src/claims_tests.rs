use interlink_core::{SessionId, claims::Claim};

use super::*;

fn claim(pattern: &str) -> Claim {
    Claim {
        pattern: pattern.into(),
        exclusive: true,
        reason: "r".into(),
        since: 1,
        until: 2,
    }
}

#[test]
fn own_claims_survive_and_an_empty_list_removes_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path());
    let dir = home.session(&SessionId::new("s1").unwrap()).unwrap();
    std::fs::create_dir_all(dir.path()).unwrap();
    assert_eq!(load_own(&dir), Ok(Vec::new()));
    save_own(&dir, &[claim("src/**"), claim("docs/a.md")]).unwrap();
    assert_eq!(
        load_own(&dir).unwrap(),
        vec![claim("src/**"), claim("docs/a.md")]
    );
    save_own(&dir, &[]).unwrap();
    assert!(!dir.path().join(CLAIMS_FILE).exists());
    std::fs::write(dir.path().join(CLAIMS_FILE), "{not json").unwrap();
    assert!(load_own(&dir).unwrap_err().contains("remove it"));
}

#[test]
fn only_fresh_views_of_the_project_are_read_newest_first() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path());
    let write = |session: &str, project: &str, at: u64| {
        let dir = home.session(&SessionId::new(session).unwrap()).unwrap();
        std::fs::create_dir_all(dir.path()).unwrap();
        let view = BoardView::new(project.into(), "/r".into(), "k".into(), session.into(), at);
        write_board(&dir, &view).unwrap();
    };
    let now = 1_000_000;
    write("a", "p1", now - 1_000);
    write("b", "p1", now - 100);
    write("c", "p2", now);
    write("stale", "p1", now - BOARD_FRESH_MS - 1);
    let views = read_boards(&home, "p1", now);
    let sessions: Vec<_> = views.iter().map(|v| v.session.as_str()).collect();
    assert_eq!(sessions, ["b", "a"]);
    let dir = home.session(&SessionId::new("b").unwrap()).unwrap();
    remove_board(&dir);
    assert_eq!(read_boards(&home, "p1", now).len(), 1);
}
